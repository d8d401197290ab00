package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/toolcall-lab/lab/server"
)

// liveWait bounds the wait for what the compiler says while the student
// types: a pause of 300 ms, the compile, the answer, the marks. Issue 52
// asks for 1.5 s; that is a figure to measure (each wait logs its time),
// not a pass/fail bound: the live helpers run below everything else
// (SCHED_IDLE), and go test ./... runs other packages' sandboxes beside
// this one, so a timed bound would fail on a busy machine, not on a
// defect. What fails here is a mark or type that never comes.
const liveWait = 15 * time.Second

// waitLive waits liveWait for expr, saying how long it took.
func waitLive(p *tab, what, expr string) {
	p.t.Helper()
	started := time.Now()
	waitUntilWithin(p, liveWait, what, func(ctx context.Context) (bool, error) {
		return chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
	}, func(ok bool) bool { return ok })
	p.t.Logf("%s: %v", what, time.Since(started).Round(time.Millisecond))
}

// TestBrowserLive: the compiler speaks while the student types. Deleting
// the Rejected arm with the keyboard marks warning 8, naming Rejected, at
// view's switch without Check; undoing it clears the mark; resting the
// pointer on accept shows its type, and so does Ctrl+I; a JavaScript
// syntax error is marked live; and none of it is a submission.
func TestBrowserLive(t *testing.T) {
	base := startLabWith(t, server.Config{InstructorToken: testToken, ReScript: compilerIfAny(t)})
	p := newBrowser(t)
	p.open(base + "/")
	openCodePanel(p)
	skipWithoutReScript(t, p)
	chooseLanguage(p, "rescript")
	waitJS(p, "the ReScript skeleton", `window.labCodeEditor.getValue().includes("let view = (call: call): view =>")`)
	waitJS(p, "the skeleton compiled as it came", `document.getElementById("code").dataset.live === "0" && document.getElementById("code-live-note").textContent === "As you type: the compiler says nothing."`)
	if got := evalJS[string](p, `document.getElementById("code-keys").textContent`); !strings.Contains(got, "Ctrl+I") || !strings.Contains(got, "resting the pointer") {
		t.Errorf("the keyboard help: %q", got)
	}

	// Delete the Rejected arm by the keyboard: the cursor at its start,
	// Shift+Down, Backspace.
	arm := evalJS[int](p, `window.labCodeEditor.getValue().split("\n").findIndex((l) => l.trim() === '| Rejected(reason) => ("Rejected", reason)')`)
	if arm < 0 {
		t.Fatal("no Rejected arm in the skeleton")
	}
	switchLine := evalJS[int](p, `window.labCodeEditor.getValue().split("\n").findIndex((l) => l.includes("switch call.status")) + 1`)
	p.do("the cursor at the Rejected arm", chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`window.labCodeEditor.focus(); window.labCodeEditor.setCursor({ line: %d, ch: 0 })`, arm)))
	p.do("Shift+Down, Backspace", chromedp.KeyEvent(kb.ArrowDown, chromedp.KeyModifiers(chromedp.ModifierShift)), chromedp.KeyEvent(kb.Backspace))
	if strings.Contains(evalJS[string](p, `window.labCodeEditor.getValue()`), `| Rejected(reason) => ("Rejected", reason)`) {
		t.Fatal("the arm is still there")
	}
	waitLive(p, "warning 8 marked at the switch, without Check", fmt.Sprintf(`(() => {
		const marks = window.labCodeEditor.getAllMarks().filter((m) => m.className === "code-diag-error");
		const item = document.querySelector("#code-diagnostic-list button");
		return marks.length === 1 && marks[0].find().from.line + 1 === %d && item !== null && item.textContent.includes("Warning 8 (error)") && item.textContent.includes("Rejected") && !document.getElementById("code-diagnostics").hidden;
	})()`, switchLine))
	if got := evalJS[string](p, `document.getElementById("code-diagnostics-heading").textContent`); got != "Compiler errors: 1 problem, as you type" {
		t.Errorf("the list's heading: %q", got)
	}
	p.do("Ctrl+Z", chromedp.KeyEvent("z", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	waitLive(p, "the mark cleared by the undo", `window.labCodeEditor.getAllMarks().filter((m) => m.className === "code-diag-error").length === 0 && document.getElementById("code-diagnostics").hidden`)

	// Types: the lesson's module, the pointer resting on accept.
	setCode(p, lessonToolCall)
	waitJS(p, "the lesson's module compiled", `document.getElementById("code-live-note").textContent === "As you type: the compiler says nothing." && window.labCodeEditor.getAllMarks().length === 0`)
	line := evalJS[int](p, `(() => {
		const cm = window.labCodeEditor;
		const line = cm.getValue().split("\n").findIndex((l) => l.startsWith("let accept"));
		cm.scrollIntoView({ line, ch: 0 }, 80);
		return line;
	})()`)
	x := evalJS[float64](p, fmt.Sprintf(`window.labCodeEditor.charCoords({ line: %d, ch: 6 }, "window").left + 2`, line))
	y := evalJS[float64](p, fmt.Sprintf(`(() => { const c = window.labCodeEditor.charCoords({ line: %d, ch: 6 }, "window"); return (c.top + c.bottom) / 2; })()`, line))
	p.do("the pointer on accept", chromedp.MouseEvent(chromedp.MouseMoved, x, y))
	waitLive(p, "accept's type in a tooltip", `!document.getElementById("code-type-tip").hidden && document.getElementById("code-type-tip").textContent === "accept: (call, reply) => update"`)
	p.do("the pointer away", chromedp.MouseEvent(chromedp.MouseMoved, 1, 1))
	waitJS(p, "the tooltip gone", `document.getElementById("code-type-tip").hidden`)
	p.do("the cursor in output, Ctrl+I", chromedp.Evaluate[chromedp.Void](`(() => {
		const cm = window.labCodeEditor;
		const line = cm.getValue().split("\n").findIndex((l) => l.includes("| Ok(output) =>"));
		cm.focus();
		cm.setCursor({ line, ch: cm.getLine(line).indexOf("output") + 2 });
	})()`), chromedp.KeyEvent("i", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	waitLive(p, "output's type by the keyboard", `!document.getElementById("code-type-tip").hidden && document.getElementById("code-type-tip").textContent === "output: string"`)

	// JavaScript: a syntax error marked live.
	chooseLanguage(p, "javascript")
	setCode(p, "export function begin(runId, callId) {\n  return {call: , notice: \"\"}\n}\n")
	waitLive(p, "a JavaScript syntax error marked", `(() => {
		const marks = window.labCodeEditor.getAllMarks().filter((m) => m.className === "code-diag-error");
		return marks.length === 1 && marks[0].find().from.line === 1 && document.querySelector("#code-diagnostic-list button")?.textContent.startsWith("Line 2, column 17: Error: ");
	})()`)

	// None of it was a submission.
	if got := evalJS[string](p, `document.getElementById("code-status").textContent`); got != "Not checked yet." {
		t.Errorf("the status after typing: %q (a live compile must not be a submission)", got)
	}
	if got := evalJS[string](p, `document.getElementById("code").dataset.status ?? ""`); got != "" {
		t.Errorf("the check's status after typing: %q", got)
	}
}
