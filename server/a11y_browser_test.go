package server_test

import (
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/toolcall-lab/lab/server"
)

// TestBrowserAccessibilityEveryPage runs axe-core on every page, in its
// empty state and its busy one, at 360 and 1280 px (and 1920 px for the
// projector): the student page, the open lab's console, the class list, a
// class's console, the projector, the join page and the login form.
func TestBrowserAccessibilityEveryPage(t *testing.T) {
	src := axeSource(t)
	lab := startServer(t, server.Config{InstructorToken: testToken, ReScript: compilerIfAny(t)})
	ts := httptest.NewServer(lab.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(func() { stopLab(t, lab) })

	// The pages in all their states take longer than one browser test's
	// usual budget on a small machine.
	p := newBrowserWithin(t, 3*browserTestTimeout)
	widths := func(p *tab, what string, ready string, ws ...int64) {
		t.Helper()
		for _, w := range ws {
			h := int64(800)
			if w == 360 {
				h = 740
			} else if w == 1920 {
				h = 1080
			}
			vp := chromedp.EmulateViewport(w, h)
			if w == 360 {
				vp = chromedp.EmulateViewport(w, h, chromedp.EmulateMobile)
			}
			p.do(fmt.Sprintf("%s at %d px", what, w), vp)
			if ready != "" {
				waitJS(p, what, ready)
			}
			axeCheck(p, src, fmt.Sprintf("%s at %d px", what, w))
		}
	}
	consoleReady := `document.getElementById("connection").textContent === "Connected"`

	// Empty: nothing made yet.
	p.do("the login form", chromedp.Navigate(ts.URL+"/instructor/login"))
	widths(p, "login form, empty", "", 360, 1280)
	p.do("a failed login", chromedp.Navigate(ts.URL+"/instructor/login?failed"))
	widths(p, "login form, failed", `!document.getElementById("failed").hidden`, 360, 1280)
	loginTab(p, ts.URL)
	widths(p, "open-lab console and class list, empty", consoleReady+` && !document.getElementById("classes").hidden`, 360, 1280)
	cl := createClass(t, ts, "Monday 10:00")
	p.do("a class just made", chromedp.Navigate(ts.URL+"/instructor/classes/"+cl.ID))
	widths(p, "class console, no student", consoleReady, 360, 1280)
	p.do("its projector", chromedp.Navigate(ts.URL+"/instructor/classes/"+cl.ID+"/projector"))
	widths(p, "projector, no student", `document.getElementById("code").textContent !== ""`, 360, 1280, 1920)

	student := p.newPrivateTab("student")
	student.do("the join page", chromedp.Navigate(ts.URL+"/join"))
	widths(student, "join page, empty", "", 360, 1280)
	student.do("the name form", chromedp.Navigate(ts.URL+"/j/"+cl.Code))
	widths(student, "join page, the name form", `document.getElementById("name") !== null`, 360, 1280)

	// Busy: students with work, a watched session, names on the projector.
	var ada string
	for i, name := range []string{"Ada", "Bob", "Chen", "Dana", "Eli"} {
		id := joinedSession(t, ts, fmt.Sprintf("127.0.0.%d", i+2), cl.Code, name)
		if i == 0 {
			ada = id
		}
	}
	createClass(t, ts, "Tuesday 14:00")
	student.do("Ada's page", chromedp.Navigate(ts.URL+"/lab/"+ada))
	student.waitView("Ada's page", func(v pageView) bool { return v.Connection == "Connected" && v.RunID != "" })
	l := newLab(student)
	l.queueOutput("step 1", "Old answer")
	l.start("step 2")
	l.queueTyped("broken JSON", `{`)
	l.queueDeadline("a deadline")
	l.deliver("deliver the deadline", 3, seedUnresolved, "Unresolved", seedUnresolvedDetail)
	student.typeReply(`{"runId":`)
	widths(student, "student page, busy", "", 360, 1280)
	// Write the client: the panel open with the skeleton, then with a failure.
	openCodePanel(student)
	chooseLanguage(student, "javascript")
	widths(student, "student page, code panel open, not checked", "", 360, 1280)
	setCode(student, jsModule(t, "wrong/deadline-over-result.js"))
	student.do("check a wrong module", chromedp.Click(chromedp.ID("code-check")))
	waitChecked(student, "the failure", `document.getElementById("code").dataset.status === "failed"`)
	widths(student, "student page, code panel with a failure", `document.querySelector("#code-failure-svg > svg") !== null`, 360, 1280)
	// Its first step selected, then a branch from it that differs, with the
	// name of the case asked for.
	student.do("select step 1", chromedp.Click(chromedp.CSS(`#code-steps button[data-step="0"]`)))
	waitJS(student, "step 1 side by side", `document.getElementById("code-diff").dataset.step === "0" && document.getElementById("code-diff").dataset.differs === "false"`)
	student.do("branch: deliver the deadline", chromedp.Click(chromedp.CSS(`#code-branch-deliver button[data-message="1"]`)))
	waitJS(student, "a branch of two steps", `document.querySelectorAll("#code-steps > tr").length === 2 && document.getElementById("code-branch").dataset.busy === "false"`)
	student.do("queue a completion", chromedp.SetValue(chromedp.ID("code-branch-kind"), "current"), chromedp.Click(chromedp.ID("code-branch-reply")))
	waitJS(student, "three steps", `document.querySelectorAll("#code-steps > tr").length === 3 && document.getElementById("code-branch").dataset.busy === "false"`)
	student.do("deliver it", chromedp.Click(chromedp.CSS(`#code-branch-deliver button[data-message="2"]`)))
	waitJS(student, "four steps", `document.querySelectorAll("#code-steps > tr").length === 4 && document.getElementById("code-branch").dataset.busy === "false"`)
	student.do("the deadline again", chromedp.Click(chromedp.CSS(`#code-branch-deliver button[data-message="1"]`)))
	waitJS(student, "a branch that differs", `document.querySelectorAll("#code-steps > tr.code-differs").length === 1 && !document.getElementById("code-branch-keep").hidden`)
	student.do("keep it: the name asked", chromedp.Click(chromedp.ID("code-branch-keep")), chromedp.SetValue(chromedp.ID("code-branch-kind"), "own"))
	widths(student, "student page, a failure's branch, a step selected", `!document.getElementById("code-keep-form").hidden && !document.querySelector(".code-branch-text").hidden`, 360, 1280)
	// In ReScript, a build the compiler refuses: its messages marked and
	// listed, the compiler tasks shown (when the lab compiles ReScript).
	if offersReScript(student) {
		chooseLanguage(student, "rescript")
		waitJS(student, "the ReScript skeleton", `window.labCodeEditor.getValue().includes("let view = (call: call): view =>")`)
		deleteRejectedArm(student)
		student.do("check without the Rejected arm", chromedp.Click(chromedp.ID("code-check")))
		waitChecked(student, "the refused build", `document.getElementById("code").dataset.status === "error" && !document.getElementById("code-diagnostics").hidden`)
		student.do("the first message", chromedp.Click(chromedp.CSS("#code-diagnostic-list button")))
		widths(student, "student page, ReScript panel with a refused build", `document.querySelectorAll("#code-editor .code-diag-error").length > 0`, 360, 1280)
		// Back to the failing JavaScript module, which the console's
		// case tools below keep as a case.
		chooseLanguage(student, "javascript")
		setCode(student, jsModule(t, "wrong/deadline-over-result.js"))
		student.do("check the wrong module again", chromedp.Click(chromedp.ID("code-check")))
		waitChecked(student, "the failure again", `document.getElementById("code").dataset.status === "failed"`)
	} else {
		t.Log("the lab offers no ReScript (GET /code.json): the ReScript panel is not checked here (TestBrowserCodeReScriptPanel checks it with a /code.json of its own)")
	}

	p.do("the class console", chromedp.Navigate(ts.URL+"/instructor/classes/"+cl.ID))
	waitJS(p, "five students", consoleReady+` && document.querySelectorAll("#overview-body > tr").length === 5`)
	p.inject("watch Ada and hold a stale reply", chromedp.Click(chromedp.CSS(`#overview-body button.watch[data-session="`+ada+`"]`)), "watched", "staleReply", "mode-hold")
	widths(p, "class console, busy", `document.querySelectorAll("#timeline-body > tr").length > 3 && document.querySelectorAll("#inject-results > li").length === 1`, 360, 1280)
	// The case tools: a case of the class in the list, Ada's failure about
	// to be kept, and the question before a removal.
	if status, _, body := call(t, ts, "POST", "/api/code/cases", testToken, "",
		`{"name":"an old deadline","frames":[{"type":"queueDeadline"},{"type":"start"},{"type":"deliver","message":1}],"class":"`+cl.ID+`"}`); status != 200 {
		t.Fatalf("a case for the class: %d %s", status, body)
	}
	// Ada's failure reaches the watching console after her page shows it
	// (and, with ReScript, after her refused build hid it for a while).
	waitJS(p, "Ada's failure in the console", `!document.getElementById("keep-box").hidden`)
	p.do("keep Ada's failure: the name asked", chromedp.Click(chromedp.ID("keep-open")))
	widths(p, "class console with the case tools and the list of cases", `document.querySelectorAll("#case-list > li").length === 1 && !document.getElementById("keep-form").hidden && !document.getElementById("use-case-box").hidden`, 360, 1280)
	p.do("remove: the question", chromedp.Click(chromedp.CSS(`#case-list > li button.case-remove`)))
	widths(p, "class console, the question before a removal", `document.getElementById("case-remove-dialog").open`, 360, 1280)
	p.do("keep it", chromedp.Click(chromedp.ID("case-remove-no")))
	student.waitView("the instructor's note", func(v pageView) bool { return v.Note != "" })
	widths(student, "student page with an instructor's note", "", 360, 1280)

	p.do("the class list", chromedp.Navigate(ts.URL+"/instructor"))
	widths(p, "open-lab console and class list, busy", consoleReady+` && document.querySelectorAll("#class-list > li").length === 2`, 360, 1280)
	p.do("the projector", chromedp.Navigate(ts.URL+"/instructor/classes/"+cl.ID+"/projector"), chromedp.Click(chromedp.ID("toggle-names")))
	widths(p, "projector with names", `document.querySelectorAll("#names > li").length === 5`, 360, 1280, 1920)
}

// TestBrowserClassWideInjectionAndProjectorNames: watching a student makes
// Inject target them; a class-wide injection asks first, with the count of
// sessions, and Cancel sends nothing; the projector warns of a loopback
// join address and fits thirty names on a 1080 px screen.
func TestBrowserClassWideInjectionAndProjectorNames(t *testing.T) {
	lab := startServer(t, server.Config{InstructorToken: testToken, ReScript: compilerIfAny(t)})
	ts := httptest.NewServer(lab.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(func() { stopLab(t, lab) })
	cl := createClass(t, ts, "Thirty")
	var first string
	for i := range 30 {
		id := joinedSession(t, ts, fmt.Sprintf("127.0.1.%d", i+2), cl.Code, fmt.Sprintf("Student number %02d", i+1))
		if i == 0 {
			first = id
		}
	}
	p := newBrowser(t)
	loginTab(p, ts.URL)
	p.do("the class console", chromedp.EmulateViewport(1280, 800), chromedp.Navigate(ts.URL+"/instructor/classes/"+cl.ID))
	waitJS(p, "thirty rows", `document.querySelectorAll("#overview-body > tr").length === 30`)
	p.do("watch the first", chromedp.Click(chromedp.CSS(`#overview-body button.watch[data-session="`+first+`"]`)))
	if got := evalJS[string](p, `document.getElementById("target").value`); got != "watched" {
		t.Errorf("after watching, Into is %q", got)
	}

	p.do("a class-wide deadline", chromedp.SetValue(chromedp.ID("target"), "all"), chromedp.SetValue(chromedp.ID("injection"), "deadline"), chromedp.Click(chromedp.ID("inject")))
	waitJS(p, "the question", `document.getElementById("inject-confirm").open`)
	if got := evalJS[string](p, `document.getElementById("inject-confirm-yes").textContent`); got != "Inject into 30 sessions" {
		t.Errorf("the confirmation says %q", got)
	}
	p.do("cancel", chromedp.Click(chromedp.ID("inject-confirm-no")))
	waitJS(p, "not injected", `document.getElementById("inject-summary").textContent === "Not injected."`)
	if row := apiRow(t, ts.URL, first); row.Held != 0 {
		t.Fatalf("a cancelled injection held %d messages", row.Held)
	}
	p.do("inject and confirm", chromedp.Click(chromedp.ID("inject")), chromedp.Click(chromedp.ID("inject-confirm-yes")))
	waitJS(p, "applied in thirty", `document.getElementById("inject-summary").textContent.startsWith("Applied in 30 of 30")`)

	p.do("the projector at 1920 × 1080", chromedp.EmulateViewport(1920, 1080), chromedp.Navigate(ts.URL+"/instructor/classes/"+cl.ID+"/projector"))
	waitJS(p, "thirty joined", `document.getElementById("count").textContent === "30"`)
	if !evalJS[bool](p, `!document.getElementById("loopback").hidden`) {
		t.Error("a loopback join address is shown without a warning")
	}
	p.do("show names", chromedp.Click(chromedp.ID("toggle-names")))
	waitJS(p, "thirty names", `document.querySelectorAll("#names > li").length === 30`)
	if h := evalJS[int](p, `Math.ceil(document.getElementById("names").lastElementChild.getBoundingClientRect().bottom + scrollY)`); h > 1080 {
		t.Errorf("the last of thirty names ends at %d px, below a 1080 px screen", h)
	}
	if h := evalJS[int](p, `document.scrollingElement.scrollHeight`); h > 1080 {
		t.Errorf("the projector with thirty names is %d px tall", h)
	}
}
