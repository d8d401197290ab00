package model

import (
	"fmt"
	"strconv"
	"strings"
)

// The exercise: the nine steps of the seed's walkthrough ("Try delayed and
// reordered replies") as checkpoints. A step counts when the student has done
// what it teaches, in any run and any order, whatever the message numbers.
// Only the student's own work ticks a step: a message the student queued,
// delivered by the student. An instructor's message never ticks a step,
// whoever delivers it (a held injection the student delivers shows the
// lesson, but the student did not make the case), and neither does an
// instructor's delivery; a step that needs two deliveries (5, 6) needs both
// to be the student's. So an injection never moves the student's current
// step or the time on it (the server's stepClock counts from ticks).
//
// The rules, each checked when the event is applied:
//
//  1. Hold a reply: the student queues a well-formed completion for the
//     current call while it is Pending. (Its output need not differ from the
//     default reply: the text only helps the student tell replies apart.)
//  2. Complete a new run: a student delivery moves the call from Pending to
//     Completed in a run after the first (a run was started).
//  3. A stale reply: the student delivers a well-formed completion whose
//     callId is the call's and whose runId names an earlier run of this
//     session ("run-k", k below the current run); it is ignored as a
//     different call identity.
//  4. The first final reply wins: once the call has a final outcome, the
//     student delivers a well-formed reply for the same call, in three
//     variants, in any runs: (a) the same kind and text as the outcome (a
//     redelivery), (b) the same kind with another text, (c) the opposite
//     kind. All three are needed, as the seed asks for all three.
//  5. A late completion resolves: in one run, a student's deadline delivery
//     moves the call from Pending to Unresolved, then a student delivery
//     moves it from Unresolved to Completed.
//  6. A late rejection resolves: as 5, ending in Rejected.
//  7. Deadlines do not erase or cross runs, two parts in any order: (a) the
//     student delivers a deadline for the current call after its final
//     outcome; (b) the student delivers a deadline captured for an earlier
//     run (same callId) while the current call is Pending.
//  8. Not every message is a reply, three parts, each while the call is
//     Pending: (a) a well-formed reply with the call's runId and another
//     callId; (b) text that is not JSON; (c) JSON that is not a reply.
//  9. Outputs are data, two parts: a student delivery completes a call that
//     was not final (a) with an empty output, (b) with an output that looks
//     like markup (a "<" followed by a letter, "/" or "!", and a ">" after it).
//
// docs/exercise.md has the same rules with each step's goal and hint, and
// the near misses that do not count.

// NumSteps is how many checkpoints the exercise has; steps are numbered 1 to NumSteps.
const NumSteps = 9

// stepParts is how many parts each step has; a step is done when all are.
var stepParts = [NumSteps]uint8{1, 1, 1, 3, 1, 1, 2, 3, 2}

// Step is what a student reads of one checkpoint.
type Step struct {
	Number int
	Goal   string   // what the step teaches, in one sentence
	Hint   string   // what to do, as the walkthrough words it
	Parts  []string // the parts a step needs, in order; nil for a step of one part
}

var steps = [NumSteps]Step{
	{1, "A held reply changes nothing: queue a completion for the current call and leave it held; the call stays Pending.",
		"In the reply box, change output to Old answer, choose Queue reply, and do not deliver it yet.", nil},
	{2, "A new run has a new identity, and its own completion is accepted.",
		"Choose Start new run, change output to New answer, queue it and deliver that message.", nil},
	{3, "A completion for an older run is ignored by a newer call: a different call identity.",
		"Deliver the completion you held for the earlier run.", nil},
	{4, "Once a call has a final outcome, no other reply changes it: not the same reply again, not another output, not the opposite kind.",
		`Deliver the accepted reply again; queue and deliver one with another output; then one with kind "rejected" and a "reason" text in place of "output".`,
		[]string{"the accepted reply again", "another output of the same kind", "the opposite kind"}},
	{5, "A deadline makes a call Unresolved, and a matching late completion still resolves it.",
		"Start a new run, queue its deadline, then its default completion; deliver the deadline, then the completion.", nil},
	{6, "After a deadline, only an explicit rejection turns Unresolved into Rejected.",
		`Start another run, queue its deadline and a reply with kind "rejected" and reason "The query is empty"; deliver the deadline, then the rejection.`, nil},
	{7, "A deadline cannot erase a result, and an older run's deadline leaves a newer call Pending.",
		"In a fresh run queue a deadline and a completion, deliver the completion, then the deadline. Then queue a deadline, start another run and deliver the old deadline.",
		[]string{"a deadline after the result", "an older run's deadline while Pending"}},
	{8, "While Pending, a reply for another callId, text that is not JSON, and JSON of the wrong shape all leave the call unchanged.",
		"Queue and deliver, one after another: a reply with the current runId and another callId; a reply box holding only the character {; valid JSON whose output is a number.",
		[]string{"another callId", "not JSON", "the wrong shape"}},
	{9, "An empty output is still a completion, and markup in an output is shown as text.",
		"In a fresh run complete with an empty output string; in another run, with output <strong>Found it</strong>.",
		[]string{"an empty output", "markup in the output"}},
}

// Steps lists the nine checkpoints in order. The slices are fresh copies.
func Steps() []Step {
	out := make([]Step, NumSteps)
	for i, s := range steps {
		s.Parts = append([]string(nil), s.Parts...)
		out[i] = s
	}
	return out
}

// Exercise is a session's progress through the checkpoints: a fold over its
// events (Lab.Apply keeps it; Progress replays it), so a restart, a replay and
// an export agree. It is comparable with ==.
type Exercise struct {
	// DoneAt[s-1] is the seq of the event that first completed step s, 0
	// while it is not done (seqs start at 1). The server turns it into the
	// time the step was first done.
	DoneAt [NumSteps]uint64
	parts  [NumSteps]uint8 // bit i: part i of the step has been seen
	// StartedAt is the seq of the student's first own action (a message
	// queued or delivered, a run started), 0 before: a student who has not
	// started is not on a step's clock, and never stuck.
	StartedAt uint64
	// unresolved: the current run's call was made Unresolved by the
	// student's own deadline delivery (steps 5 and 6); reset by a new run.
	unresolved bool
}

// Started reports whether the student has acted at all.
func (x Exercise) Started() bool { return x.StartedAt != 0 }

// acted records the student's action with seq.
func (x *Exercise) acted(seq uint64) {
	if x.StartedAt == 0 {
		x.StartedAt = seq
	}
}

// Progress replays events on a new session and returns its exercise: what
// an export or a grade computes from a stored log.
func Progress(events []Event) (Exercise, error) {
	l, err := replay(events)
	if err != nil {
		return Exercise{}, err
	}
	return l.exercise, nil
}

// replay applies events on a new session.
func replay(events []Event) (*Lab, error) {
	l := NewLab()
	for i, e := range events {
		if _, err := l.Apply(e); err != nil {
			return nil, fmt.Errorf("replaying event %d: %w", i+1, err)
		}
	}
	return l, nil
}

// IsDone reports whether step (1 to NumSteps) is done.
func (x Exercise) IsDone(step int) bool {
	return step >= 1 && step <= NumSteps && x.DoneAt[step-1] != 0
}

// Done lists the steps done, in step order; empty (not nil) when none is.
func (x Exercise) Done() []int {
	out := make([]int, 0, NumSteps)
	for s := 1; s <= NumSteps; s++ {
		if x.IsDone(s) {
			out = append(out, s)
		}
	}
	return out
}

// Current is the step to work on: the lowest step not done, 0 when all are.
func (x Exercise) Current() int {
	for s := 1; s <= NumSteps; s++ {
		if !x.IsDone(s) {
			return s
		}
	}
	return 0
}

// Parts says how many of step's parts have been seen, of how many; a step of
// one part has one.
func (x Exercise) Parts(step int) (done, total int) {
	if step < 1 || step > NumSteps {
		return 0, 0
	}
	return bitsSet(x.parts[step-1]), int(stepParts[step-1])
}

// PartDone reports whether part (from 0, in Step.Parts's order) of step has been seen.
func (x Exercise) PartDone(step, part int) bool {
	return step >= 1 && step <= NumSteps && part >= 0 && part < int(stepParts[step-1]) && x.parts[step-1]>>part&1 != 0
}

func bitsSet(b uint8) int {
	n := 0
	for ; b != 0; b &= b - 1 {
		n++
	}
	return n
}

// mark records part of step as seen by the event with seq; the step is done
// by the event that completes its last part.
func (x *Exercise) mark(seq uint64, step, part int) {
	i := step - 1
	x.parts[i] |= 1 << part
	if x.DoneAt[i] == 0 && bitsSet(x.parts[i]) == int(stepParts[i]) {
		x.DoneAt[i] = seq
	}
}

func (x *Exercise) runStarted() { x.unresolved = false }

// queued observes a message the student queued while call was current (step 1).
func (x *Exercise) queued(seq uint64, call Call, m Message, pr parsedReply) {
	if m.Kind != ReplyMessage || call.Status != Pending {
		return
	}
	if r, err := pr.reply, pr.err; err == nil && r.Outcome == Completion && r.Key == call.Key {
		x.mark(seq, 1, 0)
	}
}

// delivered observes a delivery of m by by to before, in a session at run
// number runs, with its result d (steps 2 to 9).
func (x *Exercise) delivered(seq uint64, by Actor, runs int, before Call, m Message, d Delivery) {
	if by != Student || m.From != Student || m.Lab {
		return
	}
	after := d.Call
	wasFinal := before.Status.Final()
	r, reply := d.Reply, d.OK
	switch {
	case before.Status == Pending && after.Status == Unresolved:
		x.unresolved = true
	case before.Status == Pending && after.Status == Completed && runs >= 2:
		x.mark(seq, 2, 0)
	case before.Status == Unresolved && after.Status == Completed && x.unresolved:
		x.mark(seq, 5, 0)
	case before.Status == Unresolved && after.Status == Rejected && x.unresolved:
		x.mark(seq, 6, 0)
	}
	if reply && r.Outcome == Completion && r.Key.CallID == before.Key.CallID && earlierRun(r.Key.RunID, runs) {
		x.mark(seq, 3, 0)
	}
	if wasFinal && reply && r.Key == before.Key {
		switch {
		case d.Kind == KindDuplicate:
			x.mark(seq, 4, 0)
		case (before.Status == Completed) == (r.Outcome == Completion):
			x.mark(seq, 4, 1)
		default:
			x.mark(seq, 4, 2)
		}
	}
	if m.Kind == DeadlineMessage {
		if wasFinal && m.Key == before.Key {
			x.mark(seq, 7, 0)
		}
		if before.Status == Pending && m.Key.CallID == before.Key.CallID && earlierRun(m.Key.RunID, runs) {
			x.mark(seq, 7, 1)
		}
	}
	if before.Status == Pending {
		switch {
		case reply && r.Key.RunID == before.Key.RunID && r.Key.CallID != before.Key.CallID:
			x.mark(seq, 8, 0)
		case d.Kind == KindMalformedJSON:
			x.mark(seq, 8, 1)
		case d.Kind == KindWrongShape:
			x.mark(seq, 8, 2)
		}
	}
	if !wasFinal && after.Status == Completed {
		if after.Text == "" {
			x.mark(seq, 9, 0)
		}
		if looksLikeMarkup(after.Text) {
			x.mark(seq, 9, 1)
		}
	}
}

// earlierRun reports whether id names a run of this session before the
// current one, runs: "run-k" exactly as the lab writes it, 1 <= k < runs.
func earlierRun(id string, runs int) bool {
	n, ok := strings.CutPrefix(id, "run-")
	if !ok {
		return false
	}
	k, err := strconv.Atoi(n)
	return err == nil && k >= 1 && k < runs && runID(k) == id
}

// looksLikeMarkup reports whether s has a "<" followed by a letter, "/" or
// "!", with a ">" somewhere after it: what a browser would take for a tag.
func looksLikeMarkup(s string) bool {
	for i := 0; i+1 < len(s); i++ {
		if s[i] != '<' {
			continue
		}
		c := s[i+1]
		if ('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '/' || c == '!') && strings.IndexByte(s[i+2:], '>') >= 0 {
			return true
		}
	}
	return false
}
