package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/toolcall-lab/lab/internal/qr/qrtest"
	"github.com/toolcall-lab/lab/server"
	"github.com/toolcall-lab/lab/store"
	"github.com/toolcall-lab/lab/store/sqlite"
)

// classBody is a class as the API answers it.
type classBody struct {
	ID       string    `json:"id"`
	Code     string    `json:"code"`
	Title    string    `json:"title"`
	JoinURL  string    `json:"joinUrl"`
	Key      string    `json:"key"`
	Open     bool      `json:"open"`
	Created  time.Time `json:"created"`
	Students int       `json:"students"`

	PredictionsRequired bool `json:"predictionsRequired"`
}

type classAnswer struct {
	Class    classBody     `json:"class"`
	Sessions []overviewRow `json:"sessions"`
	Classes  []classBody   `json:"classes"`
	Deleted  []string      `json:"deleted"`
	Error    *string       `json:"error"`
}

// callJSON makes one API call and decodes its answer; a status of 400 or
// more must come with {"error": "<non-empty>"}.
func callJSON(t *testing.T, ts *httptest.Server, method, path, bearer, body string) (int, classAnswer) {
	t.Helper()
	status, _, b := call(t, ts, method, path, bearer, "", body)
	var out classAnswer
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s %s: %d, not JSON: %q", method, path, status, b)
	}
	if status >= 400 && (out.Error == nil || *out.Error == "") {
		t.Fatalf(`%s %s: %d without {"error": …}: %s`, method, path, status, b)
	}
	return status, out
}

func createClass(t *testing.T, ts *httptest.Server, title string) classBody {
	t.Helper()
	status, out := callJSON(t, ts, "POST", "/api/classes", testToken, `{"title": `+quote(title)+`}`)
	if status != http.StatusCreated {
		t.Fatalf("creating %q: %d %+v", title, status, out)
	}
	return out.Class
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// browserClient is a client with its own cookie jar that does not follow
// redirects, dialling from local (another loopback address stands for
// another machine).
func browserClient(t *testing.T, local string) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	return &http.Client{
		Jar:           jar,
		Transport:     &http.Transport{DialContext: d.DialContext},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// joinAs posts a name to /j/{code} and returns the status, where it sends
// the browser and the page's text.
func joinAs(t *testing.T, c *http.Client, ts *httptest.Server, code, name string) (int, string, string) {
	t.Helper()
	resp, err := c.PostForm(ts.URL+"/j/"+code, url.Values{"name": {name}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(b)
}

func getPage(t *testing.T, c *http.Client, ts *httptest.Server, path string) (int, string, string) {
	t.Helper()
	resp, err := c.Get(ts.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(b)
}

var labPath = regexp.MustCompile(`^/lab/([0-9a-f-]{36})$`)

func TestClassesAPI(t *testing.T) {
	ts := runInstructorLab(t, server.Config{})
	before := time.Now().Add(-time.Second)
	c := createClass(t, ts, "  Monday 10:00  ")
	if c.Title != "Monday 10:00" || !c.Open || !store.ValidCode(c.Code) || len(c.Key) < 26 ||
		c.JoinURL != ts.URL+"/j/"+c.Code || c.Created.Before(before) || c.Students != 0 {
		t.Fatalf("created %+v", c)
	}
	other := createClass(t, ts, "Tuesday")
	if other.Code == c.Code {
		t.Fatalf("two open classes share code %s", c.Code)
	}

	// Bad input: status and {"error": …} for each.
	for _, bad := range []struct {
		method, path, bearer, body string
		status                     int
	}{
		{"POST", "/api/classes", testToken, `{"title": ""}`, 400},
		{"POST", "/api/classes", testToken, `{"title": "   "}`, 400},
		{"POST", "/api/classes", testToken, `{}`, 400},
		{"POST", "/api/classes", testToken, `{"title": "x", "extra": 1}`, 400},
		{"POST", "/api/classes", testToken, `{"title": "x"} {}`, 400},
		{"POST", "/api/classes", testToken, `{"title": 7}`, 400},
		{"POST", "/api/classes", testToken, `not json`, 400},
		{"POST", "/api/classes", testToken, `{"title": "` + strings.Repeat("x", 101) + `"}`, 400},
		{"POST", "/api/classes", testToken, `{"title": "a\u202eb"}`, 400},
		{"POST", "/api/classes", testToken, `{"title": "a\u0007b"}`, 400},
		{"POST", "/api/classes", "", `{"title": "x"}`, 401},
		{"POST", "/api/classes", "wrong-token-wrong-token", `{"title": "x"}`, 401},
		{"GET", "/api/classes", "", ``, 401},
		{"GET", "/api/classes/" + newID(), testToken, ``, 404},
		{"GET", "/api/classes/nope", testToken, ``, 404},
		{"POST", "/api/classes/" + newID() + "/close", testToken, ``, 404},
		{"POST", "/api/classes/" + newID() + "/reopen", testToken, ``, 404},
		{"POST", "/api/classes/" + newID() + "/key", testToken, ``, 404},
		{"DELETE", "/api/classes/" + newID(), testToken, ``, 404},
		{"GET", "/api/classes/" + newID() + "/qr.png", testToken, ``, 404},
		{"GET", "/api/classes/" + newID() + "/export.csv", testToken, ``, 404},
		{"DELETE", "/api/sessions/" + newID(), testToken, ``, 404},
		{"POST", "/api/sessions/delete", testToken, `{}`, 400},
		{"POST", "/api/sessions/delete", testToken, `{"sessions": ["a"], "idleOpenLab": true}`, 400},
		{"POST", "/api/sessions/delete", testToken, `{"sessions": "a"}`, 400},
		{"POST", "/api/inject", testToken, `{"class": "` + newID() + `", "preset": "deadline"}`, 404},
		{"POST", "/api/inject", testToken, `{"class": "nope", "preset": "deadline"}`, 404},
		{"POST", "/api/inject", testToken, `{"class": "` + c.ID + `", "all": true, "preset": "deadline"}`, 400},
	} {
		if status, _ := callJSON(t, ts, bad.method, bad.path, bad.bearer, bad.body); status != bad.status {
			t.Errorf("%s %s %s: %d, want %d", bad.method, bad.path, bad.body, status, bad.status)
		}
	}
	if status, _, _ := call(t, ts, "POST", "/api/classes", testToken, "", ""); status != http.StatusUnsupportedMediaType {
		t.Errorf("POST /api/classes without a JSON type: %d, want 415", status)
	}

	// Oldest first; two classes made in the same millisecond by id.
	if status, out := callJSON(t, ts, "GET", "/api/classes", testToken, ""); status != 200 || len(out.Classes) != 2 ||
		!slices.ContainsFunc(out.Classes, func(x classBody) bool { return x.ID == c.ID && x.Key == "" && x.Code == c.Code }) ||
		!slices.ContainsFunc(out.Classes, func(x classBody) bool { return x.ID == other.ID }) {
		t.Fatalf("GET /api/classes: %d %+v", status, out)
	}

	// Two students join; the class shows their rows, and the QR code is
	// the join URL.
	alice := browserClient(t, "127.0.0.1")
	status, loc, _ := joinAs(t, alice, ts, c.Code, "Alice")
	if status != http.StatusSeeOther || !labPath.MatchString(loc) {
		t.Fatalf("join: %d %q", status, loc)
	}
	aliceID := labPath.FindStringSubmatch(loc)[1]
	if status, _, _ := joinAs(t, browserClient(t, "127.0.0.1"), ts, c.Code, "Bob"); status != http.StatusSeeOther {
		t.Fatalf("Bob: %d", status)
	}
	status, out := callJSON(t, ts, "GET", "/api/classes/"+c.ID, testToken, "")
	if status != 200 || out.Class.Students != 2 || len(out.Sessions) != 2 {
		t.Fatalf("GET class: %d %+v", status, out)
	}
	names := []string{out.Sessions[0].Name, out.Sessions[1].Name}
	slices.Sort(names)
	if !slices.Equal(names, []string{"Alice", "Bob"}) {
		t.Fatalf("rows %+v", out.Sessions)
	}
	_, _, qr := call(t, ts, "GET", "/api/classes/"+c.ID+"/qr.png", testToken, "", "")
	if got := decodeQRPNG(t, qr); got != c.JoinURL {
		t.Fatalf("the QR code says %q, want %q", got, c.JoinURL)
	}
	status, hdr, csv := call(t, ts, "GET", "/api/classes/"+c.ID+"/export.csv", testToken, "", "")
	if status != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/csv") || !strings.Contains(string(csv), aliceID+",Alice,1,") {
		t.Fatalf("class export: %d %s", status, csv)
	}
	if _, _, all := call(t, ts, "GET", "/api/sessions", testToken, "", ""); !strings.Contains(string(all), `"class":"`+c.ID+`"`) {
		t.Errorf("GET /api/sessions does not name the rows' class: %s", all)
	}

	// Injecting into the class reaches its two sessions, and no other.
	openLab := newID()
	dial(t, ts, openLab)
	code, res := injectAPI(t, ts, `{"class": "`+c.ID+`", "preset": "deadline"}`)
	if code != 200 || res.Applied != 2 || len(res.Results) != 2 {
		t.Fatalf("inject into the class: %d %+v", code, res)
	}

	// Closing: joining answers 410; reopening keeps the code.
	if status, out := callJSON(t, ts, "POST", "/api/classes/"+c.ID+"/close", testToken, ""); status != 200 || out.Class.Open {
		t.Fatalf("close: %d %+v", status, out)
	}
	if status, _, page := joinAs(t, browserClient(t, "127.0.0.1"), ts, c.Code, "Carol"); status != http.StatusGone || !strings.Contains(page, "closed") {
		t.Fatalf("joining a closed class: %d %s", status, page)
	}
	if status, out := callJSON(t, ts, "POST", "/api/classes/"+c.ID+"/reopen", testToken, ""); status != 200 || !out.Class.Open || out.Class.Code != c.Code {
		t.Fatalf("reopen: %d %+v", status, out)
	}

	// A new key: the old one stops working.
	if status, _ := callJSON(t, ts, "GET", "/api/classes/"+c.ID, c.Key, ""); status != 200 {
		t.Fatalf("the class key: %d", status)
	}
	status, out = callJSON(t, ts, "POST", "/api/classes/"+c.ID+"/key", testToken, "")
	if status != 200 || out.Class.Key == "" || out.Class.Key == c.Key {
		t.Fatalf("rotate: %d %+v", status, out)
	}
	if status, _ := callJSON(t, ts, "GET", "/api/classes/"+c.ID, c.Key, ""); status != 401 {
		t.Fatalf("the old key after rotation: %d, want 401", status)
	}
	if status, _ := callJSON(t, ts, "GET", "/api/classes/"+c.ID, out.Class.Key, ""); status != 200 {
		t.Fatalf("the new key: %d", status)
	}

	// Deleting the class deletes its sessions with it.
	status, out = callJSON(t, ts, "DELETE", "/api/classes/"+c.ID, testToken, "")
	if status != 200 || len(out.Deleted) != 2 || !slices.Contains(out.Deleted, aliceID) {
		t.Fatalf("delete: %d %+v", status, out)
	}
	if status, _ := callJSON(t, ts, "GET", "/api/classes/"+c.ID, testToken, ""); status != 404 {
		t.Fatalf("a deleted class: %d", status)
	}
	if status, _ := callJSON(t, ts, "GET", "/api/sessions/"+aliceID, testToken, ""); status != 404 {
		t.Fatalf("a deleted class's session: %d", status)
	}
	if status, _ := callJSON(t, ts, "GET", "/api/sessions/"+openLab, testToken, ""); status != 200 {
		t.Fatalf("an open-lab session went with the class: %d", status)
	}
}

// decodeQRPNG reads a QR code PNG as a phone's camera does (qrtest.Decode).
func decodeQRPNG(t *testing.T, b []byte) string {
	t.Helper()
	return qrtest.Decode(t, b)
}

func TestJoin(t *testing.T) {
	ts := runInstructorLab(t, server.Config{})
	c := createClass(t, ts, "Algebra <b>&</b>")
	b := browserClient(t, "127.0.0.1")
	var status int
	var page string

	if status, _, page := getPage(t, b, ts, "/join"); status != 200 || !strings.Contains(page, `name="code"`) {
		t.Fatalf("GET /join: %d %s", status, page)
	}
	if status, _, page := getPage(t, b, ts, "/join?code=12ab"); status != 400 || !strings.Contains(page, "six digits") {
		t.Fatalf("GET /join?code=12ab: %d %s", status, page)
	}
	if status, loc, _ := getPage(t, b, ts, "/join?code="+c.Code); status != 303 || loc != "/j/"+c.Code {
		t.Fatalf("GET /join?code=: %d %q", status, loc)
	}
	unknown := "000000"
	if unknown == c.Code {
		unknown = "000001"
	}
	if status, _, page := getPage(t, b, ts, "/j/"+unknown); status != 404 || !strings.Contains(page, "No class has the code") || !strings.Contains(page, `name="code"`) {
		t.Fatalf("unknown code: %d %s", status, page)
	}
	status, _, page = getPage(t, b, ts, "/j/"+c.Code)
	if status != 200 || !strings.Contains(page, `name="name"`) || !strings.Contains(page, "Algebra &lt;b&gt;&amp;&lt;/b&gt;") {
		t.Fatalf("the name form: %d %s", status, page)
	}

	for _, bad := range []struct{ name, says string }{
		{"", "Type your name"},
		{"   ", "Type your name"},
		{strings.Repeat("n", 41), "at most 40"},
		{"Ada\u202eecalevol", "formatting"},
		{"Ada\u200b", "formatting"},
		{"Ada\x07", "control"},
	} {
		if status, _, page := joinAs(t, b, ts, c.Code, bad.name); status != 400 || !strings.Contains(page, bad.says) || !strings.Contains(page, `name="name"`) {
			t.Errorf("name %q: %d, want 400 saying %q: %s", bad.name, status, bad.says, page)
		}
	}

	status, loc, _ := joinAs(t, b, ts, c.Code, "  Ada  ")
	if status != 303 || !labPath.MatchString(loc) {
		t.Fatalf("join: %d %q", status, loc)
	}
	id := labPath.FindStringSubmatch(loc)[1]
	// The same browser comes back to its session, by GET or POST.
	if status, again, _ := getPage(t, b, ts, "/j/"+c.Code); status != 303 || again != loc {
		t.Fatalf("GET again: %d %q, want %q", status, again, loc)
	}
	if status, again, _ := joinAs(t, b, ts, c.Code, "Someone else"); status != 303 || again != loc {
		t.Fatalf("POST again: %d %q, want %q", status, again, loc)
	}
	// Another browser: the name is taken, whatever its case and spaces.
	if status, _, page := joinAs(t, browserClient(t, "127.0.0.1"), ts, c.Code, "ADA"); status != 409 || !strings.Contains(page, "already called ADA") {
		t.Fatalf("a taken name: %d %s", status, page)
	}
	// The session is named, and knows its class.
	_, st := dial(t, ts, id)
	if st.Name != "Ada" || st.Seq != 1 {
		t.Fatalf("the joined session: %+v", st)
	}
	var got struct {
		Class *struct {
			Title string `json:"title"`
		} `json:"class"`
	}
	status, _, body := call(t, ts, "GET", "/lab/"+id+"/class", "", "", "")
	if err := json.Unmarshal(body, &got); status != 200 || err != nil || got.Class == nil || got.Class.Title != "Algebra <b>&</b>" {
		t.Fatalf("GET /lab/{id}/class: %d %s", status, body)
	}
	if status, _, body := call(t, ts, "GET", "/lab/"+newID()+"/class", "", "", ""); status != 200 || string(body) != `{"class":null}`+"\n" {
		t.Fatalf("an open-lab session's class: %d %s", status, body)
	}
}

// TestJoinRateLimit guesses codes from one address (127.0.0.2) until it is
// refused; another address (127.0.0.3) still joins.
func TestJoinRateLimit(t *testing.T) {
	ts := runInstructorLab(t, server.Config{})
	c := createClass(t, ts, "Guessed")
	guesser := browserClient(t, "127.0.0.2")
	refusedAt := 0
	for i := range 100 {
		code := strings.Repeat("9", 6)
		if code == c.Code {
			code = "999998"
		}
		status, _, _ := getPage(t, guesser, ts, "/j/"+code)
		if status == http.StatusTooManyRequests {
			refusedAt = i
			break
		}
		if status != http.StatusNotFound {
			t.Fatalf("guess %d: %d", i, status)
		}
	}
	if refusedAt == 0 || refusedAt > 30 {
		t.Fatalf("guessing was refused after %d misses, want within 30", refusedAt)
	}
	// The guesser cannot join a real class right now either; a student at
	// another address can.
	if status, _, _ := getPage(t, guesser, ts, "/j/"+c.Code); status != http.StatusTooManyRequests {
		t.Fatalf("the guesser's next attempt: %d", status)
	}
	if status, _, _ := joinAs(t, browserClient(t, "127.0.0.3"), ts, c.Code, "Honest"); status != http.StatusSeeOther {
		t.Fatalf("another address: %d", status)
	}
}

// TestClassKeyScope: a class key reaches its class and nothing else.
func TestClassKeyScope(t *testing.T) {
	ts := runInstructorLab(t, server.Config{})
	a, b := createClass(t, ts, "A"), createClass(t, ts, "B")
	join := func(c classBody, name string) string {
		_, loc, _ := joinAs(t, browserClient(t, "127.0.0.1"), ts, c.Code, name)
		return labPath.FindStringSubmatch(loc)[1]
	}
	inA, inB := join(a, "Ann"), join(b, "Ben")
	openLab := newID()
	ol, _ := dial(t, ts, openLab)
	ol.do(`{"type":"start"}`)
	for _, r := range []struct {
		method, path, body string
		status             int
	}{
		{"GET", "/api/classes/" + a.ID, "", 200},
		{"GET", "/api/classes/" + a.ID + "/qr.png", "", 200},
		{"GET", "/api/classes/" + a.ID + "/export.csv", "", 200},
		{"GET", "/api/sessions/" + inA, "", 200},
		{"GET", "/api/sessions/" + inA + "/export", "", 200},
		{"POST", "/api/inject", `{"class": "` + a.ID + `", "preset": "deadline"}`, 200},
		{"POST", "/api/inject", `{"sessions": ["` + inA + `"], "preset": "deadline"}`, 200},
		{"POST", "/api/classes/" + a.ID + "/close", "", 200},
		{"POST", "/api/classes/" + a.ID + "/reopen", "", 200},
		{"GET", "/api/classes/" + b.ID, "", 403},
		{"GET", "/api/classes/" + b.ID + "/qr.png", "", 403},
		{"GET", "/api/classes/" + b.ID + "/export.csv", "", 403},
		{"POST", "/api/classes/" + b.ID + "/close", "", 403},
		{"GET", "/api/sessions/" + inB, "", 403},
		{"GET", "/api/sessions/" + inB + "/export", "", 403},
		{"GET", "/api/sessions/" + openLab, "", 403},
		{"POST", "/api/inject", `{"class": "` + b.ID + `", "preset": "deadline"}`, 403},
		{"POST", "/api/inject", `{"sessions": ["` + inB + `"], "preset": "deadline"}`, 403},
		{"POST", "/api/inject", `{"sessions": ["` + openLab + `"], "preset": "deadline"}`, 403},
		{"POST", "/api/inject", `{"all": true, "preset": "deadline"}`, 403},
		{"DELETE", "/api/sessions/" + inB, "", 403},
		{"DELETE", "/api/sessions/" + openLab, "", 403},
		{"POST", "/api/sessions/delete", `{"idleOpenLab": true}`, 403},
		{"GET", "/api/sessions", "", 403},
		{"GET", "/api/export.csv", "", 403},
		{"GET", "/api/classes", "", 403},
		{"POST", "/api/classes", `{"title": "mine"}`, 403},
		{"POST", "/api/classes/" + a.ID + "/key", "", 403},
		{"DELETE", "/api/classes/" + a.ID, "", 403},
		{"DELETE", "/api/sessions/" + inA, "", 200},
	} {
		status, _, body := call(t, ts, r.method, r.path, a.Key, "", r.body)
		if status != r.status {
			t.Errorf("class key: %s %s %s: %d, want %d: %s", r.method, r.path, r.body, status, r.status, body)
		}
		if status == 403 && !strings.HasPrefix(string(body), `{"error":"`) {
			t.Errorf("%s %s: 403 body %s", r.method, r.path, body)
		}
	}

	// Logged in with the key, the browser reaches the class's console and
	// projector, not another class's, not the open lab's.
	ck := loginCookie(t, ts, a.Key)
	cookie := ck.Name + "=" + ck.Value
	for path, want := range map[string]int{
		"/instructor/classes/" + a.ID:                200,
		"/instructor/classes/" + a.ID + "/projector": 200,
		"/instructor/classes/" + b.ID:                403,
		"/instructor/classes/" + b.ID + "/projector": 403,
		"/instructor":   403,
		"/api/sessions": 403,
	} {
		if status, _, _ := call(t, ts, "GET", path, "", cookie, ""); status != want {
			t.Errorf("class login: GET %s: %d, want %d", path, status, want)
		}
	}
	h := http.Header{"Cookie": {cookie}}
	if _, code, err := dialInstructorScoped(ts, "", h); err == nil || code != 403 {
		t.Errorf("class login: the open lab's socket: %d %v, want 403", code, err)
	}
	if _, code, err := dialInstructorScoped(ts, b.ID, h); err == nil || code != 403 {
		t.Errorf("class login: another class's socket: %d %v, want 403", code, err)
	}
	ws, _, err := dialInstructorScoped(ts, a.ID, h)
	if err != nil {
		t.Fatalf("class login: its class's socket: %v", err)
	}
	defer ws.CloseNow()
	if f := readInstructor(t, ws); f.Type != "overview" || len(f.Sessions) != 0 {
		t.Fatalf("the class's overview (its one student was deleted): %s", f.raw)
	}
	ws.Write(context.Background(), websocket.MessageText, []byte(`{"type":"watch","session":"`+inB+`"}`))
	if f := readUntil(t, ws, "an error", func(f overviewFrame) bool { return f.Type == "error" }); !strings.Contains(f.Error, "unknown session") {
		t.Fatalf("watching another class's session: %s", f.raw)
	}
	join(a, "Amy")
	readUntil(t, ws, "the new student", func(f overviewFrame) bool {
		return f.Type == "overview" && len(f.Sessions) == 1 && f.Sessions[0].Name == "Amy"
	})

	// A new key ends the login made with the old one.
	if status, _ := callJSON(t, ts, "POST", "/api/classes/"+a.ID+"/key", testToken, ""); status != 200 {
		t.Fatal(status)
	}
	if status, _, _ := call(t, ts, "GET", "/api/classes/"+a.ID, "", cookie, ""); status != 401 {
		t.Errorf("a login after its key was rotated: %d, want 401", status)
	}
}

// dialInstructorScoped opens the instructor WebSocket of class ("" for the
// open lab).
func dialInstructorScoped(ts *httptest.Server, class string, header http.Header) (*websocket.Conn, int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	u := "ws" + strings.TrimPrefix(ts.URL, "http") + "/instructor/ws"
	if class != "" {
		u += "?class=" + class
	}
	ws, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: header})
	code := 0
	if resp != nil {
		code = resp.StatusCode
	}
	if err == nil {
		ws.SetReadLimit(8 << 20)
	}
	return ws, code, err
}

// TestDeleteSessions deletes one session, a selection, and the open lab's
// idle ones; open tabs of a deleted session are closed.
func TestDeleteSessions(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	lab, ts := runLab(t, server.Config{Now: clock.Now, InstructorToken: testToken})
	c := createClass(t, ts, "Kept")
	_, loc, _ := joinAs(t, browserClient(t, "127.0.0.1"), ts, c.Code, "Member")
	member := labPath.FindStringSubmatch(loc)[1]
	ids := make([]string, 4)
	for i := range ids {
		ids[i] = newID()
		cl, _ := dial(t, ts, ids[i])
		cl.do(`{"type":"start"}`)
		cl.ws.Close(websocket.StatusNormalClosure, "")
		waitFor(t, func() bool { return lab.Attached(ids[i]) == 0 })
	}
	open, _ := dial(t, ts, ids[0])
	if status, out := callJSON(t, ts, "DELETE", "/api/sessions/"+ids[0], testToken, ""); status != 200 || !slices.Equal(out.Deleted, ids[:1]) {
		t.Fatalf("delete one: %d %+v", status, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, _, err := open.ws.Read(ctx); websocket.CloseStatus(err) != 4001 {
		t.Fatalf("the deleted session's tab: %v, want close 4001", err)
	}
	if status, _ := callJSON(t, ts, "DELETE", "/api/sessions/"+ids[0], testToken, ""); status != 404 {
		t.Fatalf("deleting twice: %d", status)
	}
	status, out := callJSON(t, ts, "POST", "/api/sessions/delete", testToken, `{"sessions": ["`+ids[1]+`", "`+newID()+`"]}`)
	if status != 200 || !slices.Equal(out.Deleted, ids[1:2]) {
		t.Fatalf("delete a selection: %d %+v", status, out)
	}
	// Idle open-lab sessions: none before an hour, then ids[2] and ids[3]
	// but not the class's member, nor one with a tab open.
	if _, out := callJSON(t, ts, "POST", "/api/sessions/delete", testToken, `{"idleOpenLab": true}`); len(out.Deleted) != 0 {
		t.Fatalf("deleted before an hour: %+v", out)
	}
	clock.Advance(61 * time.Minute)
	keep, _ := dial(t, ts, ids[3])
	defer keep.ws.CloseNow()
	status, out = callJSON(t, ts, "POST", "/api/sessions/delete", testToken, `{"idleOpenLab": true}`)
	if status != 200 || !slices.Equal(out.Deleted, ids[2:3]) {
		t.Fatalf("delete idle open-lab sessions: %d %+v", status, out)
	}
	if status, _ := callJSON(t, ts, "GET", "/api/sessions/"+member, testToken, ""); status != 200 {
		t.Fatalf("the class member: %d", status)
	}
}

// TestClassesSurviveRestart: a new Server on the same SQLite file has the
// class, its members (the same browser returns to its session), and the
// console login.
func TestClassesSurviveRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lab.db")
	open := func(token string) (*httptest.Server, func()) {
		st, err := sqlite.Open(path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		lab := startServer(t, server.Config{Store: st, InstructorToken: token})
		ts := httptest.NewServer(lab.Handler())
		return ts, func() {
			stopLab(t, lab)
			ts.Close()
			st.Close()
		}
	}
	ts, stop := open(testToken)
	c := createClass(t, ts, "Durable")
	b := browserClient(t, "127.0.0.1")
	_, loc, _ := joinAs(t, b, ts, c.Code, "Stay")
	ck := loginCookie(t, ts, testToken)
	cookie := ck.Name + "=" + ck.Value
	stop()

	ts, stop = open(testToken)
	status, out := callJSON(t, ts, "GET", "/api/classes/"+c.ID, testToken, "")
	if status != 200 || out.Class.Code != c.Code || len(out.Sessions) != 1 || out.Sessions[0].Name != "Stay" {
		t.Fatalf("after a restart: %d %+v", status, out)
	}
	if status, _, _ := call(t, ts, "GET", "/api/classes/"+c.ID, "", cookie, ""); status != 200 {
		t.Fatalf("the console login after a restart: %d", status)
	}
	// Cookies are kept per host, not port: the browser's cookie reaches the
	// new server.
	if status, again, _ := getPage(t, b, ts, "/j/"+c.Code); status != 303 || again != loc {
		t.Fatalf("the same browser after a restart: %d %q, want %q", status, again, loc)
	}
	if status, _ := callJSON(t, ts, "GET", "/api/classes/"+c.ID, c.Key, ""); status != 200 {
		t.Fatalf("the class key after a restart: %d", status)
	}
	stop()

	// Another token: logins made with the old one end.
	ts, stop = open("another-instructor-token-987654")
	defer stop()
	if status, _, _ := call(t, ts, "GET", "/api/classes/"+c.ID, "", cookie, ""); status != 401 {
		t.Fatalf("a login of the old token under a new one: %d, want 401", status)
	}
}

// TestClassKeyDownloadsAndPageErrors: a class key downloads its class's
// grades and export; the server-wide ones are refused, as an HTML page for
// a browser's navigation (Accept prefers text/html) and as JSON for a
// program (*/*), from the one renderer choice (errors.go downloadErrors).
func TestClassKeyDownloadsAndPageErrors(t *testing.T) {
	t.Parallel()
	ts := runInstructorLab(t, server.Config{})
	cl := createClass(t, ts, "Monday")
	for _, path := range []string{"/api/classes/" + cl.ID + "/grades.csv", "/api/classes/" + cl.ID + "/export.csv"} {
		if code, h, b := call(t, ts, "GET", path, cl.Key, "", ""); code != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "text/csv") {
			t.Errorf("GET %s with the class key: %d %s %s", path, code, h.Get("Content-Type"), b)
		}
	}
	for _, tc := range []struct{ accept, ctype string }{
		{"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", "text/html"},
		{"*/*", "application/json"},
		{"", "application/json"},
		{"application/json, text/html;q=0.5", "application/json"},
	} {
		req, _ := http.NewRequest("GET", ts.URL+"/api/grades.csv", nil)
		req.Header.Set("Authorization", "Bearer "+cl.Key)
		if tc.accept != "" {
			req.Header.Set("Accept", tc.accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.HasPrefix(resp.Header.Get("Content-Type"), tc.ctype) {
			t.Errorf("Accept %q: %d %s, want 403 %s", tc.accept, resp.StatusCode, resp.Header.Get("Content-Type"), tc.ctype)
		}
	}
}
