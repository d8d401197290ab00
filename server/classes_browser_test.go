package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/toolcall-lab/lab/server"
	"github.com/toolcall-lab/lab/store"
	"github.com/toolcall-lab/lab/store/sqlite"
)

// classroomView is what the class pages show, read from the DOM.
type classroomView struct {
	Path        string   `json:"path"`
	Search      string   `json:"search"`
	Connection  string   `json:"connection"`
	Classes     []string `json:"classes"` // "id code title" per listed class
	Key         string   `json:"key"`
	ClassTitle  string   `json:"classTitle"`
	Rows        []string `json:"rows"`
	Watched     string   `json:"watched"`
	Status      string   `json:"status"`
	Count       string   `json:"count"`
	NamesHidden bool     `json:"namesHidden"`
	Names       []string `json:"names"`
	QRLoaded    bool     `json:"qrLoaded"`
	HasName     bool     `json:"hasName"`
	ScrollWidth int      `json:"scrollWidth"`
}

func (v classroomView) String() string { return fmt.Sprintf("%+v", struct{ classroomView }{v}) }

const classroomJS = `(() => {
	const text = (id) => document.getElementById(id)?.textContent ?? "";
	const qr = document.getElementById("qr");
	return {
		path: location.pathname, search: location.search, connection: text("connection"),
		classes: [...document.querySelectorAll("#class-list > li")].map((li) =>
			li.dataset.class + " " + li.querySelector(".code").textContent.replace("code ", "") + " " + li.querySelector(".title").textContent),
		key: text("class-key"),
		classTitle: text("class-title") || text("class-head-title"),
		rows: [...document.querySelectorAll("#overview-body > tr")].map((tr) => tr.dataset.session),
		watched: text("watched-id"), status: text("w-status"),
		count: text("count"),
		namesHidden: document.getElementById("names")?.hidden ?? true,
		names: [...document.querySelectorAll("#names > li")].map((li) => li.textContent),
		qrLoaded: !!qr && qr.complete && qr.naturalWidth > 0,
		hasName: !!document.getElementById("name"),
		scrollWidth: document.scrollingElement.scrollWidth,
	};
})()`

func (p *tab) classroom(what string, ok func(classroomView) bool) classroomView {
	p.t.Helper()
	return waitUntil(p, what, func(ctx context.Context) (classroomView, error) {
		return chromedp.Run(ctx, chromedp.Evaluate[classroomView](classroomJS))
	}, ok)
}

var sessionPath = regexp.MustCompile(`^/lab/([0-9a-f-]{36})$`)

// TestBrowserClassroom is a class as it happens: the teacher creates a class
// in the console; a phone at 360 px opens the join URL read from the QR
// code, types a name and lands in its own session, which the class console
// and the projector show; the same phone opening the join URL again is back
// in its session; after a restart of the server (a new Server on the same
// data file) the console is still logged in and shows the class, its
// student and the session it was watching; a class key logs in to that
// class only.
func TestBrowserClassroom(t *testing.T) {
	data := filepath.Join(t.TempDir(), "lab.db")
	open := func() (*server.Server, *sqlite.Store) {
		st, err := sqlite.Open(data, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return startServer(t, server.Config{Store: st, InstructorToken: testToken}), st
	}
	first, firstStore := open()
	firstDown := false
	sw := &switchHandler{h: first.Handler()}
	ts := httptest.NewServer(sw)
	t.Cleanup(ts.Close)
	t.Cleanup(func() {
		if !firstDown {
			stopLab(t, first)
			firstStore.Close()
		}
	})
	base := ts.URL
	other := createClass(t, ts, "Another class")
	// The second server stops after the browser has closed (cleanups run
	// last in, first out), so no page sees it go.
	var second *server.Server
	var secondStore *sqlite.Store
	t.Cleanup(func() {
		if second != nil {
			stopLab(t, second)
			secondStore.Close()
		}
	})

	// The teacher logs in and creates the class in the console.
	teacher := newBrowser(t)
	teacher.do("open the console", chromedp.Navigate(base+"/instructor"))
	teacher.classroom("the login form", func(v classroomView) bool { return v.Path == "/instructor/login" })
	teacher.do("log in", chromedp.SendKeys(chromedp.ID("token"), testToken), chromedp.Click(chromedp.ID("login")))
	teacher.classroom("the open lab's console", func(v classroomView) bool {
		return v.Path == "/instructor" && v.Connection == "Connected" && len(v.Classes) == 1
	})
	teacher.do("create a class", chromedp.SendKeys(chromedp.ID("class-title"), "Period 3"), chromedp.Click(chromedp.ID("create-class")))
	v := teacher.classroom("the new class and its key", func(v classroomView) bool { return len(v.Classes) == 2 && v.Key != "" })
	fields := strings.SplitN(v.Classes[1], " ", 3)
	classID, code, key := fields[0], fields[1], v.Key
	if fields[2] != "Period 3" || !store.ValidCode(code) {
		t.Fatalf("the listed class: %q", v.Classes)
	}

	// The join URL, as a phone's camera reads it off the QR code.
	status, _, png := call(t, ts, "GET", "/api/classes/"+classID+"/qr.png", testToken, "", "")
	if status != http.StatusOK {
		t.Fatalf("qr.png: %d", status)
	}
	joinURL := decodeQRPNG(t, png)
	if joinURL != base+"/j/"+code {
		t.Fatalf("the QR code says %q, want %q", joinURL, base+"/j/"+code)
	}

	phone := teacher.newTab("phone")
	phone.do("a 360 px phone opens the join URL", chromedp.EmulateViewport(360, 740, chromedp.EmulateMobile), chromedp.Navigate(joinURL))
	v = phone.classroom("the name form", func(v classroomView) bool { return v.HasName })
	if v.ScrollWidth > 360 {
		t.Errorf("the name form is %d px wide at 360 px", v.ScrollWidth)
	}
	phone.do("type a name and join", chromedp.SendKeys(chromedp.ID("name"), "Grace Hopper"), chromedp.Click(chromedp.ID("join")))
	v = phone.classroom("the student's own session, in the class", func(v classroomView) bool {
		return sessionPath.MatchString(v.Path) && v.Connection == "Connected" && v.ClassTitle == "Class: Period 3"
	})
	id := sessionPath.FindStringSubmatch(v.Path)[1]

	// The class console shows the student; the open lab does not.
	teacher.do("open the class console", chromedp.Navigate(base+"/instructor/classes/"+classID))
	teacher.classroom("the student in the class console", func(v classroomView) bool {
		return v.Connection == "Connected" && v.ClassTitle == "Period 3" && slices.Equal(v.Rows, []string{id})
	})

	// The projector: count, QR code, names hidden until asked for.
	projector := teacher.newTab("projector")
	projector.do("open the projector page", chromedp.Navigate(base+"/instructor/classes/"+classID+"/projector"))
	v = projector.classroom("one student joined", func(v classroomView) bool { return v.Count == "1" && v.QRLoaded })
	if !v.NamesHidden {
		t.Errorf("the projector shows names by default: %s", v)
	}
	projector.do("show the names", chromedp.Click(chromedp.ID("toggle-names")))
	projector.classroom("the student's name", func(v classroomView) bool {
		return !v.NamesHidden && slices.Equal(v.Names, []string{"Grace Hopper"})
	})

	// The same phone opening the join URL again is back in its session.
	phone.do("open the join URL again", chromedp.Navigate(joinURL))
	phone.classroom("the same session", func(v classroomView) bool { return v.Path == "/lab/"+id && v.Connection == "Connected" })

	// The teacher watches the student's session; the URL keeps it.
	teacher.do("watch the student", chromedp.Click(chromedp.CSS(`#overview-body button.watch[data-session="`+id+`"]`)))
	teacher.classroom("the watched session", func(v classroomView) bool {
		return v.Watched == id && v.Status == "Pending" && strings.Contains(v.Search, "watch="+id)
	})

	// A restart: the first server closes its sockets and its data file, a
	// second one opens the same file.
	sw.hold()
	ctx, cancel := context.WithTimeout(context.Background(), browserTestTimeout)
	defer cancel()
	if err := first.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := firstStore.Close(); err != nil {
		t.Fatal(err)
	}
	firstDown = true
	second, secondStore = open()
	sw.serve(second.Handler())
	teacher.do("reload the console", chromedp.Reload())
	teacher.classroom("the same view after the restart", func(v classroomView) bool {
		return v.Path == "/instructor/classes/"+classID && v.Connection == "Connected" && v.ClassTitle == "Period 3" &&
			slices.Equal(v.Rows, []string{id}) && v.Watched == id && v.Status == "Pending"
	})
	phone.do("open the join URL after the restart", chromedp.Navigate(joinURL))
	phone.classroom("the same session after the restart", func(v classroomView) bool {
		return v.Path == "/lab/"+id && v.Connection == "Connected" && v.ClassTitle == "Class: Period 3"
	})

	// A teaching assistant logs in with the class key, in a browser context
	// of its own (its own cookies): its class only.
	ta := teacher.newPrivateTab("assistant")
	ta.do("open the login form", chromedp.Navigate(base+"/instructor/login"))
	ta.do("log in with the class key", chromedp.SendKeys(chromedp.ID("token"), key), chromedp.Click(chromedp.ID("login")))
	ta.classroom("the class console, by the key", func(v classroomView) bool {
		return v.Path == "/instructor/classes/"+classID && v.Connection == "Connected" && slices.Equal(v.Rows, []string{id})
	})
	cookies, err := chromedp.Call(ta.ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/instructor"}})
	if err != nil {
		t.Fatal(err)
	}
	var login string
	for _, c := range cookies.Cookies {
		if c.Name == "lab_instructor" {
			login = c.Name + "=" + c.Value
		}
	}
	for path, want := range map[string]int{
		"/api/classes/" + classID:                       200,
		"/instructor/classes/" + other.ID:               403,
		"/api/classes/" + other.ID:                      403,
		"/instructor":                                   403,
		"/api/sessions":                                 403,
		"/instructor/classes/" + classID + "/projector": 200,
	} {
		if status, _, _ := call(t, ts, "GET", path, "", login, ""); status != want {
			t.Errorf("the class key's login: GET %s: %d, want %d", path, status, want)
		}
	}
}

// newPrivateTab opens a tab in a new browser context of the same browser:
// it shares no cookies with the other tabs, as another person's browser.
func (p *tab) newPrivateTab(name string) *tab {
	p.t.Helper()
	ctx, cancel := chromedp.NewContext(p.b.ctx, chromedp.WithNewBrowserContext())
	p.t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		p.t.Fatalf("opening %s: %v", name, err)
	}
	return p.b.watch(ctx, name)
}
