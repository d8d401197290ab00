package server_test

// Browser tests for issue 13: the student page and the console as a teacher
// tried them with a class. Each test names the numbered problem it holds
// fixed.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/toolcall-lab/lab/server"
)

// inView says whether the element with id is wholly inside the viewport.
func inView(p *tab, id string) bool {
	p.t.Helper()
	return evalJS[bool](p, fmt.Sprintf(`(() => {
		const r = document.getElementById(%q).getBoundingClientRect();
		return r.height > 0 && r.top >= 0 && r.bottom <= innerHeight;
	})()`, id))
}

// rowOrder is the console table's session ids, in order.
func rowOrder(p *tab) []string {
	p.t.Helper()
	return evalJS[[]string](p, `[...document.querySelectorAll("#overview-body > tr")].map((tr) => tr.dataset.session)`)
}

// cell is the text of one cell (by class: waiting, status, …) of a session's row.
func cell(p *tab, id, class string) string {
	p.t.Helper()
	return evalJS[string](p, fmt.Sprintf(`document.querySelector('#overview-body tr[data-session="%s"] td.%s')?.textContent ?? ""`, id, class))
}

// waitJS waits until a JavaScript expression is true in the tab.
func waitJS(p *tab, what, expr string) {
	p.t.Helper()
	waitUntil(p, what, func(ctx context.Context) (bool, error) {
		return chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
	}, func(ok bool) bool { return ok })
}

// waitChecked is waitJS for a code check's result, within checkWait (a
// check may wait for a sandbox and for a free core).
func waitChecked(p *tab, what, expr string) {
	p.t.Helper()
	waitUntilWithin(p, checkWait, what, func(ctx context.Context) (bool, error) {
		return chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
	}, func(ok bool) bool { return ok })
}

// apiRow reads a session's overview row through the API.
func apiRow(t *testing.T, base, id string) (row struct {
	Tabs, Held, Waiting int
	Seq                 uint64
}) {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/api/sessions/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var got struct{ Session json.RawMessage }
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if err := json.Unmarshal(got.Session, &row); err != nil {
		t.Fatal(err)
	}
	return row
}

// TestBrowserConsoleDeadlineFieldsOnlyForFreeFormDeadline (problems 1 and
// 12): the runId and callId fields show only for "Free-form deadline…", the
// reply box only for "Free-form reply…"; a line says what each preset sends;
// no stale reply for "run-0" at run-1.
func TestBrowserConsoleDeadlineFieldsOnlyForFreeFormDeadline(t *testing.T) {
	base := startLabWith(t, server.Config{InstructorToken: testToken})
	p := newBrowser(t)
	id := p.open(base + "/").Session
	// A change stores the session: the console then lists it after this
	// tab has left the student's page for the console's.
	newLab(p).queueShown("queue run-1's draft", draftFor("run-1"))
	p.openConsole(base, id)
	presets := evalJS[[]string](p, `[...document.querySelectorAll("#injection option")].map((o) => o.value)`)
	if len(presets) < 12 {
		t.Fatalf("presets: %q", presets)
	}
	for _, preset := range presets {
		p.do("choose "+preset, chromedp.SetValue(chromedp.ID("injection"), preset),
			chromedp.Evaluate[chromedp.Void](`document.getElementById("injection").dispatchEvent(new Event("change"))`))
		shown := func(id string) bool {
			return evalJS[bool](p, fmt.Sprintf(`document.getElementById(%q).getClientRects().length > 0`, id))
		}
		if got, want := shown("deadline-run") || shown("deadline-call"), preset == "customDeadline"; got != want {
			t.Errorf("%s: runId/callId fields shown = %v, want %v", preset, got, want)
		}
		if got, want := shown("raw"), preset == "raw"; got != want {
			t.Errorf("%s: reply box shown = %v, want %v", preset, got, want)
		}
		if help := evalJS[string](p, `document.getElementById("injection-help").textContent`); help == "" {
			t.Errorf("%s: no line says what the preset sends", preset)
		}
	}

	// Problem 12: at run-1 a stale reply would be for "run-0", a run that
	// never existed; the console says so and injects nothing.
	p.inject("inject a stale reply at run-1",
		chromedp.Click(chromedp.CSS(`#overview-body button.watch[data-session="`+id+`"]`)), "watched", "staleReply", "mode-hold")
	v := p.console("the refusal", func(v consoleView) bool { return len(v.Results) == 1 })
	if !strings.Contains(v.Results[0], "not applied: preset not applicable: no older run yet") || v.Summary != "Applied in 0 of 1 sessions." {
		t.Errorf("stale reply at run-1: %q, %q", v.Summary, v.Results)
	}
	if help := evalJS[string](p, `document.getElementById("injection-help").textContent`); !strings.Contains(help, "run-1") {
		t.Errorf("the stale preset's help does not say it needs an older run: %q", help)
	}
}

// TestBrowserPhoneKeepsCallInView (problem 2, at 360 × 740): on a page many
// screens long, delivering the bottom message leaves the call's status in
// view; JSON never breaks inside an identifier; the reply box wraps.
func TestBrowserPhoneKeepsCallInView(t *testing.T) {
	base := startLab(t)
	p := newBrowser(t)
	p.do("phone viewport", chromedp.EmulateViewport(360, 740, chromedp.EmulateMobile))
	p.open(base + "/")
	l := newLab(p)
	for range 12 {
		l.queueShown("queue the draft", draftFor("run-1"))
	}
	if h := evalJS[int](p, `document.scrollingElement.scrollHeight`); h < 3*740 {
		t.Fatalf("the page is only %d px tall; the test needs one many screens long", h)
	}
	// Message 1 is the last on the page (newest first).
	l.deliver("deliver message 1, at the bottom", 1, seedCompleted, "Completed", "Answer for run-1")
	if evalJS[int](p, `scrollY`) < 740 {
		t.Fatal("the page did not scroll to the bottom message")
	}
	for _, id := range []string{"status", "notice", "feedback", "start"} {
		if !inView(p, id) {
			t.Errorf("#%s is out of view after delivering the bottom message", id)
		}
	}
	if got := evalJS[string](p, `document.getElementById("feedback").textContent`); got != "Delivered message 1: "+seedCompleted {
		t.Errorf("feedback = %q", got)
	}
	// Every JSON token of a held message is on one line.
	broken := evalJS[[]string](p, `[...document.querySelectorAll("#queue .tok, #delivered .tok")]
		.filter((s) => s.getBoundingClientRect().height > 1.6 * parseFloat(getComputedStyle(s).lineHeight))
		.map((s) => s.textContent)`)
	if len(broken) > 0 {
		t.Errorf("tokens broken over lines: %q", broken)
	}
	if n := evalJS[int](p, `document.querySelectorAll("#queue .tok").length`); n < 10 {
		t.Errorf("held messages show %d JSON tokens; the label is not split into tokens", n)
	}
	// The reply box wraps: all of a long reply shows, nothing scrolls sideways.
	p.do("a long reply", chromedp.SetValue(chromedp.ID("reply"), `{"runId":"run-1","callId":"lookup","kind":"completed","output":"`+strings.Repeat("long ", 30)+`"}`))
	if ws := evalJS[string](p, `getComputedStyle(document.getElementById("reply")).whiteSpace`); ws != "pre-wrap" {
		t.Errorf("the reply box does not wrap (white-space %q)", ws)
	}
	if evalJS[bool](p, `(() => { const r = document.getElementById("reply"); return r.scrollWidth > r.clientWidth; })()`) {
		t.Error("the reply box scrolls sideways")
	}
	if w := evalJS[int](p, `document.scrollingElement.scrollWidth`); w > 360 {
		t.Errorf("scrollWidth = %d at 360 px", w)
	}
	// The same on a desktop: the status stays in view far down the page.
	p.do("desktop viewport", chromedp.EmulateViewport(1280, 800))
	l.deliver("deliver message 2 on a desktop", 2, seedFinal, "Completed", "Answer for run-1")
	p.do("scroll to the bottom", chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, document.scrollingElement.scrollHeight)`))
	waitJS(p, "the page scrolled", `scrollY > 0`)
	if !inView(p, "status") || !inView(p, "start") {
		t.Error("on a desktop the status bar is out of view at the bottom of the page")
	}
}

// TestBrowserConsoleCountsWaitingAndKeepsOrder (problems 3, 4 and 5): the
// table counts waiting messages, not every message ever held; an injection
// does not make a session "active"; rows hold still while the pointer is in
// the table; the timeline says a notice only on deliveries.
func TestBrowserConsoleCountsWaitingAndKeepsOrder(t *testing.T) {
	base := startLabWith(t, server.Config{InstructorToken: testToken})
	ada := newBrowser(t)
	adaID := ada.open(base + "/").Session
	la := newLab(ada)
	la.queueShown("Ada queues the draft", draftFor("run-1"))
	bob := ada.newTab("bob")
	bobID := bob.open(base + "/").Session
	lb := newLab(bob)
	lb.queueDeadline("Bob queues a deadline")
	lb.queueTyped("Bob queues broken JSON", `{`)
	lb.deliver("Bob delivers it", 2, seedBadJSON, "Pending", "")
	lb.deliver("Bob delivers it again", 2, seedBadJSON, "Pending", "")
	lb.queueDeadline("Bob queues another deadline")

	teacher := ada.newTab("teacher")
	teacher.openConsole(base, bobID)
	teacher.console("both sessions", func(v consoleView) bool { return len(v.Rows) == 2 })
	if got := cell(teacher, bobID, "waiting"); got != "2" {
		t.Errorf("Bob's waiting = %q, want 2 (3 held, one delivered twice)", got)
	}
	heading := evalJS[string](teacher, `document.querySelector('[data-sort="waiting"]').textContent`)
	if heading != "Waiting" {
		t.Errorf("column heading %q", heading)
	}

	// Sorted by last activity, newest first: Bob acted last.
	teacher.do("sort by last activity, newest first",
		chromedp.Click(chromedp.CSS(`[data-sort="lastActivity"]`)),
		chromedp.Click(chromedp.CSS(`[data-sort="lastActivity"]`)),
		chromedp.MouseEvent(chromedp.MouseMoved, 1, 1))
	waitJS(teacher, "Bob first", fmt.Sprintf(`document.querySelector("#overview-body > tr")?.dataset.session === %q`, bobID))
	// An injection delivered into Ada's session is not Ada's activity.
	teacher.inject("deliver a deadline to Ada",
		chromedp.Click(chromedp.CSS(`#overview-body input.select[data-session="`+adaID+`"]`)), "selected", "deadline", "mode-deliver")
	teacher.do("pointer away from the table", chromedp.MouseEvent(chromedp.MouseMoved, 1, 1))
	waitJS(teacher, "Ada Unresolved in the table", fmt.Sprintf(`document.querySelector('#overview-body tr[data-session="%s"] td.status')?.textContent === "Unresolved"`, adaID))
	if got := rowOrder(teacher); !slices.Equal(got, []string{bobID, adaID}) {
		t.Errorf("after an injection into Ada the order is %q; the injection counted as Ada's activity", got)
	}

	// With the pointer on the table, Ada acting moves nothing.
	teacher.do("pointer on the table", chromedp.ScrollIntoView(chromedp.CSS(`#overview-body tr[data-session="`+bobID+`"]`)))
	box := evalJS[[]float64](teacher, fmt.Sprintf(`(() => { const r = document.querySelector('#overview-body tr[data-session="%s"] td.runId').getBoundingClientRect(); return [r.x + 2, r.y + 2]; })()`, bobID))
	teacher.do("hover Bob's row", chromedp.MouseEvent(chromedp.MouseMoved, box[0], box[1]))
	waitJS(teacher, "the console knows the pointer is in", `document.querySelector("#overview:hover") !== null`)
	ada.click("queue-deadline")
	waitJS(teacher, "Ada's new waiting count", fmt.Sprintf(`document.querySelector('#overview-body tr[data-session="%s"] td.waiting')?.textContent === "2"`, adaID))
	if got := rowOrder(teacher); !slices.Equal(got, []string{bobID, adaID}) {
		t.Errorf("rows moved under the pointer: %q", got)
	}
	teacher.do("pointer leaves the table", chromedp.MouseEvent(chromedp.MouseMoved, 1, 1))
	waitJS(teacher, "Ada first once the pointer left", fmt.Sprintf(`document.querySelector("#overview-body > tr")?.dataset.session === %q`, adaID))

	// Bob's timeline: a notice only on the two deliveries.
	teacher.do("watch Bob", chromedp.Click(chromedp.CSS(`#overview-body button.watch[data-session="`+bobID+`"]`)))
	v := teacher.console("Bob's timeline", func(v consoleView) bool { return len(v.Timeline) == 5 })
	want := []string{"student queued ", "student delivered " + seedBadJSON, "student delivered " + seedBadJSON, "student queued ", "student queued "}
	if !slices.Equal(v.Timeline, want) {
		t.Errorf("timeline:\n%q\nwant\n%q", v.Timeline, want)
	}
}

// TestBrowserReplyCheckedAsTyped (problem 6): broken JSON is flagged as it
// is typed, with the browser's own message and where; it can still be
// queued, and queueing it says so.
func TestBrowserReplyCheckedAsTyped(t *testing.T) {
	base := startLab(t)
	p := newBrowser(t)
	first := p.open(base + "/")
	if first.Check != "Valid JSON." {
		t.Errorf("check of the draft = %q", first.Check)
	}
	l := newLab(p)
	broken := `{"runId":"run-1",}`
	p.typeReply(broken)
	v := p.waitView("the problem and where", func(v pageView) bool { return strings.HasPrefix(v.Check, "Not valid JSON") })
	// The position is Chromium's JSON.parse message's, and the page's own
	// line and column.
	if where := strings.ReplaceAll(strings.ToLower(v.Where), ",", ""); !strings.Contains(where, "position 17") || !strings.Contains(where, "line 1 column 18") {
		t.Errorf("where = %q", v.Where)
	}
	if mark := evalJS[string](p, `document.querySelector("#reply-where mark")?.textContent ?? ""`); mark != "}" {
		t.Errorf("marked character = %q, want }", mark)
	}
	if got := evalJS[string](p, `document.getElementById("reply").getAttribute("aria-invalid")`); got != "true" {
		t.Errorf("aria-invalid = %q", got)
	}
	l.queueShown("queue it anyway", broken)
	p.waitView("the note that it was queued broken", func(v pageView) bool {
		return strings.Contains(v.Feedback, "message 1") && strings.Contains(v.Feedback, "not valid JSON")
	})
	l.deliver("deliver it", 1, seedBadJSON, "Pending", "")
	p.do("reset the reply", chromedp.Click(chromedp.ID("reset-reply")))
	p.waitView("the draft, valid", func(v pageView) bool {
		return v.Reply == draftFor("run-1") && v.Check == "Valid JSON." && v.Where == ""
	})
	p.typeReply(`{"a":1`)
	// An early end, at line 1 column 7 (in Chromium's words or the page's).
	p.waitView("an early end", func(v pageView) bool {
		return strings.Contains(strings.ReplaceAll(strings.ToLower(v.Where), ",", ""), "line 1 column 7")
	})
}

// TestBrowserInstructorActionsAnnounced (problems 8 and 9): a held injection
// and a delivered one are announced on the student's page (visible, in a
// live region), the receipt says "by instructor"; the console's link opens a
// read-only page in a new tab that never acts as the student.
func TestBrowserInstructorActionsAnnounced(t *testing.T) {
	base := startLabWith(t, server.Config{InstructorToken: testToken})
	student := newBrowser(t)
	id := student.open(base + "/").Session
	l := newLab(student)
	l.queueDeadline("queue a deadline")
	teacher := student.newTab("teacher")
	teacher.openConsole(base, id)
	teacher.inject("hold a wrong callId", chromedp.Click(chromedp.CSS(`#overview-body button.watch[data-session="`+id+`"]`)), "watched", "wrongCallId", "mode-hold")
	v := student.waitView("the note about the held message", func(v pageView) bool {
		return v.Note == "Your instructor added message I1 (a completion for another callId, run-1/search) to your waiting messages."
	})
	if !v.Queue[1].Instructor || v.Queue[1].Delivered {
		t.Errorf("the instructor's message: %s", v)
	}
	// The newest waiting message is the first in the list: in view, under the controls.
	if first := evalJS[string](student, `document.querySelector("#queue > li").dataset.messageId`); first != "2" {
		t.Errorf("first waiting message is %s, want the newest (2)", first)
	}
	if live := evalJS[string](student, `document.getElementById("instructor-note").getAttribute("aria-live")`); live != "polite" {
		t.Errorf("instructor note aria-live = %q", live)
	}
	if !inView(student, "instructor-note") {
		t.Error("the instructor note is out of view")
	}
	teacher.inject("deliver a deadline now", chromedp.Click(chromedp.ID("mode-deliver")), "watched", "deadline", "mode-deliver")
	v = student.waitView("the note about the delivery", func(v pageView) bool {
		return v.Note == "Your instructor delivered message I2: "+seedUnresolved && len(v.Receipts) == 1
	})
	if !slices.Equal(v.ByTeacher, []bool{true}) || !strings.Contains(evalJS[string](student, `document.querySelector("#receipts > li").textContent`), "by instructor") {
		t.Errorf("receipt marks: %v", v.ByTeacher)
	}
	// The student acting clears the note.
	l.queue = append(l.queue, v.labels()[1:]...)
	l.status, l.detail, l.notice = "Unresolved", seedUnresolvedDetail, seedUnresolved
	l.receipts = v.Receipts
	l.queueDeadline("the student acts")
	student.waitView("the note cleared", func(v pageView) bool { return v.Note == "" })

	// Problem 9: the console's link.
	link := evalJS[[]string](teacher, `(() => { const a = document.getElementById("watched-link"); return [a.getAttribute("href"), a.target, a.rel]; })()`)
	if link[0] != "/lab/"+id+"?observe" || link[1] != "_blank" || !strings.Contains(link[2], "noopener") {
		t.Fatalf("student page link: %q", link)
	}
	before := apiRow(t, base, id)
	observer := teacher.newTab("observer")
	observer.do("open the read-only page", chromedp.Navigate(base+link[0]))
	ov := observer.waitView("the session, observed", func(v pageView) bool {
		return v.Connection == "Connected" && v.Status == "Unresolved" && len(v.Queue) == 4
	})
	if ov.Session != id {
		t.Errorf("observed session %q", ov.Session)
	}
	if !evalJS[bool](observer, `!document.getElementById("observer").hidden && document.getElementById("start").inert && document.getElementById("main").inert`) {
		t.Error("the observer page is not marked read only, or its controls are live")
	}
	// Even a scripted click sends nothing.
	evalJS[chromedp.Void](observer, `document.getElementById("start").click(); document.querySelector("#queue button").click()`)
	observer.waitView("the read-only refusal", func(v pageView) bool { return strings.HasPrefix(v.Error, "Read only") })
	// The student acts; the observer follows; nothing of the observer's was recorded.
	l.queueDeadline("the student acts again")
	l.expectIn(observer, "the observer follows")
	after := apiRow(t, base, id)
	if after.Seq != before.Seq+1 || after.Tabs != 1 {
		t.Errorf("seq %d → %d (want one change, the student's), tabs %d (want 1: the observer is not a student tab)", before.Seq, after.Seq, after.Tabs)
	}
}

// TestBrowserStartDebouncedAndNewSessionConfirmed (problem 10): a double
// click starts one run; "New session" asks first.
func TestBrowserStartDebouncedAndNewSessionConfirmed(t *testing.T) {
	base := startLab(t)
	p := newBrowser(t)
	first := p.open(base + "/")
	l := newLab(p)
	p.do("double-click Start new run", chromedp.DoubleClick(chromedp.ID("start")))
	l.run, l.notice = 2, seedStarted
	l.expect("run-2")
	// Frames apply in order: once this deadline shows, a second start would
	// have shown first.
	l.queueDeadline("queue a deadline after the double click")
	if v, _ := p.view(); v.RunID != "run-2" {
		t.Fatalf("a double click started %s", v.RunID)
	}
	// Two programmatic clicks in one task are one start too.
	waitStartReady(p, "after the double click")
	evalJS[chromedp.Void](p, `document.getElementById("start").click(); document.getElementById("start").click()`)
	l.run = 3
	l.expect("run-3")
	l.queueDeadline("another deadline")
	if v, _ := p.view(); v.RunID != "run-3" {
		t.Fatalf("two clicks started %s", v.RunID)
	}

	// Two clicks 100 ms apart, each a single click (so not a double click
	// to the browser): the first start's state is back before the second
	// click on this machine, and still one run starts.
	waitStartReady(p, "before two clicks")
	p.do("two clicks 100 ms apart", chromedp.Click(chromedp.ID("start")), chromedp.Sleep(100*time.Millisecond), chromedp.Click(chromedp.ID("start")))
	l.run = 4
	l.expect("run-4")
	l.queueDeadline("a deadline after the two clicks")
	if v, _ := p.view(); v.RunID != "run-4" {
		t.Fatalf("two clicks 100 ms apart started %s", v.RunID)
	}

	p.do("click New session", chromedp.Click(chromedp.ID("new-session")))
	waitJS(p, "the question", `document.getElementById("new-session-dialog").open`)
	if addr := evalJS[string](p, `document.getElementById("new-session-address").textContent`); !strings.HasSuffix(addr, "/lab/"+first.Session) {
		t.Errorf("the dialog names %q, not this session's address", addr)
	}
	p.do("keep this session", chromedp.Click(chromedp.ID("new-session-cancel")))
	waitJS(p, "the dialog closed", `!document.getElementById("new-session-dialog").open`)
	if v, _ := p.view(); v.Session != first.Session || !l.matches(v) {
		t.Fatalf("cancelling changed the session: %s", v)
	}
	p.do("click New session and confirm", chromedp.Click(chromedp.ID("new-session")), chromedp.Click(chromedp.ID("new-session-confirm")))
	v := p.waitView("a new session", func(v pageView) bool {
		return v.Connection == "Connected" && v.Session != "" && v.Session != first.Session && v.RunID == "run-1"
	})
	if len(v.Queue) != 0 {
		t.Errorf("the new session holds %d messages", len(v.Queue))
	}
}

// TestBrowserNameLimitSaidAndLoginErrorStyled (problem 11).
func TestBrowserNameLimitSaidAndLoginErrorStyled(t *testing.T) {
	base := startLabWith(t, server.Config{InstructorToken: testToken})
	p := newBrowser(t)
	p.open(base + "/")
	if hint := evalJS[string](p, `document.getElementById("name-hint").textContent.replace(/\s+/g, " ").trim()`); hint != "Up to 40 characters: 0 of 40." {
		t.Errorf("name hint = %q", hint)
	}
	if got := evalJS[string](p, `document.getElementById("name").getAttribute("aria-describedby")`); got != "name-hint" {
		t.Errorf("name field described by %q", got)
	}
	// Nothing is cut: the field keeps all 45, says it is too long, and the
	// server refuses it with the limit.
	p.do("type 45 characters", chromedp.Click(chromedp.ID("name")), chromedp.KeyEvent(strings.Repeat("abcde", 9)))
	waitJS(p, "the limit said", `document.getElementById("name-count").textContent === "45 of 40: too long, shorten it" && document.getElementById("name-hint").dataset.full === "true"`)
	if n := evalJS[int](p, `document.getElementById("name").value.length`); n != 45 {
		t.Errorf("name holds %d characters", n)
	}
	// An emoji with a joiner counts as one, as the server counts it.
	p.do("type an emoji name", chromedp.SetValue(chromedp.ID("name"), "Priya 👩‍💻"))
	evalJS[bool](p, `document.getElementById("name").dispatchEvent(new Event("input"))`)
	waitJS(p, "the emoji counted as one", `document.getElementById("name-count").textContent === "7 of 40"`)

	p.do("open the login form", chromedp.Navigate(base+"/instructor/login"))
	p.do("log in with a wrong token", chromedp.SendKeys(chromedp.ID("token"), "wrong"), chromedp.Click(chromedp.ID("login")))
	waitJS(p, "the failed message", `!document.getElementById("failed").hidden`)
	style := evalJS[[]string](p, `(() => { const s = getComputedStyle(document.getElementById("failed")); return [s.color, s.borderLeftWidth, s.backgroundColor, s.fontWeight]; })()`)
	if style[0] != "rgb(161, 38, 43)" || style[1] != "4px" || style[2] == "rgba(0, 0, 0, 0)" || style[3] != "600" {
		t.Errorf("the failed-login message is not styled as an error: %q", style)
	}
}

// TestBrowserKeyboardSkipLinksAndShortcuts (problem 13): Start new run is a
// few Tab presses from the top, a skip link leads to the held messages, and
// the shortcuts listed on the page work without taking typed characters.
func TestBrowserKeyboardSkipLinksAndShortcuts(t *testing.T) {
	base := startLab(t)
	p := newBrowser(t)
	p.open(base + "/")
	l := newLab(p)
	l.queueDeadline("queue a deadline")
	l.queueDeadline("queue another")

	p.do("reload, focus at the top", chromedp.Reload())
	p.waitView("connected", func(v pageView) bool { return v.Connection == "Connected" && len(v.Queue) == 2 })
	tabs := 0
	for ; tabs < 6; tabs++ {
		if v, _ := p.view(); v.Focus == "start" {
			break
		}
		p.do("press Tab", chromedp.KeyEvent("\t"))
	}
	if tabs > 3 {
		t.Errorf("Start new run took %d Tab presses", tabs)
	}

	// The skip link to the held messages, then one Tab to the newest Deliver.
	p.do("reload", chromedp.Reload())
	p.waitView("connected", func(v pageView) bool { return v.Connection == "Connected" && len(v.Queue) == 2 })
	p.do("Tab to the second skip link and follow it", chromedp.KeyEvent("\t"), chromedp.KeyEvent("\t"))
	if got := evalJS[string](p, `document.activeElement.textContent`); got != "Skip to held messages" {
		t.Fatalf("second Tab stop is %q", got)
	}
	// The prediction choice comes first (predict, then deliver), then the
	// newest Deliver.
	p.do("follow it, then Tab twice", chromedp.KeyEvent("\r"), chromedp.KeyEvent("\t"))
	p.waitView("focus on the prediction", func(v pageView) bool { return v.Focus == "predict-none" })
	p.do("Tab", chromedp.KeyEvent("\t"))
	p.waitView("focus on the newest Deliver", func(v pageView) bool { return v.Focus == "deliver-2" })
	if !inView(p, "status") {
		t.Error("the status is out of view at the held messages")
	}
	if !evalJS[bool](p, `(() => { const b = document.activeElement.getBoundingClientRect(); return b.top >= document.getElementById("callbar").getBoundingClientRect().bottom; })()`) {
		t.Error("the focused Deliver button is under the sticky bar")
	}

	altShift := chromedp.KeyModifiers(chromedp.ModifierAlt | chromedp.ModifierShift)
	p.do("Alt+Shift+N", chromedp.KeyEvent("n", altShift))
	l.run, l.notice = 2, seedStarted
	l.expect("a run started by shortcut")
	p.do("Alt+Shift+D", chromedp.KeyEvent("d", altShift))
	l.queue = append(l.queue, "Message 3: Deadline for run-2/lookup")
	l.expect("a deadline queued by shortcut")
	p.do("Alt+Shift+M", chromedp.KeyEvent("m", altShift))
	p.waitView("focus on the newest waiting message", func(v pageView) bool { return v.Focus == "deliver-3" })
	p.do("Alt+Shift+R", chromedp.KeyEvent("r", altShift))
	p.waitView("focus in the reply", func(v pageView) bool { return v.Focus == "reply" })
	// In the reply, Alt+Shift+D is not a shortcut (it may type a letter);
	// Ctrl+Enter queues the reply.
	p.do("Alt+Shift+D in the reply", chromedp.KeyEvent("d", altShift))
	p.do("Ctrl+Enter", chromedp.KeyEvent("\r", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	v := p.waitView("the reply queued by Ctrl+Enter", func(v pageView) bool { return len(v.Queue) >= 4 })
	if len(v.Queue) != 4 || !strings.HasPrefix(v.Queue[3].Label, "Message 4: "+draftFor("run-2")) || strings.Contains(v.Reply, "\n") {
		t.Errorf("after Alt+Shift+D and Ctrl+Enter in the reply: %s", v)
	}
	if keys := evalJS[string](p, `document.querySelector(".keys").textContent`); !strings.Contains(keys, "Start new run") || !strings.Contains(keys, "Ctrl") {
		t.Errorf("the shortcuts are not listed on the page: %q", keys)
	}
}

// TestBrowserConsoleExportAndTimelineRegion (problems 14 and 15): the console
// offers the exports, and the timeline's scroll box, once it overflows, is a
// labelled region the keyboard reaches and scrolls.
func TestBrowserConsoleExportAndTimelineRegion(t *testing.T) {
	base := startLabWith(t, server.Config{InstructorToken: testToken})
	p := newBrowser(t)
	id := p.open(base + "/").Session
	l := newLab(p)
	for range 15 {
		l.queueDeadline("queue a deadline")
	}
	teacher := p.newTab("teacher")
	teacher.openConsole(base, id)
	href := evalJS[string](teacher, `document.getElementById("export-csv").getAttribute("href")`)
	if href != "/api/export.csv" {
		t.Fatalf("export link %q", href)
	}
	got := evalAsync[string](teacher, `(async () => { const r = await fetch(document.getElementById("export-csv").href); return r.status + " " + (await r.text()).split("\n")[0]; })()`)
	if got != "200 session,name,seq,time,actor,kind,message,run,notice" {
		t.Errorf("export answered %q", got)
	}
	teacher.do("watch the session", chromedp.Click(chromedp.CSS(`#overview-body button.watch[data-session="`+id+`"]`)))
	teacher.console("the timeline", func(v consoleView) bool { return len(v.Timeline) == 15 })
	session := evalAsync[string](teacher, `(async () => { const r = await fetch(document.getElementById("watched-export").href); return r.status + " " + (await r.text()).split("\n").filter(Boolean).length; })()`)
	if session != "200 15" {
		t.Errorf("session export: %q", session)
	}
	region := `document.querySelector("#watched .scroll")`
	if !evalJS[bool](teacher, region+`.scrollHeight > `+region+`.clientHeight`) {
		t.Fatal("the timeline does not overflow its box; the test needs it to")
	}
	attrs := evalJS[[]string](teacher, `(() => { const r = `+region+`; return [r.getAttribute("tabindex"), r.getAttribute("role"), document.getElementById(r.getAttribute("aria-labelledby"))?.textContent ?? ""]; })()`)
	if !slices.Equal(attrs, []string{"0", "region", "Timeline"}) {
		t.Errorf("timeline box tabindex, role, label = %q", attrs)
	}
	teacher.do("focus the timeline and scroll it by key", chromedp.Focus(chromedp.CSS("#watched .scroll")), chromedp.KeyEvent(kb.PageDown))
	waitJS(teacher, "the timeline scrolled by keyboard", region+`.scrollTop > 0`)
}

// evalAsync is evalJS for an expression whose value is a promise.
func evalAsync[T any](p *tab, expr string) T {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("%s: evaluating %.60q: %v", p.name, expr, err)
	}
	return v
}

// axeSource is axe-core's script (LAB_AXE), or "" when the check is skipped.
func axeSource(t *testing.T) string {
	t.Helper()
	path := os.Getenv("LAB_AXE")
	if path == "" {
		if os.Getenv("LAB_E2E") == "1" {
			t.Fatal("LAB_AXE is not set: point it at axe-core's axe.min.js (npm install axe-core@4.14.1; .ci/run does)")
		}
		t.Skip("LAB_AXE is not set: point it at axe-core's axe.min.js to run the accessibility check; LAB_E2E=1 makes this a failure")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("LAB_AXE: %v", err)
	}
	return string(b)
}

// axeCheck runs axe-core on the tab's page and fails the test on any
// violation, naming the rule and the elements.
func axeCheck(p *tab, src, what string) {
	p.t.Helper()
	evalJS[chromedp.Void](p, src)
	out, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]string](`axe.run(document, { resultTypes: ["violations"] }).then((r) =>
		r.violations.map((v) => v.id + " (" + v.impact + "): " + v.help + ": " + v.nodes.map((n) => n.target.join(" ")).join(", ")))`,
		chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("%s: axe: %v", what, err)
	}
	for _, v := range out {
		p.t.Errorf("%s: %s", what, v)
	}
}

// TestBrowserAccessibility runs axe-core on the student page (1280 px and
// 360 px, with held, delivered and instructor messages, a receipt and a
// broken reply), on the console with a watched session whose timeline
// overflows, and on the login form after a failed login.
func TestBrowserAccessibility(t *testing.T) {
	src := axeSource(t)
	base := startLabWith(t, server.Config{InstructorToken: testToken})
	p := newBrowser(t)
	p.do("desktop viewport", chromedp.EmulateViewport(1280, 900))
	id := p.open(base + "/").Session
	l := newLab(p)
	for range 12 {
		l.queueDeadline("queue a deadline")
	}
	l.queueTyped("queue broken JSON", `{`)
	l.deliver("deliver it", 13, seedBadJSON, "Pending", "")

	teacher := p.newTab("teacher")
	teacher.openConsole(base, id)
	teacher.inject("watch and deliver a wrong callId", chromedp.Click(chromedp.CSS(`#overview-body button.watch[data-session="`+id+`"]`)), "watched", "wrongCallId", "mode-deliver")
	teacher.console("the overflowing timeline", func(v consoleView) bool { return len(v.Timeline) == 15 })
	axeCheck(teacher, src, "console")

	p.waitView("the instructor's delivery", func(v pageView) bool { return v.Note != "" })
	p.typeReply(`{"runId":`)
	axeCheck(p, src, "student page at 1280 px")
	p.do("phone viewport", chromedp.EmulateViewport(360, 740, chromedp.EmulateMobile))
	axeCheck(p, src, "student page at 360 px")
	p.do("open the new-session question", chromedp.Click(chromedp.ID("new-session")))
	waitJS(p, "the dialog", `document.getElementById("new-session-dialog").open`)
	axeCheck(p, src, "student page with the new-session dialog")

	login := teacher.newTab("login")
	login.do("a failed login", chromedp.Navigate(base+"/instructor/login?failed"))
	waitJS(login, "the failed message", `!document.getElementById("failed").hidden`)
	axeCheck(login, src, "login form")
}
