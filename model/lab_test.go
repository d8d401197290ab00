package model

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// do decides and applies cmd, failing the test on a refusal.
func do(t *testing.T, l *Lab, cmd Command) {
	t.Helper()
	ev, err := l.Decide(cmd, Limits{})
	if err != nil {
		t.Fatalf("Decide(%+v): %v", cmd, err)
	}
	if _, err := l.Apply(ev); err != nil {
		t.Fatalf("Apply(%+v): %v", ev, err)
	}
}

func reply(run, kind, field, text string) string {
	return `{"runId":"` + run + `","callId":"lookup","kind":"` + kind + `","` + field + `":"` + text + `"}`
}

type shown struct{ status, detail, notice string }

func check(t *testing.T, l *Lab, run string, want shown) {
	t.Helper()
	v := l.View()
	got := shown{v.Call.Status, v.Call.Detail, v.Notice}
	if v.Call.RunID != run || v.Call.CallID != "lookup" || got != want {
		t.Fatalf("view = %s/%s %+v, want %s/lookup %+v", v.Call.RunID, v.Call.CallID, got, run, want)
	}
	if d := reply(run, "completed", "output", "Answer for "+run); v.Draft != d {
		t.Fatalf("draft = %s, want %s", v.Draft, d)
	}
}

func lastReceipt(l *Lab) Receipt { return l.receipts[len(l.receipts)-1] }

// TestWalkthrough follows the seed's nine steps.
func TestWalkthrough(t *testing.T) {
	t.Parallel()
	l := NewLab()
	check(t, l, "run-1", shown{"Pending", "", NoticeReady})
	if got, want := l.View().Draft, `{"runId":"run-1","callId":"lookup","kind":"completed","output":"Answer for run-1"}`; got != want {
		t.Fatalf("draft = %s, want %s", got, want)
	}
	// 1. Hold run-1's "Old answer".
	do(t, l, Command{Kind: QueueReply, Raw: reply("run-1", "completed", "output", "Old answer")})
	check(t, l, "run-1", shown{"Pending", "", NoticeReady})
	// 2. Start run-2, queue and deliver "New answer".
	do(t, l, Command{Kind: StartRun})
	check(t, l, "run-2", shown{"Pending", "", NoticeStarted})
	do(t, l, Command{Kind: QueueReply, Raw: reply("run-2", "completed", "output", "New answer")})
	do(t, l, Command{Kind: Deliver, Message: 2})
	check(t, l, "run-2", shown{"Completed", "New answer", "Accepted completion."})
	// 3. The old reply is ignored.
	do(t, l, Command{Kind: Deliver, Message: 1})
	check(t, l, "run-2", shown{"Completed", "New answer", "Ignored reply: different call identity."})
	// 4. Duplicates and contradictions keep the first final.
	do(t, l, Command{Kind: Deliver, Message: 2})
	check(t, l, "run-2", shown{"Completed", "New answer", "Ignored reply: final outcome already recorded."})
	do(t, l, Command{Kind: QueueReply, Raw: reply("run-2", "completed", "output", "Other answer")})
	do(t, l, Command{Kind: Deliver, Message: 3})
	check(t, l, "run-2", shown{"Completed", "New answer", "Ignored reply: final outcome already recorded."})
	do(t, l, Command{Kind: QueueReply, Raw: reply("run-2", "rejected", "reason", "Nope")})
	do(t, l, Command{Kind: Deliver, Message: 4})
	check(t, l, "run-2", shown{"Completed", "New answer", "Ignored reply: final outcome already recorded."})
	// 5. Deadline, then the late completion resolves.
	do(t, l, Command{Kind: StartRun})
	do(t, l, Command{Kind: QueueDeadline})
	do(t, l, Command{Kind: QueueReply, Raw: Draft(Key{"run-3", "lookup"})})
	do(t, l, Command{Kind: Deliver, Message: 5})
	check(t, l, "run-3", shown{"Unresolved", UnresolvedDetail, "Unresolved: deadline observed without a final reply."})
	do(t, l, Command{Kind: Deliver, Message: 5})
	check(t, l, "run-3", shown{"Unresolved", UnresolvedDetail, "Still unresolved: no final reply."})
	do(t, l, Command{Kind: Deliver, Message: 6})
	check(t, l, "run-3", shown{"Completed", "Answer for run-3", "Accepted completion."})
	// 6. Deadline, then an explicit rejection.
	do(t, l, Command{Kind: StartRun})
	do(t, l, Command{Kind: QueueDeadline})
	do(t, l, Command{Kind: QueueReply, Raw: reply("run-4", "rejected", "reason", "The query is empty")})
	do(t, l, Command{Kind: Deliver, Message: 7})
	check(t, l, "run-4", shown{"Unresolved", UnresolvedDetail, "Unresolved: deadline observed without a final reply."})
	do(t, l, Command{Kind: Deliver, Message: 8})
	check(t, l, "run-4", shown{"Rejected", "The query is empty", "Accepted rejection."})
	// 7. A deadline after the result, then an old run's deadline.
	do(t, l, Command{Kind: StartRun})
	do(t, l, Command{Kind: QueueDeadline})
	do(t, l, Command{Kind: QueueReply, Raw: Draft(Key{"run-5", "lookup"})})
	do(t, l, Command{Kind: Deliver, Message: 10})
	do(t, l, Command{Kind: Deliver, Message: 9})
	check(t, l, "run-5", shown{"Completed", "Answer for run-5", "Ignored deadline: final outcome already recorded."})
	do(t, l, Command{Kind: QueueDeadline})
	do(t, l, Command{Kind: StartRun})
	do(t, l, Command{Kind: Deliver, Message: 11})
	check(t, l, "run-6", shown{"Pending", "", "Ignored deadline: different call identity."})
	if got := l.View().Queue[10].Label; got != "Deadline for run-5/lookup" {
		t.Fatalf("deadline label = %q", got)
	}
	// 8. Another callId, malformed JSON, wrong shape: nothing changes.
	do(t, l, Command{Kind: QueueReply, Raw: `{"runId":"run-6","callId":"other","kind":"completed","output":"x"}`})
	do(t, l, Command{Kind: Deliver, Message: 12})
	check(t, l, "run-6", shown{"Pending", "", "Ignored reply: different call identity."})
	do(t, l, Command{Kind: QueueReply, Raw: `{`})
	do(t, l, Command{Kind: Deliver, Message: 13})
	check(t, l, "run-6", shown{"Pending", "", NoticeInvalidJSON})
	do(t, l, Command{Kind: QueueReply, Raw: `{"runId":"run-6","callId":"lookup","kind":"completed","output":42}`})
	do(t, l, Command{Kind: Deliver, Message: 14})
	check(t, l, "run-6", shown{"Pending", "", NoticeInvalidReply})
	// 9. Empty output is a completion; markup stays text.
	do(t, l, Command{Kind: QueueReply, Raw: reply("run-6", "completed", "output", "")})
	do(t, l, Command{Kind: Deliver, Message: 15})
	check(t, l, "run-6", shown{"Completed", "", "Accepted completion."})
	do(t, l, Command{Kind: StartRun})
	do(t, l, Command{Kind: QueueReply, Raw: reply("run-7", "completed", "output", "<strong>Found it</strong>")})
	do(t, l, Command{Kind: Deliver, Message: 16})
	check(t, l, "run-7", shown{"Completed", "<strong>Found it</strong>", "Accepted completion."})

	if got := lastReceipt(l); got.Message != 16 || got.Notice != "Accepted completion." || got.Number != "16" {
		t.Fatalf("last receipt = %+v", got)
	}
	if got, want := len(l.View().Receipts), 18; got != want {
		t.Fatalf("%d receipts, want %d", got, want)
	}
}

func TestQueueDeadlineCapturesIdentity(t *testing.T) {
	t.Parallel()
	l := NewLab()
	do(t, l, Command{Kind: QueueDeadline})
	do(t, l, Command{Kind: StartRun})
	m := l.View().Queue[0]
	if m != (MessageView{ID: 1, Kind: "deadline", From: "student", Label: "Deadline for run-1/lookup", Number: "1"}) {
		t.Fatalf("queued deadline = %+v", m)
	}
	do(t, l, Command{Kind: QueueReply, Raw: "anything", By: Instructor})
	if m := l.View().Queue[1]; m != (MessageView{ID: 2, Kind: "reply", From: "instructor", Label: "anything", Number: "I1"}) {
		t.Fatalf("queued reply = %+v", m)
	}
}

// checkRefused applies setup under lim, then checks that cmd is refused
// with the error text want and leaves the session exactly as it was.
func checkRefused(t *testing.T, setup []Command, lim Limits, cmd Command, want string) {
	t.Helper()
	l := NewLab()
	for _, c := range setup {
		ev, err := l.Decide(c, lim)
		if err != nil {
			t.Fatal(err)
		}
		l.Apply(ev)
	}
	before := l.View()
	if _, err := l.Decide(cmd, lim); err == nil || err.Error() != want {
		t.Fatalf("Decide(%+v) error = %v, want %q", cmd, err, want)
	}
	if !reflect.DeepEqual(l.View(), before) {
		t.Fatalf("refused %+v changed the session", cmd)
	}
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	lim := Limits{MaxReplyBytes: 10, MaxHeld: 3, MaxHeldBytes: 16, MaxReceipts: 2}
	tests := []struct {
		name  string
		setup []Command
		cmd   Command
		want  string
	}{
		{"unknown message", nil, Command{Kind: Deliver, Message: 1}, "unknown message id 1"},
		{"message zero", []Command{{Kind: QueueDeadline}}, Command{Kind: Deliver, Message: 0}, "unknown message id 0"},
		{"reply too large", nil, Command{Kind: QueueReply, Raw: strings.Repeat("x", 11)}, "reply size in bytes limit reached (at most 10)"},
		{"queue full", []Command{{Kind: QueueDeadline}, {Kind: QueueDeadline}, {Kind: QueueDeadline}}, Command{Kind: QueueDeadline}, "held messages limit reached (at most 3)"},
		{"held text full", []Command{{Kind: QueueReply, Raw: "0123456789"}}, Command{Kind: QueueReply, Raw: "0123456"}, "held text in bytes limit reached (at most 16)"},
		{"receipts full", []Command{{Kind: QueueDeadline}, {Kind: Deliver, Message: 1}, {Kind: Deliver, Message: 1}}, Command{Kind: Deliver, Message: 1}, "receipts limit reached (at most 2)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkRefused(t, tt.setup, lim, tt.cmd, tt.want) })
	}
	var le *LimitError
	if _, err := NewLab().Decide(Command{Kind: QueueReply, Raw: strings.Repeat("x", 65537)}, Limits{}); !errors.As(err, &le) || le.Max != 65536 {
		t.Fatalf("default reply limit: %v", err)
	}
	if _, err := NewLab().Decide(Command{Kind: QueueReply, Raw: strings.Repeat("x", 65536)}, Limits{}); err != nil {
		t.Fatalf("a 64 KiB reply must be accepted: %v", err)
	}
}

func TestApplyRejectsCorruptEvents(t *testing.T) {
	t.Parallel()
	l := NewLab()
	for _, ev := range []Event{
		{Kind: MessageDelivered, Message: Message{ID: 1}},
		{Kind: MessageQueued, Message: Message{ID: 2}},
		{Kind: EventKind(99)},
	} {
		if _, err := l.Apply(ev); err == nil {
			t.Errorf("Apply(%+v) succeeded on a fresh session", ev)
		}
	}
	if l.Seq() != 0 {
		t.Fatalf("seq = %d after refused events", l.Seq())
	}
}

// FuzzReplay drives a session with arbitrary commands and checks that
// replaying its events rebuilds the same state, that seq counts the changes,
// and that a final call only changes through a new run.
func FuzzReplay(f *testing.F) {
	f.Add([]byte{1, 0, 2, 3, 1, 3, 0, 3, 2}, "x")
	f.Add([]byte{2, 3, 1, 0, 3, 1}, `{"runId":"run-1","callId":"lookup","kind":"completed","output":"x"}`)
	f.Add([]byte{4, 5, 17, 29, 41, 53, 65, 77, 89, 101, 113, 125, 3}, "run-1")
	f.Fuzz(func(t *testing.T, ops []byte, raw string) {
		live, lim := NewLab(), Limits{MaxHeld: 8, MaxReceipts: 16}
		var events []Event
		for i, op := range ops {
			cmd := Command{Kind: CommandKind(op % 6), By: Actor(op / 6 % 2), Message: int(op / 12), Name: raw, Predict: Prediction(op % 5)}
			if cmd.Kind == Inject {
				cmd.Inject = Injection{Preset: Preset(op / 12 % 11), Kind: MessageKind(op / 6 % 2), Raw: raw, Key: Key{raw, CallID}, Deliver: op/12%2 == 1}
			}
			switch i % 3 {
			case 0:
				cmd.Raw = raw
			case 1:
				cmd.Raw = Draft(live.call.Key)
			default:
				cmd.Raw = reply(live.call.Key.RunID, "rejected", "reason", raw[:len(raw)/2])
			}
			before := live.call
			ev, err := live.Decide(cmd, lim)
			if err != nil {
				continue
			}
			if _, err := live.Apply(ev); err != nil {
				t.Fatalf("Apply of a decided event: %v", err)
			}
			events = append(events, ev)
			if before.Status.Final() && ev.Kind != RunStarted && live.call != before {
				t.Fatalf("final call %+v changed to %+v by %+v", before, live.call, ev)
			}
		}
		replayed := NewLab()
		for _, ev := range events {
			if _, err := replayed.Apply(ev); err != nil {
				t.Fatal(err)
			}
		}
		if !reflect.DeepEqual(replayed.View(), live.View()) {
			t.Fatalf("replay differs:\n%+v\n%+v", replayed.View(), live.View())
		}
		// ViewSince is View's tail, whatever was presented before.
		all := live.View()
		for _, k := range []int{0, 1, len(all.Queue) / 2, len(all.Queue), len(all.Queue) + 3} {
			tail := live.ViewSince(k, k)
			q, r := all.Queue[min(k, len(all.Queue)):], all.Receipts[min(k, len(all.Receipts)):]
			if !reflect.DeepEqual(tail.Queue, q) && (len(q) > 0 || len(tail.Queue) > 0) ||
				!reflect.DeepEqual(tail.Receipts, r) && (len(r) > 0 || len(tail.Receipts) > 0) ||
				tail.Held != len(all.Queue) || tail.Received != len(all.Receipts) || tail.Call != all.Call {
				t.Fatalf("ViewSince(%d, %d) = %+v, want the tail of %+v", k, k, tail, all)
			}
		}
		if live.Seq() != uint64(len(events)) {
			t.Fatalf("seq %d after %d events", live.Seq(), len(events))
		}
	})
}

// TestWaiting: a held message waits until its first delivery; delivering it
// again, or an instructor's deliver-now message, never counts twice.
func TestWaiting(t *testing.T) {
	t.Parallel()
	l := NewLab()
	steps := []struct {
		cmd           Command
		held, waiting int
	}{
		{Command{Kind: QueueDeadline}, 1, 1},
		{Command{Kind: QueueReply, Raw: "{"}, 2, 2},
		{Command{Kind: Deliver, Message: 2}, 2, 1},
		{Command{Kind: Deliver, Message: 2}, 2, 1},
		{Command{Kind: Inject, By: Instructor, Inject: Injection{Preset: CurrentDeadline}}, 3, 2},
		{Command{Kind: Inject, By: Instructor, Inject: Injection{Preset: CurrentDeadline, Deliver: true}}, 4, 2},
		{Command{Kind: Deliver, Message: 1}, 4, 1},
		{Command{Kind: Deliver, Message: 3}, 4, 0},
	}
	for i, st := range steps {
		do(t, l, st.cmd)
		if v := l.View(); v.Held != st.held || v.Waiting != st.waiting {
			t.Fatalf("step %d: held %d waiting %d, want %d and %d", i, v.Held, v.Waiting, st.held, st.waiting)
		}
	}
}

// TestDeliveriesDecodeAsReceive: a delivery does what Receive does with the
// message's text on the call current at delivery, whichever message it is,
// however often it is delivered and whether the session kept the reply
// decoded (up to parseKeptBytes) or decodes it again (longer ones); and
// queueing a long completion for the pending call ticks step 1 as a short
// one does.
func TestDeliveriesDecodeAsReceive(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", parseKeptBytes)
	raws := []string{
		reply("run-1", "completed", "output", "short"),
		reply("run-1", "completed", "output", long),
		reply("run-1", "rejected", "reason", long),
		`{"runId":"run-1"` + strings.Repeat(" ", parseKeptBytes) + `}`,
		"{",
		`{"runId":"run-2","callId":"lookup","kind":"completed","output":"` + long + `"}`,
		reply("run-2", "rejected", "reason", "no"),
	}
	for _, first := range []int{0, 1} {
		l := NewLab()
		do(t, l, Command{Kind: QueueReply, Raw: raws[first]})
		if !l.Exercise().IsDone(1) {
			t.Fatalf("queueing reply %d (%d bytes) for the pending call did not tick step 1", first, len(raws[first]))
		}
		for _, raw := range raws {
			do(t, l, Command{Kind: QueueReply, Raw: raw})
		}
		// Each message in turn, some twice, a new run in the middle.
		order := []int{2, 3, 3, 1, 5, 7, 0, 6, 8, 2, 4}
		for i, id := range order {
			if id == 0 {
				do(t, l, Command{Kind: StartRun})
				continue
			}
			m, _ := l.Message(id)
			want := Receive(l.Call(), m.Raw)
			do(t, l, Command{Kind: Deliver, Message: id})
			if got := l.Call(); got != want.Call || l.View().Notice != want.Notice {
				t.Fatalf("delivery %d (message %d, %d bytes): %+v %q, want %+v %q", i, id, len(m.Raw), got, l.View().Notice, want.Call, want.Notice)
			}
		}
	}
}
