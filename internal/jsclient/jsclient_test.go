package jsclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toolcall-lab/lab/internal/idle"
	"github.com/toolcall-lab/lab/model"
)

func read(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func load(t testing.TB, src string, b Budget) (model.NewClient, *Submission) {
	t.Helper()
	newClient, s, err := Load(context.Background(), src, b)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	t.Cleanup(s.Close)
	return newClient, s
}

type shown struct {
	RunID  string `json:"runId"`
	CallID string `json:"callId"`
	Status string `json:"status"`
	Detail string `json:"detail"`
}

func viewOf(t testing.TB, c model.Client, call model.ClientCall) shown {
	t.Helper()
	raw, err := c.View(call)
	if err != nil {
		t.Fatalf("View: %v", err)
	}
	var v shown
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("view %s: %v", raw, err)
	}
	return v
}

const plainFunctions = `
function begin(runId, callId) { return { runId, callId, done: "" }; }
function receive(call, raw) { return { call: { ...call, done: raw }, notice: "got " + raw }; }
function expire(call, runId, callId) { return { call, notice: "deadline " + runId + "/" + callId }; }
function view(call) { return { runId: call.runId, callId: call.callId, status: call.done ? "Completed" : "Pending", detail: call.done }; }
`

func TestLoadAcceptsEachForm(t *testing.T) {
	clause := strings.NewReplacer("function begin", "function b", "function receive", "function r",
		"function expire", "function e", "function view", "function v").Replace(plainFunctions) +
		"export { b as begin, r as receive, e as expire, v as view, };\n"
	consts := "export const begin = (runId, callId) => ({ runId, callId, done: \"\" });\n" +
		strings.Replace(strings.SplitN(plainFunctions, "\n", 3)[2], "function ", "export function ", -1)
	for _, tc := range []struct{ name, src, raw, detail string }{
		{"the seed's compiled ToolCall.res.js", read(t, "ToolCall.res.js"),
			`{"runId":"run-1","callId":"lookup","kind":"completed","output":"Old answer"}`, "Old answer"},
		{"export function", read(t, "correct.js"),
			`{"runId":"run-1","callId":"lookup","kind":"rejected","reason":"no"}`, "no"},
		{"top-level functions", plainFunctions, "x", "x"},
		{"export clause with as", clause, "y", "y"},
		{"export const arrow", consts, "z", "z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			newClient, _ := load(t, tc.src, Budget{})
			c, err := newClient()
			if err != nil {
				t.Fatal(err)
			}
			call, err := c.Begin("run-1", "lookup")
			if err != nil {
				t.Fatal(err)
			}
			if v := viewOf(t, c, call); v.RunID != "run-1" || v.CallID != "lookup" || v.Status != "Pending" {
				t.Fatalf("view after begin = %+v", v)
			}
			next, _, err := c.Receive(call, tc.raw)
			if err != nil {
				t.Fatal(err)
			}
			if v := viewOf(t, c, next); v.Detail != tc.detail {
				t.Fatalf("view after receive = %+v, want detail %q", v, tc.detail)
			}
		})
	}
}

func TestLoadRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		kind      SourceErrorKind
		line, col int
		inMessage string
	}{
		{"an import", "// header\nimport { x } from \"./y.js\";\n" + plainFunctions, ImportRefused, 2, 1, "import"},
		{"a syntax error", "function begin(a, b) {\n  return {a, b;\n}\n", SyntaxError, 2, 15, "line 2"},
		{"an unterminated comment", plainFunctions + "/* never closed", SyntaxError, 0, 0, "Syntax error"},
		{"a missing function", strings.Replace(plainFunctions, "function expire", "function expired", 1), MissingFunction, 0, 0, "expire"},
		{"an export default", plainFunctions + "export default begin;\n", ExportRefused, 6, 8, "export default"},
		{"a re-export", plainFunctions + "export { begin } from \"./x.js\";\n", ExportRefused, 6, 18, "from"},
		{"a throw at the top level", "throw new Error(\"no\");\n" + plainFunctions, LoadFailed, 0, 0, "line 1"},
		{"exports missing one", "export function begin() {}\nfunction receive() {}\nexport { receive };\n", MissingFunction, 0, 0, "expire and view as functions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Load(context.Background(), tc.src, Budget{})
			var se *SourceError
			if !errors.As(err, &se) {
				t.Fatalf("Load = %v, want a *SourceError", err)
			}
			if se.Kind != tc.kind || tc.line != 0 && (se.Line != tc.line || se.Column != tc.col) {
				t.Fatalf("got kind %d at %d:%d (%q), want kind %d at %d:%d", se.Kind, se.Line, se.Column, se.Message, tc.kind, tc.line, tc.col)
			}
			if !strings.Contains(se.Message, tc.inMessage) {
				t.Fatalf("message %q does not say %q", se.Message, tc.inMessage)
			}
		})
	}
}

// The seed's own compiled module shows and says what the reference does.
func TestSeedModuleMatchesTheReference(t *testing.T) {
	newClient, _ := load(t, read(t, "ToolCall.res.js"), Budget{})
	c, err := newClient()
	if err != nil {
		t.Fatal(err)
	}
	type step struct {
		begin  bool
		raw    string // a reply, or "" for a deadline
		runID  string
		callID string
	}
	steps := []step{
		{begin: true, runID: "run-1", callID: "lookup"},
		{runID: "run-1", callID: "lookup"}, // deadline: Unresolved
		{runID: "run-1", callID: "lookup"}, // still unresolved
		{raw: `{"runId":"run-1","callId":"other","kind":"completed","output":"x"}`},
		{raw: `{`},
		{raw: `{"runId":"run-1","callId":"lookup","kind":"completed","output":5}`},
		{raw: `{"runId":"run-1","callId":"lookup","kind":"rejected","reason":"The query is empty"}`},
		{raw: `{"runId":"run-1","callId":"lookup","kind":"completed","output":"late"}`},
		{runID: "run-1", callID: "lookup"},
		{begin: true, runID: "run-2", callID: "lookup"},
		{raw: `{"runId":"run-2","callId":"lookup","kind":"completed","output":"","extra":1}`},
		{runID: "run-1", callID: "lookup"},
		{begin: true, runID: "run-3", callID: "lookup"},
		{raw: `[1]`},
		{raw: `{"runId":"run-3","callId":"lookup","kind":"completed","output":"<strong>Found it</strong>"}`},
	}
	var ref model.Call
	var got model.ClientCall
	for i, s := range steps {
		var want model.Update
		var notice string
		switch {
		case s.begin:
			ref = model.Begin(s.runID, s.callID)
			got, err = c.Begin(s.runID, s.callID)
		case s.raw != "":
			want = model.Receive(ref, s.raw)
			got, notice, err = c.Receive(got, s.raw)
			ref = want.Call
		default:
			want = model.Expire(ref, model.Key{RunID: s.runID, CallID: s.callID})
			got, notice, err = c.Expire(got, s.runID, s.callID)
			ref = want.Call
		}
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if notice != want.Notice {
			t.Fatalf("step %d: notice %q, the reference says %q", i, notice, want.Notice)
		}
		rv := ref.View()
		if v := viewOf(t, c, got); v != (shown{rv.RunID, rv.CallID, rv.Status, rv.Detail}) {
			t.Fatalf("step %d: view %+v, the reference shows %+v", i, v, rv)
		}
	}
}

// Every hostile program ends as an error of its kind, within its budget.
func TestHostileProgramsEndAsErrors(t *testing.T) {
	rssBefore := rss(t)
	for _, tc := range []struct {
		file      string
		call      string // which function misbehaves
		kind      CallErrorKind
		inMessage string
		perCall   time.Duration // 0: the default; more where the cap to reach is not time
	}{
		{"loop.js", "receive", TooLong, "line 3", 0},
		{"alloc.js", "receive", OutOfMemory, "receive", 10 * time.Second},
		{"recursion.js", "receive", TooDeep, "line 4", 0},
		{"throw.js", "receive", Threw, `Error: boom at line 4`, 0},
		{"getter.js", "receive", TooLong, "line 6, column 5 (in notice)", 0},
		{"cyclic.js", "view", BadResult, "refers to itself", 0},
		{"bigstring.js", "view", TooLarge, "64 KiB", time.Second},
		{"builtin.js", "view", TooLong, "View ran for more than 50ms", 0},
	} {
		t.Run(tc.file, func(t *testing.T) {
			newClient, s := load(t, read(t, "hostile/"+tc.file), Budget{PerCall: tc.perCall, Total: 2*time.Second + tc.perCall})
			c, err := newClient()
			if err != nil {
				t.Fatal(err)
			}
			call, err := c.Begin("run-1", "lookup")
			if err != nil {
				t.Fatal(err)
			}
			if tc.call == "view" {
				_, err = c.View(call)
			} else {
				_, _, err = c.Receive(call, "{}")
			}
			var ce *CallError
			if !errors.As(err, &ce) {
				t.Fatalf("%s = %v, want a *CallError", tc.call, err)
			}
			// Under the race detector there is no memory rlimit, and the
			// heap watchdog, at the sandbox's idle priority, may be kept
			// off the cores past the call's wall bound on a busy machine.
			if raceBuild && tc.kind == OutOfMemory && ce.Kind == TooLong {
				t.Logf("%s under -race: %s", tc.file, ce.Message)
				return
			}
			if ce.Kind != tc.kind || !strings.Contains(ce.Message, tc.inMessage) {
				t.Fatalf("%s: kind %d, %q; want kind %d saying %q", tc.call, ce.Kind, ce.Message, tc.kind, tc.inMessage)
			}
			// A spent budget or memory cap stops the check (model.ErrStop);
			// a throw, a wrong result or a deep recursion is the program's answer.
			stops := tc.kind == TooLong || tc.kind == OutOfMemory
			if errors.Is(err, model.ErrStop) != stops {
				t.Fatalf("%s: errors.Is(err, model.ErrStop) = %v, want %v", tc.call, !stops, stops)
			}
			s.Close()
			t.Logf("%s: %s (used %v, sandbox peak RSS %d MiB)", tc.file, ce.Message, s.Used(), s.PeakRSS()>>20)
		})
	}
	grew := rss(t) - rssBefore
	t.Logf("the lab's RSS grew by %d KiB", grew>>10)
	if grew > 100<<20 {
		t.Fatalf("the lab's RSS grew by %d MiB, more than 100", grew>>20)
	}
}

func TestTopLevelLoopIsALoadError(t *testing.T) {
	_, _, err := Load(context.Background(), read(t, "hostile/toplevel.js"), Budget{})
	var se *SourceError
	if !errors.As(err, &se) || se.Kind != LoadFailed || !strings.Contains(se.Message, "The top level ran for more than") {
		t.Fatalf("Load = %v, want a load error at line 2", err)
	}
}

// The budget of a whole submission runs out across calls, and says so.
func TestTotalBudgetRunsOut(t *testing.T) {
	newClient, s := load(t, read(t, "hostile/loop.js"), Budget{Total: 200 * time.Millisecond, PerCall: 30 * time.Millisecond})
	c, err := newClient()
	if err != nil {
		t.Fatal(err)
	}
	call, err := c.Begin("run-1", "lookup")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []CallErrorKind
	for range 20 {
		_, _, err := c.Receive(call, "{}")
		var ce *CallError
		if !errors.As(err, &ce) {
			t.Fatalf("Receive = %v", err)
		}
		kinds = append(kinds, ce.Kind)
		if !errors.Is(err, model.ErrStop) {
			t.Fatalf("Receive = %v (kind %d), which does not stop the check", err, ce.Kind)
		}
		if ce.Kind == OutOfTime {
			break
		}
	}
	if kinds[0] != TooLong || kinds[len(kinds)-1] != OutOfTime || !s.Spent() {
		t.Fatalf("kinds %v, spent %v: want TooLong first and OutOfTime last", kinds, s.Spent())
	}
	if _, err := newClient(); err == nil {
		t.Fatal("a new instance after the budget ran out did not fail")
	}
}

// Date and Math.random are the same on every run.
func TestNoClockAndFixedRandom(t *testing.T) {
	src := strings.Replace(plainFunctions, `notice: "got " + raw`, `notice: String(Date.now()) + "," + Math.random() + "," + typeof console + typeof require`, 1)
	var notices []string
	for range 2 {
		newClient, s := load(t, src, Budget{})
		defer s.Close()
		c, err := newClient()
		if err != nil {
			t.Fatal(err)
		}
		call, _ := c.Begin("run-1", "lookup")
		_, n, err := c.Receive(call, "x")
		if err != nil {
			t.Fatal(err)
		}
		notices = append(notices, n)
		s.Close()
	}
	if notices[0] != notices[1] || !strings.HasPrefix(notices[0], strconv.FormatInt(epoch.UnixMilli(), 10)+",") || !strings.HasSuffix(notices[0], "undefinedundefined") {
		t.Fatalf("notices %q", notices)
	}
}

func TestNoticeMustBeAString(t *testing.T) {
	src := strings.Replace(plainFunctions, `notice: "got " + raw`, `notice: 42`, 1)
	newClient, _ := load(t, src, Budget{})
	c, _ := newClient()
	call, _ := c.Begin("run-1", "lookup")
	_, _, err := c.Receive(call, "x")
	var ce *CallError
	if !errors.As(err, &ce) || ce.Kind != BadResult || !strings.Contains(ce.Message, "receive returned a notice that is not a string") &&
		!strings.Contains(ce.Message, "Receive returned a notice that is not a string") {
		t.Fatalf("Receive = %v", err)
	}
}

// Each wrong module loads and runs: the checker, not the engine, finds
// what is wrong with it.
func TestWrongModulesLoad(t *testing.T) {
	files, _ := filepath.Glob("testdata/wrong/*.js")
	if len(files) < 10 {
		t.Fatalf("%d wrong modules, want 10", len(files))
	}
	for _, f := range files {
		newClient, s := load(t, read(t, strings.TrimPrefix(f, "testdata/")), Budget{})
		c, err := newClient()
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		call, err := c.Begin("run-1", "lookup")
		if err == nil {
			_, _, err = c.Expire(call, "run-1", "lookup")
		}
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		s.Close()
	}
}

func rss(t testing.TB) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc")
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n << 10
		}
	}
	return 0
}

// TestStarvedSandboxWaits: a sandbox kept off the cores (here stopped) for
// longer than a call's limit plus grace has used none of its time, so the
// call waits for it rather than killing it, and answers once it runs.
func TestStarvedSandboxWaits(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	t.Parallel()
	newClient, s := load(t, plainFunctions, Budget{})
	c, err := newClient()
	if err != nil {
		t.Fatal(err)
	}
	proc := s.cmd.Process
	if err := proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := s.budget.PerCall + grace + time.Second
	resumed := time.AfterFunc(stopped, func() { proc.Signal(syscall.SIGCONT) })
	defer resumed.Stop()
	began := time.Now()
	call, err := c.Begin("run-1", "lookup")
	if err != nil {
		t.Fatalf("Begin while the sandbox waited for a core: %v", err)
	}
	if took := time.Since(began); took < stopped-100*time.Millisecond {
		t.Fatalf("answered in %v while stopped for %v", took, stopped)
	}
	if v := viewOf(t, c, call); v.RunID != "run-1" {
		t.Fatalf("view after the wait: %+v", v)
	}
}

// The sandbox is below the lab's threads from its start, and caps its own
// CPU time, since it has no parent-death signal to end it with the lab.
func TestSandboxIsIdleAndCapped(t *testing.T) {
	_, s, err := Load(context.Background(), read(t, "ToolCall.res.js"), Budget{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pid := s.cmd.Process.Pid
	if p, err := idle.Policy(pid); err != nil || p != unix.SCHED_IDLE {
		t.Errorf("the sandbox's first thread has policy %d (%v), want SCHED_IDLE", p, err)
	}
	limits, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint((DefaultBudget().Total + checkAllowance + orphanCPU).Seconds())
	if !regexp.MustCompile(`(?m)^Max cpu time +` + want + ` +`).Match(limits) {
		t.Errorf("the sandbox's limits do not cap its CPU at %s s:\n%s", want, limits)
	}
}
