package server_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/toolcall-lab/lab/internal/jsclient"
	"github.com/toolcall-lab/lab/model"
	"github.com/toolcall-lab/lab/server"
)

// codeObject is the state frame's "code" (docs/protocol.md).
type codeObject struct {
	Submission int    `json:"submission"`
	Status     string `json:"status"`
	Cases      int    `json:"cases"`
	Passed     int    `json:"passed"`
	Seed       uint64 `json:"seed"`
	Error      string `json:"error"`
	Line       int    `json:"line"`
	Failure    *struct {
		Case     string      `json:"case"`
		Frames   model.Trace `json:"frames"`
		Step     int         `json:"step"`
		Property string      `json:"property"`
	} `json:"failure"`
	Own []struct {
		Case   string `json:"case"`
		Passed bool   `json:"passed"`
	} `json:"own"`
	raw json.RawMessage
}

// codeOf reads the code object of a state frame, nil when it has none.
func codeOf(t *testing.T, f stateFrame) *codeObject {
	t.Helper()
	var m struct {
		Code json.RawMessage `json:"code"`
	}
	if err := json.Unmarshal(f.raw, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Code) == 0 || string(m.Code) == "null" {
		return nil
	}
	var c codeObject
	if err := json.Unmarshal(m.Code, &c); err != nil {
		t.Fatalf("code %s: %v", m.Code, err)
	}
	c.raw = m.Code
	return &c
}

func testdata(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "internal", "jsclient", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func submitFrame(source string) string {
	b, _ := json.Marshal(map[string]string{"type": "submitCode", "source": source})
	return string(b)
}

// checked reads state frames until one shows submission n checked, and
// returns its code object. Any error frame fails the test.
// A check waits for a sandbox and runs on a core nothing else
// wants, so on a machine busy with the other tests (-race) it can take
// seconds: checked waits up to checkWait for it.
func (c *client) checked(n int) *codeObject {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), checkWait)
	defer cancel()
	for {
		_, data, err := c.ws.Read(ctx)
		if err != nil {
			c.t.Fatalf("submission %d was not checked within %v: %v", n, checkWait, err)
		}
		var f stateFrame
		if err := json.Unmarshal(data, &f); err != nil {
			c.t.Fatal(err)
		}
		f.raw = data
		if f.Type != "state" {
			c.t.Fatalf("got %s frame %q, want a state", f.Type, data)
		}
		if code := codeOf(c.t, f); code != nil && code.Submission == n && code.Status != "checking" {
			return code
		}
	}
}

// checkWait is how long a test waits for a check's result.
const checkWait = 60 * time.Second

// submit sends a program as the session's n-th submission and waits for
// its result.
func (c *client) submit(source string, n int) *codeObject {
	c.t.Helper()
	f := c.do(submitFrame(source))
	if code := codeOf(c.t, f); code == nil || code.Submission != n || code.Status != "checking" {
		c.t.Fatalf("after submission %d: code %s", n, f.raw)
	}
	return c.checked(n)
}

// replayStep replays frames on the reference and on source's module with
// the model's checker and returns the first step where they differ.
func replayStep(t *testing.T, source string, frames model.Trace) int {
	t.Helper()
	newClient, sub, err := jsclient.Load(context.Background(), source, jsclient.DefaultBudget())
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	step, err := model.FirstDifference(newClient, frames)
	if err != nil {
		t.Fatal(err)
	}
	return step
}

// TestCodeSeedModulePasses: the seed's own compiled module passes every
// case; the overview row and the grades show it.
func TestCodeSeedModulePasses(t *testing.T) {
	t.Parallel()
	ts := runInstructorLab(t, server.Config{})
	id := newID()
	c, f := dial(t, ts, id)
	if codeOf(t, f) != nil {
		t.Fatalf("a new session has a code object: %s", f.raw)
	}
	started := time.Now()
	code := c.submit(testdata(t, "ToolCall.res.js"), 1)
	t.Logf("the seed's module: %d cases checked in %v", code.Cases, time.Since(started))
	if code.Status != "passed" || code.Passed != code.Cases || code.Cases < model.NumSteps+model.CampaignSize || code.Failure != nil {
		t.Fatalf("the seed's module: %s", code.raw)
	}
	status, _, body := call(t, ts, "GET", "/api/sessions", testToken, "", "")
	var rows struct {
		Sessions []struct {
			ID   string `json:"id"`
			Code *struct {
				Submissions, Cases, Passed int
				Status                     string
			} `json:"code"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal(body, &rows); err != nil || status != 200 || len(rows.Sessions) != 1 {
		t.Fatalf("GET /api/sessions: %d %s", status, body)
	}
	if r := rows.Sessions[0].Code; r == nil || r.Submissions != 1 || r.Status != "passed" || r.Passed != code.Cases {
		t.Fatalf("the overview row's code: %s", body)
	}
	if status, _, _ := call(t, ts, "GET", "/lab/"+id+"/code/failure.svg", "", "", ""); status != http.StatusNotFound {
		t.Fatalf("the failure of a passing program: %d, want 404", status)
	}
	status, _, body = call(t, ts, "GET", "/api/grades.csv", testToken, "", "")
	recs, err := csv.NewReader(strings.NewReader(string(body))).ReadAll()
	if err != nil || status != 200 || len(recs) != 2 {
		t.Fatalf("grades: %d %s", status, body)
	}
	head := strings.Join(recs[0][len(recs[0])-5:], ",")
	cells := strings.Join(recs[1][len(recs[1])-5:], ",")
	if head != "code_submissions,code_status,code_passed,code_cases,code_property" || cells != "1,passed,"+itoa(uint64(code.Cases))+","+itoa(uint64(code.Cases))+"," {
		t.Fatalf("grades' code columns: %s / %s", head, cells)
	}
}

// TestCodeWrongModulesFail: each wrong module fails with a shrunk trace of
// at most 8 frames, which differs on replay exactly at step, and is drawn.
func TestCodeWrongModulesFail(t *testing.T) {
	t.Parallel()
	ts := runInstructorLab(t, server.Config{})
	files, err := filepath.Glob(filepath.Join("..", "internal", "jsclient", "testdata", "wrong", "*.js"))
	if err != nil || len(files) < 10 {
		t.Fatalf("wrong modules: %v %v", files, err)
	}
	for _, file := range files {
		source := testdata(t, filepath.Join("wrong", filepath.Base(file)))
		id := newID()
		c, _ := dial(t, ts, id)
		started := time.Now()
		code := c.submit(source, 1)
		if code.Status != "failed" || code.Failure == nil || len(code.Failure.Frames) == 0 || len(code.Failure.Frames) > 8 || code.Failure.Property == "" {
			t.Fatalf("%s: %s", file, code.raw)
		}
		if got := replayStep(t, source, code.Failure.Frames); got != code.Failure.Step {
			t.Fatalf("%s: the failure replays differing at step %d, not %d", file, got, code.Failure.Step)
		}
		t.Logf("%s: %q in %d frames (%v)", filepath.Base(file), code.Failure.Property, len(code.Failure.Frames), time.Since(started))
		for _, path := range []string{"/lab/" + id + "/code/failure.svg", "/api/sessions/" + id + "/code/failure.svg"} {
			status, h, body := call(t, ts, "GET", path, testToken, "", "")
			if status != 200 || !strings.HasPrefix(h.Get("Content-Type"), "image/svg+xml") || !strings.Contains(string(body), "<svg") {
				t.Fatalf("GET %s: %d %s", path, status, body)
			}
		}
	}
	if status, _, _ := call(t, ts, "GET", "/api/sessions/"+newID()+"/code/failure.svg", testToken, "", ""); status != http.StatusNotFound {
		t.Fatalf("an unknown session's failure: %d", status)
	}
}

// TestCodeHostileProgramsEndAsErrors: each hostile program ends as status
// error with a sentence, while another student's changes are answered.
func TestCodeHostileProgramsEndAsErrors(t *testing.T) {
	t.Parallel()
	_, ts := runLab(t, server.Config{FrameRate: 1000, FrameBurst: 1000, Limits: model.Limits{MaxHeld: 1000, MaxReceipts: 1000}})
	files, err := filepath.Glob(filepath.Join("..", "internal", "jsclient", "testdata", "hostile", "*.js"))
	if err != nil || len(files) < 9 {
		t.Fatalf("hostile programs: %v %v", files, err)
	}
	other, f := dial(t, ts, newID())
	seq := f.Seq
	for _, file := range files {
		hostile, _ := dial(t, ts, newID())
		started := time.Now()
		if code := codeOf(t, hostile.do(submitFrame(testdata(t, filepath.Join("hostile", filepath.Base(file)))))); code == nil || code.Status != "checking" {
			t.Fatalf("%s: not checking", file)
		}
		// While it is checked, the other student's changes are answered.
		for range 5 {
			g := other.do(queueReply(`{"runId":"run-1","callId":"lookup","kind":"completed","output":"x"}`))
			if g.Seq != seq+1 {
				t.Fatalf("the other student's change: seq %d after %d", g.Seq, seq)
			}
			seq = g.Seq
		}
		code := hostile.checked(1)
		// A program hostile in receive or view only may also ignore a
		// deadline, which the search finds in two frames, before any reply
		// reaches the hostile code: then it fails there.
		shorter := code.Status == "failed" && code.Failure != nil && len(code.Failure.Frames) <= 2 && code.Failure.Frames[0].Kind == model.QueueDeadline
		if !shorter && (code.Status != "error" || len(code.Error) < 20) {
			t.Fatalf("%s: %s", file, code.raw)
		}
		t.Logf("%s: %s (%v)", filepath.Base(file), code.Error, time.Since(started))
	}
}

// TestCodeRefusals: a program over 64 KiB and submissions past the
// session's allowance get error frames; the session's state is unchanged.
func TestCodeRefusals(t *testing.T) {
	t.Parallel()
	_, ts := runLab(t, server.Config{})
	c, f := dial(t, ts, newID())
	c.send(submitFrame(strings.Repeat("x", model.MaxSourceBytes+1)))
	if r := c.refusal(); r.Reason != "limit" || !strings.Contains(r.Error, "65536") {
		t.Fatalf("a program over 64 KiB: %s", r.raw)
	}
	syntax := "export function begin( {"
	code := c.submit(syntax, 1)
	if code.Status != "error" || code.Line != 1 || code.Error == "" || code.Cases != 0 {
		t.Fatalf("a syntax error: %s", code.raw)
	}
	// The allowance is ten at once (server/limits.go): nine more, then a
	// refusal that says when to try again.
	for n := 2; n <= 10; n++ {
		c.send(submitFrame(syntax))
	}
	for {
		g := c.read()
		if g.Type == "error" {
			t.Fatalf("refused within the allowance: %s", g.raw)
		}
		if code := codeOf(t, g); code.Submission == 10 {
			break
		}
	}
	c.send(submitFrame(syntax))
	for {
		g := c.read()
		if g.Type == "state" {
			continue // the checks of 2 and 3
		}
		if g.Type != "error" || g.Reason != "rate_limit" || !strings.Contains(g.Error, "try again in 1 second") {
			t.Fatalf("past the allowance: %s", g.raw)
		}
		break
	}
	// The refused one is no submission: the next frame still shows 10.
	if g := codeOf(t, c.do(`{"type":"start"}`)); g == nil || g.Submission != 10 || g.Seed >= model.MaxSeed || f.Seq != 0 {
		t.Fatalf("after the refusal: %+v", g)
	}
}

// TestCodeAfterRestart: after a restart on the same durable store, the
// session shows the same code result, checked again from the log.
func TestCodeAfterRestart(t *testing.T) {
	t.Parallel()
	st := openSQLite(t)
	lab, ts := runLab(t, server.Config{Store: st})
	id := newID()
	c, _ := dial(t, ts, id)
	want := c.submit(testdata(t, "wrong/last-final-wins.js"), 1)
	c.ws.CloseNow() // a tab that reads no more would hold up the close handshake
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := lab.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	_, ts2 := runLab(t, server.Config{Store: st})
	c2, f := dial(t, ts2, id)
	got := codeOf(t, f)
	if got == nil || got.Status == "checking" {
		got = c2.checked(1)
	}
	if string(got.raw) != string(want.raw) {
		t.Fatalf("after a restart:\n got %s\nwant %s", got.raw, want.raw)
	}
}

// TestCodeOnReplica: another replica shows the same code result.
func TestCodeOnReplica(t *testing.T) {
	t.Parallel()
	_, tss, _ := replicas(t, 2)
	id := newID()
	c, _ := dial(t, tss[0], id)
	want := c.submit(testdata(t, "wrong/deadline-over-result.js"), 1)
	c2, f := dial(t, tss[1], id)
	got := codeOf(t, f)
	if got == nil || got.Status == "checking" {
		got = c2.checked(1)
	}
	if string(got.raw) != string(want.raw) {
		t.Fatalf("on the other replica:\n got %s\nwant %s", got.raw, want.raw)
	}
}

// TestCodeInstructorCase: an instructor's case added to a class re-checks
// its students' latest submissions, and "own" shows who passes it.
func TestCodeInstructorCase(t *testing.T) {
	t.Parallel()
	ts := runInstructorLab(t, server.Config{})
	cl := createClass(t, ts, "Distributed systems")
	join := func(local, name, source string) *client {
		_, loc, _ := joinAs(t, browserClient(t, local), ts, cl.Code, name)
		m := labPath.FindStringSubmatch(loc)
		if m == nil {
			t.Fatalf("joining as %s: sent to %q", name, loc)
		}
		c, _ := dial(t, ts, m[1])
		c.submit(source, 1)
		return c
	}
	right := join("127.0.0.1", "Ada", testdata(t, "ToolCall.res.js"))
	wrong := join("127.0.0.2", "Bob", testdata(t, "wrong/last-final-wins.js"))
	frames := `[{"type":"queueReply","raw":"{\"runId\":\"run-1\",\"callId\":\"lookup\",\"kind\":\"completed\",\"output\":\"A\"}"},` +
		`{"type":"queueReply","raw":"{\"runId\":\"run-1\",\"callId\":\"lookup\",\"kind\":\"completed\",\"output\":\"B\"}"},` +
		`{"type":"deliver","message":1},{"type":"deliver","message":2}]`
	for _, bad := range []string{
		`{"name":"x","frames":[{"type":"deliver","message":1}],"class":"` + cl.ID + `"}`,
		`{"name":"","frames":` + frames + `,"class":"` + cl.ID + `"}`,
		`{"name":"x","frames":` + frames + `}`,
	} {
		if status, _, body := call(t, ts, "POST", "/api/code/cases", testToken, "", bad); status != 400 || !strings.Contains(string(body), `"error"`) {
			t.Fatalf("POST %s: %d %s", bad, status, body)
		}
	}
	status, _, body := call(t, ts, "POST", "/api/code/cases", testToken, "", `{"name":"the first final stays","frames":`+frames+`,"class":"`+cl.ID+`"}`)
	if status != 200 || !strings.Contains(string(body), `"applied":2`) {
		t.Fatalf("POST /api/code/cases: %d %s", status, body)
	}
	for _, tc := range []struct {
		c      *client
		passes bool
	}{{right, true}, {wrong, false}} {
		code := tc.c.checked(2 - 1) // the same submission, checked again with the case
		for code.Own == nil {
			code = tc.c.checked(1)
		}
		if len(code.Own) != 1 || code.Own[0].Case != "the first final stays" || code.Own[0].Passed != tc.passes {
			t.Fatalf("own: %s", code.raw)
		}
	}
}

// TestCodeFairQueue: a session that resubmits while its check runs goes
// behind a session that asked meanwhile. With one worker, A's slow
// program is being checked when A submits it again and B submits for the
// first time, then A a third time: B's result comes before A's last. (A
// queue that kept A's place ahead of B, or ran A's newer input at once,
// would check A's 2 s program again first.)
func TestCodeFairQueue(t *testing.T) {
	t.Parallel()
	_, ts := runLab(t, server.Config{CodeWorkers: 1})
	slow, right := testdata(t, "slow.js"), testdata(t, "ToolCall.res.js")
	a, _ := dial(t, ts, newID())
	b, _ := dial(t, ts, newID())
	a.do(submitFrame(slow))
	time.Sleep(300 * time.Millisecond) // the one worker takes it
	a.do(submitFrame(slow))
	b.do(submitFrame(right))
	a.do(submitFrame(slow))
	// Both sessions' frames are read at once; the order their results come
	// in is the order the checker ran them.
	type result struct {
		who    string
		status string
		err    error
	}
	results := make(chan result, 2)
	ctx, cancel := context.WithTimeout(context.Background(), checkWait)
	defer cancel()
	await := func(c *client, who string, n int) {
		for {
			_, data, err := c.ws.Read(ctx)
			if err != nil {
				results <- result{who: who, err: err}
				return
			}
			var f struct {
				Type string `json:"type"`
				Code *struct {
					Submission int    `json:"submission"`
					Status     string `json:"status"`
				} `json:"code"`
			}
			if err := json.Unmarshal(data, &f); err != nil || f.Type != "state" {
				results <- result{who: who, err: fmt.Errorf("frame %.200s: %v", data, err)}
				return
			}
			if f.Code != nil && f.Code.Submission == n && f.Code.Status != "checking" {
				results <- result{who: who, status: f.Code.Status}
				return
			}
		}
	}
	go await(a, "A", 3)
	go await(b, "B", 1)
	first, second := <-results, <-results
	for _, r := range []result{first, second} {
		if r.err != nil {
			t.Fatalf("%s: %v", r.who, r.err)
		}
	}
	if first.who != "B" || first.status != "passed" || second.status != "error" {
		t.Fatalf("results in the order %s (%s), %s (%s): want B's first check before A's resubmission", first.who, first.status, second.who, second.status)
	}
}

// TestChecksLeaveACoreToTheClass: while the class makes changes the
// checker runs one check at a time, leaving the other core to the class;
// once the class is quiet it runs as many as it has workers. A kept
// outcome needs no core and never waits for one.
func TestChecksLeaveACoreToTheClass(t *testing.T) {
	t.Parallel()
	lab, ts := runLab(t, server.Config{CodeWorkers: 2})
	slow := testdata(t, "slow.js") // each check takes its whole 2 s budget
	right := testdata(t, "ToolCall.res.js")
	a, _ := dial(t, ts, newID())
	b, _ := dial(t, ts, newID())
	c, _ := dial(t, ts, newID())
	d, _ := dial(t, ts, newID())
	if code := c.submit(right, 1); code.Status != "passed" { // its outcome kept
		t.Fatalf("the lesson's module: %s", code.raw)
	}
	// peak is the most checks seen running at once within span.
	peak := func(span time.Duration) float64 {
		most := 0.0
		for end := time.Now().Add(span); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			most = max(most, metricValue(t, lab, "lab_code_checks_running"))
		}
		return most
	}

	// Three more students click through the lesson, a change every 30 ms
	// among them (each under its connection's frame rate).
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var tabs []*websocket.Conn
	for range 3 {
		ws, _, err := websocket.Dial(ctx, wsURL(ts, newID()), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ws.CloseNow()
		go func() { // its state frames, unread
			for {
				if _, _, err := ws.Read(ctx); err != nil {
					return
				}
			}
		}()
		tabs = append(tabs, ws)
	}
	clicked := make(chan error, 1)
	go func() {
		tick := time.NewTicker(30 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			if err := tabs[i%len(tabs)].Write(ctx, websocket.MessageText, []byte(`{"type":"start"}`)); err != nil {
				if ctx.Err() != nil {
					err = nil // stopped mid-write
				}
				clicked <- err
				return
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				clicked <- nil
				return
			}
		}
	}()
	time.Sleep(300 * time.Millisecond)
	a.send(submitFrame(slow + "\n// a, busy class\n"))
	time.Sleep(100 * time.Millisecond) // the first worker takes it
	// A module whose outcome is kept takes no core: it does not wait.
	asked := time.Now()
	if code := d.submit(right, 1); code.Status != "passed" {
		t.Fatalf("the lesson's module, checked before: %s", code.raw)
	}
	if took := time.Since(asked); took > time.Second {
		t.Errorf("a kept outcome took %v while another check ran, want it at once", took)
	}
	b.send(submitFrame(slow + "\n// b, busy class\n"))
	if got := peak(1500 * time.Millisecond); got != 1 {
		t.Errorf("while the class makes changes, %v checks ran at once at most, want 1", got)
	}
	stop()
	if err := <-clicked; err != nil {
		t.Fatalf("the clicking student: %v", err)
	}
	a.checked(1)
	b.checked(1)

	time.Sleep(400 * time.Millisecond) // quiet for longer than the checker waits
	a.send(submitFrame(slow + "\n// a, quiet class\n"))
	b.send(submitFrame(slow + "\n// b, quiet class\n"))
	if got := peak(1500 * time.Millisecond); got != 2 {
		t.Errorf("with the class quiet, %v checks ran at once at most, want 2 (the workers)", got)
	}
	a.checked(2)
	b.checked(2)
}

// TestAClassSharesOneCheck: the sessions of a class that submit one module
// all get its result, with the module's seed, and the lab runs its check
// about once (at most once per worker, the others reuse the outcome); a
// module that differs by a comment is checked anew, with a seed of its own.
func TestAClassSharesOneCheck(t *testing.T) {
	t.Parallel()
	ts := runInstructorLab(t, server.Config{CodeWorkers: 2})
	src := testdata(t, "ToolCall.res.js")
	const n = 6
	clients := make([]*client, n)
	for i := range clients {
		clients[i], _ = dial(t, ts, newID())
	}
	for _, c := range clients {
		if f := c.do(submitFrame(src)); codeOf(t, f).Status != "checking" {
			t.Fatalf("after the submission: %s", f.raw)
		}
	}
	var first *codeObject
	for i, c := range clients {
		code := c.checked(1)
		if code.Status != "passed" || code.Seed != model.SeedFor(model.JavaScript, src) {
			t.Fatalf("session %d: %s", i, code.raw)
		}
		if first != nil && (code.Passed != first.Passed || code.Cases != first.Cases) {
			t.Fatalf("session %d: %s, session 0: %s", i, code.raw, first.raw)
		}
		first = code
	}
	ran, kept := checksMetric(t, ts, "ran"), checksMetric(t, ts, "kept")
	if ran > 2 || ran+kept != n {
		t.Fatalf("checks ran %v, kept %v: want at most 2 run (the workers) of %d", ran, kept, n)
	}
	other := clients[0].submit(src+"\n// mine\n", 2)
	if other.Status != "passed" || other.Seed == first.Seed {
		t.Fatalf("a module that differs by a comment: %s", other.raw)
	}
	if got := checksMetric(t, ts, "ran"); got != ran+1 {
		t.Fatalf("checks ran %v after a new module, want %v", got, ran+1)
	}
}

// checksMetric is lab_code_checks_total{how=how}.
func checksMetric(t *testing.T, ts *httptest.Server, how string) float64 {
	t.Helper()
	status, _, body := call(t, ts, "GET", "/metrics", testToken, "", "")
	if status != http.StatusOK {
		t.Fatalf("GET /metrics: %d", status)
	}
	prefix := `lab_code_checks_total{how="` + how + `"} `
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return 0
}
