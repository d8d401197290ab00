package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"
)

// chromium returns the browser to drive, skipping the test when there is
// none unless LAB_E2E=1 asks for a failure (as server's browser tests do).
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("LAB_CHROMIUM"); p != "" {
		return p
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	if os.Getenv("LAB_E2E") == "1" {
		t.Fatal("chromium not found: install Debian's chromium or set LAB_CHROMIUM")
	}
	t.Skip("chromium not found; set LAB_E2E=1 to make this a failure")
	return ""
}

// labRun is one run of the whole program on a fixed address, as
// `go run ./cmd/lab` is, with no token set.
type labRun struct {
	base, token string
	stop        func()
}

// startRun starts run on addr with data and waits for the generated token.
func startRun(t *testing.T, addr, data string) labRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"lab", "-addr", addr, "-data", data}, env(nil), &stdout, &stderr)
	}()
	line := regexp.MustCompile(`Instructor console: (http://\S+)/instructor [\s\S]*Instructor token \(generated[^)]*\): (\S+)\n`)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if m := line.FindStringSubmatch(stdout.String()); m != nil {
			stopped := false
			stop := func() {
				if !stopped {
					stopped = true
					cancel()
					<-exited
				}
			}
			t.Cleanup(stop)
			return labRun{base: m[1], token: m[2], stop: stop}
		}
		select {
		case code := <-exited:
			cancel()
			t.Fatalf("the lab exited with %d before printing its token; stderr %s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			<-exited
			t.Fatalf("no token printed; stdout %s stderr %s", stdout.String(), stderr.String())
		}
	}
}

// api calls the lab's JSON API with the token and decodes the answer.
func (l labRun) api(t *testing.T, method, path, body string, out any) {
	t.Helper()
	req, err := http.NewRequest(method, l.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+l.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %d", method, path, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
}

// queueOldAnswer does step 1 of the exercise in session id over its socket.
func queueOldAnswer(t *testing.T, base, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/lab/"+id+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	readFrame(t, ws)
	change(t, ws, `{"type":"queueReply","raw":"{\"runId\":\"run-1\",\"callId\":\"lookup\",\"kind\":\"completed\",\"output\":\"Old answer\"}"}`)
}

// TestBrowserRestartKeepsConsolePagesInPlace: with no token set (the quick
// start), a class console, a class console watching a session and the
// projector, logged in once, stay where they are across a restart of the
// lab on the same address and data: no login form, the same address, and
// each page live again (it shows what happens after the restart).
func TestBrowserRestartKeepsConsolePagesInPlace(t *testing.T) {
	path := chromium(t)
	// The address both runs listen on: the pages reconnect to where they
	// were, so the second run must be at the same port.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	data := filepath.Join(t.TempDir(), "data", "lab.db")
	first := startRun(t, addr, data)

	var made struct {
		Class struct{ ID, Code string } `json:"class"`
	}
	first.api(t, "POST", "/api/classes", `{"title": "Restarted class"}`, &made)
	cl := made.Class
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.PostForm(first.base+"/j/"+cl.Code, url.Values{"name": {"Ada"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	m := regexp.MustCompile(`^/lab/([0-9a-f-]{36})$`).FindStringSubmatch(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || m == nil {
		t.Fatalf("joining: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	ada := m[1]

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-background-timer-throttling", true),
		chromedp.Flag("disable-backgrounding-occluded-windows", true),
		chromedp.Flag("disable-renderer-backgrounding", true),
		chromedp.WindowSize(1280, 900))
	t.Cleanup(cancelAlloc)
	browserCtx, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(browserCtx); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	// The test's own deadline; the browser's contexts have none, so that a
	// timeout reports what the page showed.
	deadline, cancelTest := context.WithTimeout(browserCtx, 90*time.Second)
	t.Cleanup(cancelTest)

	type page struct {
		name, path string
		ctx        context.Context
	}
	do := func(p page, step string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(p.ctx, actions...); err != nil {
			t.Fatalf("%s: %s: %v", p.name, step, err)
		}
	}
	// wait reads expr until it is true, and fails with what the page shows.
	wait := func(p page, what, expr string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(p.ctx, 20*time.Second)
		defer cancel()
		for {
			ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
			if err == nil && ok {
				return
			}
			select {
			case <-ctx.Done():
				shown, _ := chromedp.Run(p.ctx, chromedp.Evaluate[string](`location.pathname + location.search + "\n" + document.body.innerText.slice(0, 600)`))
				t.Fatalf("%s: gave up waiting for %s (%v); the page at %s", p.name, what, err, shown)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	where := func(p page) string {
		t.Helper()
		v, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`location.pathname + location.search`))
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		return v
	}

	console := page{name: "class console", path: "/instructor/classes/" + cl.ID, ctx: deadline}
	do(console, "open the console, which asks for the token", chromedp.Navigate(first.base+console.path))
	wait(console, "the login form", `location.pathname === "/instructor/login"`)
	do(console, "log in once", chromedp.SendKeys(chromedp.ID("token"), first.token), chromedp.Click(chromedp.ID("login")))
	row := `!!document.querySelector('#overview-body button.watch[data-session="` + ada + `"]')`
	wait(console, "the class console, back where it asked", `location.pathname === "`+console.path+`" && document.getElementById("connection").textContent === "Connected" && `+row)
	console.path = where(console)

	newPage := func(name, path string) page {
		ctx, cancel := chromedp.NewContext(deadline)
		t.Cleanup(cancel)
		p := page{name: name, path: path, ctx: ctx}
		do(p, "open "+path, chromedp.Navigate(first.base+path))
		return p
	}
	watched := newPage("watched session", console.path)
	wait(watched, "the class's row", `document.getElementById("connection").textContent === "Connected" && `+row)
	do(watched, "watch Ada's session", chromedp.Click(chromedp.CSS(`#overview-body button.watch[data-session="`+ada+`"]`)))
	wait(watched, "the watched session", `new URLSearchParams(location.search).get("watch") === "`+ada+`" && !document.getElementById("watched").hidden`)
	watched.path = where(watched)
	rows := `document.querySelectorAll("#timeline-body > tr").length`
	wait(watched, "the timeline", rows+` > 0`)
	before, err := chromedp.Run(watched.ctx, chromedp.Evaluate[int](rows))
	if err != nil {
		t.Fatal(err)
	}
	projector := newPage("projector", console.path+"/projector")
	wait(projector, "Ada on step 1", `document.getElementById("steps").textContent === "Step 1: 1"`)

	first.stop()
	for _, p := range []page{console, watched, projector} {
		wait(p, "the page saying it reconnects", `document.getElementById("connection").textContent.startsWith("Reconnecting")`)
	}
	second := startRun(t, addr, data)
	wait(console, "the console connected again", `document.getElementById("connection").textContent === "Connected"`)
	wait(watched, "the watching console connected again", `document.getElementById("connection").textContent === "Connected"`)

	// Live again: Ada's step 1 after the restart reaches every page.
	queueOldAnswer(t, second.base, ada)
	wait(console, "Ada's step on the progress board", `document.querySelector('#progress-body > tr[data-session="`+ada+`"] td.step')?.dataset.status === "done"`)
	wait(watched, "Ada's message in the watched timeline", rows+` === `+strconv.Itoa(before+1))
	wait(projector, "Ada on step 2 on the projector", `document.getElementById("steps").textContent === "Step 2: 1" && document.getElementById("connection").textContent === ""`)
	for _, p := range []page{console, watched, projector} {
		if got := where(p); got != p.path {
			t.Errorf("%s: after the restart the page is at %s, want %s", p.name, got, p.path)
		}
	}
	if second.token != first.token {
		t.Error("the restart made another token")
	}
}
