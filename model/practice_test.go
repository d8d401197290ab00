package model

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// predicted is one delivery with a prediction, for the mastery tables.
type predicted struct {
	kind  DeliveryKind
	right bool
}

func TestMasteryFold(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		seen  []predicted
		kind  DeliveryKind
		want  KindMastery // without its unexported fields
		state string
	}{
		{"never", nil, KindStaleReply, KindMastery{}, "new"},
		{"one wrong", []predicted{{KindStaleReply, false}}, KindStaleReply,
			KindMastery{Predicted: 1, LastAt: 1, LastWrong: true}, "wrong"},
		{"two right", []predicted{{KindStaleReply, true}, {KindStaleReply, true}}, KindStaleReply,
			KindMastery{Predicted: 2, Right: 2, Streak: 2, LastAt: 2}, "learning"},
		{"three right master it", []predicted{{KindDeadline, true}, {KindDeadline, true}, {KindDeadline, true}}, KindDeadline,
			KindMastery{Predicted: 3, Right: 3, Streak: 3, Mastered: true, LastAt: 3}, "mastered"},
		{"a wrong one breaks the streak", []predicted{{KindDeadline, true}, {KindDeadline, true}, {KindDeadline, false}, {KindDeadline, true}}, KindDeadline,
			KindMastery{Predicted: 4, Right: 3, Streak: 1, LastAt: 4}, "learning"},
		{"mastery is lost by a wrong one", []predicted{{KindDeadline, true}, {KindDeadline, true}, {KindDeadline, true}, {KindDeadline, false}}, KindDeadline,
			KindMastery{Predicted: 4, Right: 3, LastAt: 4, LastWrong: true}, "wrong"},
		{"other kinds do not count", []predicted{{KindDeadline, true}, {KindStaleReply, false}, {KindDeadline, true}, {KindDuplicate, false}, {KindDeadline, true}}, KindDeadline,
			KindMastery{Predicted: 3, Right: 3, Streak: 3, Mastered: true, LastAt: 5}, "mastered"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var m Mastery
			for i, p := range tc.seen {
				m.add(uint64(i+1), Receipt{Kind: p.kind, Predicted: PredictIgnored, Right: p.right}, i+1, "run-1")
			}
			got := m[tc.kind]
			got.wrong, got.run = 0, ""
			if got != tc.want {
				t.Errorf("mastery = %+v, want %+v", got, tc.want)
			}
			if s := m.State(tc.kind); s != tc.state {
				t.Errorf("state = %q, want %q", s, tc.state)
			}
		})
	}
	var m Mastery
	m.add(1, Receipt{Kind: KindDeadline}, 1, "run-1") // no prediction
	if m != (Mastery{}) {
		t.Fatalf("a delivery without a prediction counted: %+v", m)
	}
}

// labMastered builds a session whose mastery is given (the receipts Why
// reads are not).
func labMastered(m Mastery, codeAt uint64) *Lab {
	l := NewLab()
	l.mastery, l.codeAt = m, codeAt
	return l
}

func TestNextKindOrder(t *testing.T) {
	t.Parallel()
	all := func(except ...DeliveryKind) Mastery {
		var m Mastery
		for k := range m {
			m[k] = KindMastery{Predicted: 3, Right: 3, Streak: 3, Mastered: true, LastAt: uint64(k + 1)}
		}
		for _, k := range except {
			m[k] = KindMastery{}
		}
		return m
	}
	wrongAt := func(m Mastery, k DeliveryKind, at uint64) Mastery {
		m[k] = KindMastery{Predicted: 1, LastAt: at, LastWrong: true}
		return m
	}
	rightAt := func(m Mastery, k DeliveryKind, streak int, at uint64) Mastery {
		m[k] = KindMastery{Predicted: streak, Right: streak, Streak: streak, LastAt: at, Mastered: streak >= MasteryStreak}
		return m
	}
	coverage := func(wrong ...string) *Result {
		r := &Result{}
		for _, id := range []string{"completion", "deadlineAfterResult", "olderRun", "malformedJson"} {
			r.Coverage = append(r.Coverage, Situation{ID: id, Passed: !strings.Contains(strings.Join(wrong, " "), id)})
		}
		return r
	}
	tests := []struct {
		name   string
		m      Mastery
		codeAt uint64
		code   *Result
		want   DeliveryKind
		why    string // a part of it
	}{
		{"fresh: the steps' first kind", Mastery{}, 0, nil, KindMatchingReply, "You have not predicted a matching reply yet."},
		{"never predicted, in the steps' order", rightAt(Mastery{}, KindMatchingReply, 1, 1), 0, nil, KindStaleReply, "not predicted a stale reply"},
		{"a wrong one before the never predicted", wrongAt(Mastery{}, KindWrongShape, 4), 0, nil, KindWrongShape, "wrong"},
		{"the most recent wrong first", wrongAt(wrongAt(Mastery{}, KindStaleReply, 5), KindDeadline, 7), 0, nil, KindDeadline, ""},
		{"the most recent wrong first, the other way", wrongAt(wrongAt(Mastery{}, KindStaleReply, 9), KindDeadline, 7), 0, nil, KindStaleReply, ""},
		{"never a mastered kind", all(KindLateReply), 0, nil, KindLateReply, "not predicted a late reply"},
		{"the shortest streak", rightAt(rightAt(all(), KindDuplicate, 2, 3), KindWrongShape, 1, 8), 0, nil, KindWrongShape, "right once in a row"},
		{"equal streaks: the least recently practised", rightAt(rightAt(all(), KindDuplicate, 2, 9), KindWrongShape, 2, 8), 0, nil, KindWrongShape, "right twice in a row"},
		{"the code check's wrong situation counts as wrong", rightAt(Mastery{}, KindMatchingReply, 1, 1), 4, coverage("deadlineAfterResult"), KindDeadline,
			"Your last code check shows that your module lets a deadline overwrite a result."},
		{"the code check is as recent as its submission", wrongAt(Mastery{}, KindStaleReply, 6), 4, coverage("malformedJson"), KindStaleReply, ""},
		{"a later submission is more recent", wrongAt(Mastery{}, KindStaleReply, 3), 4, coverage("malformedJson"), KindMalformedJSON, "text that is not JSON"},
		{"a right prediction after the check supersedes it", rightAt(rightAt(all(), KindDeadline, 1, 9), KindStaleReply, 1, 2), 4, coverage("deadlineAfterResult"), KindStaleReply, ""},
		{"a mastered kind stays out, whatever the check", all(KindLateReply), 20, coverage("deadlineAfterResult"), KindLateReply, ""},
		{"passed situations are not wrong", rightAt(Mastery{}, KindMatchingReply, 1, 1), 4, coverage(), KindStaleReply, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k, why, ok := labMastered(tc.m, tc.codeAt).NextKind(tc.code)
			if !ok || k != tc.want || !strings.Contains(why, tc.why) || !strings.HasSuffix(why, ".") {
				t.Fatalf("NextKind = %v %q %v, want %v with %q", k, why, ok, tc.want, tc.why)
			}
		})
	}
	if k, why, ok := labMastered(all(), 0).NextKind(nil); ok {
		t.Fatalf("all mastered drew %v %q", k, why)
	}
	if p := labMastered(all(), 0).Practice(); !p.Done {
		t.Fatalf("all mastered: practice %+v, want done", p)
	}
}

// TestSituationKinds: every situation of the code check says which kinds
// it involves (a new run none), so none is forgotten when one is added.
func TestSituationKinds(t *testing.T) {
	t.Parallel()
	for _, s := range situations {
		sk, ok := situationKinds[s.id]
		if !ok {
			t.Errorf("situation %q has no kinds", s.id)
		}
		if len(sk.kinds) > 0 != (sk.does != "") || sk.does != "" && !strings.HasPrefix(sk.does, "your module ") {
			t.Errorf("situation %q: %+v", s.id, sk)
		}
	}
	if len(situationKinds) != len(situations) {
		t.Errorf("%d situations mapped, %d exist", len(situationKinds), len(situations))
	}
}

// rightPrediction is what a student who is always right predicts for the
// delivery of message id now.
func rightPrediction(l *Lab, id int) Prediction {
	m, _ := l.Message(id)
	return ClassifyNotice(Explain(l.call, m).Notice)
}

// draw decides and applies a practice draw.
func draw(t *testing.T, l *Lab, by Actor, code *Result) (PracticeView, Event) {
	t.Helper()
	ev, err := l.Decide(Command{Kind: DrawPractice, By: by, Code: code}, Limits{})
	if err != nil {
		t.Fatalf("draw: %v", err)
	}
	if _, err := l.Apply(ev); err != nil {
		t.Fatalf("applying the draw: %v", err)
	}
	return l.Practice(), ev
}

func TestPracticeAfterAWrongStaleReply(t *testing.T) {
	t.Parallel()
	l := NewLab()
	do(t, l, queue(completion("run-1", "Old answer")))
	do(t, l, start())
	do(t, l, Command{Kind: Deliver, Message: 1, Predict: PredictAccepted})
	p, ev := draw(t, l, Student, nil)
	want := "You expected run-1's reply to be accepted after run-2 began (message 1)."
	if p.Kind != KindStaleReply || p.Why != want || p.Message != 2 || p.Number != "2" {
		t.Fatalf("practice = %+v, want a stale reply, why %q", p, want)
	}
	if m, _ := l.Message(2); m.Raw != completion("run-1", "Old answer") || !m.Lab || ev.Practice.NewRun || ev.Practice.Setup.ID != 0 {
		t.Fatalf("held %+v from %+v: want run-1's own reply, nothing set up", m, ev.Practice)
	}
	if _, err := l.Decide(Command{Kind: DrawPractice}, Limits{}); !errors.Is(err, ErrPresetNotApplicable) {
		t.Fatalf("a second draw while one is held: %v", err)
	}
	if _, err := l.Decide(deliver(2), Limits{}); !errors.Is(err, ErrPredictionRequired) {
		t.Fatalf("delivering the practice without a prediction: %v, want ErrPredictionRequired", err)
	}
	do(t, l, Command{Kind: Deliver, Message: 2, Predict: PredictIgnored})
	r := lastReceipt(l)
	if r.Kind != KindStaleReply || !r.Practice || !r.Right || l.Practice() != (PracticeView{}) {
		t.Fatalf("receipt %+v, practice %+v", r, l.Practice())
	}
	if m := l.Mastery()[KindStaleReply]; m.Predicted != 2 || m.Right != 1 || m.Streak != 1 || m.LastWrong {
		t.Fatalf("mastery of stale replies %+v", m)
	}
}

// TestPracticeUntilAllMastered: a student who always predicts right is
// drawn every kind, never a mastered one, each receipt saying the kind
// drawn, until all ten are mastered, from any history; a replay of the
// events gives the same session.
func TestPracticeUntilAllMastered(t *testing.T) {
	t.Parallel()
	for name := range histories {
		t.Run(name, func(t *testing.T) {
			l := labWith(t, name)
			var events []Event
			seen := map[DeliveryKind]int{}
			for draws := 0; ; draws++ {
				if draws > 3*NumDeliveryKinds {
					t.Fatalf("%d draws and not all mastered: %+v", draws, l.Mastery())
				}
				ev, err := l.Decide(Command{Kind: DrawPractice, By: Student}, Limits{})
				if errors.Is(err, ErrAllMastered) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if _, err := l.Apply(ev); err != nil {
					t.Fatal(err)
				}
				p := l.Practice()
				if l.Mastery()[p.Kind].Mastered {
					t.Fatalf("drew %v, already mastered", p.Kind)
				}
				seen[p.Kind]++
				cmd := Command{Kind: Deliver, By: Student, Message: p.Message, Predict: rightPrediction(l, p.Message)}
				dev, err := l.Decide(cmd, Limits{})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := l.Apply(dev); err != nil {
					t.Fatal(err)
				}
				if r := lastReceipt(l); r.Kind != p.Kind || !r.Right || !r.Practice {
					t.Fatalf("drew %v (%q), the receipt says %+v", p.Kind, p.Why, r)
				}
				events = append(events, ev, dev)
			}
			if !l.Mastery().All() || !l.Practice().Done || len(seen) != NumDeliveryKinds {
				t.Fatalf("mastery %+v, practice %+v, drawn %v", l.Mastery(), l.Practice(), seen)
			}
			if l.Exercise().DoneAt != labWith(t, name).Exercise().DoneAt {
				t.Fatalf("practice ticked steps: %v", l.Exercise().Done())
			}
			replayed := labWith(t, name)
			for _, ev := range events {
				if _, err := replayed.Apply(ev); err != nil {
					t.Fatal(err)
				}
			}
			if !reflect.DeepEqual(replayed.View(), l.View()) {
				t.Fatal("replay differs")
			}
		})
	}
}

// TestPracticeSetUp: each kind's set-up makes ordinary changes the
// student sees, and the held message is of the kind.
func TestPracticeSetUp(t *testing.T) {
	t.Parallel()
	tests := []struct {
		history string
		kind    DeliveryKind
		newRun  bool
		setup   string // the set-up message's label, "" for none
		notice  string // the notice after the draw
	}{
		{"fresh", KindStaleReply, true, "", NoticeStarted},
		{"fresh", KindDuplicate, false, Draft(Key{"run-1", CallID}), NoticeAcceptedComplete},
		{"fresh", KindContradictory, false, Draft(Key{"run-1", CallID}), NoticeAcceptedComplete},
		{"fresh", KindLateReply, false, "Deadline for run-1/lookup", NoticeUnresolved},
		{"fresh", KindStaleDeadline, true, "", NoticeStarted},
		{"completed at run-2", KindMatchingReply, true, "", NoticeStarted},
		{"completed at run-2", KindLateReply, true, "Deadline for run-3/lookup", NoticeUnresolved},
		{"completed at run-2", KindDuplicate, false, "", NoticeAcceptedComplete},
		{"unresolved at run-2", KindDuplicate, false, Draft(Key{"run-2", CallID}), NoticeAcceptedComplete},
		{"unresolved at run-2", KindLateReply, false, "", NoticeUnresolved},
		{"rejected at run-3", KindContradictory, false, "", NoticeAcceptedReject},
		{"old answer held", KindStaleReply, false, "", NoticeStarted},
	}
	for _, tc := range tests {
		l := labWith(t, tc.history)
		p := l.planPractice(tc.kind, Student)
		ev := Event{Kind: PracticeDrawn, By: Student, Practice: &p}
		if _, err := l.Apply(ev); err != nil {
			t.Fatalf("%s, %v: %v", tc.history, tc.kind, err)
		}
		setup := ""
		if p.Setup.ID != 0 {
			m, _ := l.Message(p.Setup.ID)
			setup = m.Label()
		}
		m, _ := l.Message(p.Message.ID)
		if p.NewRun != tc.newRun || setup != tc.setup || l.notice != tc.notice || Explain(l.call, m).Kind != tc.kind {
			t.Errorf("%s, %v: new run %v, set-up %q, notice %q, message %q is %v", tc.history, tc.kind, p.NewRun, setup, l.notice, m.Label(), Explain(l.call, m).Kind)
		}
	}
	l := labWith(t, "old answer held")
	if p := l.planPractice(KindStaleReply, Student); p.Message.Raw != completion("run-1", "Old answer") {
		t.Errorf("a stale reply is %q, want run-1's own held reply", p.Message.Raw)
	}
	l = labWith(t, "completed at run-2")
	if p := l.planPractice(KindDuplicate, Student); p.Message.Raw != completion("run-2", "New answer") {
		t.Errorf("a duplicate is %q, want the exact final reply", p.Message.Raw)
	}
}

// TestPracticeTicksNoStep: the lab's messages never tick a step, even
// delivered by the student (a deadline then a late reply is step 5's
// shape).
func TestPracticeTicksNoStep(t *testing.T) {
	t.Parallel()
	l := labWith(t, "fresh")
	p := l.planPractice(KindLateReply, Student)
	p.Why = "test"
	if _, err := l.Apply(Event{Kind: PracticeDrawn, By: Student, Practice: &p}); err != nil {
		t.Fatal(err)
	}
	do(t, l, Command{Kind: Deliver, Message: p.Message.ID, Predict: PredictAccepted})
	if l.call.Status != Completed || l.Exercise().IsDone(5) || len(l.Exercise().Done()) != 0 {
		t.Fatalf("call %+v, steps done %v", l.call, l.Exercise().Done())
	}
	if !l.Exercise().Started() {
		t.Fatal("the student's own draw and delivery did not start the exercise")
	}
}

func TestPracticePreset(t *testing.T) {
	t.Parallel()
	l := NewLab()
	do(t, l, queue(Draft(Key{"run-1", CallID})))
	do(t, l, Command{Kind: Deliver, Message: 1, Predict: PredictAccepted})
	do(t, l, Command{Kind: Deliver, Message: 1, Predict: PredictAccepted}) // a duplicate, predicted wrong
	inj := Command{Kind: Inject, By: Instructor, Inject: Injection{Preset: PracticePreset}}
	ev, err := l.Decide(inj, Limits{})
	if err != nil || ev.Kind != PracticeDrawn || ev.By != Instructor || ev.Practice.Kind != KindDuplicate {
		t.Fatalf("the practice preset: %+v %v", ev, err)
	}
	inj.Inject.Deliver = true
	if _, err := l.Decide(inj, Limits{}); !errors.Is(err, ErrPresetNotApplicable) {
		t.Fatalf("the practice preset delivered at once: %v", err)
	}
	if p, ok := ParsePreset("practice"); !ok || p != PracticePreset {
		t.Fatal("no preset named practice")
	}
}

func TestPracticeLimits(t *testing.T) {
	t.Parallel()
	l := NewLab()
	if _, err := l.Decide(Command{Kind: DrawPractice}, Limits{MaxHeld: 1, MaxReceipts: 1}); err != nil {
		t.Fatal(err) // a matching reply, nothing to set up
	}
	var le *LimitError
	l = labWith(t, "unresolved at run-2") // a duplicate needs a completion delivered first
	l.mastery[KindMatchingReply] = KindMastery{Predicted: 1, LastAt: 1, LastWrong: false}
	l.mastery[KindStaleReply] = KindMastery{Predicted: 1, LastAt: 2, LastWrong: true}
	l.mastery[KindDuplicate] = KindMastery{Predicted: 1, LastAt: 3, LastWrong: true}
	if _, err := l.Decide(Command{Kind: DrawPractice}, Limits{MaxHeld: 2}); !errors.As(err, &le) || le.Cap != "held messages" {
		t.Fatalf("a draw holding two messages with room for one: %v", err)
	}
}

func FuzzPracticeKind(f *testing.F) {
	f.Add([]byte{1, 0, 2, 3, 1, 3, 0, 3, 2}, "x", uint16(0))
	f.Add([]byte{2, 3, 1, 0, 3, 1}, `{"runId":"run-1","callId":"lookup","kind":"completed","output":"x"}`, uint16(0xffff))
	f.Add([]byte{4, 5, 17, 29, 41, 53, 65, 77, 89, 101, 113, 125, 3, 9, 9, 21}, "run-1", uint16(5))
	f.Fuzz(func(t *testing.T, ops []byte, raw string, wrong uint16) {
		l := NewLab()
		var code *Result
		for i, op := range ops {
			kinds := []CommandKind{StartRun, QueueReply, QueueDeadline, Deliver, Inject, DrawPractice, SubmitCode}
			cmd := Command{Kind: kinds[int(op)%len(kinds)], By: Actor(op / 7 % 2), Message: int(op/14) + 1, Predict: Prediction(op % 5)}
			switch i % 3 {
			case 0:
				cmd.Raw = raw
			case 1:
				cmd.Raw = Draft(l.call.Key)
			default:
				cmd.Raw = reply(l.call.Key.RunID, "rejected", "reason", raw[:len(raw)/2])
			}
			if cmd.Kind == Inject {
				cmd.Inject = Injection{Preset: Preset(op / 7 % 12), Kind: MessageKind(op / 3 % 2), Raw: raw, Key: Key{raw, CallID}}
			}
			if cmd.Kind == SubmitCode {
				code = &Result{}
				for j, s := range situations {
					code.Coverage = append(code.Coverage, Situation{ID: s.id, Passed: wrong&(1<<(j%16)) == 0})
				}
			}
			cmd.Code = code
			if ev, err := l.Decide(cmd, Limits{MaxHeld: 64}); err == nil {
				if _, err := l.Apply(ev); err != nil {
					t.Fatalf("applying a decided %+v: %v", ev, err)
				}
			}
		}
		ev, err := l.Decide(Command{Kind: DrawPractice, By: Student, Code: code}, Limits{})
		if err != nil {
			if !errors.Is(err, ErrPresetNotApplicable) {
				t.Fatal(err)
			}
			return
		}
		if l.Mastery()[ev.Practice.Kind].Mastered {
			t.Fatalf("drew %v, mastered", ev.Practice.Kind)
		}
		if _, err := l.Apply(ev); err != nil {
			t.Fatal(err)
		}
		p := l.Practice()
		if _, err := l.Decide(Command{Kind: Deliver, Message: p.Message}, Limits{}); !errors.Is(err, ErrPredictionRequired) {
			t.Fatalf("delivering the practice without a prediction: %v", err)
		}
		do(t, l, Command{Kind: Deliver, By: Student, Message: p.Message, Predict: PredictAccepted})
		if r := lastReceipt(l); r.Kind != p.Kind || !r.Practice {
			t.Fatalf("drew %v, delivered %+v", p.Kind, r)
		}
	})
}
