package server_test

import (
	"context"
	"encoding/csv"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"github.com/toolcall-lab/lab/server"
)

// TestBrowserClassKeyDownloadsItsGrades: a teaching assistant logged in
// with a class key clicks "Download this class's grades (CSV)" on the
// class console and gets a file of that class's students only, each with
// the class's title; another class's student and the open lab's are not in
// it.
func TestBrowserClassKeyDownloadsItsGrades(t *testing.T) {
	t.Parallel()
	lab := startServer(t, server.Config{InstructorToken: testToken})
	ts := httptest.NewServer(lab.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(func() { stopLab(t, lab) })
	cl := createClass(t, ts, "Period 3")
	other := createClass(t, ts, "Period 4")
	joinedSession(t, ts, "127.0.0.2", cl.Code, "Zoe")
	joinedSession(t, ts, "127.0.0.3", cl.Code, "Ada")
	joinedSession(t, ts, "127.0.0.4", other.Code, "Bob")
	open := newID()
	c, _ := dial(t, ts, open)
	c.do(`{"type":"queueDeadline"}`)

	ta := newBrowser(t)
	dir := t.TempDir()
	// A link that answers with a page rather than a file starts no download:
	// the wait for one is bounded, and the failure says what the tab shows.
	dlCtx, cancelDL := context.WithTimeout(ta.ctx, waitTimeout)
	defer cancelDL()
	progress := chromedp.Events(dlCtx, cdpbrowser.DownloadProgress)
	ta.do("downloads into a folder", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		yes := true
		_, err := chromedp.Call(ctx, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
			Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllowAndName, DownloadPath: dir, EventsEnabled: &yes,
		})
		return err
	}))
	ta.do("open the login form", chromedp.Navigate(ts.URL+"/instructor/login"))
	ta.do("log in with the class key", chromedp.SendKeys(chromedp.ID("token"), cl.Key), chromedp.Click(chromedp.ID("login")))
	waitJS(ta, "the class console with its two students and the grades link",
		`location.pathname === "/instructor/classes/`+cl.ID+`" && document.querySelectorAll("#progress-body > tr").length === 2 && !!document.getElementById("grades-link")`)
	link := evalJS[[]string](ta, `(() => { const a = document.getElementById("grades-link"); return [a.textContent, a.getAttribute("href")]; })()`)
	if !slices.Equal(link, []string{"Download this class's grades (CSV)", "/api/classes/" + cl.ID + "/grades.csv"}) {
		t.Errorf("the class console's grades link: %q", link)
	}
	ta.do("click the grades link", chromedp.Click(chromedp.ID("grades-link")))
	var file string
	for ev, err := range progress {
		if err != nil {
			shown, _ := chromedp.Run(ta.ctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText.slice(0, 300)`))
			t.Fatalf("waiting for the download: %v; the tab shows %s", err, shown)
		}
		if ev.State == cdpbrowser.DownloadProgressStateCanceled {
			t.Fatal("the download was cancelled")
		}
		if ev.State == cdpbrowser.DownloadProgressStateCompleted {
			file = filepath.Join(dir, ev.GUID)
			break
		}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(strings.NewReader(string(b))).ReadAll()
	if err != nil {
		t.Fatalf("the download is not CSV: %v\n%s", err, b)
	}
	if len(rows) == 0 || !slices.Equal(rows[0][:2], []string{"name", "class"}) {
		t.Fatalf("the grades' header: %q", rows)
	}
	var got []string
	for _, r := range rows[1:] {
		got = append(got, r[0]+" / "+r[1])
	}
	if want := []string{"Ada / Period 3", "Zoe / Period 3"}; !slices.Equal(got, want) {
		t.Errorf("the class key's grades hold %q, want %q (this class only, in name order)", got, want)
	}
}

// TestBrowserEmojiNameJoinsAndLongNameRefused: "Priya 👩‍💻" (an emoji with
// a zero-width joiner) joins through the join form and is shown whole on
// the console's table and board and on the projector's name list; a
// 51-character name is refused with the limit and kept whole in the field,
// and no session is made for it.
func TestBrowserEmojiNameJoinsAndLongNameRefused(t *testing.T) {
	t.Parallel()
	lab := startServer(t, server.Config{InstructorToken: testToken})
	ts := httptest.NewServer(lab.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(func() { stopLab(t, lab) })
	cl := createClass(t, ts, "Names")
	const priya = "Priya 👩\u200d💻"

	teacher := newBrowser(t)
	phone := teacher.newPrivateTab("phone")
	phone.do("a phone opens the join form", chromedp.EmulateViewport(360, 740, chromedp.EmulateMobile), chromedp.Navigate(ts.URL+"/j/"+cl.Code))
	phone.do("type the name and join", chromedp.SetValue(chromedp.ID("name"), priya), chromedp.Click(chromedp.ID("join")))
	waitJS(phone, "Priya's session", `/^\/lab\/[0-9a-f-]{36}$/.test(location.pathname) && document.getElementById("connection").textContent === "Connected"`)
	id := strings.TrimPrefix(evalJS[string](phone, `location.pathname`), "/lab/")

	loginTab(teacher, ts.URL)
	teacher.do("open the class console", chromedp.Navigate(ts.URL+"/instructor/classes/"+cl.ID))
	waitJS(teacher, "Priya's rows", `document.querySelectorAll("#overview-body > tr").length === 1 && document.querySelectorAll("#progress-body > tr").length === 1`)
	names := evalJS[[]string](teacher, `[document.querySelector('#overview-body > tr[data-session="`+id+`"]').innerText, document.querySelector('#progress-body > tr[data-session="`+id+`"] th.name').textContent]`)
	if !strings.Contains(names[0], priya) || names[1] != priya {
		t.Errorf("the console shows the name as %q, want %q whole", names, priya)
	}
	teacher.do("open the projector and show the names", chromedp.Navigate(ts.URL+"/instructor/classes/"+cl.ID+"/projector"))
	waitJS(teacher, "one student", `document.getElementById("count").textContent === "1"`)
	teacher.do("show the names", chromedp.Click(chromedp.ID("toggle-names")))
	if got := evalJS[[]string](teacher, `[...document.querySelectorAll("#names > li")].map((li) => li.textContent)`); !slices.Equal(got, []string{priya}) {
		t.Errorf("the projector's names %q, want %q", got, priya)
	}

	long := strings.Repeat("Abcdefghij", 5) + "k" // 51 characters
	other := teacher.newPrivateTab("another phone")
	other.do("another phone opens the join form", chromedp.EmulateViewport(360, 740, chromedp.EmulateMobile), chromedp.Navigate(ts.URL+"/j/"+cl.Code))
	// The refusal is a 400 page, which Chromium logs.
	other.expectProblem("status of 400 (Bad Request) (" + ts.URL + "/j/" + cl.Code)
	other.do("type 51 characters and join", chromedp.SetValue(chromedp.ID("name"), long), chromedp.Click(chromedp.ID("join")))
	waitJS(other, "the refusal", `!!document.getElementById("error")`)
	said := evalJS[[]string](other, `[location.pathname, document.getElementById("error").textContent, document.getElementById("name").value]`)
	if said[0] != "/j/"+cl.Code || !strings.Contains(said[1], "at most 40 characters") || !strings.Contains(said[1], "51") {
		t.Errorf("a 51-character name: at %s, told %q", said[0], said[1])
	}
	if said[2] != long {
		t.Errorf("the field holds %q after the refusal, want the 51 characters whole", said[2])
	}
	if status, out := callJSON(t, ts, "GET", "/api/classes/"+cl.ID, testToken, ""); status != 200 || len(out.Sessions) != 1 || out.Sessions[0].Name != priya {
		t.Errorf("the class after the refusal: %d %+v", status, out.Sessions)
	}
}

// seconds reads a board's "time on step" ("45 s", "4 min 05 s").
func seconds(s string) int {
	m := regexp.MustCompile(`^(?:(\d+) min )?(\d+) s$`).FindStringSubmatch(s)
	if m == nil {
		return -1
	}
	min, _ := strconv.Atoi(m[1])
	sec, _ := strconv.Atoi(m[2])
	return min*60 + sec
}

// TestBrowserInjectionNeverTicksOrResetsTheBoard: on the console's
// progress board, a student on step 3 (deliver the stale reply) is not
// ticked, nor has the clock on the step restarted, when the instructor
// delivers a stale reply of their own into the session; a student who has
// done nothing stays "not started" after an injection.
func TestBrowserInjectionNeverTicksOrResetsTheBoard(t *testing.T) {
	t.Parallel()
	lab := startServer(t, server.Config{InstructorToken: testToken})
	ts := httptest.NewServer(lab.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(func() { stopLab(t, lab) })
	cl := createClass(t, ts, "Injections")
	ada := joinedSession(t, ts, "127.0.0.2", cl.Code, "Ada")
	idle := joinedSession(t, ts, "127.0.0.3", cl.Code, "Bob")

	// Ada does steps 1 and 2; step 3 is delivering her held run-1 reply.
	c, _ := dial(t, ts, ada)
	c.do(queueReply(reply("run-1", "lookup", "completed", "output", "Old answer")))
	c.do(`{"type":"start"}`)
	c.do(queueReply(reply("run-2", "lookup", "completed", "output", "New answer")))
	if f := c.do(`{"type":"deliver","message":2}`); len(exerciseOf(t, f).Exercise.Done) != 2 {
		t.Fatalf("steps 1 and 2 not ticked: %s", f.raw)
	}

	p := newBrowser(t)
	loginTab(p, ts.URL)
	p.do("open the class console", chromedp.Navigate(ts.URL+"/instructor/classes/"+cl.ID))
	row := func(v boardView, id string) boardRow {
		for _, r := range v.Rows {
			if r.Session == id {
				return r
			}
		}
		return boardRow{}
	}
	// Wait for a clock that a restart could not show yet (it would read 0 or
	// 1 s when the board shows the injection).
	before := p.board("Ada on step 3 for two seconds, Bob not started", func(v boardView) bool {
		return slices.Equal(row(v, ada).Cells, cellsFor([]int{1, 2}, 3)) && seconds(row(v, ada).Time) >= 2 &&
			row(v, idle).Time == "not started"
	})
	receipts := `document.querySelector('#overview-body > tr[data-session="` + ada + `"] td.receipts')?.textContent`
	if got := evalJS[string](p, receipts); got != "1" {
		t.Fatalf("Ada's receipts before the injection: %q (the test reads this cell)", got)
	}

	for _, body := range []string{
		`{"sessions":["` + ada + `"],"preset":"staleReply","mode":"deliver"}`,
		`{"sessions":["` + idle + `"],"preset":"staleReply","mode":"deliver"}`,
	} {
		if status, _, b := call(t, ts, "POST", "/api/inject", testToken, "", body); status != 200 {
			t.Fatalf("inject %s: %d %s", body, status, b)
		}
	}
	waitJS(p, "the injection delivered in Ada's row", receipts+` === "2"`)
	after := p.board("the board after the injections", func(boardView) bool { return true })
	a, b := row(after, ada), row(after, idle)
	if !slices.Equal(a.Cells, cellsFor([]int{1, 2}, 3)) {
		t.Errorf("the instructor's stale reply changed Ada's steps: %q", a.Cells)
	}
	if seconds(a.Time) < seconds(row(before, ada).Time) {
		t.Errorf("the instructor's stale reply restarted Ada's clock: %q before, %q after", row(before, ada).Time, a.Time)
	}
	if b.Time != "not started" || b.Stuck != "" || !slices.Equal(b.Cells, cellsFor(nil, 1)) {
		t.Errorf("an injection started Bob's session: %+v", b)
	}
}
