package jsclient

import (
	"context"
	"encoding/json"
	"testing"
)

// TestPoolReusesCleanly: a sandbox given back to its Pool loads the next
// submission, which sees nothing of the last one (its globals, its
// prototypes) and is checked exactly as in a new sandbox; a source that
// does not load leaves the sandbox reusable; one whose program filled
// its heap is not given back; Close ends the idle one.
func TestPoolReusesCleanly(t *testing.T) {
	pool := NewPool(1)
	defer pool.Close()
	ctx := context.Background()
	var first int
	pid := func(s *Submission) int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.cmd.Process.Pid
	}
	// wantReused: under the race detector a sandbox's memory (shadow
	// included) passes poolResident soon, and it is retired: only say so.
	wantReused := func(s *Submission, what string) {
		t.Helper()
		if got := pid(s); got != first {
			if raceBuild {
				t.Logf("%s ran in sandbox %d, not the pooled %d (race detector)", what, got, first)
				return
			}
			t.Fatalf("%s ran in sandbox %d, not the pooled %d", what, got, first)
		}
	}
	leaky := read(t, "ToolCall.res.js") + "\nglobalThis.left = 'by the last student'; Object.prototype.left = 1; Array.prototype.push = () => 0;\n"
	_, s1, err := pool.Load(ctx, leaky, Budget{})
	if err != nil {
		t.Fatal(err)
	}
	first = pid(s1)
	if _, err := s1.Check(ctx, 7, nil); err != nil {
		t.Fatal(err)
	}
	s1.Close()

	// The next student reads what the last one left: nothing.
	reader := `export function begin(runId, callId) {
  if (typeof left !== "undefined" || ({}).left !== undefined || [].push(1) !== 1) throw new Error("saw the last program");
  return {runId, callId, status: "Pending", detail: ""};
}
export function receive(call, raw) { return {call, notice: ""}; }
export function expire(call) { return {call, notice: ""}; }
export function view(call) { return call; }`
	nc, s2, err := pool.Load(ctx, reader, Budget{})
	if err != nil {
		t.Fatal(err)
	}
	wantReused(s2, "the second submission")
	c, err := nc()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Begin("run-1", "lookup"); err != nil {
		t.Fatalf("in a reused sandbox: %v", err)
	}
	s2.Close()

	// The same check in the reused sandbox and in a new one.
	src := read(t, "wrong/last-final-wins.js")
	_, s3, err := pool.Load(ctx, src, Budget{})
	if err != nil {
		t.Fatal(err)
	}
	wantReused(s3, "the third submission")
	got, err := s3.Check(ctx, 1<<40, nil)
	s3.Close()
	if err != nil {
		t.Fatal(err)
	}
	want := perCallCheck(t, src, 1<<40, nil)
	if gj, wj := mustMarshal(t, got), mustMarshal(t, want); gj != wj {
		t.Fatalf("in a reused sandbox:\n%s\nin a new one:\n%s", gj, wj)
	}

	// A source that does not load: the sandbox stays good.
	if _, _, err := pool.Load(ctx, "export function begin( {", Budget{}); err == nil {
		t.Fatal("a syntax error loaded")
	}
	_, s4, err := pool.Load(ctx, read(t, "correct.js"), Budget{})
	if err != nil {
		t.Fatal(err)
	}
	wantReused(s4, "the submission after a syntax error")
	s4.Close()

	// A program that fills the heap: the sandbox is not given back.
	hog := `const a = new Array(3e6).fill(1.5), b = new Array(3e6).fill(2.5); for (;;) {}
export function begin(runId, callId) { return {runId, callId}; }
export function receive(call) { return {call, notice: ""}; }
export function expire(call) { return {call, notice: ""}; }
export function view(call) { return call; }`
	if _, _, err := pool.Load(ctx, hog, Budget{}); err == nil {
		t.Fatalf("a program that fills the heap at its top level: %v", err)
	}
	_, s5, err := pool.Load(ctx, read(t, "correct.js"), Budget{})
	if err != nil {
		t.Fatal(err)
	}
	if pid(s5) == first {
		t.Fatal("the sandbox whose program filled the heap was given back")
	}
	s5.Close()
	pool.Close()
	if w := pool.take(DefaultBudget()); w != nil {
		t.Fatal("a closed pool still has an idle sandbox")
	}
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
