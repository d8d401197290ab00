package model

import (
	"reflect"
	"testing"
)

// FuzzPreview checks that Preview changes nothing and predicts exactly the
// notice and run that Apply then leaves.
func FuzzPreview(f *testing.F) {
	f.Add([]byte{1, 0, 2, 3, 1, 3, 0, 3, 2, 11, 19}, "x")
	f.Add([]byte{2, 3, 1, 0, 3, 1, 11}, `{"runId":"run-1","callId":"lookup","kind":"completed","output":"x"}`)
	f.Fuzz(func(t *testing.T, ops []byte, raw string) {
		l, lim := NewLab(), Limits{MaxHeld: 8, MaxReceipts: 16}
		for i, op := range ops {
			cmd := Command{Kind: CommandKind(op % 4), By: Actor(op / 4 % 2), Message: int(op / 8)}
			if i%2 == 0 {
				cmd.Raw = raw
			} else {
				cmd.Raw = Draft(l.call.Key)
			}
			ev, err := l.Decide(cmd, lim)
			if err != nil {
				continue
			}
			before := l.View()
			notice, run, err := l.Preview(ev)
			if err != nil {
				t.Fatalf("Preview of a decided event: %v", err)
			}
			if after := l.View(); !reflect.DeepEqual(before, after) {
				t.Fatalf("Preview changed the session:\n%+v\n%+v", before, after)
			}
			got, err := l.Apply(ev)
			if err != nil {
				t.Fatal(err)
			}
			if got != notice || l.call.Key.RunID != run {
				t.Fatalf("Preview said %q/%s, Apply left %q/%s", notice, run, got, l.call.Key.RunID)
			}
		}
	})
}

func TestPreviewRefusesWhatApplyRefuses(t *testing.T) {
	t.Parallel()
	l := NewLab()
	if _, _, err := l.Preview(Event{Kind: MessageDelivered, Message: Message{ID: 3}}); err == nil {
		t.Fatal("Preview accepted a delivery of a message never queued")
	}
	if l.Seq() != 0 {
		t.Fatalf("seq %d after a refused preview", l.Seq())
	}
}

// TestPrepareCommit: a change committed is what Apply of the same event
// leaves, and a change prepared at another seq is refused.
func TestPrepareCommit(t *testing.T) {
	t.Parallel()
	applied, committed := NewLab(), NewLab()
	events := []Event{
		{Kind: MessageQueued, By: Student, Message: Message{ID: 1, Kind: ReplyMessage, From: Student, Raw: `{"runId":"run-1","callId":"lookup","kind":"completed","output":"x"}`}},
		{Kind: MessageDelivered, By: Student, Message: Message{ID: 1}, Prediction: PredictAccepted},
		{Kind: RunStarted, By: Student},
	}
	var stale Change
	for i, e := range events {
		if _, err := applied.Apply(e); err != nil {
			t.Fatal(err)
		}
		ch, err := committed.Prepare(e)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			stale = ch
		}
		if err := committed.Commit(ch); err != nil {
			t.Fatal(err)
		}
		if ch.Notice() != applied.View().Notice || ch.Run() != applied.View().Call.RunID {
			t.Fatalf("event %d: prepared %q %q, applied %+v", i, ch.Notice(), ch.Run(), applied.View())
		}
	}
	if !reflect.DeepEqual(applied, committed) {
		t.Fatalf("committed\n%+v\napplied\n%+v", committed, applied)
	}
	if err := committed.Commit(stale); err == nil {
		t.Fatal("a change prepared at seq 0 was committed at seq 3")
	}
	if err := committed.Commit(Change{}); err == nil {
		t.Fatal("a zero change was committed")
	}
}
