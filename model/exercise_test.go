package model

import (
	"reflect"
	"slices"
	"testing"
)

// Commands for the exercise's tables: the student's unless byInstructor.
func start() Command           { return Command{Kind: StartRun} }
func queue(raw string) Command { return Command{Kind: QueueReply, Raw: raw} }
func queueDeadline() Command   { return Command{Kind: QueueDeadline} }
func deliver(id int) Command   { return Command{Kind: Deliver, Message: id} }
func byInstructor(c Command) Command {
	c.By = Instructor
	return c
}

// injectReply and injectDeadline are an instructor's free-form injections,
// held or delivered at once.
func injectReply(raw string, now bool) Command {
	return Command{Kind: Inject, By: Instructor, Inject: Injection{Kind: ReplyMessage, Raw: raw, Deliver: now}}
}

func injectDeadline(run string, now bool) Command {
	return Command{Kind: Inject, By: Instructor, Inject: Injection{Kind: DeadlineMessage, Key: Key{run, CallID}, Deliver: now}}
}

func completion(run, output string) string { return reply(run, "completed", "output", output) }
func rejection(run, reason string) string  { return reply(run, "rejected", "reason", reason) }

const (
	otherCallID = `{"runId":"run-1","callId":"search","kind":"completed","output":"x"}`
	numeric     = `{"runId":"run-1","callId":"lookup","kind":"completed","output":42}`
)

// run decides and applies cmds on a new session and returns it with the
// events it stored.
func run(t *testing.T, cmds []Command) (*Lab, []Event) {
	t.Helper()
	l := NewLab()
	var events []Event
	for i, c := range cmds {
		ev, err := l.Decide(c, Limits{})
		if err != nil {
			t.Fatalf("command %d %+v: %v", i+1, c, err)
		}
		if _, err := l.Apply(ev); err != nil {
			t.Fatalf("event %d %+v: %v", i+1, ev, err)
		}
		events = append(events, ev)
	}
	return l, events
}

// seedSteps are the walkthrough's nine steps as the seed words them, one
// list of commands per step, applied in order on one session.
var seedSteps = [NumSteps][]Command{
	{queue(completion("run-1", "Old answer"))},
	{start(), queue(completion("run-2", "New answer")), deliver(2)},
	{deliver(1)},
	{deliver(2), queue(completion("run-2", "Other answer")), deliver(3), queue(rejection("run-2", "Nope")), deliver(4)},
	{start(), queueDeadline(), queue(Draft(Key{"run-3", CallID})), deliver(5), deliver(6)},
	{start(), queueDeadline(), queue(rejection("run-4", "The query is empty")), deliver(7), deliver(8)},
	{start(), queueDeadline(), queue(Draft(Key{"run-5", CallID})), deliver(10), deliver(9), queueDeadline(), start(), deliver(11)},
	{queue(`{"runId":"run-6","callId":"search","kind":"completed","output":"x"}`), deliver(12), queue(`{`), deliver(13),
		queue(`{"runId":"run-6","callId":"lookup","kind":"completed","output":42}`), deliver(14)},
	{queue(completion("run-6", "")), deliver(15), start(), queue(completion("run-7", "<strong>Found it</strong>")), deliver(16)},
}

// TestSeedWalkthroughTicks does the nine steps as the seed words them and
// checks that each ticks when it is done, and no later step before.
func TestSeedWalkthroughTicks(t *testing.T) {
	t.Parallel()
	l := NewLab()
	for i, cmds := range seedSteps {
		step := i + 1
		for _, c := range cmds {
			do(t, l, c)
		}
		x := l.Exercise()
		want := make([]int, step)
		for s := range want {
			want[s] = s + 1
		}
		if got := x.Done(); !slices.Equal(got, want) {
			t.Fatalf("after step %d: done %v, want %v", step, got, want)
		}
		if x.DoneAt[i] != l.Seq() {
			t.Fatalf("step %d done at seq %d, want the step's last event %d", step, x.DoneAt[i], l.Seq())
		}
		if want := (step + 1) % (NumSteps + 1); x.Current() != want {
			t.Fatalf("after step %d: current %d, want %d", step, x.Current(), want)
		}
	}
	if v := l.View(); v.Exercise != l.Exercise() || v.Exercise.Current() != 0 {
		t.Fatalf("view's exercise %+v", v.Exercise)
	}
}

// TestAnotherOrderTicks does the nine steps in another order, with other
// runs and message numbers, and checks every step counts.
func TestAnotherOrderTicks(t *testing.T) {
	t.Parallel()
	cmds := []Command{
		// 8 at run-1.
		queue(otherCallID), deliver(1),
		queue(numeric), deliver(2),
		queue(`{"runId":`), deliver(3),
		// 7b: a deadline for run-1 delivered at run-2, Pending.
		queueDeadline(), start(), deliver(4),
		// 9a and 2 at run-2.
		queue(completion("run-2", "")), deliver(5),
		// 4 at run-2: the three variants in another order.
		queue(rejection("run-2", "no")), deliver(6), deliver(5), queue(completion("run-2", "more")), deliver(7),
		// 6 then 5, at runs 3 and 4; 7a at run-4.
		start(), queueDeadline(), deliver(8), queue(rejection("run-3", "r")), deliver(9),
		start(), queueDeadline(), queue(completion("run-4", "<b>late</b>")), deliver(10), deliver(11), deliver(10),
		// 3 last.
		start(), queue(completion("run-5", "held")), start(), deliver(12),
	}
	l, events := run(t, cmds)
	x := l.Exercise()
	if got := x.Done(); len(got) != NumSteps || x.Current() != 0 {
		t.Fatalf("done %v, current %d; want all nine", got, x.Current())
	}
	// Done in the order the commands finished them (queueing run-2's
	// completion already did step 1); one delivery at run-4
	// finishes both 5 and 9 (its markup output), and 7 waits for its part a.
	order := []int{8, 1, 2, 4, 6, 5, 7, 3}
	for i := 1; i < len(order); i++ {
		if x.DoneAt[order[i-1]-1] >= x.DoneAt[order[i]-1] {
			t.Fatalf("step %d done at %d, not before step %d at %d", order[i-1], x.DoneAt[order[i-1]-1], order[i], x.DoneAt[order[i]-1])
		}
	}
	if x.DoneAt[8] != x.DoneAt[4] {
		t.Fatalf("step 9 done at %d, step 5 at %d", x.DoneAt[8], x.DoneAt[4])
	}
	if p, err := Progress(events); err != nil || p != x {
		t.Fatalf("Progress = %+v, %v; live %+v", p, err, x)
	}
}

// TestInjectionBeforeStep2 is the story: an instructor's stale reply
// held before step 2 takes no student number, so "deliver message 2" still
// delivers the student's New answer.
func TestInjectionBeforeStep2(t *testing.T) {
	t.Parallel()
	l, _ := run(t, []Command{queue(completion("run-1", "Old answer")), start(), injectReply(completion("run-1", "Stale"), false),
		queue(completion("run-2", "New answer"))})
	var id int
	for _, m := range l.View().Queue {
		if m.Number == "2" {
			id = m.ID
		}
	}
	if got := l.View().Queue[1].Number; got != "I1" || id != 3 {
		t.Fatalf("instructor's message numbered %q; student's message 2 has id %d", got, id)
	}
	do(t, l, deliver(id))
	if v := l.View(); v.Call.Status != "Completed" || v.Call.Detail != "New answer" || !l.Exercise().IsDone(2) {
		t.Fatalf("after delivering message 2: %+v, done %v", v.Call, l.Exercise().Done())
	}
	if r := l.View().Receipts[0]; r.Number != "2" || r.From != Student {
		t.Fatalf("receipt %+v", r)
	}
}

// TestStepRules checks each rule, with near misses that must not count.
func TestStepRules(t *testing.T) {
	t.Parallel()
	completed2 := []Command{start(), queue(completion("run-2", "New answer")), deliver(1)} // run-2 Completed by message 1
	tests := []struct {
		name string
		step int
		cmds []Command
		want bool
	}{
		{"1 seed: a completion for run-1 held", 1, []Command{queue(completion("run-1", "Old answer"))}, true},
		{"1 the draft itself", 1, []Command{queue(Draft(Key{"run-1", CallID}))}, true},
		{"1 in a later run", 1, []Command{start(), queue(completion("run-2", "x"))}, true},
		{"1 miss: a deadline", 1, []Command{queueDeadline()}, false},
		{"1 miss: not JSON", 1, []Command{queue(`{`)}, false},
		{"1 miss: another run's completion", 1, []Command{queue(completion("run-2", "x"))}, false},
		{"1 miss: another callId", 1, []Command{queue(otherCallID)}, false},
		{"1 miss: a rejection", 1, []Command{queue(rejection("run-1", "r"))}, false},
		{"1 miss: the call is final", 1, []Command{queue(rejection("run-1", "r")), deliver(1), queue(completion("run-1", "x"))}, false},
		{"1 miss: queued by the instructor", 1, []Command{byInstructor(queue(completion("run-1", "x")))}, false},
		{"1 miss: injected", 1, []Command{injectReply(completion("run-1", "x"), false)}, false},

		{"2 seed", 2, []Command{queue(completion("run-1", "Old answer")), start(), queue(completion("run-2", "New answer")), deliver(2)}, true},
		{"2 miss: an instructor's held completion, delivered by the student", 2, []Command{start(), injectReply(completion("run-2", "x"), false), deliver(1)}, false},
		{"2 miss: run-1, no new run", 2, []Command{queue(completion("run-1", "x")), deliver(1)}, false},
		{"2 miss: delivered by the instructor", 2, []Command{start(), queue(completion("run-2", "x")), byInstructor(deliver(1))}, false},
		{"2 miss: injected and delivered", 2, []Command{start(), injectReply(completion("run-2", "x"), true)}, false},
		{"2 miss: a rejection", 2, []Command{start(), queue(rejection("run-2", "r")), deliver(1)}, false},
		{"2 miss: completed after a deadline (step 5)", 2, []Command{start(), queueDeadline(), queue(completion("run-2", "x")), deliver(1), deliver(2)}, false},

		{"3 seed: after the new run completed", 3, append(append([]Command{queue(completion("run-1", "Old answer"))}, start(), queue(completion("run-2", "New")), deliver(2)), deliver(1)), true},
		{"3 while the new run is Pending", 3, []Command{queue(completion("run-1", "x")), start(), deliver(1)}, true},
		{"3 two runs later", 3, []Command{queue(completion("run-1", "x")), start(), start(), deliver(1)}, true},
		{"3 typed during the newer run", 3, []Command{start(), queue(completion("run-1", "x")), deliver(1)}, true},
		{"3 miss: the same run", 3, []Command{queue(completion("run-1", "x")), deliver(1)}, false},
		{"3 miss: a deadline instead", 3, []Command{queueDeadline(), start(), deliver(1)}, false},
		{"3 miss: a rejection", 3, []Command{queue(rejection("run-1", "r")), start(), deliver(1)}, false},
		{"3 miss: delivered by the instructor", 3, []Command{queue(completion("run-1", "x")), start(), byInstructor(deliver(1))}, false},
		{"3 miss: injected and delivered", 3, []Command{start(), injectReply(completion("run-1", "x"), true)}, false},
		{"3 miss: a later run", 3, []Command{start(), queue(completion("run-5", "x")), deliver(1)}, false},
		{"3 miss: another callId", 3, []Command{start(), queue(`{"runId":"run-1","callId":"search","kind":"completed","output":"x"}`), deliver(1)}, false},
		{"3 miss: not how the lab names runs", 3, []Command{start(), queue(completion("run-01", "x")), deliver(1)}, false},
		{"3 miss: run-0", 3, []Command{start(), queue(completion("run-0", "x")), deliver(1)}, false},

		{"4 seed", 4, append(completed2, deliver(1), queue(completion("run-2", "Other")), deliver(2), queue(rejection("run-2", "Nope")), deliver(3)), true},
		{"4 after a rejection", 4, []Command{queue(rejection("run-1", "r")), deliver(1), deliver(1), queue(rejection("run-1", "s")), deliver(2), queue(completion("run-1", "x")), deliver(3)}, true},
		{"4 across runs", 4, append(completed2, deliver(1), start(), queue(rejection("run-3", "r")), deliver(2), queue(rejection("run-3", "s")), deliver(3), queue(completion("run-3", "x")), deliver(4)), true},
		{"4 redelivery with other spacing is the same reply", 4, append(completed2, queue(`{ "runId":"run-2","callId":"lookup","kind":"completed","output":"New answer" }`), deliver(2), queue(completion("run-2", "Other")), deliver(3), queue(rejection("run-2", "Nope")), deliver(4)), true},
		{"4 miss: two of three", 4, append(completed2, deliver(1), queue(completion("run-2", "Other")), deliver(2)), false},
		{"4 miss: before the final outcome", 4, []Command{start(), queue(completion("run-2", "a")), queue(completion("run-2", "b")), queue(rejection("run-2", "r")), deliver(3), deliver(1), deliver(2)}, false},
		{"4 miss: an older run's replies", 4, append(completed2, queue(completion("run-1", "New answer")), deliver(2), queue(completion("run-1", "Other")), deliver(3), queue(rejection("run-1", "Nope")), deliver(4)), false},
		{"4 miss: delivered by the instructor", 4, append(completed2, byInstructor(deliver(1)), queue(completion("run-2", "Other")), byInstructor(deliver(2)), queue(rejection("run-2", "Nope")), byInstructor(deliver(3))), false},

		{"5 seed", 5, []Command{start(), queueDeadline(), queue(Draft(Key{"run-2", CallID})), deliver(1), deliver(2)}, true},
		{"5 in run-1, repeated deadline first", 5, []Command{queueDeadline(), queue(completion("run-1", "x")), deliver(1), deliver(1), deliver(2)}, true},
		{"5 miss: the completion is for another run", 5, []Command{start(), queueDeadline(), queue(completion("run-1", "x")), deliver(1), deliver(2)}, false},
		{"5 miss: the instructor's deadline", 5, []Command{injectDeadline("run-1", true), queue(completion("run-1", "x")), deliver(2)}, false},
		{"5 miss: the student repeats the instructor's deadline", 5, []Command{injectDeadline("run-1", true), deliver(1), queue(completion("run-1", "x")), deliver(2)}, false},
		{"5 miss: the instructor delivers the completion", 5, []Command{queueDeadline(), queue(completion("run-1", "x")), deliver(1), byInstructor(deliver(2))}, false},
		{"5 miss: the deadline was in an earlier run", 5, []Command{queueDeadline(), deliver(1), start(), injectDeadline("run-2", true), queue(completion("run-2", "x")), deliver(3)}, false},
		{"5 miss: completion before the deadline", 5, []Command{queueDeadline(), queue(completion("run-1", "x")), deliver(2), deliver(1)}, false},
		{"5 miss: a rejection (step 6)", 5, []Command{queueDeadline(), queue(rejection("run-1", "r")), deliver(1), deliver(2)}, false},

		{"6 seed", 6, []Command{start(), queueDeadline(), queue(rejection("run-2", "The query is empty")), deliver(1), deliver(2)}, true},
		{"6 miss: a completion (step 5)", 6, []Command{queueDeadline(), queue(completion("run-1", "x")), deliver(1), deliver(2)}, false},
		{"6 miss: rejected while Pending", 6, []Command{queue(rejection("run-1", "r")), deliver(1), queueDeadline(), deliver(2)}, false},
		{"6 miss: the instructor's deadline", 6, []Command{injectDeadline("run-1", true), queue(rejection("run-1", "r")), deliver(2)}, false},
		{"6 miss: the rejection is for another run", 6, []Command{start(), queueDeadline(), queue(rejection("run-1", "r")), deliver(1), deliver(2)}, false},

		{"7 seed", 7, []Command{start(), queueDeadline(), queue(Draft(Key{"run-2", CallID})), deliver(2), deliver(1), queueDeadline(), start(), deliver(3)}, true},
		{"7 the other order", 7, []Command{queueDeadline(), start(), deliver(1), queueDeadline(), queue(completion("run-2", "x")), deliver(3), deliver(2)}, true},
		{"7 after a rejection, and an older run's deadline", 7, []Command{queueDeadline(), queue(rejection("run-1", "r")), deliver(2), deliver(1), queueDeadline(), start(), deliver(3)}, true},
		{"7 miss: the instructor's held old deadline, delivered by the student", 7, []Command{queueDeadline(), queue(rejection("run-1", "r")), deliver(2), deliver(1), start(), injectDeadline("run-1", false), deliver(3)}, false},
		{"7 miss: only the deadline after the result", 7, []Command{queueDeadline(), queue(completion("run-1", "x")), deliver(2), deliver(1)}, false},
		{"7 miss: only the old deadline", 7, []Command{queueDeadline(), start(), deliver(1)}, false},
		{"7 miss: the old deadline meets a final call", 7, []Command{queueDeadline(), start(), queue(completion("run-2", "x")), deliver(2), deliver(1), queueDeadline(), deliver(3)}, false},
		{"7 miss: the current deadline while Pending", 7, []Command{queueDeadline(), deliver(1), queue(completion("run-1", "x")), deliver(2), deliver(1)}, false},
		{"7 miss: run-0's deadline", 7, []Command{queueDeadline(), queue(completion("run-1", "x")), deliver(2), deliver(1), start(), injectDeadline("run-0", false), deliver(3)}, false},
		{"7 miss: delivered by the instructor", 7, []Command{queueDeadline(), queue(completion("run-1", "x")), deliver(2), byInstructor(deliver(1)), queueDeadline(), start(), byInstructor(deliver(3))}, false},

		{"8 seed", 8, []Command{queue(otherCallID), deliver(1), queue(`{`), deliver(2), queue(numeric), deliver(3)}, true},
		{"8 miss: the instructor's held messages, delivered by the student", 8, []Command{injectReply(otherCallID, false), injectReply(`{`, false), injectReply(`[]`, false), deliver(3), deliver(2), deliver(1)}, false},
		{"8 miss: after the final outcome", 8, []Command{queue(completion("run-1", "x")), deliver(1), queue(otherCallID), deliver(2), queue(`{`), deliver(3), queue(numeric), deliver(4)}, false},
		{"8 miss: while Unresolved", 8, []Command{queueDeadline(), deliver(1), queue(otherCallID), deliver(2), queue(`{`), deliver(3), queue(numeric), deliver(4)}, false},
		{"8 miss: another runId too", 8, []Command{start(), queue(otherCallID), deliver(1), queue(`{`), deliver(2), queue(numeric), deliver(3)}, false},
		{"8 miss: two of three", 8, []Command{queue(otherCallID), deliver(1), queue(`{`), deliver(2)}, false},
		{"8 miss: delivered by the instructor", 8, []Command{injectReply(otherCallID, true), injectReply(`{`, true), injectReply(numeric, true)}, false},

		{"9 seed", 9, []Command{queue(completion("run-1", "")), deliver(1), start(), queue(completion("run-2", "<strong>Found it</strong>")), deliver(2)}, true},
		{"9 late completions count", 9, []Command{queueDeadline(), queue(completion("run-1", "</p>")), deliver(1), deliver(2), start(), queue(completion("run-2", "")), deliver(3)}, true},
		{"9 miss: an empty reason", 9, []Command{queue(rejection("run-1", "")), deliver(1), start(), queue(completion("run-2", "<b>x</b>")), deliver(2)}, false},
		{"9 miss: markup after the final outcome", 9, []Command{queue(completion("run-1", "")), deliver(1), queue(completion("run-1", "<b>x</b>")), deliver(2)}, false},
		{"9 miss: angle brackets that are not a tag", 9, []Command{queue(completion("run-1", "")), deliver(1), start(), queue(completion("run-2", "a < b > c")), deliver(2)}, false},
		{"9 miss: delivered by the instructor", 9, []Command{injectReply(completion("run-1", ""), true), start(), injectReply(completion("run-2", "<i>x</i>"), true)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l, events := run(t, tt.cmds)
			x := l.Exercise()
			if x.IsDone(tt.step) != tt.want {
				done, total := x.Parts(tt.step)
				t.Fatalf("step %d done = %v, want %v (%d of %d parts; done %v)", tt.step, !tt.want, tt.want, done, total, x.Done())
			}
			if tt.want && x.DoneAt[tt.step-1] != l.Seq() {
				t.Fatalf("step %d done at seq %d, want the last event's %d", tt.step, x.DoneAt[tt.step-1], l.Seq())
			}
			if p, err := Progress(events); err != nil || p != x {
				t.Fatalf("Progress = %+v, %v; live %+v", p, err, x)
			}
		})
	}
}

func TestExerciseParts(t *testing.T) {
	t.Parallel()
	l, _ := run(t, []Command{queue(completion("run-1", "x")), deliver(1), deliver(1), queue(rejection("run-1", "r")), deliver(2)})
	x := l.Exercise()
	if done, total := x.Parts(4); done != 2 || total != 3 || !x.PartDone(4, 0) || x.PartDone(4, 1) || !x.PartDone(4, 2) {
		t.Fatalf("step 4 parts: %d of %d, %v %v %v", done, total, x.PartDone(4, 0), x.PartDone(4, 1), x.PartDone(4, 2))
	}
	if done, total := x.Parts(1); done != 1 || total != 1 {
		t.Fatalf("step 1 parts: %d of %d", done, total)
	}
	for _, bad := range [][2]int{{0, 0}, {10, 0}, {4, 3}, {4, -1}} {
		if x.PartDone(bad[0], bad[1]) {
			t.Errorf("PartDone(%d, %d)", bad[0], bad[1])
		}
	}
	if d, n := x.Parts(0); d != 0 || n != 0 || x.IsDone(0) || x.IsDone(10) {
		t.Fatal("out-of-range steps")
	}
	if got := (Exercise{}).Done(); got == nil || len(got) != 0 || (Exercise{}).Current() != 1 {
		t.Fatalf("a new exercise: done %#v, current %d", got, (Exercise{}).Current())
	}
}

func TestSteps(t *testing.T) {
	t.Parallel()
	s := Steps()
	if len(s) != NumSteps {
		t.Fatalf("%d steps", len(s))
	}
	for i, st := range s {
		if st.Number != i+1 || st.Goal == "" || st.Hint == "" {
			t.Errorf("step %d: %+v", i+1, st)
		}
		if n := max(len(st.Parts), 1); n != int(stepParts[i]) {
			t.Errorf("step %d names %d parts, has %d", i+1, n, stepParts[i])
		}
	}
	s[3].Parts[0] = "changed"
	if Steps()[3].Parts[0] == "changed" {
		t.Fatal("Steps shares its slices")
	}
}

func TestProgressRefusesACorruptLog(t *testing.T) {
	t.Parallel()
	if _, err := Progress([]Event{{Kind: MessageDelivered, Message: Message{ID: 1}}}); err == nil {
		t.Fatal("Progress replayed a delivery of a message never queued")
	}
	if x, err := Progress(nil); err != nil || !reflect.DeepEqual(x, Exercise{}) {
		t.Fatalf("Progress(nil) = %+v, %v", x, err)
	}
}

func TestLooksLikeMarkup(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		s    string
		want bool
	}{
		{"<strong>Found it</strong>", true}, {"<b>", true}, {"</p>", true}, {"<!-- x -->", true}, {MarkupText, true},
		{"", false}, {"a < b > c", false}, {"<", false}, {"<b", false}, {"1<2", false}, {"> <a", false}, {"<>", false},
	} {
		if got := looksLikeMarkup(c.s); got != c.want {
			t.Errorf("looksLikeMarkup(%q) = %v", c.s, got)
		}
	}
}

// TestStartedIsTheStudentsOwn: a session's exercise starts with the
// student's first own action; a rename or an instructor's injection (held
// or delivered at once) does not start it.
func TestStartedIsTheStudentsOwn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cmds []Command
		want uint64 // StartedAt
	}{
		{"nothing", nil, 0},
		{"injections only", []Command{injectReply(completion("run-1", "x"), false), injectReply(completion("run-1", "y"), true)}, 0},
		{"an injection, then the student queues", []Command{injectReply(completion("run-1", "x"), false), queue(completion("run-1", "y"))}, 2},
		{"the student starts a run", []Command{start()}, 1},
		{"the instructor delivers", []Command{queue(completion("run-1", "x")), byInstructor(deliver(1))}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := run(t, tc.cmds)
			if x := l.Exercise(); x.StartedAt != tc.want || x.Started() != (tc.want != 0) {
				t.Fatalf("StartedAt %d, want %d", x.StartedAt, tc.want)
			}
		})
	}
}
