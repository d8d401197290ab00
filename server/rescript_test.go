package server_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolcall-lab/lab/internal/rescript"
	"github.com/toolcall-lab/lab/model"
	"github.com/toolcall-lab/lab/server"
)

// rescriptCompiler is the real ReScript compiler, found as the lab finds
// it (LAB_RESCRIPT, else the checkout's node_modules, else PATH). Without
// one the test skips, unless LAB_E2E=1 (CI installs it).
func rescriptCompiler(t *testing.T) *rescript.Compiler {
	t.Helper()
	c, err := findCompiler()
	if err != nil {
		if os.Getenv("LAB_E2E") == "1" {
			t.Fatalf("LAB_E2E=1 and no ReScript compiler: %v (npm install rescript@12.2.0)", err)
		}
		t.Skipf("no ReScript compiler (npm install rescript@12.2.0 in the checkout, or set LAB_RESCRIPT): %v", err)
	}
	return c
}

// compilerIfAny is the ReScript compiler for a test that runs without one
// too (its ReScript part then skipped), nil when there is none; with
// LAB_E2E=1 a missing compiler fails the test.
func compilerIfAny(t *testing.T) server.Compiler {
	t.Helper()
	c, err := findCompiler()
	if err != nil {
		if os.Getenv("LAB_E2E") == "1" {
			t.Fatalf("LAB_E2E=1 and no ReScript compiler: %v (npm install rescript@12.2.0)", err)
		}
		return nil
	}
	return c
}

var testCompiler struct {
	once sync.Once
	c    *rescript.Compiler
	err  error
}

// findCompiler finds the compiler once for the package's tests.
func findCompiler() (*rescript.Compiler, error) {
	testCompiler.once.Do(func() {
		setting := os.Getenv("LAB_RESCRIPT")
		if setting == "" {
			if bin, err := filepath.Abs(filepath.Join("..", "node_modules", "@rescript", "linux-x64", "bin", "bsc.exe")); err == nil {
				if _, err := os.Stat(bin); err == nil {
					setting = bin
				}
			}
		}
		testCompiler.c, testCompiler.err = rescript.Find(setting, exec.LookPath)
	})
	return testCompiler.c, testCompiler.err
}

// lessonRes is the lesson's ToolCall.res, as the lesson writes it.
func lessonRes(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "internal", "rescript", "testdata", "ToolCall.res"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func submitIn(lang, source string) string {
	b, _ := json.Marshal(map[string]string{"type": "submitCode", "source": source, "language": lang})
	return string(b)
}

// rescriptCode is the code object's ReScript fields (docs/protocol.md).
type rescriptCode struct {
	Language string             `json:"language"`
	Compiler []model.Diagnostic `json:"compiler"`
	Tasks    struct {
		MissingRejected bool `json:"missingRejected"`
		AddCancelled    bool `json:"addCancelled"`
	} `json:"tasks"`
}

func rescriptOf(t *testing.T, code *codeObject) rescriptCode {
	t.Helper()
	var r rescriptCode
	if err := json.Unmarshal(code.raw, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// submitRes sends source as ReScript, the session's n-th submission, and
// waits for its result.
func (c *client) submitRes(source string, n int) (*codeObject, rescriptCode) {
	c.t.Helper()
	f := c.do(submitIn("rescript", source))
	if code := codeOf(c.t, f); code == nil || code.Submission != n || code.Status != "checking" {
		c.t.Fatalf("after submission %d: %s", n, f.raw)
	}
	code := c.checked(n)
	return code, rescriptOf(c.t, code)
}

// lineOf is the 1-based line of source where want first starts.
func lineOf(t *testing.T, source, want string) int {
	t.Helper()
	i := strings.Index(source, want)
	if i < 0 {
		t.Fatalf("no %q in the source", want)
	}
	return strings.Count(source[:i], "\n") + 1
}

// nonExhaustive are the diagnostics that say a match forgets constructor.
func nonExhaustive(ds []model.Diagnostic, constructor string) []model.Diagnostic {
	var out []model.Diagnostic
	for _, d := range ds {
		if d.Severity == "error" && d.Warning != nil && *d.Warning == model.NonExhaustive && strings.Contains(d.Text, constructor) {
			out = append(out, d)
		}
	}
	return out
}

// The lesson's module with the standard library: its JavaScript imports
// the runtime (Option, String, Dict), which the lab bundles.
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
  let shown = Dict.fromArray([("runId", call.key.runId)])
  {runId: shown->Dict.get("runId")->Option.getOr(""), callId: call.key.callId, status, detail}
}`

// TestReScriptOverTheProtocol is issue 41's "done when", over the
// student protocol on a lab with the real compiler.
func TestReScriptOverTheProtocol(t *testing.T) {
	t.Parallel()
	compiler := rescriptCompiler(t)
	ts := runInstructorLab(t, server.Config{ReScript: compiler, FrameRate: 1000, FrameBurst: 1000})
	lesson := lessonRes(t)
	viewAt := strings.Index(lesson, "let view = ")
	if viewAt < 0 {
		t.Fatal("the lesson's module has no view")
	}

	t.Run("the lesson's module passes", func(t *testing.T) {
		c, _ := dial(t, ts, newID())
		started := time.Now()
		code, rs := c.submitRes(lesson, 1)
		t.Logf("the lesson's ToolCall.res: %d cases, compile and check in %v", code.Cases, time.Since(started))
		if code.Status != "passed" || code.Passed != code.Cases || code.Cases < model.NumSteps+model.CampaignSize || rs.Language != "rescript" || len(rs.Compiler) != 0 {
			t.Fatalf("%s", code.raw)
		}
	})
	t.Run("with the standard library", func(t *testing.T) {
		c, _ := dial(t, ts, newID())
		code, rs := c.submitRes(lesson[:viewAt]+stdlibView+"\n", 1)
		if code.Status != "passed" || code.Passed != code.Cases || len(rs.Compiler) != 0 {
			t.Fatalf("%s", code.raw)
		}
	})
	t.Run("the Rejected arm deleted", func(t *testing.T) {
		c, _ := dial(t, ts, newID())
		arm := "  | Rejected(reason) => (\"Rejected\", reason)\n"
		if !strings.Contains(lesson[viewAt:], arm) {
			t.Fatal("no Rejected arm in view")
		}
		source := lesson[:viewAt] + strings.Replace(lesson[viewAt:], arm, "", 1)
		code, rs := c.submitRes(source, 1)
		missing := nonExhaustive(rs.Compiler, "Rejected")
		want := lineOf(t, source, "switch call.status {\n  | Pending => (\"Pending\"")
		if code.Status != "error" || code.Cases != 0 || len(missing) != 1 || missing[0].Line != want || !strings.Contains(code.Error, "does not compile: 1 problem") {
			t.Fatalf("want one warning 8 at line %d naming Rejected: %s", want, code.raw)
		}
		if d := missing[0]; d.Column < 1 || d.EndLine < d.Line || !rs.Tasks.MissingRejected || rs.Tasks.AddCancelled {
			t.Fatalf("the diagnostic or the tasks: %s", code.raw)
		}
		// The board: the row says which warning refused it.
		_, _, body := call(t, ts, "GET", "/api/sessions", testToken, "", "")
		if !strings.Contains(string(body), `"warnings":[8]`) || !strings.Contains(string(body), `"missingRejected":true`) {
			t.Fatalf("the overview row: %s", body)
		}
	})
	t.Run("Cancelled added", func(t *testing.T) {
		c, _ := dial(t, ts, newID())
		source := strings.Replace(lesson, "  | Unresolved\n", "  | Unresolved\n  | Cancelled\n", 1)
		if source == lesson {
			t.Fatal("no status type to extend")
		}
		code, rs := c.submitRes(source, 1)
		missing := nonExhaustive(rs.Compiler, "Cancelled")
		if code.Status != "error" || len(missing) != 3 || !rs.Tasks.AddCancelled {
			t.Fatalf("want three warnings 8 naming Cancelled: %s", code.raw)
		}
		lines := map[int]bool{}
		for _, d := range missing {
			lines[d.Line] = true
		}
		for _, at := range []string{"let accept", "let expire", "let view"} {
			start := lineOf(t, source, at)
			found := false
			for l := range lines {
				found = found || l > start && l < start+12
			}
			if !found {
				t.Errorf("no diagnostic in %s (from line %d): %v", at, start, lines)
			}
		}
	})
	t.Run("a type error and a syntax error", func(t *testing.T) {
		c, _ := dial(t, ts, newID())
		typeErr := strings.Replace(lesson, `{runId: call.key.runId, callId: call.key.callId, status, detail}`, `{runId: call.key.runId, callId: 7, status, detail}`, 1)
		code, rs := c.submitRes(typeErr, 1)
		want := lineOf(t, typeErr, "callId: 7")
		if code.Status != "error" || len(rs.Compiler) == 0 || rs.Compiler[0].Line != want || rs.Compiler[0].Warning != nil || rs.Compiler[0].Severity != "error" {
			t.Fatalf("a type error at line %d: %s", want, code.raw)
		}
		syntax := strings.Replace(lesson, "let sameKey = (a: key, b: key) =>", "let sameKey = (a: key, b: key) => =>", 1)
		code, rs = c.submitRes(syntax, 2)
		want = lineOf(t, syntax, "let sameKey")
		if code.Status != "error" || len(rs.Compiler) == 0 || rs.Compiler[0].Line != want {
			t.Fatalf("a syntax error at line %d: %s", want, code.raw)
		}
	})
	t.Run("a rule broken", func(t *testing.T) {
		c, _ := dial(t, ts, newID())
		// A deadline overwrites a result: expire ignores the status.
		wrong := strings.Replace(lesson, "    | Completed(_) | Rejected(_) => {\n        call,\n        notice: \"Ignored deadline: final outcome already recorded.\",\n      }",
			"    | Completed(_) | Rejected(_) => {\n        call: {...call, status: Unresolved},\n        notice: \"Unresolved: deadline observed without a final reply.\",\n      }", 1)
		if wrong == lesson {
			t.Fatal("no expire arm to break")
		}
		code, _ := c.submitRes(wrong, 1)
		if code.Status != "failed" || code.Failure == nil || code.Failure.Property != "a deadline overwrites a result" {
			t.Fatalf("%s", code.raw)
		}
	})
	t.Run("hostile programs end as errors", func(t *testing.T) {
		other, f := dial(t, ts, newID())
		seq := f.Seq
		exponential := "let f0 = x => (x, x)\n"
		for i := 1; i <= 7; i++ {
			exponential += "let f" + itoa(uint64(i)) + " = x => f" + itoa(uint64(i-1)) + "(f" + itoa(uint64(i-1)) + "(x))\n"
		}
		exponential += "let v = f7(1)\n"
		for name, source := range map[string]string{
			"exponential types": exponential,
			"an import of fs":   "@module(\"fs\") external readFileSync: string => string = \"readFileSync\"\n" + lesson + "\nlet secret = readFileSync(\"/etc/passwd\")\n",
		} {
			c, _ := dial(t, ts, newID())
			started := time.Now()
			if code := codeOf(t, c.do(submitIn("rescript", source))); code == nil || code.Status != "checking" {
				t.Fatalf("%s: not checking", name)
			}
			done := make(chan *codeObject, 1)
			go func() { done <- c.checked(1) }()
		waiting:
			for {
				select {
				case code := <-done:
					if code.Status != "error" || code.Error == "" || time.Since(started) > 20*time.Second {
						t.Fatalf("%s: %s after %v", name, code.raw, time.Since(started))
					}
					t.Logf("%s: %s (%v)", name, code.Error, time.Since(started))
					break waiting
				case <-time.After(200 * time.Millisecond):
					asked := time.Now()
					g := other.do(queueReply(`{"runId":"run-1","callId":"lookup","kind":"completed","output":"x"}`))
					if g.Seq != seq+1 || time.Since(asked) > time.Second {
						t.Fatalf("a bystander's change during %s: seq %d after %d, in %v", name, g.Seq, seq, time.Since(asked))
					}
					seq = g.Seq
				}
			}
		}
	})
}

// TestReScriptTasksSurviveARestart: the lesson's compiler tasks a student
// did stay done after they fixed the module and the lab restarted.
func TestReScriptTasksSurviveARestart(t *testing.T) {
	t.Parallel()
	compiler := rescriptCompiler(t)
	st := openSQLite(t)
	lab, ts := runLab(t, server.Config{Store: st, ReScript: compiler})
	lesson := lessonRes(t)
	id := newID()
	c, _ := dial(t, ts, id)
	c.send(submitIn("rescript", strings.Replace(lesson, "  | Rejected(reason) => (\"Rejected\", reason)\n", "", 1)))
	c.send(submitIn("rescript", strings.Replace(lesson, "  | Unresolved\n", "  | Unresolved\n  | Cancelled\n", 1)))
	want := func(code *codeObject) {
		t.Helper()
		if rs := rescriptOf(t, code); code.Status != "passed" || !rs.Tasks.MissingRejected || !rs.Tasks.AddCancelled {
			t.Fatalf("want the lesson's module passing with both tasks done: %s", code.raw)
		}
	}
	// The third replaces the others while they wait or run: their
	// builds are still seen for the tasks.
	c.send(submitIn("rescript", lesson))
	for {
		code := c.checked(3)
		if rescriptOf(t, code).Tasks.AddCancelled && rescriptOf(t, code).Tasks.MissingRejected {
			want(code)
			break
		}
	}
	c.ws.CloseNow()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := lab.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	_, ts2 := runLab(t, server.Config{Store: st, ReScript: compiler})
	c2, f := dial(t, ts2, id)
	code := codeOf(t, f)
	for code == nil || code.Status == "checking" || !rescriptOf(t, code).Tasks.AddCancelled || !rescriptOf(t, code).Tasks.MissingRejected {
		code = c2.checked(3) // its check, and the earlier builds', run again
	}
	want(code)
}

// TestAKeptOutcomeIsTheProgramsOwn: a session whose check also compiled
// its earlier, unseen sources shows their tasks, but the outcome another
// session takes for the same program is that program's alone.
func TestAKeptOutcomeIsTheProgramsOwn(t *testing.T) {
	t.Parallel()
	compiler := rescriptCompiler(t)
	ts := runInstructorLab(t, server.Config{ReScript: compiler})
	lesson := lessonRes(t)
	a, _ := dial(t, ts, newID())
	// The first is replaced before its build is seen: the second's check
	// compiles it again, for its tasks.
	a.send(submitIn("rescript", strings.Replace(lesson, "  | Rejected(reason) => (\"Rejected\", reason)\n", "", 1)))
	a.send(submitIn("rescript", lesson))
	if code := a.checked(2); code.Status != "passed" || !rescriptOf(t, code).Tasks.MissingRejected {
		t.Fatalf("the session that deleted the Rejected arm first: %s", code.raw)
	}
	b, _ := dial(t, ts, newID())
	code, rs := b.submitRes(lesson, 1)
	if code.Status != "passed" || rs.Tasks.MissingRejected || rs.Tasks.AddCancelled {
		t.Fatalf("another session's same module: %s", code.raw)
	}
	if kept := checksMetric(t, ts, "kept"); kept != 1 {
		t.Fatalf("checks kept %v, want 1 (the second session's)", kept)
	}
}

// TestReScriptWithoutACompiler: a lab without the compiler offers
// JavaScript only and refuses a ReScript submission with a reason.
func TestReScriptWithoutACompiler(t *testing.T) {
	t.Parallel()
	_, ts := runLab(t, server.Config{})
	resp := get(t, ts, "/code.json")
	var langs struct {
		Languages []string `json:"languages"`
		Default   string   `json:"default"`
		Enable    string   `json:"enable"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&langs); err != nil || resp.StatusCode != 200 ||
		strings.Join(langs.Languages, ",") != "javascript" || langs.Default != "javascript" || !strings.Contains(langs.Enable, "npm install rescript@12.2.0") {
		t.Fatalf("GET /code.json: %d %+v %v", resp.StatusCode, langs, err)
	}
	c, _ := dial(t, ts, newID())
	c.send(submitIn("rescript", "let begin = 1"))
	if r := c.refusal(); r.Reason != "unavailable" || !strings.Contains(r.Error, "ReScript") {
		t.Fatalf("a ReScript submission without a compiler: %s", r.raw)
	}
	c.send(submitIn("typescript", "let begin = 1"))
	if r := c.refusal(); r.Reason != "invalid_frame" || !strings.Contains(r.Error, "language") {
		t.Fatalf("an unknown language: %s", r.raw)
	}
	// JavaScript, named or not, is as before.
	if code := codeOf(t, c.do(submitIn("javascript", "export function begin( {"))); code == nil || code.Submission != 1 {
		t.Fatalf("a JavaScript submission: %+v", code)
	}
}
