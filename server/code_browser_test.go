package server_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/toolcall-lab/lab/server"
)

// openCodePanel opens the "Write the client" panel and waits for the
// editor (CodeMirror, loaded when the panel first opens) and for the
// languages the lab offers (GET /code.json).
func openCodePanel(p *tab) {
	p.t.Helper()
	// A lab without GET /code.json answers 404, which Chromium logs as an
	// error; the page then offers JavaScript alone.
	p.expectProblem("/code.json")
	p.do("open Write the client", chromedp.Click(chromedp.ID("code-toggle")))
	waitJS(p, "the code editor", `document.getElementById("code-toggle").getAttribute("aria-expanded") === "true" && !!window.labCodeEditor && !!document.querySelector("#code-editor .CodeMirror") && !!document.getElementById("code").dataset.languages`)
}

// chooseLanguage puts the editor in lang ("javascript" or "rescript"),
// clicking its radio button when the lab offers a choice.
func chooseLanguage(p *tab, lang string) {
	p.t.Helper()
	if evalJS[string](p, `document.getElementById("code").dataset.language`) != lang {
		p.do("choose "+lang, chromedp.Click(chromedp.ID("code-lang-"+lang)))
	}
	waitJS(p, lang+" in the editor", `document.getElementById("code").dataset.language === "`+lang+`" && window.labCodeEditor.getOption("mode") === "`+lang+`"`)
}

// offersReScript says whether the lab under test compiles ReScript (its
// GET /code.json lists it).
func offersReScript(p *tab) bool {
	return evalJS[bool](p, `document.getElementById("code").dataset.languages.split(" ").includes("rescript")`)
}

// setCode puts source into the editor through its API, as a paste would.
func setCode(p *tab, source string) {
	p.t.Helper()
	b, _ := json.Marshal(source)
	evalJS[chromedp.Void](p, `window.labCodeEditor.setValue(`+string(b)+`)`)
}

// jsModule reads one of the engine's test modules.
func jsModule(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "internal", "jsclient", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestBrowserCodeEditor: the panel is closed at first and loads the editor
// when opened (under the page's CSP: any violation fails the test), with
// line numbers, highlighting and the skeleton of the four functions; typing
// changes the draft, a reload keeps it, Esc then Tab leaves the editor,
// Reset asks first and brings the skeleton back; at 360 px nothing scrolls
// sideways.
func TestBrowserCodeEditor(t *testing.T) {
	t.Parallel()
	base := startLab(t)
	p := newBrowser(t)
	p.open(base + "/")
	if evalJS[bool](p, `!document.getElementById("code-panel").hidden || !!window.CodeMirror`) {
		t.Fatal("the code panel is open, or the editor loaded, before the student opened it")
	}
	openCodePanel(p)
	chooseLanguage(p, "javascript")
	skeleton := evalJS[string](p, `window.labCodeEditor.getValue()`)
	for _, fn := range []string{"export function begin(runId, callId)", "export function receive(call, raw)", "export function expire(call, runId, callId)", "export function view(call)"} {
		if !strings.Contains(skeleton, fn) {
			t.Errorf("the skeleton has no %q", fn)
		}
	}
	if n := evalJS[int](p, `document.querySelectorAll("#code-editor .CodeMirror-linenumber").length`); n < 10 {
		t.Errorf("%d line numbers shown", n)
	}
	if n := evalJS[int](p, `document.querySelectorAll("#code-editor .cm-keyword").length`); n == 0 {
		t.Error("no keyword is highlighted")
	}

	// Type at the end of the first line.
	p.do("type in the editor",
		chromedp.Evaluate[chromedp.Void](`window.labCodeEditor.focus(); window.labCodeEditor.setCursor({line: 0, ch: 1e9})`),
		chromedp.KeyEvent(" typed here"))
	waitJS(p, "the typed text in the editor", `window.labCodeEditor.getLine(0).endsWith(" typed here")`)
	// A Tab in the editor indents; Esc then Tab leaves it for Check.
	p.do("Tab indents", chromedp.KeyEvent(kb.Tab))
	if !evalJS[bool](p, `document.activeElement.closest(".CodeMirror") !== null && / typed here +$/.test(window.labCodeEditor.getLine(0))`) {
		t.Errorf("Tab in the editor did not indent: line 1 is %q", evalJS[string](p, `window.labCodeEditor.getLine(0)`))
	}
	p.do("Esc, Tab", chromedp.KeyEvent(kb.Escape), chromedp.KeyEvent(kb.Tab))
	if got := evalJS[string](p, `document.activeElement.id`); got != "code-check" {
		t.Errorf("after Esc then Tab the focus is on %q, want code-check", got)
	}
	p.do("back in, Esc, Shift+Tab", chromedp.Evaluate[chromedp.Void](`window.labCodeEditor.focus()`), chromedp.KeyEvent(kb.Escape),
		chromedp.KeyEvent(kb.Tab, chromedp.KeyModifiers(chromedp.ModifierShift)))
	if evalJS[bool](p, `document.activeElement.closest(".CodeMirror") !== null`) {
		t.Error("after Esc then Shift+Tab the focus is still in the editor")
	}

	// A reload keeps the draft and the open panel.
	p.do("reload", chromedp.Reload())
	waitJS(p, "the editor after a reload", `!!window.labCodeEditor`)
	if !evalJS[bool](p, `/ typed here +$/.test(window.labCodeEditor.getLine(0))`) {
		t.Errorf("after a reload the first line is %q", evalJS[string](p, `window.labCodeEditor.getLine(0)`))
	}

	// Reset asks; Keep keeps, Replace brings the skeleton back.
	p.do("reset, keep", chromedp.Click(chromedp.ID("code-reset")))
	waitJS(p, "the question", `document.getElementById("code-reset-dialog").open`)
	p.do("keep", chromedp.Click(chromedp.ID("code-reset-no")))
	if evalJS[string](p, `window.labCodeEditor.getValue()`) == skeleton {
		t.Error("Keep my code reset the code")
	}
	p.do("reset, replace", chromedp.Click(chromedp.ID("code-reset")), chromedp.Click(chromedp.ID("code-reset-yes")))
	if evalJS[string](p, `window.labCodeEditor.getValue()`) != skeleton {
		t.Error("Replace did not bring the skeleton back")
	}

	p.do("phone viewport", chromedp.EmulateViewport(360, 740, chromedp.EmulateMobile))
	if w := evalJS[int](p, `document.scrollingElement.scrollWidth`); w > 360 {
		t.Errorf("with the code panel open, scrollWidth = %d at 360 px", w)
	}
}

// TestBrowserCodeCheck: a student checks a module that lets a deadline
// overwrite a result; the page shows the failure step by step with the
// differing step highlighted and the failure drawn, and the teacher's board
// says what fails; the fixed module passes, and the board says so. A
// syntax error marks its line in the editor.
func TestBrowserCodeCheck(t *testing.T) {
	base := startLabWith(t, server.Config{InstructorToken: testToken})
	student := newBrowser(t)
	id := student.open(base + "/").Session
	student.do("name", chromedp.SetValue(chromedp.ID("name"), "Ada"), chromedp.Click(chromedp.ID("set-name")))
	openCodePanel(student)
	chooseLanguage(student, "javascript")

	// A syntax error: its line is marked.
	setCode(student, "export function begin(runId, callId) {\n  return {\n}\nexport function view(c) { return c }\n")
	student.do("check", chromedp.Click(chromedp.ID("code-check")))
	waitChecked(student, "the syntax error", `document.getElementById("code").dataset.status === "error" && !document.getElementById("code-error").hidden`)
	if n := evalJS[int](student, `document.querySelectorAll("#code-editor .code-error-line").length`); n != 1 {
		t.Errorf("%d lines marked for a syntax error, want 1", n)
	}

	setCode(student, jsModule(t, "wrong/deadline-over-result.js"))
	student.do("check the wrong module", chromedp.Click(chromedp.ID("code-check")))
	waitChecked(student, "the failure", `document.getElementById("code").dataset.status === "failed" && !document.getElementById("code-failure").hidden`)
	if got := evalJS[string](student, `document.getElementById("code-property").textContent`); !strings.Contains(got, "a deadline overwrites a result") {
		t.Errorf("the failure in words: %q", got)
	}
	step := evalJS[int](student, `Number(document.querySelector("#code-steps tr.code-differs")?.dataset.step ?? -1)`)
	if rows := evalJS[int](student, `document.querySelectorAll("#code-steps tr").length`); step < 0 || step >= rows || rows > 8 {
		t.Errorf("the failing step is %d of %d rows", step, rows)
	}
	if !evalJS[bool](student, `document.querySelector("#code-steps tr.code-differs").getAttribute("aria-current") === "step" && document.querySelectorAll("#code-diff mark").length > 0`) {
		t.Error("the differing step is not highlighted, or nothing in it is marked")
	}
	waitJS(student, "the failure drawn", `document.querySelector("#code-failure-svg > svg") !== null`)

	teacher := student.newTab("teacher")
	teacher.openConsole(base, id)
	waitJS(teacher, "the board says the program fails", `(() => {
		const tr = document.querySelector('#progress-body tr[data-session="`+id+`"]');
		return tr && tr.querySelector(".code-status").textContent === "failed" && tr.querySelector(".code-property").textContent === "a deadline overwrites a result";
	})()`)
	if got := evalJS[string](teacher, `document.getElementById("code-groups").textContent`); got != "1 of 1 program: a deadline overwrites a result" {
		t.Errorf("the class's summary: %q", got)
	}
	if got := evalJS[string](teacher, `document.getElementById("code-class-compile").textContent`); !strings.HasPrefix(got, "Situations the class gets wrong: a deadline after a result (1 of 1)") {
		t.Errorf("the situations the class gets wrong: %q", got)
	}

	setCode(student, jsModule(t, "correct.js"))
	student.do("check the fixed module", chromedp.Click(chromedp.ID("code-check")))
	waitChecked(student, "the pass", `document.getElementById("code").dataset.status === "passed" && document.getElementById("code-failure").hidden`)
	// What the check covered: every situation of the lesson, each right.
	if got := evalJS[string](student, `document.getElementById("code-coverage-summary").textContent`); !strings.HasPrefix(got, "Checked ") || !strings.Contains(got, "every sequence of up to") || strings.Contains(got, "wrong:") ||
		evalJS[int](student, `document.querySelectorAll("#code-coverage > li.passed").length`) < 16 {
		t.Fatalf("the coverage of a passing module: %q", got)
	}
	if got := evalJS[string](student, `document.getElementById("code-status").textContent`); !strings.HasPrefix(got, "Submission 3: passed: ") {
		t.Errorf("the status says %q", got)
	}
	waitJS(teacher, "the board says the program passes", `(() => {
		const tr = document.querySelector('#progress-body tr[data-session="`+id+`"]');
		return tr && tr.querySelector(".code-status").textContent === "passed" && tr.querySelector(".code-subs").textContent === "3" && tr.querySelector(".code-property").textContent === "";
	})()`)
	if got := evalJS[string](teacher, `document.getElementById("code-class-lead").textContent`); got != "1 of 1 student has checked a program; 1 of 1 pass every case." {
		t.Errorf("the class's summary: %q", got)
	}

	// The teacher's own case: a stale reply after a new run, into the
	// session shown; the correct program passes it.
	teacher.do("watch Ada", chromedp.Click(chromedp.CSS(`#overview-body button.watch[data-session="`+id+`"]`)))
	teacher.do("add a case", chromedp.SetValue(chromedp.ID("case-target"), "watched"), chromedp.SetValue(chromedp.ID("case-name"), "my stale reply"),
		chromedp.Click(chromedp.ID("add-case")))
	waitChecked(teacher, "who passes it", `document.querySelector("#case-results > li")?.textContent === "Ada: passes"`)
	waitJS(student, "the instructor's case on the student's page", `document.getElementById("code-own").textContent.includes("my stale reply: passes")`)
}

// TestBrowserCodeScreenshots writes docs/code.png (1280 px), docs/code-360.png
// and docs/code-console.png (LAB_SCREENSHOT=1): the student's panel with a
// failure, and the console's board. It asserts nothing beyond the other
// tests; it only draws.
func TestBrowserCodeScreenshots(t *testing.T) {
	if os.Getenv("LAB_SCREENSHOT") != "1" {
		t.Skip("set LAB_SCREENSHOT=1 to write docs/code.png, docs/code-360.png and docs/code-console.png")
	}
	base := startLabWith(t, server.Config{InstructorToken: testToken})
	student := newBrowser(t)
	id := student.open(base + "/").Session
	student.do("name", chromedp.SetValue(chromedp.ID("name"), "Ada"), chromedp.Click(chromedp.ID("set-name")))
	openCodePanel(student)
	chooseLanguage(student, "javascript")
	setCode(student, jsModule(t, "wrong/deadline-over-result.js"))
	student.do("check", chromedp.Click(chromedp.ID("code-check")))
	waitJS(student, "the failure drawn", `document.querySelector("#code-failure-svg > svg") !== null`)
	for _, name := range []string{"Bob", "Chen"} {
		other := student.newPrivateTab(name)
		other.open(base + "/")
		other.do("name", chromedp.SetValue(chromedp.ID("name"), name), chromedp.Click(chromedp.ID("set-name")))
		openCodePanel(other)
		chooseLanguage(other, "javascript")
		module := "correct.js"
		if name == "Chen" {
			module = "wrong/run-id-only.js"
		}
		setCode(other, jsModule(t, module))
		other.do("check", chromedp.Click(chromedp.ID("code-check")))
		waitChecked(other, "the result", `["passed", "failed"].includes(document.getElementById("code").dataset.status)`)
	}
	teacher := student.newTab("teacher")
	teacher.openConsole(base, id)
	waitChecked(teacher, "three programs", `document.querySelectorAll("#progress-body td.code-status[data-status]:not([data-status=''])").length === 3`)

	shoot := func(p *tab, file string, w, h int64, scroll string, mobile bool) {
		t.Helper()
		viewport := chromedp.EmulateViewport(w, h)
		if mobile {
			viewport = chromedp.EmulateViewport(w, h, chromedp.EmulateMobile)
		}
		p.do("frame "+file, viewport,
			chromedp.Evaluate[chromedp.Void](`document.activeElement?.blur(); `+scroll),
			chromedp.MouseEvent(chromedp.MouseMoved, 1, 1))
		png, err := chromedp.Run(p.ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		path := filepath.Join("..", "docs", file)
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", path)
	}
	shoot(student, "code.png", 1280, 1300, `document.getElementById("code-status").scrollIntoView()`, false)
	shoot(student, "code-360.png", 360, 1400, `document.getElementById("code-failure").scrollIntoView()`, true)
	shoot(teacher, "code-console.png", 1280, 1000, `document.getElementById("progress").scrollIntoView()`, false)
}
