package model

import (
	"encoding/json"
	"testing"
)

// playLab plays t on a new Lab and calls each with the call before a frame,
// the lab after it and the frame.
func playLab(t *testing.T, tr Trace, each func(before Call, l *Lab, f Command)) *Lab {
	t.Helper()
	l := NewLab()
	for i, f := range tr {
		before := l.call
		e, err := l.Decide(f, Limits{})
		if err != nil {
			t.Fatalf("frame %d (%s): %v", i+1, frameText(f), err)
		}
		if _, err := l.Apply(e); err != nil {
			t.Fatalf("frame %d: %v", i+1, err)
		}
		if each != nil {
			each(before, l, f)
		}
	}
	return l
}

// Each walkthrough case does its step as the exercise judges it, and
// leaves the call the walkthrough says.
func TestWalkthroughCasesDoTheirSteps(t *testing.T) {
	want := [NumSteps]CallView{
		{"run-1", "lookup", "Pending", ""},
		{"run-2", "lookup", "Completed", "New answer"},
		{"run-2", "lookup", "Completed", "New answer"},
		{"run-2", "lookup", "Completed", "New answer"},
		{"run-3", "lookup", "Completed", "Answer for run-3"},
		{"run-4", "lookup", "Rejected", "The query is empty"},
		{"run-6", "lookup", "Pending", ""},
		{"run-6", "lookup", "Pending", ""},
		{"run-8", "lookup", "Completed", "<strong>Found it</strong>"},
	}
	cases := Walkthrough()
	if len(cases) != NumSteps {
		t.Fatalf("%d cases", len(cases))
	}
	for i, c := range cases {
		l := playLab(t, c.Frames, nil)
		x := l.Exercise()
		for s := 1; s <= i+1; s++ {
			if !x.IsDone(s) {
				t.Errorf("%s: step %d not done", c.Name, s)
			}
		}
		if i+1 < NumSteps && x.IsDone(i+2) {
			t.Errorf("%s: step %d done already", c.Name, i+2)
		}
		if got := l.Call().View(); got != want[i] {
			t.Errorf("%s: call %+v, want %+v", c.Name, got, want[i])
		}
	}
}

func TestCampaignCoversTheSeed(t *testing.T) {
	for _, seed := range []uint64{0, 1, 2, 42, 1 << 40, 1<<53 - 1, ^uint64(0)} {
		camp := Campaign(seed)
		if len(camp) < 200 {
			t.Fatalf("seed %d: %d traces", seed, len(camp))
		}
		notices := map[string]int{}
		kinds := map[DeliveryKind]int{}
		var deadlineAfterFinal, deadlinePending, deadlineUnresolved, olderRunReply, emptyOutput, markup int
		for _, c := range camp {
			if len(c.Frames) > campaignMaxFrames {
				t.Errorf("seed %d: %s has %d frames", seed, c.Name, len(c.Frames))
			}
			l := NewLab()
			notices[l.notice]++
			playLab(t, c.Frames, func(before Call, l *Lab, f Command) {
				notices[l.notice]++
				if f.Kind != Deliver {
					return
				}
				r := l.receipts[len(l.receipts)-1]
				kinds[r.Kind]++
				m := l.queue[f.Message-1]
				switch {
				case r.Kind == KindDeadline && before.Status.Final():
					deadlineAfterFinal++
				case r.Kind == KindDeadline && before.Status == Pending:
					deadlinePending++
				case r.Kind == KindDeadline:
					deadlineUnresolved++
				}
				if rep, err := ParseReply(m.Raw); err == nil && m.Kind == ReplyMessage {
					if rep.Key.CallID == CallID && earlierRun(rep.Key.RunID, runNumber(before.Key.RunID)) {
						olderRunReply++
					}
				}
				if !before.Status.Final() && l.call.Status == Completed {
					if l.call.Text == "" {
						emptyOutput++
					}
					if looksLikeMarkup(l.call.Text) {
						markup++
					}
				}
			})
		}
		for _, n := range append(DeliveryNotices(), NoticeReady, NoticeStarted) {
			if notices[n] == 0 {
				t.Errorf("seed %d: notice %q never occurs", seed, n)
			}
		}
		for k := range numDeliveryKinds {
			if kinds[k] == 0 {
				t.Errorf("seed %d: no delivery of %s", seed, k.Phrase())
			}
		}
		for name, n := range map[string]int{"deadline after a final": deadlineAfterFinal, "deadline while Pending": deadlinePending,
			"deadline while Unresolved": deadlineUnresolved, "older run's reply": olderRunReply, "empty output": emptyOutput, "markup": markup} {
			if n == 0 {
				t.Errorf("seed %d: no %s", seed, name)
			}
		}
		if seed == 0 {
			t.Logf("seed 0: %d traces, delivery kinds %v, notices %v", len(camp), kinds, notices)
		}
	}
}

// A campaign is a function of its seed.
func TestCampaignIsDeterministic(t *testing.T) {
	enc := func(cs []Case) string {
		b, err := json.Marshal(cs)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	a, b, c := enc(Campaign(9)), enc(Campaign(9)), enc(Campaign(10))
	if a != b {
		t.Error("the same seed gave two campaigns")
	}
	if a == c {
		t.Error("two seeds gave the same campaign")
	}
	// The generator's output is fixed by its definition: splitmix64 from 0.
	r := &rng{}
	if got := r.next(); got != 0xe220a8397b1dcdaf {
		t.Errorf("splitmix64(0) = %#x", got)
	}
}

func TestTraceJSON(t *testing.T) {
	tr := Trace{startFrame(), replyFrame(""), replyFrame("<b>\"x\"</b>\u2028"), deadlineFrame(), deliverFrame(2)}
	// MarshalJSON writes strings as JSON.stringify does (json.Marshal then
	// escapes <, > and & again, which JSON.parse reads the same).
	b, err := tr.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"type":"start"},{"type":"queueReply","raw":""},{"type":"queueReply","raw":"<b>\"x\"</b>` + "\u2028" + `"},{"type":"queueDeadline"},{"type":"deliver","message":2}]`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	if _, err := json.Marshal(Trace{{Kind: Rename}}); err == nil {
		t.Error("a rename frame was written")
	}
}

func TestValidateTrace(t *testing.T) {
	for _, c := range []struct {
		t    Trace
		want string
	}{
		{Trace{replyFrame("x"), deliverFrame(1)}, ""},
		{nil, "a case needs at least one frame"},
		{Trace{deliverFrame(1)}, "frame 1: unknown message id 1"},
		{Trace{replyFrame("x"), deliverFrame(2)}, "frame 2: unknown message id 2"},
		{Trace{{Kind: Rename, Name: "x"}}, "frame 1: a case has only start, queueReply, queueDeadline and deliver frames"},
		{make(Trace, MaxCaseFrames+1), "a case has at most 200 frames, not 201"},
		{Trace{replyFrame(string(make([]byte, 65<<10)))}, "frame 1: reply size in bytes limit reached (at most 65536)"},
	} {
		err := ValidateTrace(c.t)
		if got := ""; err != nil {
			got = err.Error()
			if got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		} else if c.want != "" {
			t.Errorf("valid, want %q", c.want)
		}
	}
}

func TestWithoutRenumbers(t *testing.T) {
	tr := Trace{replyFrame("a"), deadlineFrame(), startFrame(), replyFrame("b"), deliverFrame(1), deliverFrame(3), deliverFrame(2)}
	got := without(tr, []bool{true, false, false, false, false, false, false})
	want := Trace{deadlineFrame(), startFrame(), replyFrame("b"), deliverFrame(2), deliverFrame(1)}
	if !equal(got, want) {
		t.Errorf("got %s", frames(got))
	}
	if err := ValidateTrace(got); err != nil {
		t.Error(err)
	}
}

func TestRenumberRuns(t *testing.T) {
	old := Trace{startFrame(), startFrame(), replyFrame(`{"runId":"run-3","x":"run-2 run-1 run-30 run-0 run-"}`), deliverFrame(1)}
	drop := []bool{true, false, false, false}
	got := renumberRuns(old, drop, without(old, drop))
	if want := `{"runId":"run-2","x":"run-1 run-1 run-29 run-0 run-"}`; got[1].Raw != want {
		t.Errorf("got %s, want %s", got[1].Raw, want)
	}
}

func frames(t Trace) string {
	b, _ := json.Marshal(t)
	return string(b)
}

func TestPropertiesAreDistinct(t *testing.T) {
	seen := map[Property]bool{}
	for _, p := range Properties() {
		if seen[p] || p == "" {
			t.Errorf("property %q twice or empty", p)
		}
		seen[p] = true
	}
}

// The checker's reference and the Lab show the same call and notice after
// every frame of every case, so the lab and the check never disagree.
func TestReferenceIsTheLab(t *testing.T) {
	for _, c := range Cases(5) {
		ref := newRefHost()
		playLab(t, c.Frames, func(_ Call, l *Lab, f Command) {
			if err := ref.step(f); err != nil {
				t.Fatalf("%s: %v", c.Name, err)
			}
			if ref.call != l.Call() || ref.notice != l.View().Notice {
				t.Fatalf("%s: reference %+v %q, lab %+v %q", c.Name, ref.call, ref.notice, l.Call(), l.View().Notice)
			}
		})
	}
}
