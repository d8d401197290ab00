package model

import "testing"

func TestSideBySide(t *testing.T) {
	reply := func(run, out string) Command {
		return Command{Kind: QueueReply, Raw: `{"runId":"` + run + `","callId":"lookup","kind":"completed","output":"` + out + `"}`}
	}
	// A deadline over a result: the module and the model part at step 3
	// and stay apart after it.
	tr := Trace{reply("run-1", "A"), {Kind: QueueDeadline}, {Kind: Deliver, Message: 1}, {Kind: Deliver, Message: 2}, {Kind: StartRun}}
	for _, tc := range []struct {
		name     string
		client   NewClient
		differs  []bool
		property Property
	}{
		{"the reference", newRef, []bool{false, false, false, false, false}, ""},
		{"a deadline over a result", newBuggy(bugs{deadlineOver: true}), []bool{false, false, false, true, false}, PropDeadlineResult},
	} {
		steps, err := SideBySide(tc.client, tr)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(steps) != len(tr) {
			t.Fatalf("%s: %d steps for %d frames", tc.name, len(steps), len(tr))
		}
		var prop Property
		for i, s := range steps {
			if s.Differs != tc.differs[i] {
				t.Errorf("%s: step %d differs %v, want %v (%+v)", tc.name, i, s.Differs, tc.differs[i], s)
			}
			if s.Property != "" {
				prop = s.Property
			}
		}
		if prop != tc.property {
			t.Errorf("%s: property %q, want %q", tc.name, prop, tc.property)
		}
		if steps[2].Expected.Call.Status != "Completed" || steps[2].Expected.Notice != NoticeAcceptedComplete {
			t.Errorf("%s: step 2 expected %+v", tc.name, steps[2].Expected)
		}
	}
	if _, err := SideBySide(newRef, Trace{{Kind: Deliver, Message: 1}}); err == nil {
		t.Error("a trace that cannot be played was played")
	}
}
