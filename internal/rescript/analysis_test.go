package rescript

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toolcall-lab/lab/internal/idle"
	"github.com/toolcall-lab/lab/model"
)

// withTypes is the real compiler with its analysis binary, which the test
// needs (npm's rescript@12.2.0 ships both).
func withTypes(t *testing.T) *Compiler {
	t.Helper()
	c := compiler(t)
	if !c.Types() {
		t.Fatalf("%s has no %s beside it", c.bin, analysisName)
	}
	return c
}

func live(t *testing.T, c *Compiler, n int) *Live {
	t.Helper()
	l := c.Live(n)
	t.Cleanup(l.Close)
	return l
}

func runLive(t *testing.T, l *Live, j LiveJob) (LiveOutput, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return l.Run(ctx, j)
}

// placeOf is the 1-based line and column of the first want in src, plus
// skip characters.
func placeOf(t *testing.T, src, want string, skip int) (int, int) {
	t.Helper()
	i := strings.Index(src, want)
	if i < 0 {
		t.Fatalf("no %q", want)
	}
	i += skip
	line := strings.Count(src[:i], "\n") + 1
	return line, i - strings.LastIndex(src[:i], "\n")
}

// TestLiveTheLesson: a live compile of the lesson's module says nothing
// and leaves its types; the type under the pointer comes from them, with
// or without compiling again.
func TestLiveTheLesson(t *testing.T) {
	c := withTypes(t)
	l := live(t, c, 1)
	src := lesson(t)
	out, err := runLive(t, l, LiveJob{Source: src})
	if err != nil || out.Refused || len(out.Diagnostics) != 0 || !out.Compiled || len(out.Types) == 0 {
		t.Fatalf("the lesson's module: %+v %v", out.Diagnostics, err)
	}
	line, col := placeOf(t, src, "let accept", 4)
	got, err := runLive(t, l, LiveJob{Source: src, At: true, Line: line, Column: col})
	if err != nil || got.Type != "(call, reply) => update" || !got.Compiled {
		t.Errorf("accept, compiled again: %q %v", got.Type, err)
	}
	line, col = placeOf(t, src, "Ok(output)", 3)
	got, err = runLive(t, l, LiveJob{Source: src, Types: out.Types, At: true, Line: line, Column: col})
	if err != nil || got.Type != "string" || got.Compiled {
		t.Errorf("output in Ok(output), from the types kept: %q compiled %v, %v", got.Type, got.Compiled, err)
	}
	got, err = runLive(t, l, LiveJob{Source: src, Types: out.Types, At: true, Line: 1, Column: 1})
	if err != nil || got.Type != "" {
		t.Errorf("a comment: %q %v", got.Type, err)
	}
	// The Rejected arm deleted: warning 8 at view's switch, naming it.
	viewAt := strings.Index(src, "let view = ")
	noRejected := src[:viewAt] + strings.Replace(src[viewAt:], "  | Rejected(reason) => (\"Rejected\", reason)\n", "", 1)
	out, err = runLive(t, l, LiveJob{Source: noRejected})
	if err != nil || !out.Refused || len(missing(out.Diagnostics, "Rejected")) != 1 {
		t.Fatalf("the Rejected arm deleted: %+v %v", out, err)
	}
	// A syntax error: its place, and no types of the last program.
	out, err = runLive(t, l, LiveJob{Source: "let f = (x => \n", At: true, Line: 1, Column: 5})
	if err != nil || !out.Refused || len(out.Diagnostics) != 1 || out.Diagnostics[0].Column != 14 || out.Type != "" {
		t.Fatalf("a syntax error: %+v %v", out, err)
	}
}

// TestLiveCaps: the helper and what it starts are capped as a compile's
// sandbox is (CPU at LiveCPU), at SCHED_IDLE, with an empty environment.
func TestLiveCaps(t *testing.T) {
	c := withTypes(t)
	l := live(t, c, 1)
	if _, err := runLive(t, l, LiveJob{Source: lesson(t)}); err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	var pid int
	for h := range l.started {
		pid = h.cmd.Process.Pid
	}
	l.mu.Unlock()
	limits, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/limits")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Max cpu time              1                    2                    seconds",
		"Max data size             " + strconv.Itoa(CompileMemory) + "            " + strconv.Itoa(CompileMemory) + "            bytes",
		"Max file size             " + strconv.Itoa(maxFileBytes) + "              " + strconv.Itoa(maxFileBytes) + "              bytes",
		"Max open files            64                   64                   files",
		"Max core file size        0                    0                    bytes",
	} {
		if !strings.Contains(string(limits), want) {
			t.Errorf("the helper's limits lack %q:\n%s", want, limits)
		}
	}
	if p, err := idle.Policy(pid); err != nil || p != unix.SCHED_IDLE {
		t.Errorf("the helper's policy is %d (%v), want SCHED_IDLE", p, err)
	}
	if env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ"); err != nil || strings.Contains(string(env), "PATH=") || strings.Contains(string(env), "HOME=") {
		t.Errorf("the helper's environment: %q %v", env, err)
	}
}

// fakeAnalysis is a compiler whose analysis binary is a script.
func fakeAnalysis(t *testing.T, c *Compiler, script string) *Compiler {
	t.Helper()
	p := filepath.Join(t.TempDir(), analysisName)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	fake := *c
	fake.analysis = p
	return &fake
}

// TestLiveHostile: a module the compiler would take seconds on is stopped
// at LiveCPU; an analysis that prints without end, spins or sleeps, and a
// .cmt that is no .cmt, are stopped or answered "", each within its caps,
// and the next job is answered as usual.
func TestLiveHostile(t *testing.T) {
	c := withTypes(t)
	t.Setenv("TMPDIR", t.TempDir())
	src := lesson(t)
	line, col := placeOf(t, src, "let accept", 4)
	exponential := "let f0 = x => (x, x)\n"
	for i := 1; i <= 8; i++ {
		exponential += "let f" + itoa(i) + " = x => f" + itoa(i-1) + "(f" + itoa(i-1) + "(x))\n"
	}
	exponential += "let v = f8(1)\n"
	for _, tc := range []struct {
		name string
		c    *Compiler
		job  LiveJob
		kind ErrorKind // 0: answered, with no type
		most time.Duration
	}{
		{"exponential types", c, LiveJob{Source: exponential}, TooLong, 4 * time.Second},
		{"a .cmt that is none", c, LiveJob{Source: src, Types: []byte("not a cmt"), At: true, Line: line, Column: col}, 0, 3 * time.Second},
		{"an analysis that prints without end", fakeAnalysis(t, c, "yes"), LiveJob{Source: src, At: true, Line: line, Column: col}, TooMuchOutput, 3 * time.Second},
		{"an analysis that spins", fakeAnalysis(t, c, "while :; do :; done"), LiveJob{Source: src, At: true, Line: line, Column: col}, TooLong, 4 * time.Second},
		{"an analysis that sleeps", fakeAnalysis(t, c, "exec sleep 60"), LiveJob{Source: src, At: true, Line: line, Column: col}, TooLong, LiveWall + 2*time.Second},
		{"too large", c, LiveJob{Source: strings.Repeat("// x\n", model.MaxSourceBytes/5+1)}, TooLarge, time.Second},
	} {
		l := tc.c.Live(1)
		started := time.Now()
		out, err := runLive(t, l, tc.job)
		took := time.Since(started)
		var e *Error
		switch {
		case tc.kind == 0 && (err != nil || out.Type != ""):
			t.Errorf("%s: %q %v", tc.name, out.Type, err)
		case tc.kind != 0 && (!errors.As(err, &e) || e.Kind != tc.kind):
			t.Errorf("%s: %+v %v, want kind %d", tc.name, out, err, tc.kind)
		case took > tc.most:
			t.Errorf("%s: took %v", tc.name, took)
		}
		t.Logf("%s: %v (%v)", tc.name, err, took.Round(time.Millisecond))
		// The next job of the same Live is answered.
		if out, err := runLive(t, l, LiveJob{Source: src}); err != nil || out.Refused {
			t.Errorf("%s, then the lesson: %+v %v", tc.name, out, err)
		}
		l.Close()
	}
	left, _ := filepath.Glob(filepath.Join(os.TempDir(), "lab-rescript-live-*"))
	if len(left) != 0 {
		t.Errorf("directories left: %v", left)
	}
}

// TestLiveWithoutTheAnalysis: a compiler without its analysis binary
// beside it says so (Types false), compiles live as before, and answers
// every type with "".
func TestLiveWithoutTheAnalysis(t *testing.T) {
	real := compiler(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "@rescript", "linux-x64", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real.runtime, filepath.Join(dir, "@rescript", "runtime")); err != nil {
		t.Fatal(err)
	}
	copyFile(t, real.bin, filepath.Join(bin, "bsc.exe"))
	c, err := Find(filepath.Join(bin, "bsc.exe"), exec.LookPath)
	if err != nil {
		t.Fatal(err)
	}
	if c.Types() {
		t.Fatalf("Types() with no %s beside bsc.exe", analysisName)
	}
	l := live(t, c, 1)
	src := lesson(t)
	line, col := placeOf(t, src, "let accept", 4)
	out, err := runLive(t, l, LiveJob{Source: src, At: true, Line: line, Column: col})
	if err != nil || out.Refused || out.Type != "" || !out.Compiled {
		t.Fatalf("%+v %v", out, err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestHoverType(t *testing.T) {
	for in, want := range map[string]string{
		`{"contents": {"kind": "markdown", "value": "` + "```rescript\\n(call, reply) => update\\n```\\n\\n---\\n\\n```rescript\\ntype call = {key: key}\\n```\\nGo to: [Type definition](command:x)" + `"}}`: "(call, reply) => update",
		`{"contents": {"kind": "markdown", "value": "` + "```rescript\\nstring\\n```" + `"}}`:                                                                                                                 "string",
		"null":                              "",
		"":                                  "",
		`{"contents": {"value": "[x](y)"}}`: "",
	} {
		if got := HoverType([]byte(in)); got != want {
			t.Errorf("HoverType(%s) = %q, want %q", in, got, want)
		}
	}
}

// BenchmarkLiveLesson: a live compile of the lesson's module, each a
// different source (a comment), through a helper kept running; beside
// BenchmarkCompileLesson, the check's compile.
func BenchmarkLiveLesson(b *testing.B) {
	c := compiler(b)
	l := c.Live(1)
	defer l.Close()
	src := lesson(b)
	i := 0
	for b.Loop() {
		i++
		if _, err := l.Run(context.Background(), LiveJob{Source: src + "// " + itoa(i) + "\n"}); err != nil {
			b.Fatal(err)
		}
	}
}
