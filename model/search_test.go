package model

import (
	"strings"
	"testing"
)

// A correct module, the reference behind the interface or a JavaScript
// programmer's (a fresh object per update), is searched through, every
// situation met and right; the two merge into the same states.
func TestSearchOfACorrectModule(t *testing.T) {
	var explored []int
	for _, nc := range []NewClient{newRef, newBuggy(bugs{})} {
		r := Search(nc, DefaultSearchBounds())
		if r.Failure != nil || r.Error != "" || !r.Exhausted || r.Note != "" || r.Depth != 5 || r.Explored < 1000 {
			t.Fatalf("failure %+v, error %q, exhausted %v, note %q, depth %d, explored %d", r.Failure, r.Error, r.Exhausted, r.Note, r.Depth, r.Explored)
		}
		if len(r.Coverage) != int(numSituations) {
			t.Fatalf("%d situations", len(r.Coverage))
		}
		for _, c := range r.Coverage {
			if c.Hit == 0 || !c.Passed {
				t.Errorf("%s: hit %d, passed %v", c.ID, c.Hit, c.Passed)
			}
		}
		explored = append(explored, r.Explored)
	}
	if explored[0] != explored[1] {
		t.Errorf("explored %v: the two correct modules differ", explored)
	}
}

// The situation each wrong stand-in gets wrong in the search.
var wrongSituation = map[string]string{
	"checking only the run id":           "otherCallId",
	"last final wins":                    "sameKindAgain",
	"a deadline over a result":           "deadlineAfterResult",
	"Unresolved kept on a rejection":     "lateReply",
	"an empty output treated as pending": "emptyOutput",
	"output coerced to a string":         "wrongShape",
	"trimmed identifiers":                "spaces",
	"a mutated call":                     "completion",
	"a notice text one character off":    "completion",
	"a view without detail":              "newRun",
	"a throw on a rejection":             "rejection",
}

// Each wrong stand-in fails the search, which is the failure Check
// reports: a trace that differs at its last frame and nowhere before, as
// an independent host replays it, and no sequence one frame shorter (all
// of them, played one by one) tells the module apart.
func TestSearchFindsAShortestDifference(t *testing.T) {
	for _, m := range wrongModules {
		t.Run(m.name, func(t *testing.T) {
			nc := newBuggy(m.b)
			r := Check(nc, 3, nil)
			f := r.Failure
			if f == nil || f.Case != SearchName(5) {
				t.Fatalf("failure %+v, want the search's", f)
			}
			if f.Property != m.want || f.Step != len(f.Frames)-1 || len(f.Frames) > 4 {
				t.Errorf("property %q (want %q), step %d of %d frames: %s", f.Property, m.want, f.Step, len(f.Frames), mustJSON(t, f.Frames))
			}
			if m.want == PropError && (r.Status != CodeError || !strings.HasPrefix(r.Error, `case "`+SearchName(5)+`", frame`)) {
				t.Errorf("status %s, error %q", r.Status, r.Error)
			}
			if at := firstDifference(t, nc, f.Frames); at != f.Step {
				t.Errorf("replayed, the trace differs at %d, the failure says %d", at, f.Step)
			}
			if short := differsWithin(t, nc, len(f.Frames)-1); short != nil {
				t.Errorf("a shorter trace differs: %s", mustJSON(t, short))
			}
			if !r.Exhausted || r.Passed >= r.Cases {
				t.Errorf("exhausted %v, passed %d of %d", r.Exhausted, r.Passed, r.Cases)
			}
			for _, c := range r.Coverage {
				if c.ID == wrongSituation[m.name] && (c.Passed || c.Hit == 0) {
					t.Errorf("situation %s: hit %d, passed %v", c.ID, c.Hit, c.Passed)
				}
			}
			t.Logf("%d frames: %s; %s", len(f.Frames), mustJSON(t, f.Frames), r.SearchSummary())
		})
	}
}

// differsWithin plays every sequence of exactly n frames of the search's
// alphabet within its bounds (at most 3 runs and 5 held messages), one by
// one with an independent host, and returns the first on which nc and
// the reference differ. A shorter sequence that differs is the prefix of
// one of these, which then differs too.
func differsWithin(t *testing.T, nc NewClient, n int) Trace {
	var found Trace
	var walk func(tr Trace, runs, held int)
	walk = func(tr Trace, runs, held int) {
		if found != nil {
			return
		}
		if len(tr) == n {
			if firstDifference(t, nc, tr) != -1 {
				found = append(Trace(nil), tr...)
			}
			return
		}
		if runs < 3 {
			walk(append(tr, startFrame()), runs+1, held)
		}
		if held < 5 {
			for _, raw := range SearchReplies(runs) {
				walk(append(tr, replyFrame(raw)), runs, held+1)
			}
			walk(append(tr, deadlineFrame()), runs, held+1)
		}
		for k := 1; k <= held; k++ {
			walk(append(tr, deliverFrame(k)), runs, held)
		}
	}
	if n > 0 {
		walk(nil, 1, 0)
	}
	return found
}

// A module with state outside its calls (a counter of receives) is found
// out, said so, and searched with every sequence played on a fresh
// instance, as far as the budget goes (a counter that changes answers
// after 2 receives needs 5 frames to show, past what the budget reaches
// without merging states): Check then reports the case that fails on a
// fresh instance; a counter no case reaches passes.
func TestSearchOfAModuleWithHiddenState(t *testing.T) {
	for _, tc := range []struct {
		counter int
		passes  bool
	}{
		{2, false},
		{100, true},
	} {
		nc := newBuggy(bugs{counter: tc.counter})
		r := Search(nc, DefaultSearchBounds())
		if !strings.Contains(r.Note, "keeps state outside the call") || r.Exhausted || r.Explored == 0 {
			t.Errorf("counter %d: note %q, exhausted %v, explored %d", tc.counter, r.Note, r.Exhausted, r.Explored)
		}
		if f := r.Failure; f != nil {
			if at := firstDifference(t, nc, f.Frames); at != f.Step {
				t.Errorf("counter %d: replayed, differs at %d, the failure says %d: %s", tc.counter, at, f.Step, mustJSON(t, f.Frames))
			}
		}
		c := Check(nc, 3, nil)
		if c.SearchNote != r.Note || c.Exhausted || (c.Status == CodePassed) != tc.passes {
			t.Fatalf("counter %d: Check's status %s, note %q", tc.counter, c.Status, c.SearchNote)
		}
		if f := c.Failure; f != nil {
			if at := firstDifference(t, nc, f.Frames); at != f.Step || f.Property != PropNoticeText {
				t.Errorf("counter %d: replayed, differs at %d, the failure says %d (%s): %s", tc.counter, at, f.Step, f.Property, mustJSON(t, f.Frames))
			}
			t.Logf("counter %d: %s %d frames", tc.counter, f.Case, len(f.Frames))
		}
	}
}

// A module whose calls cannot be written as JSON is searched without
// merging by its calls, within the caps, and not exhaustively; it still
// fails with a shortest trace.
func TestSearchWithoutCallKeys(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    bugs
		want int // frames of the failure, 0 for none
	}{
		{"correct", bugs{noKey: true}, 0},
		{"last final wins", bugs{noKey: true, lastFinalWins: true}, 3},
		{"a deadline over a result", bugs{noKey: true, deadlineOver: true}, 4},
	} {
		r := Search(newBuggy(tc.b), DefaultSearchBounds())
		if r.Exhausted || !strings.Contains(r.Note, "could not be written as JSON (the call holds a function)") {
			t.Errorf("%s: exhausted %v, note %q", tc.name, r.Exhausted, r.Note)
		}
		if got := 0; r.Failure != nil {
			got = len(r.Failure.Frames)
			if got != tc.want {
				t.Errorf("%s: %d frames, want %d", tc.name, got, tc.want)
			}
		} else if tc.want != 0 {
			t.Errorf("%s: no failure", tc.name)
		}
		if r.Calls > DefaultSearchBounds().Calls+8 {
			t.Errorf("%s: %d calls, past the cap", tc.name, r.Calls)
		}
	}
}

// The caps stop the search, which then says it is not exhaustive.
func TestSearchCaps(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    SearchBounds
	}{
		{"states", SearchBounds{Depth: 5, Runs: 3, Held: 5, States: 500, Calls: 1 << 20}},
		{"calls", SearchBounds{Depth: 5, Runs: 3, Held: 5, States: 1 << 20, Calls: 300}},
	} {
		r := Search(newRef, tc.b)
		if r.Exhausted || r.Failure != nil || r.Explored > tc.b.States || r.Calls > tc.b.Calls+8 {
			t.Errorf("%s: exhausted %v, explored %d, calls %d", tc.name, r.Exhausted, r.Explored, r.Calls)
		}
	}
	// Deeper bounds visit more states; depth 0 is no search at all.
	a, b := Search(newRef, SearchBounds{Depth: 3, Runs: 3, Held: 5, States: 1 << 20, Calls: 1 << 20}), Search(newRef, DefaultSearchBounds())
	if !a.Exhausted || a.Explored >= b.Explored {
		t.Errorf("depth 3: %d states, depth 5: %d", a.Explored, b.Explored)
	}
	if r := CheckWithin(newRef, 1, nil, SearchBounds{}); r.Depth != 0 || r.Explored != 0 || r.Cases != len(Cases(1)) || r.Coverage != nil {
		t.Errorf("no search: %+v", r)
	}
}

func TestSearchSummary(t *testing.T) {
	cov := func(wrong, missed int) []Situation {
		var out []Situation
		for i := range 4 {
			out = append(out, Situation{ID: situations[i].id, Text: situations[i].text, Hit: 3, Passed: true})
		}
		if wrong >= 0 {
			out[wrong].Passed = false
		}
		if missed >= 0 {
			out[missed].Hit, out[missed].Passed = 0, true
		}
		return out
	}
	for _, tc := range []struct {
		r    Result
		want string
	}{
		{Result{}, ""},
		{Result{Explored: 12408, Depth: 5, Exhausted: true, Coverage: cov(-1, -1)},
			"Checked 12,408 states, every sequence of up to 5 frames: 4 of 4 situations right."},
		{Result{Explored: 1234567, Depth: 5, Exhausted: true, Coverage: cov(2, -1)},
			"Checked 1,234,567 states, every sequence of up to 5 frames: 3 of 4 situations right; wrong: a reply for an older run."},
		{Result{Explored: 200, Depth: 4, Coverage: cov(0, 3)},
			"Checked 200 states of the sequences of up to 4 frames, not all of them: 2 of 4 situations right; wrong: a completion for the current run; not reached: a reply for another call id."},
	} {
		if got := tc.r.SearchSummary(); got != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
	}
}

// The Go side of the search: the reference behind the interface.
func BenchmarkSearchReference(b *testing.B) {
	for b.Loop() {
		if r := Search(newRef, DefaultSearchBounds()); r.Failure != nil || !r.Exhausted {
			b.Fatal(r.Note)
		}
	}
}
