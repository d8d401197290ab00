package model

import "testing"

// traceOf reads fuzz bytes as a trace: each byte a frame, its low bits the
// kind, the rest a reply from the campaign's texts or a message number.
func traceOf(data []byte) Trace {
	var t Trace
	queued := 0
	texts := append(append(append([]string(nil), malformed...), campaignOutputs...),
		Draft(Key{"run-1", CallID}), Draft(Key{"run-2", CallID}), replyJSON(Key{"run-1", CallID}, "rejected", "reason", ""))
	for _, b := range data {
		if len(t) == 40 {
			break
		}
		switch b & 3 {
		case 0:
			t = append(t, startFrame())
		case 1:
			t = append(t, replyFrame(texts[int(b>>2)%len(texts)]))
			queued++
		case 2:
			t = append(t, deadlineFrame())
			queued++
		default:
			if queued > 0 {
				t = append(t, deliverFrame(1+int(b>>2)%queued))
			}
		}
	}
	return t
}

// The reference passes every trace; a wrong module's failure, shrunk, is
// a valid trace no longer than the one it came from, failing at its last
// frame the same way.
func FuzzCheckTrace(f *testing.F) {
	f.Add([]byte{1, 3, 3, 2, 7})
	f.Add([]byte{2, 1, 3, 7, 0, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		tr := traceOf(data)
		if len(tr) == 0 {
			return
		}
		if o, err := play(newRef, tr); o != nil || err != nil {
			t.Fatalf("the reference fails %s: %+v %v", frames(tr), o, err)
		}
		for _, m := range wrongModules {
			nc := newBuggy(m.b)
			o, err := play(nc, tr)
			if err != nil {
				t.Fatal(err)
			}
			if o == nil {
				continue
			}
			shrunk, so := shrink(nc, tr, o)
			if err := ValidateTrace(shrunk); err != nil || len(shrunk) > o.step+1 || so.step != len(shrunk)-1 || so.property != o.property {
				t.Fatalf("%s: %s shrunk to %s (step %d, %q): %v", m.name, frames(tr), frames(shrunk), so.step, so.property, err)
			}
			if at := firstDifference(t, nc, shrunk); at != so.step {
				t.Fatalf("%s: %s differs at %d, not %d", m.name, frames(shrunk), at, so.step)
			}
		}
	})
}
