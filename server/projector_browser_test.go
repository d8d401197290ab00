package server_test

import (
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
