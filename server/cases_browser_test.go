package server_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/toolcall-lab/lab/server"
)

// stepShownJS says whether the failure view shows step i side by side
// (the model's side and the module's), and whether the two differ there:
// the differing values marked, none marked where they agree.
func stepShownJS(i int, differs bool) string {
	return fmt.Sprintf(`(() => {
		const d = document.getElementById("code-diff");
		const b = document.querySelector('#code-steps button[data-step="%[1]d"]');
		const marks = d.querySelectorAll("mark").length;
		return d.dataset.step === "%[1]d" && d.dataset.differs === "%[2]t" && b?.getAttribute("aria-pressed") === "true" &&
			b.closest("tr").getAttribute("aria-current") === "step" &&
			d.textContent.includes("The lab's model") && d.textContent.includes("Your module") &&
			d.querySelectorAll(".code-field").length === 8 && (%[2]t ? marks > 0 : marks === 0);
	})()`, i, differs)
}

// branchRowsJS says whether the failure view shows a trace of n steps that
// first differ at step differ (0-based; -1: they agree throughout).
func branchRowsJS(n, differ int) string {
	return fmt.Sprintf(`(() => {
		const rows = document.querySelectorAll("#code-steps > tr");
		const first = document.querySelector("#code-steps > tr.code-differs");
		return document.getElementById("code-branch").dataset.busy === "false" && rows.length === %d &&
			(%d < 0 ? first === null : first?.dataset.step === "%d");
	})()`, n, differ, differ)
}

// TestBrowserStepThrough: a student's wrong module (a deadline overwrites a
// result) fails; they select each step of the failure, with the keyboard
// and the pointer, and see both sides at it, the failing step's values
// marked and the step marked in the drawing; they branch from step 1 with
// another delivery and see where the two differ; they keep the branch as
// their own case, which their program fails; and they play it in the lab,
// where its messages are held for them to deliver.
func TestBrowserStepThrough(t *testing.T) {
	base := startLab(t)
	p := newBrowser(t)
	p.do("a wide window", chromedp.EmulateViewport(1280, 900))
	p.open(base + "/")
	openCodePanel(p)
	setCode(p, jsModule(t, "wrong/deadline-over-result.js"))
	p.do("check", chromedp.Click(chromedp.ID("code-check")))
	// The shrunk failure: queue a deadline, queue a completion, deliver
	// the completion, deliver the deadline (which must be ignored).
	waitChecked(p, "the failure, four steps", `document.getElementById("code").dataset.status === "failed" && document.querySelectorAll("#code-steps button.code-step-button").length === 4`)
	if !evalJS[bool](p, stepShownJS(3, true)) {
		t.Fatalf("the failing step is not the one shown at first: %s", evalJS[string](p, `document.getElementById("code-diff").textContent`))
	}
	waitJS(p, "the failing step marked in the drawing", `document.querySelector('#code-failure-svg g.code-step-selected[data-step="3"] rect.code-step-box') !== null`)

	// The keyboard: Enter on step 1, then the arrows, End and Home.
	p.do("Enter on step 1", chromedp.Focus(chromedp.CSS(`#code-steps button[data-step="0"]`)), chromedp.KeyEvent(kb.Enter))
	waitJS(p, "step 1 side by side", stepShownJS(0, false))
	for _, k := range []struct {
		key  string
		step int
	}{{kb.ArrowDown, 1}, {kb.ArrowDown, 2}, {kb.End, 3}, {kb.ArrowUp, 2}, {kb.Home, 0}} {
		p.do("a key", chromedp.KeyEvent(k.key))
		waitJS(p, fmt.Sprintf("step %d by the keyboard", k.step+1), stepShownJS(k.step, k.step == 3))
		if got := evalJS[string](p, `document.activeElement.dataset.step ?? ""`); got != fmt.Sprint(k.step) {
			t.Errorf("after a key the focus is on step %q, want %d", got, k.step)
		}
	}
	// The pointer: every step.
	for i := range 4 {
		p.do("click a step", chromedp.Click(chromedp.CSS(fmt.Sprintf(`#code-steps button[data-step="%d"]`, i))))
		waitJS(p, fmt.Sprintf("step %d by the pointer", i+1), stepShownJS(i, i == 3))
		waitJS(p, "the step marked in the drawing", fmt.Sprintf(`document.querySelectorAll("#code-failure-svg g.code-step-selected").length > 0 &&
			[...document.querySelectorAll("#code-failure-svg g.code-step-selected")].every((g) => g.dataset.step === "%d")`, i))
	}
	// The failing step's values: the model ignores the deadline, the
	// module lets it make the call Unresolved.
	if got := evalJS[string](p, `[...document.querySelectorAll("#code-diff mark")].map((m) => m.textContent).join(" | ")`); !strings.Contains(got, `"Unresolved"`) || !strings.Contains(got, `"Completed"`) {
		t.Errorf("the marked values at the failing step: %s", got)
	}
	if got := evalJS[string](p, `document.getElementById("code-diff").textContent`); !strings.Contains(got, "a deadline overwrites a result") {
		t.Errorf("the failing step does not say the property: %s", got)
	}

	// A branch from step 1: the deadline delivered at once (both go
	// Unresolved), then a completion queued and delivered (both resolve),
	// then the deadline again: the model ignores it, the module does not.
	p.do("step 1", chromedp.Click(chromedp.CSS(`#code-steps button[data-step="0"]`)))
	waitJS(p, "step 1 shown", stepShownJS(0, false))
	if got := evalJS[string](p, `document.getElementById("code-branch-title").textContent`); got != "Branch after step 1" {
		t.Errorf("the branch's title: %q", got)
	}
	p.do("deliver message 1 after step 1", chromedp.Click(chromedp.CSS(`#code-branch-deliver button[data-message="1"]`)))
	waitJS(p, "a branch of two steps that agree", branchRowsJS(2, -1))
	waitJS(p, "its new step shown", stepShownJS(1, false))
	if !evalJS[bool](p, `!document.getElementById("code-branch-back").hidden && document.getElementById("code-branch-keep").hidden`) {
		t.Error("a branch that agrees shows no way back, or offers to keep it")
	}
	p.do("queue a completion", chromedp.SetValue(chromedp.ID("code-branch-kind"), "current"), chromedp.Click(chromedp.ID("code-branch-reply")))
	waitJS(p, "three steps", branchRowsJS(3, -1))
	p.do("deliver it", chromedp.Click(chromedp.CSS(`#code-branch-deliver button[data-message="2"]`)))
	waitJS(p, "four steps", branchRowsJS(4, -1))
	p.do("deliver the deadline again", chromedp.Click(chromedp.CSS(`#code-branch-deliver button[data-message="1"]`)))
	waitJS(p, "five steps that differ at the last", branchRowsJS(5, 4))
	waitJS(p, "the differing step shown", stepShownJS(4, true))
	if got := evalJS[string](p, `document.getElementById("code-branch-status").textContent`); !strings.Contains(got, "They first differ at step 5") {
		t.Errorf("the branch's status: %q", got)
	}
	// From a step of the branch: step 2 there shows the branch's step.
	p.do("step 2 of the branch", chromedp.Click(chromedp.CSS(`#code-steps button[data-step="1"]`)))
	waitJS(p, "step 2 of the branch shown", stepShownJS(1, false))
	p.do("back to step 5", chromedp.Click(chromedp.CSS(`#code-steps button[data-step="4"]`)))
	waitJS(p, "step 5 of the branch shown", stepShownJS(4, true))

	// Kept as the student's own case: asked for a name first.
	p.do("keep it", chromedp.Click(chromedp.ID("code-branch-keep")))
	waitJS(p, "the name asked", `!document.getElementById("code-keep-form").hidden && document.activeElement.id === "code-keep-name"`)
	if got := evalJS[string](p, `document.getElementById("code-keep-name").value`); got != "a deadline overwrites a result" {
		t.Errorf("the name offered: %q", got)
	}
	p.do("name it and keep it", chromedp.SetValue(chromedp.ID("code-keep-name"), "my deadline after the result"), chromedp.Click(chromedp.ID("code-keep-yes")))
	waitChecked(p, "the case among the student's own, failing", `document.getElementById("code-own").textContent.includes("my deadline after the result: fails") && document.getElementById("code").dataset.status === "failed"`)
	waitJS(p, "the branch still shown after the check", branchRowsJS(5, 4))

	// Played in the lab: a new run, the branch's two messages held.
	p.do("play it in the lab", chromedp.Click(chromedp.ID("code-branch-lab")))
	v := p.waitView("the case's messages held", func(v pageView) bool { return len(v.Queue) == 2 && v.RunID == "run-2" })
	if v.Queue[0].Label != "Message 1: Deadline for run-2/lookup" || !strings.HasPrefix(v.Queue[1].Label, `Message 2: {"runId":"run-1"`) || len(v.Receipts) != 0 {
		t.Errorf("the lab after playing the case:\n%s", v)
	}
	if got := evalJS[string](p, `document.getElementById("code-branch-lab-said").textContent`); !strings.Contains(got, "messages 1 to 2") || !strings.Contains(got, "messages 1, then 2, then 1") {
		t.Errorf("the page says: %q", got)
	}
	if v.Focus != "held-heading" {
		t.Errorf("after playing the case the focus is on %q", v.Focus)
	}

	// On a phone the page does not scroll sideways: the steps scroll in
	// their own box.
	p.do("a phone", chromedp.EmulateViewport(360, 740, chromedp.EmulateMobile), chromedp.Evaluate[chromedp.Void](`document.getElementById("code-diff").scrollIntoView()`))
	if w := evalJS[int](p, `document.scrollingElement.scrollWidth`); w > 360 {
		t.Errorf("with a branch shown, scrollWidth = %d at 360 px", w)
	}
	if w := evalJS[int](p, `Math.max(...[...document.querySelectorAll("#code-branch, #code-diff, #code-branch *")].map((e) => Math.ceil(e.getBoundingClientRect().right)))`); w > 360 {
		t.Errorf("the branch's tools reach %d px at 360 px", w)
	}
}

// TestBrowserCasesConsole: the teacher clicks through a demonstration in a
// lab page of their own (queue a deadline, start a new run, deliver the old
// deadline), shows that session in the open lab's console and uses it as a
// code case of a class of two; the list says "passes 1 of 2" once the
// students' programs are checked again (one right, one that lets any
// deadline expire the call). On the class's console they keep the wrong
// program's failure as a case, and remove the first case (asked first).
func TestBrowserCasesConsole(t *testing.T) {
	lab := startServer(t, server.Config{InstructorToken: testToken})
	ts := httptest.NewServer(lab.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(func() { stopLab(t, lab) })
	cl := createClass(t, ts, "Distributed systems")
	ada := joinedSession(t, ts, "127.0.0.2", cl.Code, "Ada")
	bob := joinedSession(t, ts, "127.0.0.3", cl.Code, "Bob")
	lesson := testdata(t, "ToolCall.res.js")
	anyDeadline := strings.Replace(lesson, "function expire(call, runId, callId) {\n  if (!sameKey(", "function expire(call, runId, callId) {\n  if (false && !sameKey(", 1)
	if anyDeadline == lesson {
		t.Fatal("no guard to drop in expire")
	}
	right, _ := dial(t, ts, ada)
	right.submit(lesson, 1)
	wrong, _ := dial(t, ts, bob)
	wrong.submit(anyDeadline, 1)

	// The demonstration, in the teacher's own practice session. Two
	// rounds of checks of the class's programs take a while on a small
	// machine.
	p := newBrowserWithin(t, 2*browserTestTimeout)
	p.do("a wide window", chromedp.EmulateViewport(1280, 900))
	demo := p.open(ts.URL + "/").Session
	l := newLab(p)
	l.queueDeadline("queue a deadline")
	l.start("start a new run")
	l.deliver("deliver the old deadline", 1, seedDeadlineCall, "Pending", "")

	teacher := p.newTab("console")
	teacher.do("a wide window", chromedp.EmulateViewport(1280, 900))
	loginTab(teacher, ts.URL)
	waitJS(teacher, "the practice session listed", `document.querySelector('#overview-body button.watch[data-session="`+demo+`"]') !== null`)
	teacher.do("show it", chromedp.Click(chromedp.CSS(`#overview-body button.watch[data-session="`+demo+`"]`)))
	waitJS(teacher, "Use as a code case, with its two runs and the class as a target", `!document.getElementById("use-case-box").hidden &&
		[...document.getElementById("use-run").options].map((o) => o.value).join() === "run-1,run-2" &&
		document.querySelector('#use-target option[value="class:`+cl.ID+`"]') !== null`)
	teacher.do("use it as a case of the class",
		chromedp.SetValue(chromedp.ID("use-name"), "an old deadline"),
		chromedp.SetValue(chromedp.ID("use-target"), "class:"+cl.ID),
		chromedp.Click(chromedp.ID("use-case")))
	waitJS(teacher, "added in both", `document.getElementById("use-summary").textContent.startsWith("Case “an old deadline” added in 2 of 2 sessions") && document.querySelectorAll("#use-results > li").length === 2`)
	oldDeadline := `#case-list > li[data-case="an old deadline"]`
	waitChecked(teacher, "passes 1 of 2", `document.querySelector('`+oldDeadline+` .case-passes')?.textContent === "passes 1 of 2"`)
	if got := evalJS[string](teacher, `[...document.querySelectorAll('`+oldDeadline+` .case-words > li')].map((li) => li.textContent).join("; ")`); got != "queue a deadline; start a new run; deliver message 1" {
		t.Errorf("the case in words: %q", got)
	}
	if got := evalJS[string](teacher, `document.querySelector('`+oldDeadline+` .meta').textContent`); !strings.HasPrefix(got, "Added by the instructor at ") {
		t.Errorf("who added it: %q", got)
	}

	// The class's console: Bob's failure kept as a case of the class.
	teacher.do("the class's console", chromedp.Navigate(ts.URL+"/instructor/classes/"+cl.ID))
	waitJS(teacher, "the class and its case", `document.getElementById("connection").textContent === "Connected" &&
		document.querySelectorAll("#overview-body > tr").length === 2 && document.querySelector('`+oldDeadline+`') !== null`)
	teacher.do("show Bob", chromedp.Click(chromedp.CSS(`#overview-body button.watch[data-session="`+bob+`"]`)))
	waitJS(teacher, "Bob's failure", `!document.getElementById("keep-box").hidden && document.getElementById("keep-text").textContent.startsWith("Bob's program fails")`)
	teacher.do("keep it", chromedp.Click(chromedp.ID("keep-open")))
	waitJS(teacher, "the name asked", `!document.getElementById("keep-form").hidden && document.activeElement.id === "keep-name" && document.getElementById("keep-name").value !== ""`)
	teacher.do("name it", chromedp.SetValue(chromedp.ID("keep-name"), "Bob's mistake"), chromedp.Click(chromedp.ID("keep-yes")))
	waitJS(teacher, "kept in both", `document.getElementById("keep-summary").textContent.startsWith("Case “Bob's mistake” added in 2 of 2 sessions")`)
	mistake := `#case-list > li[data-case="Bob's mistake"]`
	waitChecked(teacher, "Bob's mistake: passes 1 of 2", `document.querySelector('`+strings.ReplaceAll(mistake, "'", `\'`)+` .case-passes')?.textContent === "passes 1 of 2"`)

	// Removing asks first: Keep it keeps it; Remove the case removes it.
	teacher.do("remove, keep it", chromedp.Click(chromedp.CSS(oldDeadline+` button.case-remove`)))
	waitJS(teacher, "the question", `document.getElementById("case-remove-dialog").open && document.getElementById("case-remove-text").textContent.includes("an old deadline")`)
	teacher.do("keep it", chromedp.Click(chromedp.ID("case-remove-no")))
	waitJS(teacher, "still listed", `!document.getElementById("case-remove-dialog").open && document.querySelectorAll("#case-list > li").length === 2`)
	teacher.do("remove, yes", chromedp.Click(chromedp.CSS(oldDeadline+` button.case-remove`)), chromedp.Click(chromedp.ID("case-remove-yes")))
	waitJS(teacher, "removed", `document.getElementById("case-list-status").textContent === "Removed “an old deadline” from 2 sessions; their latest programs are checked again." &&
		[...document.querySelectorAll("#case-list > li")].map((li) => li.dataset.case).join() === "Bob's mistake"`)

	teacher.do("a phone", chromedp.EmulateViewport(360, 740, chromedp.EmulateMobile), chromedp.Click(chromedp.ID("keep-open")))
	if w := evalJS[int](teacher, `document.scrollingElement.scrollWidth`); w > 360 {
		t.Errorf("the console with its case tools: scrollWidth = %d at 360 px", w)
	}
}
