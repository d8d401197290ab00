package model

import "fmt"

// Side by side: a trace played on the reference and on a student's module,
// every step of it shown, not only the first that differs, so that a
// student can step through a failure and branch from any step (play other
// frames than the trace did) and see where the two part.

// StepSides is one frame of a trace and what each side showed after it:
// the lab's model, and the module (its view's JSON text, null when it has
// none, its notice, and its error). Differs is whether they disagree as
// the check compares them.
type StepSides struct {
	Frame    Command  `json:"-"`
	Expected Expected `json:"expected"`
	Got      Got      `json:"got"`
	Differs  bool     `json:"differs"`
	// Property names the difference in words, at the first step that
	// differs only (later steps follow from an earlier difference).
	Property Property `json:"property,omitempty"`
}

// MaxSideBySideFrames bounds a trace played side by side, as a case.
const MaxSideBySideFrames = MaxCaseFrames

// SideBySide plays t on the reference and on a fresh module and shows
// every step of both. Unlike a check it goes on past the first difference
// (both sides keep going from where each is), and stops at a step where
// the module raised an error (the steps after it cannot be played). The
// error is the trace's own (one the lab cannot play) or newClient's.
func SideBySide(newClient NewClient, t Trace) ([]StepSides, error) {
	if len(t) > MaxSideBySideFrames {
		return nil, fmt.Errorf("a trace has at most %d frames, not %d", MaxSideBySideFrames, len(t))
	}
	if err := ValidateTrace(t); err != nil {
		return nil, err
	}
	ref, h, setupErr, err := startSides(newClient)
	if err != nil {
		return nil, err
	}
	out := make([]StepSides, 0, len(t))
	first := true
	for i, f := range t {
		rs, err := ref.play(f)
		if err != nil {
			return nil, err // ValidateTrace let it through: a defect
		}
		f := rs.frame
		err = setupErr
		mutated := ""
		if err == nil {
			mutated, err = h.step(f)
		}
		s := StepSides{Frame: f, Expected: Expected{Call: viewJSON(ref.call.View()), Notice: ref.notice}}
		var shown *showing
		if err == nil {
			shown = &h.showing
		}
		if o := judge(i, rs, ref.notice, shown, mutated, err); o != nil {
			s.Got, s.Differs = o.got, true
			if first {
				s.Property, first = o.property, false
			}
		} else {
			s.Got = h.showing.got()
		}
		out = append(out, s)
		if err != nil {
			return out, nil // the steps after an error cannot be played
		}
	}
	return out, nil
}
