package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/toolcall-lab/lab/server"
)

// lessonToolCall is the lesson's src/ToolCall.res ("Add the model"), the
// module a student writes in ReScript; it passes every case.
const lessonToolCall = `
type key = {runId: string, callId: string}

type status =
  | Pending
  | Completed(string)
  | Rejected(string)
  | Unresolved

type call = {key: key, status: status}
type reply = {key: key, outcome: result<string, string>}
type update = {call: call, notice: string}

type view = {
  runId: string,
  callId: string,
  status: string,
  detail: string,
}

let begin = (runId, callId): call => {key: {runId, callId}, status: Pending}

let sameKey = (a: key, b: key) => a.runId === b.runId && a.callId === b.callId

let decode = (json: JSON.t): result<reply, string> => {
  open JSON
  switch json {
  | Object(dict{
      "runId": String(runId),
      "callId": String(callId),
      "kind": String("completed"),
      "output": String(output),
    }) =>
    Ok({key: {runId, callId}, outcome: Ok(output)})
  | Object(dict{
      "runId": String(runId),
      "callId": String(callId),
      "kind": String("rejected"),
      "reason": String(reason),
    }) =>
    Ok({key: {runId, callId}, outcome: Error(reason)})
  | _ =>
    Error("Invalid reply: expected string identifiers and a completed output or rejected reason.")
  }
}

let parse = raw => {
  let parsed = try {
    Ok(JSON.parseOrThrow(raw))
  } catch {
  | _ => Error("Invalid JSON: could not parse message.")
  }
  switch parsed {
  | Ok(json) => decode(json)
  | Error(message) => Error(message)
  }
}

let accept = (call: call, reply: reply): update => {
  if !sameKey(call.key, reply.key) {
    {call, notice: "Ignored reply: different call identity."}
  } else {
    switch call.status {
    | Completed(_) | Rejected(_) => {call, notice: "Ignored reply: final outcome already recorded."}
    | Pending | Unresolved =>
      switch reply.outcome {
      | Ok(output) => {
          call: {...call, status: Completed(output)},
          notice: "Accepted completion.",
        }
      | Error(reason) => {
          call: {...call, status: Rejected(reason)},
          notice: "Accepted rejection.",
        }
      }
    }
  }
}

let receive = (call, raw): update =>
  switch parse(raw) {
  | Ok(reply) => accept(call, reply)
  | Error(notice) => {call, notice}
  }

let expire = (call: call, runId, callId): update => {
  if !sameKey(call.key, {runId, callId}) {
    {call, notice: "Ignored deadline: different call identity."}
  } else {
    switch call.status {
    | Pending => {
        call: {...call, status: Unresolved},
        notice: "Unresolved: deadline observed without a final reply.",
      }
    | Unresolved => {call, notice: "Still unresolved: no final reply."}
    | Completed(_) | Rejected(_) => {
        call,
        notice: "Ignored deadline: final outcome already recorded.",
      }
    }
  }
}

let view = (call: call): view => {
  let (status, detail) = switch call.status {
  | Pending => ("Pending", "")
  | Completed(output) => ("Completed", output)
  | Rejected(reason) => ("Rejected", reason)
  | Unresolved => (
      "Unresolved",
      "No final reply observed. A matching late reply can still resolve this call.",
    )
  }
  {runId: call.key.runId, callId: call.key.callId, status, detail}
}
`

// skipWithoutReScript skips a test whose lab does not compile ReScript (its
// GET /code.json lists JavaScript alone, or is not served).
func skipWithoutReScript(t *testing.T, p *tab) {
	t.Helper()
	if !offersReScript(p) {
		t.Skip("the lab under test offers no ReScript (GET /code.json lists no \"rescript\": no compiler, or a lab without issue 41's server side); set LAB_RESCRIPT to bsc.exe")
	}
}

// deleteRejectedArm deletes the Rejected arm of view's switch in the
// editor, as the lesson's first compiler task asks, and returns the
// 1-based line of that switch.
func deleteRejectedArm(p *tab) int {
	p.t.Helper()
	line := evalJS[int](p, `(() => {
		const cm = window.labCodeEditor;
		const lines = cm.getValue().split("\n");
		const arm = lines.findIndex((l) => l.trim() === '| Rejected(reason) => ("Rejected", reason)');
		if (arm < 0) return -1;
		cm.replaceRange("", { line: arm, ch: 0 }, { line: arm + 1, ch: 0 });
		return cm.getValue().split("\n").findIndex((l) => l.includes("switch call.status")) + 1;
	})()`)
	if line <= 0 {
		p.t.Fatalf("no Rejected arm of view's switch in the editor:\n%s", evalJS[string](p, `window.labCodeEditor.getValue()`))
	}
	return line
}

// TestBrowserReScript: a student writes ReScript. The skeleton appears
// highlighted; with the Rejected arm of view's switch deleted, Check is
// refused by the compiler: warning 8 marked at the switch and listed naming
// Rejected, the list's item puts the cursor there, the first compiler task
// is ticked, and the teacher's board says "does not compile (warning 8)".
// The lesson's full module then passes.
func TestBrowserReScript(t *testing.T) {
	base := startLabWith(t, server.Config{InstructorToken: testToken, ReScript: compilerIfAny(t)})
	student := newBrowser(t)
	id := student.open(base + "/").Session
	student.do("name", chromedp.SetValue(chromedp.ID("name"), "Ada"), chromedp.Click(chromedp.ID("set-name")))
	openCodePanel(student)
	skipWithoutReScript(t, student)
	chooseLanguage(student, "rescript")
	waitJS(student, "the ReScript skeleton", `window.labCodeEditor.getValue().includes("let view = (call: call): view =>")`)
	if !evalJS[bool](student, `document.querySelectorAll("#code-editor .cm-keyword").length > 0 && document.querySelectorAll("#code-editor .cm-variable-2").length > 0 && document.querySelectorAll("#code-editor .cm-string").length > 0`) {
		t.Error("the ReScript skeleton has no highlighted keyword, constructor or string")
	}
	if got := evalJS[string](student, `document.getElementById("code-label").textContent`); got != "Your ToolCall module (ReScript)" {
		t.Errorf("the editor's label: %q", got)
	}
	if got := evalJS[string](student, `document.getElementById("code-task-list").textContent`); !strings.Contains(got, "Delete the Rejected arm") || strings.Contains(got, "✓ done") {
		t.Errorf("the compiler tasks before any check: %q", got)
	}

	line := deleteRejectedArm(student)
	student.do("check without the Rejected arm", chromedp.Click(chromedp.ID("code-check")))
	waitChecked(student, "the refused build", `document.getElementById("code").dataset.status === "error" && !document.getElementById("code-diagnostics").hidden`)
	if got := evalJS[string](student, `document.getElementById("code-status").textContent`); !strings.Contains(got, "does not compile: 1 problem") {
		t.Errorf("the status says %q", got)
	}
	marked := evalJS[[]int](student, `window.labCodeEditor.getAllMarks().filter((m) => m.className === "code-diag-error").map((m) => m.find().from.line + 1)`)
	if len(marked) != 1 || marked[0] != line {
		t.Errorf("the errors are marked at lines %v, want the switch at line %d", marked, line)
	}
	item := evalJS[string](student, `document.querySelector("#code-diagnostic-list button").textContent`)
	if !strings.HasPrefix(item, fmt.Sprintf("Line %d, column ", line)) || !strings.Contains(item, "Warning 8 (error)") || !strings.Contains(item, "Rejected") {
		t.Errorf("the compiler's message: %q", item)
	}
	student.do("the cursor elsewhere, then the message", chromedp.Evaluate[chromedp.Void](`window.labCodeEditor.setCursor({ line: 0, ch: 0 })`),
		chromedp.Click(chromedp.CSS("#code-diagnostic-list button")))
	waitJS(student, "the cursor at the switch", fmt.Sprintf(`window.labCodeEditor.getCursor().line === %d && document.activeElement.closest(".CodeMirror") !== null`, line-1))
	// CodeMirror draws only the lines in view: the switch is, now.
	if n := evalJS[int](student, `document.querySelectorAll("#code-editor .code-diag-error[data-warning='8']").length`); n == 0 {
		t.Error("no warning-8 mark drawn at the switch")
	}
	if n := evalJS[int](student, `document.querySelectorAll("#code-editor .code-error-line").length`); n != 1 {
		t.Errorf("%d lines with an error's background, want 1", n)
	}
	waitJS(student, "the first compiler task ticked", `document.querySelector("#code-task-list li[data-task='missingRejected']").dataset.done === "true" && document.querySelector("#code-task-list li[data-task='missingRejected']").textContent.includes("✓ done")`)

	teacher := student.newTab("teacher")
	teacher.openConsole(base, id)
	waitJS(teacher, "the board says the program does not compile", `(() => {
		const tr = document.querySelector('#progress-body tr[data-session="`+id+`"]');
		return tr && tr.querySelector(".code-status").textContent === "does not compile (warning 8)" && tr.querySelector(".code-tasks").textContent === "missing Rejected";
	})()`)
	if got := evalJS[string](teacher, `document.getElementById("code-class-compile").textContent`); got != "1 of 1 program does not compile: 1 forgot a case (warning 8)." {
		t.Errorf("the class's summary: %q", got)
	}

	setCode(student, lessonToolCall)
	student.do("check the lesson's module", chromedp.Click(chromedp.ID("code-check")))
	waitChecked(student, "the pass", `document.getElementById("code").dataset.status === "passed"`)
	if got := evalJS[string](student, `document.getElementById("code-status").textContent`); !strings.HasPrefix(got, "Submission 2: passed: ") {
		t.Errorf("the status says %q", got)
	}
	if n := evalJS[int](student, `window.labCodeEditor.getAllMarks().filter((m) => m.className === "code-diag-error").length`); n != 0 {
		t.Errorf("%d error marks left after a pass", n)
	}
	waitJS(teacher, "the board says the program passes", `document.querySelector('#progress-body tr[data-session="`+id+`"] .code-status')?.textContent === "passed"`)
}

// TestBrowserCodeReScriptPanel drives the page's side alone, whatever the
// lab compiles: GET /code.json is answered here as by a lab with a
// compiler, and the results are handed to code.js's renderCode as a state
// frame would. The skeleton comes highlighted, a refused build's warning 8
// is marked and listed, its item puts the cursor at the range, the tasks
// tick, a built program's warnings are listed apart; the console's cells
// and summary say what the overview rows' code says; a reload keeps the
// language and each language its draft. With LAB_AXE, axe-core checks the
// panel at 360 and 1280 px.
func TestBrowserCodeReScriptPanel(t *testing.T) {
	lab := startServer(t, server.Config{InstructorToken: testToken, ReScript: compilerIfAny(t)})
	h := lab.Handler()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/code.json" {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"languages":["rescript","javascript"],"default":"rescript","rescript":{"version":"12.2.0"}}`)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	t.Cleanup(func() { stopLab(t, lab) })

	p := newBrowser(t)
	p.open(ts.URL + "/")
	openCodePanel(p)
	waitJS(p, "the ReScript skeleton", `document.getElementById("code").dataset.language === "rescript" && window.labCodeEditor.getOption("mode") === "rescript" && window.labCodeEditor.getValue().includes("let view = (call: call): view =>")`)
	if !evalJS[bool](p, `document.getElementById("code-lang-rescript").checked && !document.getElementById("code-language").hidden && !document.getElementById("code-tasks").hidden`) {
		t.Error("ReScript is not the language chosen, or the choice or the tasks are hidden")
	}
	if got := evalJS[string](p, `document.getElementById("code-lang-note").textContent`); !strings.Contains(got, "ReScript 12.2.0") || strings.Contains(got, "ReScript ReScript") {
		t.Errorf("the language note: %q", got)
	}
	for _, class := range []string{"cm-keyword", "cm-variable-2", "cm-string", "cm-comment", "cm-def"} {
		if n := evalJS[int](p, `document.querySelectorAll("#code-editor .`+class+`").length`); n == 0 {
			t.Errorf("no %s token in the ReScript skeleton", class)
		}
	}
	skeleton := evalJS[string](p, `window.labCodeEditor.getValue()`)
	if strings.Contains(strings.ToLower(skeleton), "seed") {
		t.Error(`the ReScript skeleton says "seed"`)
	}

	line := deleteRejectedArm(p)
	refused := map[string]any{
		"submission": 1, "status": "error", "cases": 0, "passed": 0, "seed": 7, "language": "rescript",
		"error": "The program does not compile: 1 problem.",
		"compiler": []map[string]any{{
			"line": line, "column": 26, "endLine": line + 7, "endColumn": 3, "warning": 8, "severity": "error",
			"text": "You forgot to handle a possible case here, for example: \n| Rejected(_)",
		}},
		"tasks": map[string]bool{"missingRejected": true, "addCancelled": false},
	}
	render := func(code map[string]any) {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"code": code})
		p.do("render a result", chromedp.Evaluate[chromedp.Void](`import("/static/code.js").then((m) => m.renderCode(`+string(b)+`))`, chromedp.EvalAwaitPromise))
	}
	render(refused)
	waitJS(p, "the refused build", `document.getElementById("code").dataset.status === "error" && !document.getElementById("code-diagnostics").hidden`)
	if got := evalJS[string](p, `document.getElementById("code-status").textContent`); got != "Submission 1: does not compile: 1 problem." {
		t.Errorf("the status says %q", got)
	}
	if got := evalJS[string](p, `document.getElementById("code-summary").textContent`); got != " (does not compile: 1 problem)" {
		t.Errorf("the heading says %q", got)
	}
	if !evalJS[bool](p, `document.getElementById("code-error").hidden`) {
		t.Error("a refused build's error is shown beside its list")
	}
	marked := evalJS[[]int](p, `window.labCodeEditor.getAllMarks().filter((m) => m.className === "code-diag-error").map((m) => m.find().from.line + 1)`)
	if len(marked) != 1 || marked[0] != line {
		t.Errorf("the errors are marked at lines %v, want %d", marked, line)
	}
	want := fmt.Sprintf("Line %d, column 26: Warning 8 (error): You forgot to handle a possible case here, for example: \n| Rejected(_)", line)
	if got := evalJS[string](p, `document.querySelector("#code-diagnostic-list button").textContent`); got != want {
		t.Errorf("the compiler's message: %q, want %q", got, want)
	}
	if got := evalJS[string](p, `document.getElementById("code-diagnostics-heading").textContent`); got != "Compiler errors: 1 problem" {
		t.Errorf("the list's heading: %q", got)
	}
	p.do("the message", chromedp.Evaluate[chromedp.Void](`window.labCodeEditor.setCursor({ line: 0, ch: 0 })`), chromedp.Click(chromedp.CSS("#code-diagnostic-list button")))
	waitJS(p, "the cursor at the switch", fmt.Sprintf(`(() => { const c = window.labCodeEditor.getCursor(); return c.line === %d && c.ch === 25 && document.activeElement.closest(".CodeMirror") !== null; })()`, line-1))
	// CodeMirror draws only the lines in view: the switch is, now.
	if n := evalJS[int](p, `document.querySelectorAll("#code-editor .code-diag-error[data-warning='8']").length`); n == 0 {
		t.Error("no warning-8 mark drawn at the switch")
	}
	if n := evalJS[int](p, `document.querySelectorAll("#code-editor .code-error-sign").length`); n != 1 {
		t.Errorf("%d gutter signs, want 1", n)
	}
	if got := evalJS[[]string](p, `[...document.querySelectorAll("#code-task-list .code-task-state")].map((s) => s.textContent)`); strings.Join(got, "|") != "✓ done|not yet" {
		t.Errorf("the tasks' states: %q", got)
	}
	if src := os.Getenv("LAB_AXE"); src != "" {
		axe := axeSource(t)
		for _, w := range []int64{360, 1280} {
			vp := chromedp.EmulateViewport(w, 800)
			if w == 360 {
				vp = chromedp.EmulateViewport(w, 740, chromedp.EmulateMobile)
			}
			p.do(fmt.Sprintf("%d px", w), vp)
			axeCheck(p, axe, fmt.Sprintf("ReScript panel with a refused build at %d px", w))
			if w == 360 {
				if sw := evalJS[int](p, `document.scrollingElement.scrollWidth`); sw > 360 {
					t.Errorf("with the compiler's messages, scrollWidth = %d at 360 px", sw)
				}
			}
		}
	}

	// A built program's warnings are listed apart; the tasks both tick.
	render(map[string]any{
		"submission": 2, "status": "passed", "cases": 249, "passed": 249, "seed": 7, "language": "rescript",
		"compiler": []map[string]any{{"line": 1, "column": 1, "endLine": 1, "endColumn": 2, "warning": 27, "severity": "warning", "text": "unused variable x."}},
		"tasks":    map[string]bool{"missingRejected": true, "addCancelled": true},
	})
	waitJS(p, "the pass", `document.getElementById("code").dataset.status === "passed"`)
	if got := evalJS[string](p, `document.getElementById("code-diagnostics-heading").textContent`); got != "Compiler warnings" {
		t.Errorf("the list's heading: %q", got)
	}
	if !evalJS[bool](p, `window.labCodeEditor.getAllMarks().filter((m) => m.className === "code-diag-warning").length === 1 && document.querySelectorAll("#code-editor .code-error-sign").length === 0`) {
		t.Error("the warning is not marked as a warning")
	}
	if got := evalJS[string](p, `document.getElementById("code-task-list").textContent`); strings.Count(got, "✓ done") != 2 {
		t.Errorf("the tasks: %q", got)
	}

	// A runtime error of a ReScript program names the compiled JavaScript's
	// line: nothing is marked from it.
	render(map[string]any{"submission": 3, "status": "error", "cases": 0, "language": "rescript", "error": "TypeError at line 3: x is undefined"})
	waitJS(p, "the runtime error", `!document.getElementById("code-error").hidden && document.getElementById("code-diagnostics").hidden`)
	if n := evalJS[int](p, `document.querySelectorAll("#code-editor .code-error-line").length + document.querySelectorAll("#code-error-line").length`); n != 0 {
		t.Error("a ReScript program's runtime error marked a line")
	}

	// The console's cells and summary, from overview rows' code.
	cells, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]string](`import("/static/codeboard.js").then((m) => {
		const box = m.codeSummaryBox();
		const rows = [
			{ id: "a", code: { submissions: 2, status: "error", cases: 0, passed: 0, language: "rescript", warnings: [8], tasks: { missingRejected: true, addCancelled: false } } },
			{ id: "b", code: { submissions: 1, status: "error", cases: 0, passed: 0, language: "rescript", warnings: [8, 11], tasks: { missingRejected: true, addCancelled: true } } },
			{ id: "c", code: { submissions: 1, status: "error", cases: 0, passed: 0, language: "rescript", warnings: [], tasks: { missingRejected: false, addCancelled: true } } },
			{ id: "d", code: { submissions: 1, status: "passed", cases: 249, passed: 249, language: "javascript", tasks: { missingRejected: false, addCancelled: false } } },
		];
		m.drawCodeSummary(rows);
		const out = rows.map((r) => { const c = m.codeCells(); c.update(r); return c.tds.map((td) => td.textContent).join("|"); });
		return [...out, box.querySelector("#code-class-compile").textContent];
	})`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("the console's cells: %v", err)
	}
	wantCells := []string{
		"2||does not compile (warning 8)||missing Rejected",
		"1||does not compile (warnings 8, 11)||both",
		"1||does not compile||Cancelled",
		"1|249 of 249|passed||none",
		"3 of 4 programs do not compile: 2 forgot a case (warning 8), 1 other errors, 1 warning 11.",
	}
	if strings.Join(cells, "\n") != strings.Join(wantCells, "\n") {
		t.Errorf("the console's cells and summary:\n%s\nwant\n%s", strings.Join(cells, "\n"), strings.Join(wantCells, "\n"))
	}

	// A reload keeps ReScript and its draft; JavaScript has its own.
	p.do("reload", chromedp.Reload())
	waitJS(p, "the editor after a reload", `!!window.labCodeEditor && document.getElementById("code").dataset.language === "rescript"`)
	if strings.Contains(evalJS[string](p, `window.labCodeEditor.getValue()`), `| Rejected(reason) =>`) {
		t.Error("after a reload the ReScript draft has its Rejected arm back")
	}
	chooseLanguage(p, "javascript")
	if got := evalJS[string](p, `window.labCodeEditor.getValue()`); !strings.Contains(got, "export function view(call)") {
		t.Errorf("the JavaScript draft: %q", got)
	}
	p.do("reload", chromedp.Reload())
	waitJS(p, "JavaScript after a reload", `!!window.labCodeEditor && document.getElementById("code").dataset.language === "javascript" && window.labCodeEditor.getOption("mode") === "javascript"`)
	chooseLanguage(p, "rescript")
	p.do("reset, replace", chromedp.Click(chromedp.ID("code-reset")), chromedp.Click(chromedp.ID("code-reset-yes")))
	waitJS(p, "the ReScript skeleton back", `window.labCodeEditor.getValue() === `+jsString(skeleton))
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
