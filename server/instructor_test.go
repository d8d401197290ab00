package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/toolcall-lab/lab/model"
	"github.com/toolcall-lab/lab/server"
)

const testToken = "test-instructor-token-0123456789"

// runInstructorLab runs a lab with the test's instructor token.
func runInstructorLab(t *testing.T, cfg server.Config) *httptest.Server {
	t.Helper()
	cfg.InstructorToken = testToken
	_, ts := runLab(t, cfg)
	return ts
}

// noRedirects is a client that shows redirects instead of following them.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// call makes one request with the given credentials (a bearer token, or a
// cookie "name=value") and returns the status and body.
func call(t *testing.T, ts *httptest.Server, method, path, bearer, cookie, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if cookie != "" {
		req.Header.Set("Cookie", cookie)
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// loginCookie logs in through the form and returns the cookie it sets.
func loginCookie(t *testing.T, ts *httptest.Server, token string) *http.Cookie {
	t.Helper()
	resp, err := noRedirects.PostForm(ts.URL+"/instructor/login", url.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login = %d", resp.StatusCode)
	}
	for _, c := range resp.Cookies() {
		if c.Name == "lab_instructor" {
			return c
		}
	}
	if loc := resp.Header.Get("Location"); loc != "/instructor/login?failed=1" {
		t.Fatalf("failed login went to %q", loc)
	}
	return nil
}

// dialInstructor opens the instructor WebSocket with header.
func dialInstructor(ts *httptest.Server, header http.Header) (*websocket.Conn, int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(ts.URL, "http")+"/instructor/ws", &websocket.DialOptions{HTTPHeader: header})
	code := 0
	if resp != nil {
		code = resp.StatusCode
	}
	if err == nil {
		ws.SetReadLimit(8 << 20)
	}
	return ws, code, err
}

func bearerHeader(token string) http.Header {
	return http.Header{"Authorization": {"Bearer " + token}}
}

func TestInstructorAuth(t *testing.T) {
	t.Parallel()
	// It presents many wrong credentials on purpose, all from one address.
	ts := runInstructorLab(t, server.Config{AuthFailureBurst: 1000})
	id := newID()
	dial(t, ts, id)

	// Login: a wrong token sets no cookie; the right one sets a random login
	// id, HttpOnly and SameSite=Strict, not Secure over plain HTTP.
	if c := loginCookie(t, ts, "wrong"); c != nil {
		t.Fatalf("a wrong token logged in: %v", c)
	}
	ck := loginCookie(t, ts, testToken)
	if ck == nil || ck.Value == "" || strings.Contains(ck.Value, testToken) || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/" || ck.Secure {
		t.Fatalf("login cookie %+v", ck)
	}
	if other := loginCookie(t, ts, testToken); other.Value == ck.Value {
		t.Fatal("two logins got the same id")
	}
	good := "lab_instructor=" + ck.Value

	inject := `{"sessions":["` + id + `"],"preset":"deadline"}`
	routes := []struct{ method, path, body string }{
		{"GET", "/api/sessions", ""},
		{"GET", "/api/sessions/" + id, ""},
		{"POST", "/api/inject", inject},
	}
	refused := []struct{ name, bearer, cookie string }{
		{"anonymous", "", ""},
		{"wrong token", testToken + "x", ""},
		{"token prefix", testToken[:10], ""},
		{"empty bearer", "", ""},
		{"made-up cookie", "", "lab_instructor=" + strings.Repeat("A", 43)},
		{"token as cookie", "", "lab_instructor=" + testToken},
		{"wrong token with a good cookie", "nope", good},
	}
	for _, r := range routes {
		for _, who := range refused {
			code, h, body := call(t, ts, r.method, r.path, who.bearer, who.cookie, r.body)
			var e struct{ Error string }
			if code != http.StatusUnauthorized || json.Unmarshal(body, &e) != nil || e.Error == "" || h.Get("WWW-Authenticate") == "" {
				t.Errorf("%s %s as %s = %d %s, want 401 with a JSON error", r.method, r.path, who.name, code, body)
			}
		}
		for _, cred := range [][2]string{{testToken, ""}, {"", good}} {
			if code, _, body := call(t, ts, r.method, r.path, cred[0], cred[1], r.body); code != http.StatusOK {
				t.Errorf("%s %s with credentials = %d %s", r.method, r.path, code, body)
			}
		}
	}
	// Nothing was injected by the refused requests: two good ones only.
	c, _ := dial(t, ts, id)
	_ = c
	var got struct{ State stateFrame }
	_, _, body := call(t, ts, "GET", "/api/sessions/"+id, testToken, "", "")
	json.Unmarshal(body, &got)
	if len(got.State.Receipts) != 0 || len(got.State.Queue) != 2 {
		t.Fatalf("after refused injections: %s", body)
	}

	// The page: anonymous browsers are sent to the login form.
	for _, who := range refused {
		code, h, _ := call(t, ts, "GET", "/instructor", who.bearer, who.cookie, "")
		if code != http.StatusSeeOther || h.Get("Location") != "/instructor/login" {
			t.Errorf("GET /instructor as %s = %d to %q", who.name, code, h.Get("Location"))
		}
	}
	if code, _, body := call(t, ts, "GET", "/instructor", "", good, ""); code != http.StatusOK || !bytes.Contains(body, []byte(`id="overview"`)) {
		t.Errorf("GET /instructor logged in = %d", code)
	}
	if code, _, body := call(t, ts, "GET", "/instructor/login", "", "", ""); code != http.StatusOK || !bytes.Contains(body, []byte(`name="token"`)) {
		t.Errorf("GET /instructor/login = %d", code)
	}

	// The WebSocket: credentials and the Origin are both checked.
	for _, who := range refused {
		h := http.Header{}
		if who.bearer != "" {
			h = bearerHeader(who.bearer)
		}
		if who.cookie != "" {
			h.Set("Cookie", who.cookie)
		}
		if ws, code, err := dialInstructor(ts, h); err == nil || code != http.StatusUnauthorized {
			if ws != nil {
				ws.CloseNow()
			}
			t.Errorf("instructor WebSocket as %s: %d %v, want 401", who.name, code, err)
		}
	}
	for _, h := range []http.Header{bearerHeader(testToken), {"Cookie": {good}}} {
		ws, code, err := dialInstructor(ts, h)
		if err != nil {
			t.Fatalf("instructor WebSocket with %v: %d %v", h, code, err)
		}
		ws.CloseNow()
	}
	evil := http.Header{"Cookie": {good}, "Origin": {"http://evil.example"}}
	if ws, code, err := dialInstructor(ts, evil); err == nil || code != http.StatusForbidden {
		if ws != nil {
			ws.CloseNow()
		}
		t.Fatalf("cross-origin instructor WebSocket: %d %v, want 403", code, err)
	}

	// Logout ends the login.
	if code, _, _ := call(t, ts, "POST", "/instructor/logout", "", good, ""); code != http.StatusSeeOther {
		t.Fatalf("logout = %d", code)
	}
	if code, _, _ := call(t, ts, "GET", "/api/sessions", "", good, ""); code != http.StatusUnauthorized {
		t.Fatalf("after logout: %d", code)
	}
}

// TestNoInstructorToken: a server without a token refuses every instructor.
func TestNoInstructorToken(t *testing.T) {
	t.Parallel()
	_, ts := runLab(t, server.Config{})
	if c := loginCookie(t, ts, ""); c != nil {
		t.Fatal("an empty token logged in")
	}
	for _, path := range []string{"/api/sessions", "/api/export.csv", "/api/sessions/" + newID() + "/export"} {
		req, _ := http.NewRequest("GET", ts.URL+path, nil)
		req.Header.Set("Authorization", "Bearer ")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s with an empty bearer on a server without a token = %d", path, resp.StatusCode)
		}
	}
}

// injectResponse is the body of POST /api/inject.
type injectResponse struct {
	Applied int    `json:"applied"`
	Error   string `json:"error"`
	Results []struct {
		Session string `json:"session"`
		Applied bool   `json:"applied"`
		Reason  string `json:"reason"`
		Error   string `json:"error"`
	} `json:"results"`
}

func injectAPI(t *testing.T, ts *httptest.Server, body string) (int, injectResponse) {
	t.Helper()
	code, _, b := call(t, ts, "POST", "/api/inject", testToken, "", body)
	var r injectResponse
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("inject answered %d %s: %v", code, b, err)
	}
	return code, r
}

// TestInjectPresets injects every preset into a known history over the API,
// held, and checks what joins the student's queue.
func TestInjectPresets(t *testing.T) {
	t.Parallel()
	ts := runInstructorLab(t, server.Config{})
	id := newID()
	c, _ := dial(t, ts, id)
	// run-2 Completed with "New answer", accepted from message 1.
	c.do(`{"type":"start"}`)
	c.do(queueReply(reply("run-2", "lookup", "completed", "output", "New answer")))
	c.do(`{"type":"deliver","message":1}`)

	want := map[string]string{
		"staleReply":         `{"runId":"run-1","callId":"lookup","kind":"completed","output":"Stale answer for run-1"}`,
		"duplicateFinal":     `{"runId":"run-2","callId":"lookup","kind":"completed","output":"New answer"}`,
		"contradictoryFinal": `{"runId":"run-2","callId":"lookup","kind":"rejected","reason":"Contradictory rejection for run-2"}`,
		"wrongCallId":        `{"runId":"run-2","callId":"search","kind":"completed","output":"Answer for run-2"}`,
		"malformedJson":      `{"runId":"run-2","callId":"lookup","kind":"completed","output":"Answer for run-2"`,
		"wrongShape":         `{"runId":"run-2","callId":"lookup","kind":"completed","output":42}`,
		"markupOutput":       `{"runId":"run-2","callId":"lookup","kind":"completed","output":"<img src=\"x\" onerror=\"alert(1)\"><b>Answer</b>"}`,
		"emptyOutput":        `{"runId":"run-2","callId":"lookup","kind":"completed","output":""}`,
		"deadline":           `Deadline for run-2/lookup`,
		"staleDeadline":      `Deadline for run-1/lookup`,
	}
	for _, p := range model.Presets() {
		if p == model.PracticePreset {
			continue // it sets the call up first: TestInjectPractice
		}
		name := p.String()
		code, r := injectAPI(t, ts, `{"sessions":["`+id+`"],"mode":"hold","preset":"`+name+`"}`)
		if code != http.StatusOK || r.Applied != 1 || !r.Results[0].Applied {
			t.Fatalf("preset %s: %d %+v", name, code, r)
		}
		f := c.state()
		last := f.Queue[len(f.Queue)-1]
		if last.Label != want[name] || last.From != "instructor" {
			t.Errorf("preset %s held %q from %s, want %q from instructor", name, last.Label, last.From, want[name])
		}
		if f.Call.Status != "Completed" || f.Call.Detail != "New answer" || len(f.Receipts) != 1 {
			t.Errorf("holding %s changed the call: %+v", name, f.Call)
		}
	}
	// A fresh session has nothing to duplicate or contradict.
	fresh := newID()
	dial(t, ts, fresh)
	for _, name := range []string{"duplicateFinal", "contradictoryFinal"} {
		code, r := injectAPI(t, ts, `{"sessions":["`+fresh+`"],"preset":"`+name+`"}`)
		if code != http.StatusOK || r.Applied != 0 || r.Results[0].Reason != "not_applicable" || !strings.HasPrefix(r.Results[0].Error, "preset not applicable: no final reply to") {
			t.Errorf("%s on a fresh session: %d %+v", name, code, r)
		}
	}
}

// TestInjectDeliverNow: applied at once, the receipt is the instructor's.
func TestInjectDeliverNow(t *testing.T) {
	t.Parallel()
	ts := runInstructorLab(t, server.Config{})
	id := newID()
	c, _ := dial(t, ts, id)
	code, r := injectAPI(t, ts, `{"sessions":["`+id+`"],"mode":"deliver","preset":"deadline"}`)
	if code != http.StatusOK || r.Applied != 1 {
		t.Fatalf("deliver now: %d %+v", code, r)
	}
	f := c.state()
	if f.Call.Status != "Unresolved" || f.Notice != model.NoticeUnresolved || len(f.Receipts) != 1 || f.Receipts[0].By != "instructor" || f.Queue[0].From != "instructor" {
		t.Fatalf("after deliver now: %s", f.raw)
	}
	// Free-form: a raw reply and a deadline with a chosen identity.
	injectAPI(t, ts, `{"sessions":["`+id+`"],"mode":"deliver","raw":"{\"runId\":\"run-1\",\"callId\":\"lookup\",\"kind\":\"rejected\",\"reason\":\"late no\"}"}`)
	if f := c.state(); f.Call.Status != "Rejected" || f.Call.Detail != "late no" {
		t.Fatalf("raw deliver: %s", f.raw)
	}
	injectAPI(t, ts, `{"sessions":["`+id+`"],"deadline":{"runId":"run-7","callId":"x"}}`)
	if f := c.state(); f.Queue[2].Label != "Deadline for run-7/x" || len(f.Receipts) != 2 {
		t.Fatalf("deadline hold: %s", f.raw)
	}
	// Applied injections are counted by mode; a refused one is not.
	injectAPI(t, ts, `{"sessions":["`+newID()+`"],"preset":"deadline"}`)
	_, _, m := call(t, ts, "GET", "/metrics", "", "", "")
	for _, want := range []string{`lab_injections_total{mode="deliver"} 2`, `lab_injections_total{mode="hold"} 1`} {
		if !bytes.Contains(m, []byte(want+"\n")) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestInjectMultiWithCap: one injection into three sessions, one at its
// cap and one unknown, reports per session and half-applies nothing.
func TestInjectMultiWithCap(t *testing.T) {
	t.Parallel()
	ts := runInstructorLab(t, server.Config{Limits: model.Limits{MaxHeld: 2, MaxReceipts: 1}})
	full, free := newID(), newID()
	cf, _ := dial(t, ts, full)
	cfree, _ := dial(t, ts, free)
	cf.do(`{"type":"queueDeadline"}`)
	before := cf.do(`{"type":"queueDeadline"}`)
	gone := newID()
	code, r := injectAPI(t, ts, `{"sessions":["`+full+`","`+free+`","`+gone+`","`+free+`"],"preset":"wrongCallId"}`)
	if code != http.StatusOK || r.Applied != 1 || len(r.Results) != 3 {
		t.Fatalf("multi inject: %d %+v", code, r)
	}
	byID := map[string]int{}
	for i, res := range r.Results {
		byID[res.Session] = i
	}
	if res := r.Results[byID[full]]; res.Applied || res.Reason != "limit" || res.Error != "held messages limit reached (at most 2)" {
		t.Errorf("full session: %+v", res)
	}
	if res := r.Results[byID[free]]; !res.Applied || res.Error != "" {
		t.Errorf("free session: %+v", res)
	}
	if res := r.Results[byID[gone]]; res.Applied || res.Reason != "unknown_session" || res.Error != "unknown session "+gone {
		t.Errorf("unknown session: %+v", res)
	}
	if f := cfree.state(); len(f.Queue) != 1 || f.Queue[0].From != "instructor" {
		t.Fatalf("free session: %s", f.raw)
	}
	// The full session is untouched.
	if _, _, b := call(t, ts, "GET", "/api/sessions/"+full, testToken, "", ""); !bytes.Contains(b, []byte(`"seq":`+itoa(before.Seq)+`,`)) {
		t.Fatalf("full session changed: %s", b)
	}

	// Deliver now is one event: with receipts full, not even the hold happens.
	cfree.do(`{"type":"deliver","message":1}`)
	code, r = injectAPI(t, ts, `{"all":true,"mode":"deliver","preset":"deadline"}`)
	if code != http.StatusOK || r.Applied != 0 || len(r.Results) != 2 {
		t.Fatalf("all, deliver now: %d %+v", code, r)
	}
	for _, res := range r.Results {
		want := map[string]string{full: "held messages limit reached (at most 2)", free: "receipts limit reached (at most 1)"}[res.Session]
		if res.Error != want {
			t.Errorf("%s: %q, want %q", res.Session, res.Error, want)
		}
	}
	var got struct{ State stateFrame }
	_, _, b := call(t, ts, "GET", "/api/sessions/"+free, testToken, "", "")
	json.Unmarshal(b, &got)
	if len(got.State.Queue) != 1 {
		t.Fatalf("a refused deliver-now injection was held: %s", b)
	}
}

func itoa(n uint64) string { b, _ := json.Marshal(n); return string(b) }

func TestInjectBadRequests(t *testing.T) {
	t.Parallel()
	ts := runInstructorLab(t, server.Config{})
	id := newID()
	c, first := dial(t, ts, id)
	to := `"sessions":["` + id + `"]`
	tests := []struct {
		name, body, ctype string
		code              int
		want              string
	}{
		{"not JSON", `{`, "", 400, "not a valid injection request"},
		{"array", `[]`, "", 400, "not a valid injection request"},
		{"two objects", `{` + to + `,"preset":"deadline"} {}`, "", 400, "one JSON object"},
		{"unknown field", `{` + to + `,"preset":"deadline","extra":1}`, "", 400, `unknown field "extra"`},
		{"sessions not a list", `{"sessions":"` + id + `","preset":"deadline"}`, "", 400, "not a valid injection request"},
		{"no target", `{"preset":"deadline"}`, "", 400, `name the target sessions`},
		{"both targets", `{` + to + `,"all":true,"preset":"deadline"}`, "", 400, `not both`},
		{"nothing to inject", `{` + to + `}`, "", 400, `exactly one of`},
		{"two things", `{` + to + `,"preset":"deadline","raw":"x"}`, "", 400, `exactly one of`},
		{"unknown preset", `{` + to + `,"preset":"Stale"}`, "", 400, `unknown preset "Stale": want one of staleReply,`},
		{"bad mode", `{` + to + `,"preset":"deadline","mode":"now"}`, "", 400, `"mode" must be "hold" or "deliver"`},
		{"deadline without callId", `{` + to + `,"deadline":{"runId":"run-1"}}`, "", 400, `"deadline" needs`},
		{"raw too large", `{` + to + `,"raw":"` + strings.Repeat("x", 65537) + `"}`, "", 413, "raw reply size in bytes limit reached (at most 65536)"},
		{"body too large", `{` + to + `,"raw":"` + strings.Repeat("x", 2<<20) + `"}`, "", 413, "request body size in bytes limit reached"},
		{"not JSON type", `{` + to + `,"preset":"deadline"}`, "text/plain", 415, "application/json"},
		{"unknown session", `{"sessions":["` + newID() + `"],"preset":"deadline"}`, "", 404, "unknown session"},
		{"not a session id", `{"sessions":["../x"],"preset":"deadline"}`, "", 404, "unknown session ../x"},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest("POST", ts.URL+"/api/inject", strings.NewReader(tt.body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set("Content-Type", cmp(tt.ctype, "application/json"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct{ Error string }
		if resp.StatusCode != tt.code || json.Unmarshal(b, &e) != nil || !strings.Contains(e.Error, tt.want) {
			t.Errorf("%s: %d %.200s, want %d with an error containing %q", tt.name, resp.StatusCode, b, tt.code, tt.want)
		}
	}
	for _, path := range []string{"/api/sessions/" + newID(), "/api/sessions/not-a-uuid", "/api/sessions/" + strings.ToUpper(id)} {
		code, _, b := call(t, ts, "GET", path, testToken, "", "")
		var e struct{ Error string }
		if code != http.StatusNotFound || json.Unmarshal(b, &e) != nil || !strings.HasPrefix(e.Error, "unknown session") {
			t.Errorf("GET %s = %d %s", path, code, b)
		}
	}
	// Nothing reached the session.
	if f := c.do(`{"type":"start"}`); f.Seq != first.Seq+1 {
		t.Fatalf("seq %d after bad requests, want %d", f.Seq, first.Seq+1)
	}
}

func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// overviewRow is a row of the class overview, as docs/instructor.md has it.
type overviewRow struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Tabs     int    `json:"tabs"`
	RunID    string `json:"runId"`
	Status   string `json:"status"`
	Held     int    `json:"held"`
	Receipts int    `json:"receipts"`
	Seq      uint64 `json:"seq"`
}

// overviewFrame is any instructor frame: overview, state, timeline, error.
type overviewFrame struct {
	Type     string        `json:"type"`
	Error    string        `json:"error"`
	Reason   string        `json:"reason"`
	Session  string        `json:"session"`
	Reset    bool          `json:"reset"`
	Sessions []overviewRow `json:"sessions"`
	Entries  []struct {
		Seq         uint64 `json:"seq"`
		Actor       string `json:"actor"`
		Kind        string `json:"kind"`
		MessageKind string `json:"messageKind"`
		Message     int    `json:"message"`
		Label       string `json:"label"`
		Notice      string `json:"notice"`
	} `json:"entries"`
	raw []byte
}

func readInstructor(t *testing.T, ws *websocket.Conn) overviewFrame {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, data, err := ws.Read(ctx)
	if err != nil {
		t.Fatalf("instructor read: %v", err)
	}
	var f overviewFrame
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("instructor frame %s: %v", data, err)
	}
	f.raw = data
	return f
}

// readUntil reads instructor frames until ok accepts one.
func readUntil(t *testing.T, ws *websocket.Conn, what string, ok func(overviewFrame) bool) overviewFrame {
	t.Helper()
	for range 200 {
		if f := readInstructor(t, ws); ok(f) {
			return f
		}
	}
	t.Fatalf("no frame with %s", what)
	return overviewFrame{}
}

func TestInstructorSocket(t *testing.T) {
	t.Parallel()
	ts := runInstructorLab(t, server.Config{})
	a, b := newID(), newID()
	ca, _ := dial(t, ts, a)
	dial(t, ts, b)
	dial(t, ts, b)
	ws, _, err := dialInstructor(ts, bearerHeader(testToken))
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	send := func(frame string) {
		if err := ws.Write(context.Background(), websocket.MessageText, []byte(frame)); err != nil {
			t.Fatal(err)
		}
	}

	first := readInstructor(t, ws)
	ids := []string{a, b}
	sort.Strings(ids)
	if first.Type != "overview" || len(first.Sessions) != 2 || first.Sessions[0].ID != ids[0] {
		t.Fatalf("first instructor frame: %s", first.raw)
	}
	tabs := map[string]int{}
	for _, r := range first.Sessions {
		tabs[r.ID] = r.Tabs
	}
	if tabs[a] != 1 || tabs[b] != 2 {
		t.Fatalf("tabs %v", tabs)
	}

	// A student renames and starts a run: the overview follows.
	ca.do(`{"type":"rename","name":"  Ada  "}`)
	ca.do(`{"type":"start"}`)
	readUntil(t, ws, "Ada at run-2", func(f overviewFrame) bool {
		return f.Type == "overview" && slices.ContainsFunc(f.Sessions, func(r overviewRow) bool {
			return r.ID == a && r.Name == "Ada" && r.RunID == "run-2" && r.Seq == 2
		})
	})

	// Watching a session: its state exactly as the student has it, then its timeline.
	send(`{"type":"watch","session":"` + a + `"}`)
	state := readUntil(t, ws, "a state", func(f overviewFrame) bool { return f.Type == "state" })
	var student struct{ raw []byte }
	_, _, body := call(t, ts, "GET", "/api/sessions/"+a, testToken, "", "")
	var api struct{ State json.RawMessage }
	json.Unmarshal(body, &api)
	student.raw = api.State
	if !bytes.Equal(state.raw, student.raw) {
		t.Fatalf("watched state differs from the student's:\n%s\n%s", state.raw, student.raw)
	}
	tl := readUntil(t, ws, "the timeline", func(f overviewFrame) bool { return f.Type == "timeline" })
	if !tl.Reset || len(tl.Entries) != 2 || tl.Entries[0].Kind != "renamed" || tl.Entries[0].Label != "Ada" || tl.Entries[1].Kind != "started" || tl.Entries[1].Notice != "" || tl.Entries[1].Actor != "student" {
		t.Fatalf("timeline: %s", tl.raw)
	}
	// An injection shows in the watched timeline as the instructor's.
	injectAPI(t, ts, `{"sessions":["`+a+`"],"mode":"deliver","preset":"staleReply"}`)
	tl = readUntil(t, ws, "the injection", func(f overviewFrame) bool { return f.Type == "timeline" })
	if e := tl.Entries; tl.Reset || len(e) != 1 || e[0].Kind != "injected-delivered" || e[0].MessageKind != "reply" || e[0].Actor != "instructor" || e[0].Message != 1 || e[0].Notice != model.NoticeReplyOtherCall || e[0].Seq != 3 {
		t.Fatalf("injection entry: %s", tl.raw)
	}

	// Refused instructor frames.
	for _, tt := range []struct{ frame, want, reason string }{
		{`{"type":"watch","session":"` + newID() + `"}`, "unknown session", "unknown_session"},
		{`{"type":"watch","session":"nope"}`, `field "session" must be a session id`, "invalid_frame"},
		{`{"type":"watch"}`, `missing field "session"`, "invalid_frame"},
		{`{"type":"inject"}`, `unknown frame type "inject"`, "invalid_frame"},
		{`nope`, "not valid JSON", "invalid_frame"},
	} {
		send(tt.frame)
		f := readUntil(t, ws, "an error", func(f overviewFrame) bool { return f.Type == "error" })
		if !strings.Contains(f.Error, tt.want) || f.Reason != tt.reason {
			t.Errorf("%s: %q (reason %q), want %q (reason %q)", tt.frame, f.Error, f.Reason, tt.want, tt.reason)
		}
	}
	// The last watch was refused, which also stopped watching a: a change
	// there sends no state.
	ca.do(`{"type":"queueDeadline"}`)
	send(`{"type":"unwatch"}`)
	f := readUntil(t, ws, "an overview", func(f overviewFrame) bool { return f.Type == "overview" || f.Type == "state" })
	if f.Type == "state" {
		t.Fatalf("an unwatched session sent its state: %s", f.raw)
	}
}

func TestRenameFrame(t *testing.T) {
	t.Parallel()
	_, ts := runLab(t, server.Config{})
	c, first := dial(t, ts, newID())
	if first.Name != "" || !bytes.Contains(first.raw, []byte(`"name":""`)) {
		t.Fatalf("first frame has no empty name: %s", first.raw)
	}
	if f := c.do(`{"type":"rename","name":"  Grace Hopper "}`); f.Name != "Grace Hopper" || f.Notice != model.NoticeReady {
		t.Fatalf("rename: %s", f.raw)
	}
	for _, tt := range []struct{ frame, want string }{
		{`{"type":"rename"}`, `missing field "name"`},
		{`{"type":"rename","name":7}`, `field "name" must be a string, not number`},
		{`{"type":"rename","name":"` + strings.Repeat("x", 41) + `"}`, "name length in characters limit reached (at most 40)"},
		{`{"type":"rename","name":"a\nb"}`, "name must not contain control characters"},
	} {
		c.send(tt.frame)
		if got := c.refused(); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.frame, got, tt.want)
		}
	}
	if f := c.do(`{"type":"rename","name":""}`); f.Name != "" || f.Seq != 2 {
		t.Fatalf("clearing the name: %s", f.raw)
	}
}

// TestShutdownClosesInstructorSockets: instructors get 1001 too, and no
// goroutine (flusher, overview timer) outlives the server.
func TestShutdownClosesInstructorSockets(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	lab := startServer(t, server.Config{InstructorToken: testToken})
	ts := httptest.NewServer(lab.Handler())
	defer ts.Close()
	c, _ := dial(t, ts, newID())
	ws, _, err := dialInstructor(ts, bearerHeader(testToken))
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	readInstructor(t, ws)
	c.do(`{"type":"start"}`) // arms an overview flush
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- lab.Shutdown(ctx) }()
	// Both peers read, so that their close handshakes complete.
	go func() {
		for {
			if _, _, err := c.ws.Read(ctx); err != nil {
				return
			}
		}
	}()
	for {
		if _, _, err = ws.Read(ctx); err != nil {
			break
		}
	}
	if code := websocket.CloseStatus(err); code != websocket.StatusGoingAway {
		t.Fatalf("instructor after shutdown: %v, want 1001", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	c.ws.CloseNow()
	ws.CloseNow()
	ts.Close()
}

// TestOverviewLag200 measures how long a change in one of 200 sessions, each
// with a student WebSocket, takes to reach an instructor's overview. It
// reports figures and asserts only that every change arrives: timing on a
// shared machine is not a pass/fail matter.
func TestOverviewLag200(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 200 WebSockets")
	}
	ts := runInstructorLab(t, server.Config{})
	const n = 200
	ids := make([]string, n)
	students := make([]*client, n)
	for i := range ids {
		ids[i] = newID()
		students[i], _ = dial(t, ts, ids[i])
	}
	ws, _, err := dialInstructor(ts, bearerHeader(testToken))
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	var size int
	readUntil(t, ws, "200 rows", func(f overviewFrame) bool {
		size = len(f.raw)
		return f.Type == "overview" && len(f.Sessions) == n
	})
	measure := func(round int, pause time.Duration) []time.Duration {
		var lags []time.Duration
		for i := range 15 {
			time.Sleep(pause) // spacing between changes, not synchronization
			k := (round*15 + i*13) % n
			c := students[k]
			start := time.Now()
			f := c.do(`{"type":"start"}`)
			readUntil(t, ws, "the change", func(o overviewFrame) bool {
				for _, r := range o.Sessions {
					if r.ID == ids[k] {
						return r.Seq == f.Seq
					}
				}
				return false
			})
			lags = append(lags, time.Since(start))
		}
		slices.Sort(lags)
		return lags
	}
	report := func(what string, lags []time.Duration) {
		t.Logf("overview lag, 200 sessions, %s: median %v, p90 %v, max %v (frame %d bytes)",
			what, lags[len(lags)/2].Round(time.Millisecond), lags[len(lags)*9/10].Round(time.Millisecond), lags[len(lags)-1].Round(time.Millisecond), size)
	}
	report("changes 300 ms apart", measure(0, 300*time.Millisecond))
	report("changes back to back", measure(1, 0))
}

// TestLoginLimitAndSecureCookie: guessing the token is throttled (429), and
// the cookie is Secure when a trusted proxy says the browser used HTTPS.
func TestLoginLimitAndSecureCookie(t *testing.T) {
	t.Parallel()
	_, loopback, _ := net.ParseCIDR("127.0.0.0/8")
	_, ts := runLab(t, server.Config{InstructorToken: testToken, TrustedProxies: []*net.IPNet{loopback}})
	post := func(token, proto string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/instructor/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if proto != "" {
			req.Header.Set("X-Forwarded-Proto", proto)
		}
		resp, err := noRedirects.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	secure := func(resp *http.Response) bool {
		for _, c := range resp.Cookies() {
			if c.Name == "lab_instructor" {
				return c.Secure
			}
		}
		t.Fatalf("no login cookie: %d", resp.StatusCode)
		return false
	}
	if secure(post(testToken, "")) {
		t.Error("the cookie is Secure over plain HTTP")
	}
	if !secure(post(testToken, "https")) {
		t.Error("the cookie is not Secure behind a trusted HTTPS proxy")
	}
	var throttled *http.Response
	for range 20 {
		if resp := post("wrong", ""); resp.StatusCode == http.StatusTooManyRequests {
			throttled = resp
			break
		}
	}
	if throttled == nil || throttled.Header.Get("Retry-After") == "" {
		t.Fatal("20 wrong tokens in a row were never throttled")
	}

	// Without trust, the header is ignored.
	_, plain := runLab(t, server.Config{InstructorToken: testToken})
	req, _ := http.NewRequest(http.MethodPost, plain.URL+"/instructor/login", strings.NewReader("token="+testToken))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Forwarded-Proto", "https")
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if secure(resp) {
		t.Error("an untrusted X-Forwarded-Proto made the cookie Secure")
	}
}
