package rescript

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolcall-lab/lab/model"
)

// compiler is the real compiler, found as the lab finds it (LAB_RESCRIPT,
// else the checkout's node_modules, else PATH); without one the test
// skips, unless LAB_E2E=1 (CI installs it).
func compiler(t testing.TB) *Compiler {
	t.Helper()
	setting := os.Getenv("LAB_RESCRIPT")
	if setting == "" {
		if p := filepath.Join("..", "..", "node_modules", "@rescript", "linux-x64", "bin", "bsc.exe"); fileExists(p) {
			setting = p
		}
	}
	c, err := Find(setting, exec.LookPath)
	if err != nil {
		if os.Getenv("LAB_E2E") == "1" {
			t.Fatalf("LAB_E2E=1 and no ReScript compiler: %v", err)
		}
		t.Skipf("no ReScript compiler (npm install rescript@12.2.0 in the checkout, or set LAB_RESCRIPT): %v", err)
	}
	return c
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func lesson(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "ToolCall.res"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func compile(t *testing.T, c *Compiler, src string) (Output, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return c.Compile(ctx, src)
}

func lineOf(t *testing.T, src, want string) int {
	t.Helper()
	i := strings.Index(src, want)
	if i < 0 {
		t.Fatalf("no %q", want)
	}
	return strings.Count(src[:i], "\n") + 1
}

func missing(ds []model.Diagnostic, name string) (out []model.Diagnostic) {
	for _, d := range ds {
		if d.Warning != nil && *d.Warning == 8 && d.Severity == model.SeverityError && strings.Contains(d.Text, "| "+name) {
			out = append(out, d)
		}
	}
	return out
}

func TestFindRefuses(t *testing.T) {
	if _, err := Find("", func(string) (string, error) { return "", exec.ErrNotFound }); !errors.Is(err, ErrNotFound) {
		t.Errorf("nothing anywhere: %v", err)
	}
	if _, err := Find("/bin/true", exec.LookPath); err == nil || !strings.Contains(err.Error(), "runtime") {
		t.Errorf("a binary with no runtime beside it: %v", err)
	}
	// A compiler that says it is another version.
	dir := t.TempDir()
	bin := filepath.Join(dir, "@rescript", "linux-x64", "bin")
	for _, d := range []string{bin, filepath.Join(dir, "@rescript", "runtime", "lib", "ocaml"), filepath.Join(dir, "@rescript", "runtime", "lib", "es6")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(bin, "bsc.exe"), []byte("#!/bin/sh\necho ReScript 11.1.4\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Find(filepath.Join(bin, "bsc.exe"), exec.LookPath); err == nil || !strings.Contains(err.Error(), "11.1.4") || !strings.Contains(err.Error(), "rescript@12.2.0") {
		t.Errorf("ReScript 11: %v", err)
	}
}

func TestCompileTheLesson(t *testing.T) {
	c := compiler(t)
	if !strings.HasPrefix(c.Version(), "ReScript 12.") {
		t.Fatalf("version %q", c.Version())
	}
	src := lesson(t)
	out, err := compile(t, c, src)
	if err != nil || out.Refused || len(out.Diagnostics) != 0 {
		t.Fatalf("the lesson's module: %+v %v", out, err)
	}
	if strings.Contains(out.JS, "import ") {
		t.Fatalf("the bundle imports: %s", out.JS)
	}
	for _, name := range []string{"begin", "receive", "expire", "view"} {
		if !strings.Contains(out.JS, name) {
			t.Errorf("the bundle has no %s", name)
		}
	}
	if !strings.Contains(out.JS, "export {") {
		t.Errorf("the bundle exports nothing:\n%s", out.JS)
	}
}

// stdlibView is view written with the standard library, whose JavaScript
// imports the runtime.
const stdlibView = `let view = (call: call): view => {
  let (status, detail) = switch call.status {
  | Pending => ("Pending", "")
  | Completed(output) => ("Completed", Option.getOr(Some(output), ""))
  | Rejected(reason) => ("Rejected", [reason]->Array.join(""))
  | Unresolved => (
      "Unresolved",
      "No final reply observed. A matching late reply can still resolve this call.",
    )
  }
  {runId: call.key.runId, callId: call.key.callId, status, detail}
}
`

func TestCompileBundlesTheRuntime(t *testing.T) {
	c := compiler(t)
	src := lesson(t)
	src = src[:strings.Index(src, "let view = ")] + stdlibView
	out, err := compile(t, c, src)
	if err != nil || out.Refused {
		t.Fatalf("%+v %v", out, err)
	}
	if strings.Contains(out.JS, "import ") || !strings.Contains(out.JS, "getOr") {
		t.Fatalf("the runtime is not bundled in:\n%s", out.JS)
	}
}

func TestCompileRefused(t *testing.T) {
	c := compiler(t)
	src := lesson(t)
	viewAt := strings.Index(src, "let view = ")
	noRejected := src[:viewAt] + strings.Replace(src[viewAt:], "  | Rejected(reason) => (\"Rejected\", reason)\n", "", 1)
	cancelled := strings.Replace(src, "  | Unresolved\n", "  | Unresolved\n  | Cancelled\n", 1)
	for _, tc := range []struct {
		name    string
		src     string
		check   func(ds []model.Diagnostic) bool
		refused bool
	}{
		{"the Rejected arm deleted", noRejected, func(ds []model.Diagnostic) bool {
			m := missing(ds, "Rejected")
			want := lineOf(t, noRejected, "switch call.status {\n  | Pending => (\"Pending\"")
			return len(ds) == 1 && len(m) == 1 && m[0].Line == want && m[0].Column == 26 && m[0].EndLine > want &&
				model.TasksOf(ds) == model.CompilerTasks{MissingRejected: true}
		}, true},
		{"Cancelled added", cancelled, func(ds []model.Diagnostic) bool {
			return len(missing(ds, "Cancelled")) == 3 && model.TasksOf(ds).AddCancelled
		}, true},
		{"a type error", strings.Replace(src, "callId: call.key.callId, status, detail}", "callId: 7, status, detail}", 1), func(ds []model.Diagnostic) bool {
			return len(ds) == 1 && ds[0].Warning == nil && ds[0].Severity == "error" && strings.Contains(ds[0].Text, "int")
		}, true},
		{"a syntax error", "let f = (x => \n", func(ds []model.Diagnostic) bool {
			return len(ds) == 1 && ds[0].Line == 1 && ds[0].Column == 14 && ds[0].Warning == nil && strings.Contains(ds[0].Text, "Missing expression")
		}, true},
		{"an unused variable", "let f = x => {\n  let y = 1\n  x\n}\n", func(ds []model.Diagnostic) bool {
			return len(ds) == 1 && ds[0].Warning != nil && *ds[0].Warning == 26 && ds[0].Line == 2 && ds[0].Column == 7 && ds[0].EndColumn == 7
		}, true},
		{"a warning that does not stop the build", "let f = (x: int) => x\nlet g = f(1)\nlet _ = g\nlet h = (x) => switch x { | 1 => \"a\" | _ => \"b\" }\nlet k = x => x ++ \"\"\nlet _ = h\nlet _ = k\nlet l = (~a) => a\nlet _ = l(~a=1)\ntype t = A | B\nlet m = A\nlet _ = m\nlet _ = B\nlet n = (x: option<int>) => switch x { | Some(y) => y | None => 0 }\nlet _ = n\nlet o = 1.0 == 1.0\n", func(ds []model.Diagnostic) bool {
			return true
		}, false},
	} {
		out, err := compile(t, c, tc.src)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if out.Refused != tc.refused || !tc.check(out.Diagnostics) || (out.JS == "") != tc.refused {
			t.Errorf("%s: refused %v, js %d bytes: %+v", tc.name, out.Refused, len(out.JS), out.Diagnostics)
			for _, d := range out.Diagnostics {
				t.Logf("  %d:%d-%d:%d w%v %s %q", d.Line, d.Column, d.EndLine, d.EndColumn, d.Warning, d.Severity, d.Text)
			}
		}
	}
}

func TestCompileHostile(t *testing.T) {
	c := compiler(t)
	// A directory of its own, so that what is left there is this test's.
	t.Setenv("TMPDIR", t.TempDir())
	exponential := "let f0 = x => (x, x)\n"
	for i := 1; i <= 8; i++ {
		exponential += "let f" + itoa(i) + " = x => f" + itoa(i-1) + "(f" + itoa(i-1) + "(x))\n"
	}
	exponential += "let v = f8(1)\n"
	for _, tc := range []struct {
		name string
		src  string
		kind ErrorKind
		says string
	}{
		{"exponential types", exponential, TooLong, "took longer"},
		{"an import of fs", "@module(\"fs\") external readFileSync: string => string = \"readFileSync\"\nlet x = readFileSync(\"/etc/passwd\")\n", ImportRefused, `"fs"`},
		{"an import of node:fs", "@module(\"node:fs\") external readFileSync: string => string = \"readFileSync\"\nlet x = readFileSync(\"/etc/passwd\")\n", ImportRefused, `"node:fs"`},
		{"an import of a URL", "@module(\"https://example.com/x.js\") external f: int => int = \"f\"\nlet x = f(1)\n", ImportRefused, "https://"},
		{"an import of a file of the runtime's by a path", "@module(\"../../../../etc/passwd\") external f: int => int = \"f\"\nlet x = f(1)\n", ImportRefused, "passwd"},
		{"too large", strings.Repeat("// x\n", model.MaxSourceBytes/5+1), TooLarge, "bytes"},
	} {
		started := time.Now()
		_, err := compile(t, c, tc.src)
		var e *Error
		if !errors.As(err, &e) || e.Kind != tc.kind || !strings.Contains(e.Message, tc.says) {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if took := time.Since(started); took > 15*time.Second {
			t.Errorf("%s: took %v", tc.name, took)
		}
		t.Logf("%s: %s (%v)", tc.name, e.Message, time.Since(started).Round(time.Millisecond))
	}
	// Nothing is left behind.
	left, _ := filepath.Glob(filepath.Join(os.TempDir(), "lab-rescript-*"))
	if len(left) != 0 {
		t.Errorf("directories left: %v", left)
	}
}

func TestCompileThirtyAtOnce(t *testing.T) {
	c := compiler(t)
	src := lesson(t)
	var wg sync.WaitGroup
	errs := make(chan error, 30)
	started := time.Now()
	for range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			out, err := c.Compile(ctx, src)
			if err == nil && (out.Refused || out.JS == "") {
				err = errors.New("refused")
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("30 compiles of the lesson's module at once: %v", time.Since(started))
}

func itoa(n int) string { return strconv.Itoa(n) }

func BenchmarkCompileLesson(b *testing.B) {
	c := compiler(b)
	src := lesson(b)
	for b.Loop() {
		if _, err := c.Compile(context.Background(), src); err != nil {
			b.Fatal(err)
		}
	}
}
