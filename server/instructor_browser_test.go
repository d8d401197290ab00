package server_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/toolcall-lab/lab/server"
)

// consoleView is what the instructor console shows, read from the DOM.
type consoleView struct {
	Connection string   `json:"connection"`
	Path       string   `json:"path"`
	Rows       []string `json:"rows"` // session ids, in table order
	Summary    string   `json:"summary"`
	Results    []string `json:"results"`
	Status     string   `json:"status"`
	Timeline   []string `json:"timeline"` // "actor kind notice", newest first
}

func (v consoleView) String() string {
	type fields consoleView // without this String method, which %+v would call again
	return fmt.Sprintf("%+v", fields(v))
}

const consoleJS = `(() => {
	const text = (id) => document.getElementById(id)?.textContent ?? "";
	return {
		connection: text("connection"), path: location.pathname,
		rows: [...document.querySelectorAll("#overview-body > tr")].map((tr) => tr.dataset.session),
		summary: text("inject-summary"),
		results: [...document.querySelectorAll("#inject-results > li")].map((li) => li.textContent),
		status: text("w-status"),
		timeline: [...document.querySelectorAll("#timeline-body > tr")].map((tr) =>
			[...tr.children].filter((_, i) => i === 2 || i === 3 || i === 5).map((td) => td.textContent).join(" ")),
	};
})()`

func (p *tab) console(what string, ok func(consoleView) bool) consoleView {
	p.t.Helper()
	return waitUntil(p, what, func(ctx context.Context) (consoleView, error) {
		return chromedp.Run(ctx, chromedp.Evaluate[consoleView](consoleJS))
	}, ok)
}

// openConsole logs in through the form, as an instructor would, and waits
// until the console shows session id in its table.
func (p *tab) openConsole(base, id string) {
	p.t.Helper()
	p.do("open the console", chromedp.Navigate(base+"/instructor"))
	p.console("the login form", func(v consoleView) bool { return v.Path == "/instructor/login" })
	p.do("log in",
		chromedp.SendKeys(chromedp.ID("token"), testToken),
		chromedp.Click(chromedp.ID("login")),
	)
	p.console("the console with the student's session", func(v consoleView) bool {
		return v.Path == "/instructor" && v.Connection == "Connected" && slices.Contains(v.Rows, id)
	})
}

// TestBrowserInstructorHoldsStaleReply: the instructor holds a stale reply in
// a student's queue; the student's tab shows it at once, marked as the
// instructor's; delivering it leaves the current result.
func TestBrowserInstructorHoldsStaleReply(t *testing.T) {
	t.Parallel()
	base := startLabWith(t, server.Config{InstructorToken: testToken})
	student := newBrowser(t)
	first := student.open(base + "/")
	id := first.Session
	l := newLab(student)
	l.start("start run-2")
	l.queueShown("queue run-2's draft", draftFor("run-2"))
	l.deliver("deliver it", 1, seedCompleted, "Completed", "Answer for run-2")

	teacher := student.newTab("instructor")
	teacher.openConsole(base, id)
	teacher.inject("select the session and inject a stale reply, held",
		chromedp.Click(chromedp.CSS(`#overview-body input.select[data-session="`+id+`"]`)), "selected", "staleReply", "mode-hold")
	teacher.console("the injection's result", func(v consoleView) bool {
		return v.Summary == "Applied in 1 of 1 sessions." && len(v.Results) == 1 && strings.HasSuffix(v.Results[0], ": applied")
	})

	stale := `{"runId":"run-1","callId":"lookup","kind":"completed","output":"Stale answer for run-1"}`
	v := student.waitView("the instructor's stale reply, held", func(v pageView) bool {
		// The instructor's messages are numbered apart: I1, not 2.
		return len(v.Queue) == 2 && v.Queue[1].Label == "Message I1: "+stale && v.Queue[1].Button == "Deliver message I1"
	})
	if !v.Queue[1].Instructor || v.Queue[0].Instructor {
		t.Fatalf("instructor marks: %s", v)
	}
	if v.Status != "Completed" || v.Detail != "Answer for run-2" {
		t.Fatalf("holding changed the call: %s", v)
	}
	l.queue = append(l.queue, "Message I1: "+stale)
	l.deliverAs("deliver the stale reply", 2, "I1", seedOtherCall, "Completed", "Answer for run-2")

	// The console's view of the session shows the same, and its timeline.
	teacher.do("watch the session", chromedp.Click(chromedp.CSS(`#overview-body button.watch[data-session="`+id+`"]`)))
	teacher.console("the session's timeline", func(v consoleView) bool {
		return v.Status == "Completed" && len(v.Timeline) == 5 &&
			v.Timeline[0] == "student delivered "+seedOtherCall &&
			v.Timeline[1] == "instructor injected "
	})
}

// inject picks the sessions with choose, then injects preset into target
// with the mode button given, as an instructor does in the console.
func (p *tab) inject(what string, choose chromedp.Action[chromedp.Void], target, preset, mode string) {
	p.t.Helper()
	p.do(what,
		choose,
		chromedp.SetValue(chromedp.ID("target"), target),
		chromedp.SetValue(chromedp.ID("injection"), preset),
		chromedp.Click(chromedp.ID(mode)),
		chromedp.Click(chromedp.ID("inject")),
	)
}

// TestBrowserInstructorDeliversDeadline: a deadline delivered now turns a
// Pending student Unresolved live.
func TestBrowserInstructorDeliversDeadline(t *testing.T) {
	t.Parallel()
	base := startLabWith(t, server.Config{InstructorToken: testToken})
	student := newBrowser(t)
	id := student.open(base + "/").Session
	teacher := student.newTab("instructor")
	teacher.openConsole(base, id)
	teacher.inject("watch the session and deliver a deadline now",
		chromedp.Click(chromedp.CSS(`#overview-body button.watch[data-session="`+id+`"]`)), "watched", "deadline", "mode-deliver")
	v := student.waitView("Unresolved, live", func(v pageView) bool { return v.Status == "Unresolved" })
	if v.Detail != seedUnresolvedDetail || v.Notice != seedUnresolved || len(v.Receipts) != 1 ||
		v.Receipts[0] != "Delivered message I1: "+seedUnresolved || len(v.Queue) != 1 || !v.Queue[0].Instructor {
		t.Fatalf("after the deadline: %s", v)
	}
	teacher.console("the console's view of it", func(v consoleView) bool {
		return v.Status == "Unresolved" && len(v.Timeline) == 1 && v.Timeline[0] == "instructor injected-delivered "+seedUnresolved
	})
}
