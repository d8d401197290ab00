package server_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/toolcall-lab/lab/server"
)

// loginTab logs a tab in to the console with the server's token.
func loginTab(p *tab, base string) {
	p.t.Helper()
	p.do("open the login form", chromedp.Navigate(base+"/instructor/login"))
	p.do("log in", chromedp.SendKeys(chromedp.ID("token"), testToken), chromedp.Click(chromedp.ID("login")))
	waitJS(p, "the console", `location.pathname === "/instructor"`)
}

// TestBrowserProjectorSteps: the projector shows how many students are on
// each step, without names, and follows a student who ticks a step.
func TestBrowserProjectorSteps(t *testing.T) {
	t.Parallel()
	lab := startServer(t, server.Config{InstructorToken: testToken})
	ts := httptest.NewServer(lab.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(func() { stopLab(t, lab) })
	cl := createClass(t, ts, "Steps")
	ada := joinedSession(t, ts, "127.0.0.2", cl.Code, "Ada Lovelace")
	joinedSession(t, ts, "127.0.0.3", cl.Code, "Bob Brown")

	p := newBrowser(t)
	loginTab(p, ts.URL)
	p.do("open the projector", chromedp.Navigate(ts.URL+"/instructor/classes/"+cl.ID+"/projector"))
	waitJS(p, "both students on step 1", `document.getElementById("steps").textContent === "Step 1: 2"`)

	// Ada does step 1: a completion for the current call, held.
	c, _ := dial(t, ts, ada)
	if f := c.do(queueReply(reply("run-1", "lookup", "completed", "output", "Old answer"))); len(exerciseOf(t, f).Exercise.Done) != 1 {
		t.Fatalf("step 1 not ticked: %s", f.raw)
	}
	waitJS(p, "one student on step 1, one on step 2", `document.getElementById("steps").textContent === "Step 1: 1 · Step 2: 1"`)
	if names := evalJS[string](p, `document.body.innerText`); strings.Contains(names, "Ada") || strings.Contains(names, "Bob") {
		t.Errorf("the projector shows names without being asked:\n%s", names)
	}
}

// endedView is what the student page shows once its session was deleted.
type endedView struct {
	Connection string `json:"connection"`
	Ended      string `json:"ended"`
	Hidden     bool   `json:"hidden"`
	Link       string `json:"link"`
	ClassTitle string `json:"classTitle"`
	TitleShown bool   `json:"titleShown"`
	TitleRight int    `json:"titleRight"`
	Width      int    `json:"width"`
}

const endedJS = `(() => {
	const ended = document.getElementById("ended");
	const title = document.getElementById("class-title");
	const link = document.getElementById("ended-link");
	return {
		connection: document.getElementById("connection").textContent,
		ended: ended.textContent, hidden: ended.hidden,
		link: link ? new URL(link.href).pathname : "",
		classTitle: title.textContent, titleShown: !title.hidden && title.offsetHeight > 0,
		titleRight: Math.ceil(title.getBoundingClientRect().right),
		width: document.scrollingElement.scrollWidth,
	};
})()`

func (p *tab) ended(what string, ok func(endedView) bool) endedView {
	p.t.Helper()
	return waitUntil(p, what, func(ctx context.Context) (endedView, error) {
		return chromedp.Run(ctx, chromedp.Evaluate[endedView](endedJS))
	}, ok)
}

// TestBrowserDeletedSession: when an instructor deletes a session (close
// code 4001) the student page stops reconnecting and says so in words, with
// a link to /join for a class's session and to / for the open lab's. The
// class's title is readable at 360 px.
func TestBrowserDeletedSession(t *testing.T) {
	t.Parallel()
	lab := startServer(t, server.Config{InstructorToken: testToken})
	ts := httptest.NewServer(lab.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(func() { stopLab(t, lab) })
	cl := createClass(t, ts, "Thursday afternoon: reordered replies and deadlines, group B")
	member := joinedSession(t, ts, "127.0.0.2", cl.Code, "Ada")
	open := newID()

	p := newBrowser(t)
	p.do("a 360 px phone opens its class session", chromedp.EmulateViewport(360, 740, chromedp.EmulateMobile), chromedp.Navigate(ts.URL+"/lab/"+member))
	v := p.ended("the class title, connected", func(v endedView) bool {
		return v.Connection == "Connected" && v.TitleShown && strings.Contains(v.ClassTitle, "group B")
	})
	if v.Width > 360 || v.TitleRight > 360 {
		t.Errorf("at 360 px the page is %d px wide and the class title ends at %d px", v.Width, v.TitleRight)
	}
	if !v.Hidden {
		t.Fatalf("the deleted-session message shows before any deletion: %+v", v)
	}
	if status, out := callJSON(t, ts, "DELETE", "/api/classes/"+cl.ID, testToken, ""); status != 200 || len(out.Deleted) != 1 {
		t.Fatalf("deleting the class: %d %+v", status, out)
	}
	v = p.ended("the session deleted, with a link to join again", func(v endedView) bool { return !v.Hidden })
	if v.Link != "/join" || v.Connection != "Session deleted" || !strings.Contains(v.Ended, "instructor deleted this session") || !strings.Contains(v.Ended, "stopped connecting") {
		t.Errorf("a class's deleted session: %+v", v)
	}
	// Coming back online retries a pending reconnection at once; there is
	// none, so the lab holds no session at the address again.
	evalJS[bool](p, `window.dispatchEvent(new Event("online"))`)
	p.ended("still deleted", func(v endedView) bool { return !v.Hidden && v.Connection == "Session deleted" })
	if status, _, _ := call(t, ts, "GET", "/api/sessions/"+member, testToken, "", ""); status != 404 {
		t.Errorf("the page reconnected to its deleted session: GET /api/sessions/%s is %d", member, status)
	}

	// The open lab: the link starts a new session.
	q := p.newTab("open lab")
	q.do("open an open-lab session", chromedp.Navigate(ts.URL+"/lab/"+open))
	q.ended("connected", func(v endedView) bool { return v.Connection == "Connected" && !v.TitleShown })
	q.do("start a run", chromedp.Click(chromedp.ID("start")))
	waitJS(q, "run-2", `document.getElementById("run-id").textContent === "run-2"`)
	if status, out := callJSON(t, ts, "DELETE", "/api/sessions/"+open, testToken, ""); status != 200 || len(out.Deleted) != 1 {
		t.Fatalf("deleting the session: %d %+v", status, out)
	}
	v = q.ended("the open-lab session deleted", func(v endedView) bool { return !v.Hidden })
	if v.Link != "/" || v.Connection != "Session deleted" {
		t.Errorf("an open-lab deleted session: %+v", v)
	}
	q.do("follow the link", chromedp.Click(chromedp.ID("ended-link")))
	waitJS(q, "a new session", `/^\/lab\/[0-9a-f-]{36}$/.test(location.pathname) && location.pathname !== "/lab/`+open+`" && document.getElementById("connection").textContent === "Connected"`)
}

// TestBrowserClassPredictionsRequired: the teacher ticks "Predictions
// required" in the class console; the student's open page marks the
// choice as required at once, holds a delivery without a prediction and
// says why, and delivers once a prediction is chosen.
func TestBrowserClassPredictionsRequired(t *testing.T) {
	t.Parallel()
	lab := startServer(t, server.Config{InstructorToken: testToken})
	ts := httptest.NewServer(lab.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(func() { stopLab(t, lab) })
	cl := createClass(t, ts, "Predict first")
	id := joinedSession(t, ts, "127.0.0.2", cl.Code, "Ada")

	teacher := newBrowser(t)
	student := teacher.newPrivateTab("student")
	student.do("open the session", chromedp.Navigate(ts.URL+"/lab/"+id))
	waitJS(student, "connected, predictions optional", `document.getElementById("connection").textContent === "Connected" &&
		!document.getElementById("predict-none").closest("label").hidden && document.getElementById("predict-none").checked`)

	loginTab(teacher, ts.URL)
	teacher.do("open the class console", chromedp.Navigate(ts.URL+"/instructor/classes/"+cl.ID))
	waitJS(teacher, "the setting's box", `!document.getElementById("class-predictions").disabled && !document.getElementById("class-predictions").checked`)
	teacher.do("require predictions", chromedp.Click(chromedp.ID("class-predictions")))
	waitJS(teacher, "the setting saved", `document.getElementById("class-settings-message").textContent.includes("now required")`)
	if status, out := callJSON(t, ts, "GET", "/api/classes/"+cl.ID, testToken, ""); status != 200 || !out.Class.PredictionsRequired {
		t.Fatalf("the class after the box was ticked: %d %+v", status, out)
	}

	waitJS(student, "the choice marked required", `document.getElementById("predict").querySelector("legend").textContent.startsWith("Required by your class") &&
		document.getElementById("predict-none").closest("label").hidden && !document.querySelector('input[name="predict"]:checked')`)
	student.do("queue a deadline", chromedp.Click(chromedp.ID("queue-deadline")))
	waitJS(student, "message 1 held", `!!document.querySelector('#queue button[data-message-id="1"]')`)
	student.do("deliver without a prediction", chromedp.Click(chromedp.CSS(`#queue button[data-message-id="1"]`)))
	waitJS(student, "why it was not sent", `document.getElementById("error").textContent.startsWith("Your class asks you to predict first")`)
	if row := apiRow(t, ts.URL, id); row.Seq != 2 {
		t.Fatalf("a delivery without a prediction changed the session: seq %d, want 2 (the rename and the deadline)", row.Seq)
	}
	student.do("predict and deliver", chromedp.Click(chromedp.ID("predict-unresolved")), chromedp.Click(chromedp.CSS(`#queue button[data-message-id="1"]`)))
	waitJS(student, "delivered with its prediction", `document.getElementById("status").textContent === "Unresolved" &&
		document.querySelector("#receipts .prediction")?.textContent.includes("You predicted unresolved") && !document.querySelector('input[name="predict"]:checked')`)
}

// TestBrowserAccessibilityClassPages runs axe-core on what this file's
// tests add: a class's student page at 360 px with its title and the
// choice of a required prediction, the same page once the session was
// deleted, the class console with its setting, and the projector's step
// counts.
func TestBrowserAccessibilityClassPages(t *testing.T) {
	src := axeSource(t)
	lab := startServer(t, server.Config{InstructorToken: testToken})
	ts := httptest.NewServer(lab.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(func() { stopLab(t, lab) })
	status, out := callJSON(t, ts, "POST", "/api/classes", testToken, `{"title": "Accessible class with a rather long title", "predictionsRequired": true}`)
	if status != 201 {
		t.Fatalf("creating the class: %d %+v", status, out)
	}
	cl := out.Class
	id := joinedSession(t, ts, "127.0.0.2", cl.Code, "Ada")

	teacher := newBrowser(t)
	loginTab(teacher, ts.URL)
	teacher.do("open the class console", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(ts.URL+"/instructor/classes/"+cl.ID))
	waitJS(teacher, "the setting's box", `!document.getElementById("class-predictions").disabled && document.getElementById("class-predictions").checked`)
	axeCheck(teacher, src, "class console with its settings")
	teacher.do("open the projector", chromedp.Navigate(ts.URL+"/instructor/classes/"+cl.ID+"/projector"))
	waitJS(teacher, "the step counts", `document.getElementById("steps").textContent === "Step 1: 1"`)
	axeCheck(teacher, src, "projector with step counts")

	student := teacher.newPrivateTab("student")
	student.do("a 360 px phone opens its session", chromedp.EmulateViewport(360, 740, chromedp.EmulateMobile), chromedp.Navigate(ts.URL+"/lab/"+id))
	waitJS(student, "the class title and the required choice", `document.getElementById("connection").textContent === "Connected" &&
		!document.getElementById("class-title").hidden && document.getElementById("predict-none").closest("label").hidden`)
	axeCheck(student, src, "class student page at 360 px")
	if status, _ := callJSON(t, ts, "DELETE", "/api/sessions/"+id, testToken, ""); status != 200 {
		t.Fatalf("deleting the session: %d", status)
	}
	waitJS(student, "the deleted-session message", `!document.getElementById("ended").hidden`)
	axeCheck(student, src, "student page of a deleted session")
}
