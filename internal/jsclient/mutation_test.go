package jsclient

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/toolcall-lab/lab/model"
)

// The mutation suite (issue 43): single edits of the lesson's compiled
// module, made by rules, each searched by model.Search in this process.
// A variant the search cannot tell from the lesson's module within its
// bounds is listed as equivalent; every other must fail with a trace of
// the search's (no longer than its bound, differing at its last frame
// and nowhere before as an independent host replays it, and, up to 3
// frames, no sequence one frame shorter tells it apart).
// LAB_MUTATION_BEFORE=1 also runs the whole check without the search (the
// check before issue 43) and with it, for BENCHMARKS.md's score.

// mutant is one edit of the source.
type mutant struct {
	name string
	src  string
}

// literalEdits replace one occurrence of from with to; each occurrence
// is a variant of its own.
var literalEdits = []struct{ rule, from, to string }{
	{"flip", "===", "!=="},
	{"flip", "!==", "==="},
	{"drop negation", "if (!", "if ("},
	{"status", `"Pending"`, `"Unresolved"`},
	{"status", `"Unresolved"`, `"Pending"`},
	{"status", `"Completed"`, `"Rejected"`},
	{"status", `"Rejected"`, `"Completed"`},
	{"constructor", `"Ok"`, `"Error"`},
	{"constructor", `"Error"`, `"Ok"`},
	{"kind", `"completed"`, `"rejected"`},
	{"kind", `"rejected"`, `"completed"`},
	{"typeof", `"string"`, `"number"`},
	{"typeof", `"object"`, `"string"`},
	{"old call", "call: {\n", "call: call, was: {\n"},
	{"field", ".runId", ".callId"},
	{"field", ".callId", ".runId"},
	{"field", "json.output", "json.reason"},
	{"field", "json.reason", "json.output"},
	{"constant", "return false;", "return true;"},
	{"view", "match[0]", "match[1]"},
	{"view", "match[1]", "match[0]"},
	{"text", "_0: output._0", `_0: ""`},
	{"text", "_0: output\n", "_0: \"\"\n"},
	{"text", "_0: reason\n", "_0: \"\"\n"},
	{"text", "_0: parsed._0", `_0: "Invalid JSON: could not parse message."`},
	{"identifier", "runId: runId", "runId: callId"},
	{"identifier", "callId: callId", "callId: runId"},
	{"key", "key: call.key", "key: reply.key"},
	{"trim", "a.runId === b.runId", "a.runId.trim() === b.runId.trim()"},
	{"trim", "a.callId === b.callId", "a.callId.trim() === b.callId.trim()"},
	{"trim", "JSON.parse(raw)", "JSON.parse(raw.trim())"},
	{"drop condition", "Array.isArray(json)", "false"},
	{"drop condition", `typeof json !== "object" || `, ""},
	{"drop condition", `json === null || `, ""},
	{"detail", `"No final reply observed. A matching late reply can still resolve this call."`, `""`},
	{"detail", "\"Pending\",\n          \"\"", "\"Pending\",\n          \"No final reply observed. A matching late reply can still resolve this call.\""},
}

// mutants are the variants of src, deterministic and without repeats:
// the literal edits, then each if's condition negated, made true and made
// false, then each notice swapped for the next of the lesson's.
func mutants(src string) []mutant {
	var out []mutant
	seen := map[string]bool{src: true}
	add := func(name, s string) {
		if !seen[s] {
			seen[s] = true
			out = append(out, mutant{name, s})
		}
	}
	line := func(at int) int { return strings.Count(src[:at], "\n") + 1 }
	each := func(rule, from, to string) {
		for at := 0; ; at++ {
			i := strings.Index(src[at:], from)
			if i < 0 {
				return
			}
			at += i
			add(fmt.Sprintf("%s %q→%q at line %d", rule, strings.TrimSpace(from), strings.TrimSpace(to), line(at)), src[:at]+to+src[at+len(from):])
		}
	}
	for _, e := range literalEdits {
		each(e.rule, e.from, e.to)
	}
	for at := 0; ; at++ {
		i := strings.Index(src[at:], "if (")
		if i < 0 {
			break
		}
		at += i
		open, depth, end := at+3, 0, -1
		for j := open; j < len(src); j++ {
			if src[j] == '(' {
				depth++
			} else if src[j] == ')' {
				if depth--; depth == 0 {
					end = j
					break
				}
			}
		}
		cond := src[open+1 : end]
		for _, c := range []struct{ rule, to string }{{"negated if", "!(" + cond + ")"}, {"if always", "true"}, {"if never", "false"}} {
			add(fmt.Sprintf("%s at line %d", c.rule, line(at)), src[:open+1]+c.to+src[end:])
		}
	}
	notices := model.DeliveryNotices()
	for i, n := range notices {
		each("notice", `"`+n+`"`, `"`+notices[(i+1)%len(notices)]+`"`)
	}
	return out
}

// verdict is what the search said of one variant.
type verdict struct {
	m       mutant
	loads   bool
	rep     model.SearchReport
	problem string // why the test fails for it, "" when it does not
	before  *model.Result
	after   *model.Result
}

func TestMutantsAreCaughtWithShortestTraces(t *testing.T) {
	src := read(t, "ToolCall.res.js")
	all := mutants(src)
	if len(all) < 150 || len(all) > 220 {
		t.Fatalf("%d variants, want 150 to 220", len(all))
	}
	// The wrong modules of testdata/wrong, hand-written, join them.
	files, _ := filepath.Glob("testdata/wrong/*.js")
	for _, f := range files {
		all = append(all, mutant{"wrong/" + filepath.Base(f), read(t, strings.TrimPrefix(f, "testdata/"))})
	}
	every := 1
	if testing.Short() || raceBuild {
		every = 5 // the race detector makes goja some ten times slower
	}
	before := os.Getenv("LAB_MUTATION_BEFORE") == "1"
	bounds := model.DefaultSearchBounds()

	if r := model.Search(inProcess(t, src), bounds); r.Failure != nil || !r.Exhausted {
		t.Fatalf("the lesson's own module: %+v", r.Failure)
	}
	var todo []int
	for i := range all {
		if i%every == 0 || strings.HasPrefix(all[i].name, "wrong/") {
			todo = append(todo, i)
		}
	}
	verdicts := make([]verdict, len(all))
	var wg sync.WaitGroup
	work := make(chan int)
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				verdicts[i] = judgeMutant(all[i], bounds, before)
			}
		}()
	}
	for _, i := range todo {
		work <- i
	}
	close(work)
	wg.Wait()

	var caught, equivalent, unloadable int
	var beforeCaught, afterCaught, beforeLonger int
	lengths := map[int]int{}
	for _, i := range todo {
		v := verdicts[i]
		switch {
		case !v.loads:
			unloadable++
			continue
		case v.problem != "":
			t.Errorf("%s: %s", v.m.name, v.problem)
		case v.rep.Failure == nil:
			equivalent++
			note := ""
			if v.after != nil && v.after.Failure != nil {
				note = fmt.Sprintf(" (the campaign tells it apart: %s, %d frames)", v.after.Failure.Case, len(v.after.Failure.Frames))
			}
			t.Logf("equivalent within the bounds: %s%s", v.m.name, note)
			if strings.HasPrefix(v.m.name, "wrong/") {
				t.Errorf("%s passes the search", v.m.name)
			}
			continue
		default:
			caught++
			lengths[len(v.rep.Failure.Frames)]++
		}
		if v.before != nil && v.before.Status != model.CodePassed {
			beforeCaught++
			if f := v.before.Failure; f != nil && len(f.Frames) > len(v.rep.Failure.Frames) {
				beforeLonger++
			}
		} else if v.before != nil {
			t.Logf("the check without the search passes %s (the search: %s)", v.m.name, frames(v.rep.Failure.Frames))
		}
		if v.after != nil && v.after.Status != model.CodePassed {
			afterCaught++
		}
	}
	var ls []string
	for n, c := range lengths {
		ls = append(ls, fmt.Sprintf("%d of %d frames", c, n))
	}
	sort.Strings(ls)
	t.Logf("%d variants played (%d rules' variants, %d wrong modules): %d do not load, %d equivalent within the bounds, %d caught by the search (%s)",
		len(todo), len(all)-len(files), len(files), unloadable, equivalent, caught, strings.Join(ls, ", "))
	if before {
		t.Logf("score: before (no search) %d of %d, %d of them reported with a trace longer than the search's; after (the check with the search) %d of %d",
			beforeCaught, caught, beforeLonger, afterCaught, caught)
	}
	if equivalent*5 > len(todo) {
		t.Errorf("%d of %d variants equivalent: the alphabet or the bounds miss something", equivalent, len(todo))
	}
}

// judgeMutant searches one variant and checks what the search says.
func judgeMutant(m mutant, b model.SearchBounds, before bool) verdict {
	v := verdict{m: m}
	p, err := compileSource(m.src, inProcessBudget)
	if err != nil {
		return v
	}
	nc := func() (model.Client, error) {
		in, err := p.newInstance()
		if err != nil {
			return nil, err
		}
		return procClient{in}, nil
	}
	if _, err := nc(); err != nil {
		return v
	}
	v.loads = true
	v.rep = model.Search(nc, b)
	f := v.rep.Failure
	switch {
	case v.rep.Error != "":
		v.problem = "the search stopped: " + v.rep.Error
	case f == nil && !v.rep.Exhausted:
		v.problem = "the search passed it without going through every sequence: " + v.rep.Note
	case f == nil:
	case f.Case != model.SearchName(b.Depth) || len(f.Frames) > b.Depth || f.Step != len(f.Frames)-1:
		v.problem = fmt.Sprintf("failure %q at step %d of %d frames", f.Case, f.Step, len(f.Frames))
	default:
		if at := replayDifference(nc, f.Frames); at != f.Step {
			v.problem = fmt.Sprintf("replayed, %s differs at %d, the failure says %d", frames(f.Frames), at, f.Step)
		} else if n := len(f.Frames) - 1; n >= 1 && n <= 2 {
			if short := differsIn(nc, n, b); short != nil {
				v.problem = fmt.Sprintf("%s is shorter than the search's %s", frames(short), frames(f.Frames))
			}
		}
	}
	if before {
		r := model.CheckWithin(nc, 1, nil, model.SearchBounds{})
		v.before = &r
	}
	if before || f == nil {
		r := model.Check(nc, 1, nil)
		v.after = &r
	}
	return v
}

func frames(t model.Trace) string {
	b, _ := json.Marshal(t)
	return string(b)
}

// differsIn plays every sequence of n frames of the search's alphabet,
// within its bounds, with replayDifference, and returns the first that
// differs.
func differsIn(nc model.NewClient, n int, b model.SearchBounds) model.Trace {
	var found model.Trace
	var walk func(tr model.Trace, runs, held int)
	walk = func(tr model.Trace, runs, held int) {
		if found != nil {
			return
		}
		if len(tr) == n {
			if replayDifference(nc, tr) != -1 {
				found = append(model.Trace(nil), tr...)
			}
			return
		}
		if runs < b.Runs {
			walk(append(tr, model.Command{Kind: model.StartRun}), runs+1, held)
		}
		if held < b.Held {
			for _, raw := range model.SearchReplies(runs) {
				walk(append(tr, model.Command{Kind: model.QueueReply, Raw: raw}), runs, held+1)
			}
			walk(append(tr, model.Command{Kind: model.QueueDeadline}), runs, held+1)
		}
		for k := 1; k <= held; k++ {
			walk(append(tr, model.Command{Kind: model.Deliver, Message: k}), runs, held)
		}
	}
	walk(nil, 1, 0)
	return found
}

// replayDifference plays tr on a fresh instance and on a Lab, with a host
// of its own, and returns the first frame after which the view, the
// notice or the given call differ (or the module raises an error), -1
// when none does.
func replayDifference(nc model.NewClient, tr model.Trace) int {
	c, err := nc()
	if err != nil {
		return 0
	}
	lab := model.NewLab()
	cur, err := c.Begin("run-1", "lookup")
	if err != nil {
		return 0
	}
	notice, runs := model.NoticeReady, 1
	var held []func(model.ClientCall) (model.ClientCall, string, error)
	for i, f := range tr {
		e, err := lab.Decide(f, model.Limits{})
		if err != nil {
			return i
		}
		if _, err := lab.Apply(e); err != nil {
			return i
		}
		mutated := false
		switch f.Kind {
		case model.StartRun:
			runs++
			if cur, err = c.Begin(fmt.Sprintf("run-%d", runs), "lookup"); err != nil {
				return i
			}
			notice = model.NoticeStarted
		case model.QueueReply:
			raw := f.Raw
			held = append(held, func(k model.ClientCall) (model.ClientCall, string, error) { return c.Receive(k, raw) })
		case model.QueueDeadline:
			var v shown
			b, _ := c.View(cur)
			_ = json.Unmarshal(b, &v)
			held = append(held, func(k model.ClientCall) (model.ClientCall, string, error) { return c.Expire(k, v.RunID, v.CallID) })
		case model.Deliver:
			before, err := c.View(cur)
			if err != nil {
				return i
			}
			next, n, err := held[f.Message-1](cur)
			if err != nil {
				return i
			}
			after, err := c.View(cur)
			if err != nil {
				return i
			}
			mutated = string(before) != string(after)
			cur, notice = next, n
		}
		b, err := c.View(cur)
		if err != nil {
			return i
		}
		var got map[string]any
		if json.Unmarshal(b, &got) != nil {
			return i
		}
		want := lab.Call().View()
		for k, w := range map[string]string{"runId": want.RunID, "callId": want.CallID, "status": want.Status, "detail": want.Detail} {
			if s, ok := got[k].(string); !ok || s != w {
				return i
			}
		}
		if notice != lab.View().Notice || mutated {
			return i
		}
	}
	return -1
}
