package model

import (
	"errors"
	"testing"
)

func TestTraceOf(t *testing.T) {
	reply := func(id int, raw string, from Actor) Event {
		return Event{Kind: MessageQueued, By: from, Message: Message{ID: id, Kind: ReplyMessage, From: from, Raw: raw}}
	}
	deadline := func(id int, key string) Event {
		return Event{Kind: MessageQueued, By: Student, Message: Message{ID: id, Kind: DeadlineMessage, From: Student, Key: Key{RunID: key, CallID: CallID}}}
	}
	deliver := func(id int) Event { return Event{Kind: MessageDelivered, By: Student, Message: Message{ID: id}} }
	start := Event{Kind: RunStarted, By: Student}
	injected := Event{Kind: MessageInjected, By: Instructor, Message: Message{ID: 3, Kind: ReplyMessage, From: Instructor, Raw: "{"}}
	rename := Event{Kind: Renamed, By: Student, Name: "Ada"}
	// The teacher's demonstration: queue a deadline, start a new run,
	// deliver the old deadline; before it, a reply in run-1, an
	// instructor's message and a rename.
	log := []Event{reply(1, "old", Student), deliver(1), rename, deadline(2, "run-1"), injected, deliver(3), start, deliver(2)}
	for _, tc := range []struct {
		name    string
		from    int
		want    string
		wantErr error
	}{
		{"all of it", 1, `[{"type":"queueReply","raw":"old"},{"type":"deliver","message":1},{"type":"queueDeadline"},{"type":"start"},{"type":"deliver","message":2}]`, nil},
		{"from run-2: the deadline queued before and delivered in it is kept", 2, `[{"type":"queueDeadline"},{"type":"start"},{"type":"deliver","message":1}]`, nil},
		{"a run the session never reached", 3, "", ErrNoDemonstration},
		{"no run 0", 0, "", nil},
	} {
		got, err := TraceOf(log, tc.from)
		switch {
		case tc.from == 0:
			if err == nil {
				t.Errorf("%s: no error", tc.name)
			}
			continue
		case tc.wantErr != nil:
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("%s: err %v, want %v", tc.name, err, tc.wantErr)
			}
			continue
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		b, _ := got.MarshalJSON()
		if string(b) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, b, tc.want)
		}
		if err := ValidateTrace(got); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	// Played as a case, the demonstration reaches what the teacher saw.
	tr, _ := TraceOf(log, 2)
	ref := newRefHost()
	for _, f := range tr {
		if err := ref.step(f); err != nil {
			t.Fatal(err)
		}
	}
	if ref.call.Status != Pending || ref.call.Key.RunID != "run-2" || ref.notice != NoticeDeadlineOtherCall {
		t.Errorf("played: %+v %q", ref.call, ref.notice)
	}
	// Starts alone demonstrate nothing.
	if _, err := TraceOf([]Event{start, start}, 1); !errors.Is(err, ErrNoDemonstration) {
		t.Errorf("starts only: %v", err)
	}
	for _, tc := range []struct {
		in   string
		want int
	}{{"run-3", 3}, {"run-1", 1}, {"run-0", 0}, {"run-03", 0}, {"3", 0}, {"", 0}} {
		n, err := ParseRun(tc.in)
		if n != tc.want || (err == nil) != (tc.want > 0) {
			t.Errorf("ParseRun(%q) = %d, %v", tc.in, n, err)
		}
	}
}

func TestRemoveCase(t *testing.T) {
	l := NewLab()
	add := func(name string) {
		c := Case{Name: name, Frames: Trace{{Kind: StartRun}}}
		if _, err := l.Apply(mustDecide(t, l, Command{Kind: AddCase, By: Instructor, Case: &c})); err != nil {
			t.Fatal(err)
		}
	}
	add("a")
	add("b")
	ev := mustDecide(t, l, Command{Kind: RemoveCase, By: Instructor, Case: &Case{Name: " a "}})
	if ev.Kind != CaseRemoved || ev.Case.Name != "a" || ev.KindName() != KindCaseRemoved {
		t.Fatalf("%+v", ev)
	}
	before := l.Code()
	if _, err := l.Apply(ev); err != nil {
		t.Fatal(err)
	}
	if got := l.Code().Cases; len(got) != 1 || got[0].Name != "b" || len(before.Cases) != 2 {
		t.Fatalf("cases after removing a: %+v (before %+v)", got, before.Cases)
	}
	if _, err := l.Decide(Command{Kind: RemoveCase, By: Instructor, Case: &Case{Name: "a"}}, Limits{}); !errors.Is(err, ErrUnknownCase) {
		t.Fatalf("removing it again: %v", err)
	}
	add("a") // a removed name may be used again
}

func mustDecide(t *testing.T, l *Lab, cmd Command) Event {
	t.Helper()
	ev, err := l.Decide(cmd, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}
