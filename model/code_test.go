package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestCodeEvents(t *testing.T) {
	okCase := &Case{Name: " mine ", Frames: Trace{replyFrame(`x`), deliverFrame(1)}}
	tests := []struct {
		name string
		cmd  Command
		want EventKind
		err  string // a part of the refusal, "" for none
	}{
		{"a submission", Command{Kind: SubmitCode, Source: "function begin(){}", Seed: 7}, CodeSubmitted, ""},
		{"the largest submission", Command{Kind: SubmitCode, Source: strings.Repeat("x", MaxSourceBytes)}, CodeSubmitted, ""},
		{"a submission too large", Command{Kind: SubmitCode, Source: strings.Repeat("x", MaxSourceBytes+1)}, 0, "program size in bytes limit reached"},
		{"a seed too large", Command{Kind: SubmitCode, Seed: MaxSeed}, 0, "below 2^53"},
		{"a case", Command{Kind: AddCase, By: Instructor, Case: okCase}, CaseAdded, ""},
		{"no case", Command{Kind: AddCase, By: Instructor}, 0, "no case given"},
		{"a case without a name", Command{Kind: AddCase, Case: &Case{Name: " ", Frames: okCase.Frames}}, 0, "needs a name"},
		{"a name with a newline", Command{Kind: AddCase, Case: &Case{Name: "a\nb", Frames: okCase.Frames}}, 0, "control characters"},
		{"an empty trace", Command{Kind: AddCase, Case: &Case{Name: "a"}}, 0, "at least one frame"},
		{"a delivery of nothing", Command{Kind: AddCase, Case: &Case{Name: "a", Frames: Trace{deliverFrame(1)}}}, 0, "frame 1: unknown message id 1"},
		{"a frame of another kind", Command{Kind: AddCase, Case: &Case{Name: "a", Frames: Trace{{Kind: Rename}}}}, 0, "only start"},
		{"too much text", Command{Kind: AddCase, Case: &Case{Name: "a", Frames: Trace{replyFrame(strings.Repeat("x", 60<<10)), replyFrame(strings.Repeat("x", 5<<10))}}}, 0, "reply text of one case"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := NewLab()
			e, err := l.Decide(tt.cmd, Limits{})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Decide: %v, want an error with %q", err, tt.err)
				}
				return
			}
			if err != nil || e.Kind != tt.want {
				t.Fatalf("Decide: %+v, %v; want kind %d", e, err, tt.want)
			}
			notice, err := l.Apply(e)
			if err != nil || notice != NoticeReady || l.Seq() != 1 {
				t.Fatalf("Apply: %q, %v, seq %d", notice, err, l.Seq())
			}
		})
	}
}

func TestCodeInputFollowsTheLog(t *testing.T) {
	l := NewLab()
	apply := func(cmd Command) error {
		e, err := l.Decide(cmd, Limits{})
		if err != nil {
			return err
		}
		_, err = l.Apply(e)
		return err
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	if c := l.Code(); c.Submissions != 0 || len(c.Cases) != 0 {
		t.Fatalf("a new session's code input: %+v", c)
	}
	must(apply(Command{Kind: SubmitCode, Source: "a", Seed: 1}))
	must(apply(Command{Kind: AddCase, Case: &Case{Name: "one", Frames: Trace{startFrame()}}}))
	before := l.Code()
	must(apply(Command{Kind: SubmitCode, Source: "b", Seed: 2}))
	must(apply(Command{Kind: AddCase, Case: &Case{Name: "two", Frames: Trace{deadlineFrame()}}}))
	if err := apply(Command{Kind: AddCase, Case: &Case{Name: "two", Frames: Trace{startFrame()}}}); !errors.Is(err, ErrInvalidCase) {
		t.Fatalf("a second case named two: %v, want ErrInvalidCase", err)
	}
	c := l.Code()
	if c.Submissions != 2 || c.Source != "b" || c.Seed != 2 || len(c.Cases) != 2 || c.Cases[1].Name != "two" {
		t.Fatalf("code input: %+v", c)
	}
	if before.Submissions != 1 || before.Source != "a" || len(before.Cases) != 1 || before.Same(c) || !c.Same(l.Code()) {
		t.Fatalf("an input handed out changed, or Same is wrong: %+v", before)
	}
	for i := len(c.Cases); i < MaxCodeCases; i++ {
		must(apply(Command{Kind: AddCase, Case: &Case{Name: "c" + strconv.Itoa(i), Frames: Trace{startFrame()}}}))
	}
	var le *LimitError
	if err := apply(Command{Kind: AddCase, Case: &Case{Name: "last", Frames: Trace{startFrame()}}}); !errors.As(err, &le) {
		t.Fatalf("case %d: %v, want a LimitError", MaxCodeCases+1, err)
	}
	// The campaign's view of the lab is unchanged by code events.
	if v := l.View(); v.Call.RunID != "run-1" || v.Held != 0 || v.Notice != NoticeReady {
		t.Fatalf("view after code events: %+v", v)
	}
}

func TestTraceJSONRoundTrip(t *testing.T) {
	tr := Trace{replyFrame("{\"a\":1}\u2028<b>"), startFrame(), deadlineFrame(), deliverFrame(2)}
	b, err := json.Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	var back Trace
	if err := json.Unmarshal(b, &back); err != nil || !equal(back, tr) {
		t.Fatalf("round trip of %s: %v, %v", b, back, err)
	}
	for _, bad := range []string{`{}`, `[{"type":"rename","name":"x"}]`, `[{"type":"deliver"}]`, `[{"type":"start","raw":"x"}]`, `[{"type":"queueReply"}]`} {
		if err := json.Unmarshal([]byte(bad), &back); err == nil {
			t.Errorf("%s read as a trace", bad)
		}
	}
}

func TestCodeKindNames(t *testing.T) {
	for _, k := range []EventKind{CodeSubmitted, CaseAdded} {
		name := Event{Kind: k}.KindName()
		got, _, ok := ParseKindName(name)
		if !ok || got != k || strings.HasPrefix(name, "unknown") {
			t.Errorf("kind %d: name %q parses as %d, %v", k, name, got, ok)
		}
	}
}

func TestFirstDifference(t *testing.T) {
	ref := func() (Client, error) { return refClient{}, nil }
	for _, c := range Walkthrough() {
		if step, err := FirstDifference(ref, c.Frames); err != nil || step != -1 {
			t.Fatalf("%s: the reference differs from itself at %d (%v)", c.Name, step, err)
		}
	}
}

// SeedFor is the program's: the same for the same language and text, below
// MaxSeed, another for another text or language. Key tells apart inputs
// that differ in anything but Submissions.
func TestSeedForAndKey(t *testing.T) {
	src := "export function begin() {}"
	if a, b := SeedFor(JavaScript, src), SeedFor(JavaScript, strings.Clone(src)); a != b {
		t.Fatalf("SeedFor is not a function of its input: %d, then %d", a, b)
	}
	seeds := map[uint64]string{}
	for _, in := range []struct {
		lang Language
		src  string
	}{{JavaScript, src}, {ReScript, src}, {JavaScript, src + " "}, {JavaScript, ""}, {ReScript, ""}} {
		s := SeedFor(in.lang, in.src)
		if s >= MaxSeed {
			t.Fatalf("SeedFor(%v, %q) = %d, not below 2^53", in.lang, in.src, s)
		}
		if prev, ok := seeds[s]; ok {
			t.Fatalf("SeedFor(%v, %q) = SeedFor of %s", in.lang, in.src, prev)
		}
		seeds[s] = fmt.Sprintf("%v %q", in.lang, in.src)
	}
	base := CodeInput{Submissions: 1, Source: src, Lang: JavaScript, Seed: 7, Cases: []Case{{Name: "a", Frames: Trace{{Kind: QueueReply, Raw: "x"}, {Kind: Deliver, Message: 1}}}}}
	same := base
	same.Submissions = 9
	if base.Key() != same.Key() {
		t.Fatal("Key depends on Submissions")
	}
	for name, change := range map[string]func(*CodeInput){
		"source":    func(c *CodeInput) { c.Source += " " },
		"language":  func(c *CodeInput) { c.Lang = ReScript },
		"seed":      func(c *CodeInput) { c.Seed = 8 },
		"no cases":  func(c *CodeInput) { c.Cases = nil },
		"case name": func(c *CodeInput) { c.Cases = []Case{{Name: "b", Frames: c.Cases[0].Frames}} },
		"a raw": func(c *CodeInput) {
			c.Cases = []Case{{Name: "a", Frames: Trace{{Kind: QueueReply, Raw: "y"}, {Kind: Deliver, Message: 1}}}}
		},
		"a message": func(c *CodeInput) {
			c.Cases = []Case{{Name: "a", Frames: Trace{{Kind: QueueReply, Raw: "x"}, {Kind: Deliver, Message: 2}}}}
		},
		"a kind": func(c *CodeInput) {
			c.Cases = []Case{{Name: "a", Frames: Trace{{Kind: QueueDeadline, Raw: "x"}, {Kind: Deliver, Message: 1}}}}
		},
		"two cases":    func(c *CodeInput) { c.Cases = append(slices.Clip(c.Cases), Case{Name: "c"}) },
		"another case": func(c *CodeInput) { c.Cases = []Case{{Name: "a" + "x", Frames: Trace{{Kind: Deliver, Message: 1}}}} },
	} {
		other := base
		change(&other)
		if other.Key() == base.Key() {
			t.Errorf("%s: the same Key", name)
		}
	}
}
