package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/toolcall-lab/lab/model"
	"github.com/toolcall-lab/lab/server"
)

func TestRoutes(t *testing.T) {
	t.Parallel()
	_, ts := runLab(t, server.Config{})

	resp := get(t, ts, "/")
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !regexp.MustCompile(`^/lab/[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(loc) {
		t.Fatalf("GET / = %d %q, want 303 to /lab/{uuid}", resp.StatusCode, loc)
	}
	if other := get(t, ts, "/").Header.Get("Location"); other == loc {
		t.Fatalf("two visits to / gave the same session %s", loc)
	}

	page := get(t, ts, loc)
	body, _ := io.ReadAll(page.Body)
	if page.StatusCode != http.StatusOK || !strings.Contains(page.Header.Get("Content-Type"), "text/html") || !bytes.Contains(body, []byte(`id="queue-reply"`)) {
		t.Fatalf("GET %s = %d %s", loc, page.StatusCode, page.Header.Get("Content-Type"))
	}
	if csp := page.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
		t.Fatalf("CSP = %q", csp)
	}
	if js := get(t, ts, "/static/lab.js"); js.StatusCode != http.StatusOK {
		t.Fatalf("GET /static/lab.js = %d", js.StatusCode)
	}

	id := newID()
	for _, bad := range []string{"not-a-uuid", strings.ToUpper(id), "{" + id + "}", "urn:uuid:" + id, strings.ReplaceAll(id, "-", ""), id + "0"} {
		if code := get(t, ts, "/lab/"+bad).StatusCode; code != http.StatusNotFound {
			t.Errorf("GET /lab/%s = %d, want 404", bad, code)
		}
		if code := get(t, ts, "/lab/"+bad+"/ws").StatusCode; code != http.StatusNotFound {
			t.Errorf("GET /lab/%s/ws = %d, want 404", bad, code)
		}
	}
}

func TestNewSessionState(t *testing.T) {
	t.Parallel()
	_, ts := runLab(t, server.Config{})
	id := newID()
	_, f := dial(t, ts, id)
	want := `{"type":"state","session":"` + id + `","queue":[],"receipts":[],"seq":0,"call":{"runId":"run-1","callId":"lookup","status":"Pending","detail":""},"notice":"Ready. Queue a reply or a local deadline observation.","draft":"{\"runId\":\"run-1\",\"callId\":\"lookup\",\"kind\":\"completed\",\"output\":\"Answer for run-1\"}","name":"",` +
		`"exercise":{"done":[],"current":1,"parts":[[false],[false],[false],[false,false,false],[false],[false],[false,false],[false,false,false],[false,false]],"predictionsRequired":false},"predictions":{"made":0,"right":0},` +
		`"mastery":{"matchingReply":{"predicted":0,"right":0,"streak":0,"mastered":false},"staleReply":{"predicted":0,"right":0,"streak":0,"mastered":false},` +
		`"duplicate":{"predicted":0,"right":0,"streak":0,"mastered":false},"contradictory":{"predicted":0,"right":0,"streak":0,"mastered":false},` +
		`"deadline":{"predicted":0,"right":0,"streak":0,"mastered":false},"lateReply":{"predicted":0,"right":0,"streak":0,"mastered":false},` +
		`"staleDeadline":{"predicted":0,"right":0,"streak":0,"mastered":false},"wrongCallId":{"predicted":0,"right":0,"streak":0,"mastered":false},` +
		`"malformedJson":{"predicted":0,"right":0,"streak":0,"mastered":false},"wrongShape":{"predicted":0,"right":0,"streak":0,"mastered":false}}}`
	if string(f.raw) != want {
		t.Fatalf("first frame:\n got %s\nwant %s", f.raw, want)
	}
}

func reply(run, callID, kind, field, text string) string {
	return fmt.Sprintf(`{"runId":%q,"callId":%q,"kind":%q,%q:%q}`, run, callID, kind, field, text)
}

// TestWalkthrough is the seed's nine steps over the protocol.
func TestWalkthrough(t *testing.T) {
	t.Parallel()
	_, ts := runLab(t, server.Config{})
	c, _ := dial(t, ts, newID())
	type want struct{ run, status, detail, notice string }
	expect := func(f stateFrame, w want) {
		t.Helper()
		got := want{f.Call.RunID, f.Call.Status, f.Call.Detail, f.Notice}
		if got != w || f.Call.CallID != "lookup" {
			t.Fatalf("state %+v, want %+v", got, w)
		}
	}
	receipt := func(f stateFrame, text string) {
		t.Helper()
		r := f.Receipts[len(f.Receipts)-1]
		if got := fmt.Sprintf("Delivered message %d: %s", r.Message, r.Notice); got != text {
			t.Fatalf("last receipt %q, want %q", got, text)
		}
	}
	ready := "Ready. Queue a reply or a local deadline observation."
	unresolved := "No final reply observed. A matching late reply can still resolve this call."

	// 1
	f := c.do(queueReply(reply("run-1", "lookup", "completed", "output", "Old answer")))
	expect(f, want{"run-1", "Pending", "", ready})
	if f.Queue[0].Label != reply("run-1", "lookup", "completed", "output", "Old answer") || f.Queue[0].From != "student" || f.Queue[0].Kind != "reply" {
		t.Fatalf("queue %+v", f.Queue)
	}
	// 2
	f = c.do(`{"type":"start"}`)
	expect(f, want{"run-2", "Pending", "", "Started a new run. Older messages remain queued."})
	if f.Draft != `{"runId":"run-2","callId":"lookup","kind":"completed","output":"Answer for run-2"}` {
		t.Fatalf("draft %s", f.Draft)
	}
	c.do(queueReply(reply("run-2", "lookup", "completed", "output", "New answer")))
	f = c.do(`{"type":"deliver","message":2}`)
	expect(f, want{"run-2", "Completed", "New answer", "Accepted completion."})
	// 3
	f = c.do(`{"type":"deliver","message":1}`)
	expect(f, want{"run-2", "Completed", "New answer", "Ignored reply: different call identity."})
	receipt(f, "Delivered message 1: Ignored reply: different call identity.")
	// 4
	f = c.do(`{"type":"deliver","message":2}`)
	receipt(f, "Delivered message 2: Ignored reply: final outcome already recorded.")
	c.do(queueReply(reply("run-2", "lookup", "completed", "output", "Different")))
	f = c.do(`{"type":"deliver","message":3}`)
	expect(f, want{"run-2", "Completed", "New answer", "Ignored reply: final outcome already recorded."})
	c.do(queueReply(reply("run-2", "lookup", "rejected", "reason", "Contradiction")))
	f = c.do(`{"type":"deliver","message":4}`)
	expect(f, want{"run-2", "Completed", "New answer", "Ignored reply: final outcome already recorded."})
	// 5
	f = c.do(`{"type":"start"}`)
	c.do(`{"type":"queueDeadline"}`)
	f = c.do(queueReply(f.Draft))
	if f.Queue[4].Label != "Deadline for run-3/lookup" || f.Queue[4].Kind != "deadline" {
		t.Fatalf("deadline entry %+v", f.Queue[4])
	}
	f = c.do(`{"type":"deliver","message":5}`)
	expect(f, want{"run-3", "Unresolved", unresolved, "Unresolved: deadline observed without a final reply."})
	f = c.do(`{"type":"deliver","message":6}`)
	expect(f, want{"run-3", "Completed", "Answer for run-3", "Accepted completion."})
	// 6
	c.do(`{"type":"start"}`)
	c.do(`{"type":"queueDeadline"}`)
	c.do(queueReply(reply("run-4", "lookup", "rejected", "reason", "The query is empty")))
	f = c.do(`{"type":"deliver","message":7}`)
	expect(f, want{"run-4", "Unresolved", unresolved, "Unresolved: deadline observed without a final reply."})
	f = c.do(`{"type":"deliver","message":7}`)
	expect(f, want{"run-4", "Unresolved", unresolved, "Still unresolved: no final reply."})
	f = c.do(`{"type":"deliver","message":8}`)
	expect(f, want{"run-4", "Rejected", "The query is empty", "Accepted rejection."})
	// 7
	f = c.do(`{"type":"start"}`)
	c.do(`{"type":"queueDeadline"}`)
	c.do(queueReply(f.Draft))
	c.do(`{"type":"deliver","message":10}`)
	f = c.do(`{"type":"deliver","message":9}`)
	expect(f, want{"run-5", "Completed", "Answer for run-5", "Ignored deadline: final outcome already recorded."})
	c.do(`{"type":"queueDeadline"}`)
	c.do(`{"type":"start"}`)
	f = c.do(`{"type":"deliver","message":11}`)
	expect(f, want{"run-6", "Pending", "", "Ignored deadline: different call identity."})
	// 8
	c.do(queueReply(reply("run-6", "other", "completed", "output", "x")))
	f = c.do(`{"type":"deliver","message":12}`)
	expect(f, want{"run-6", "Pending", "", "Ignored reply: different call identity."})
	c.do(queueReply(`{`))
	f = c.do(`{"type":"deliver","message":13}`)
	expect(f, want{"run-6", "Pending", "", "Invalid JSON: could not parse message."})
	c.do(queueReply(`{"runId":"run-6","callId":"lookup","kind":"completed","output":42}`))
	f = c.do(`{"type":"deliver","message":14}`)
	expect(f, want{"run-6", "Pending", "", "Invalid reply: expected string identifiers and a completed output or rejected reason."})
	// 9
	c.do(queueReply(reply("run-6", "lookup", "completed", "output", "")))
	f = c.do(`{"type":"deliver","message":15}`)
	expect(f, want{"run-6", "Completed", "", "Accepted completion."})
	c.do(`{"type":"start"}`)
	c.do(queueReply(reply("run-7", "lookup", "completed", "output", "<strong>Found it</strong>")))
	f = c.do(`{"type":"deliver","message":16}`)
	expect(f, want{"run-7", "Completed", "<strong>Found it</strong>", "Accepted completion."})
	if !bytes.Contains(f.raw, []byte(`"detail":"<strong>Found it</strong>"`)) {
		t.Fatalf("markup was escaped in the frame: %s", f.raw)
	}
	if f.Seq != 40 || len(f.Queue) != 16 || len(f.Receipts) != 18 {
		t.Fatalf("seq %d, %d held, %d receipts", f.Seq, len(f.Queue), len(f.Receipts))
	}
}

// TestTabsSeeTheSameFrames: two connections of one session receive the same
// frames, byte for byte, in the same order, whichever of them acts.
func TestTabsSeeTheSameFrames(t *testing.T) {
	t.Parallel()
	_, ts := runLab(t, server.Config{})
	id := newID()
	a, fa := dial(t, ts, id)
	b, fb := dial(t, ts, id)
	if !bytes.Equal(fa.raw, fb.raw) {
		t.Fatalf("first frames differ:\n%s\n%s", fa.raw, fb.raw)
	}
	frames := []string{`{"type":"queueDeadline"}`, `{"type":"start"}`, queueReply("x"), `{"type":"deliver","message":1}`, `{"type":"deliver","message":2}`}
	for i, frame := range frames {
		actor := a
		if i%2 == 1 {
			actor = b
		}
		actor.send(frame)
		fa, fb := a.state(), b.state()
		if !bytes.Equal(fa.raw, fb.raw) || fa.Seq != uint64(i+1) {
			t.Fatalf("after %s: seq %d and %d:\n%s\n%s", frame, fa.Seq, fb.Seq, fa.raw, fb.raw)
		}
	}
	// An error answers its own frame in order: after the state of the frame before it.
	a.send(`{"type":"queueDeadline"}`)
	a.send(`{"type":"bogus"}`)
	if f := a.state(); f.Seq != 6 {
		t.Fatalf("seq %d, want 6", f.Seq)
	}
	a.refused()
	b.state()
	// A burst from both tabs still reaches both in one order.
	for range 5 {
		a.send(`{"type":"queueDeadline"}`)
		b.send(`{"type":"start"}`)
	}
	var lastA, lastB stateFrame
	for range 10 {
		lastA, lastB = a.state(), b.state()
		if !bytes.Equal(lastA.raw, lastB.raw) {
			t.Fatalf("burst frames differ:\n%s\n%s", lastA.raw, lastB.raw)
		}
	}
	if lastA.Seq != 16 || lastA.Call.RunID != "run-7" {
		t.Fatalf("after the burst: seq %d %s", lastA.Seq, lastA.Call.RunID)
	}
}

func TestReconnectSeesSameState(t *testing.T) {
	t.Parallel()
	_, ts := runLab(t, server.Config{})
	id := newID()
	c, _ := dial(t, ts, id)
	c.do(queueReply("held"))
	last := c.do(`{"type":"start"}`)
	c.ws.Close(websocket.StatusNormalClosure, "")
	_, again := dial(t, ts, id)
	if !bytes.Equal(again.raw, last.raw) {
		t.Fatalf("reconnect:\n got %s\nwant %s", again.raw, last.raw)
	}
	_, other := dial(t, ts, newID())
	if other.Seq != 0 || other.Session == id {
		t.Fatalf("another session is not fresh: %s", other.raw)
	}
}

func TestRefusedFrames(t *testing.T) {
	t.Parallel()
	limits := model.Limits{MaxHeld: 3}
	_, ts := runLab(t, server.Config{Limits: limits})
	c, _ := dial(t, ts, newID())
	c.do(queueReply("one"))
	base := c.do(`{"type":"deliver","message":1}`)

	tests := []struct{ frame, want string }{
		{`nope`, "frame is not valid JSON"},
		{``, "frame is not valid JSON"},
		{`{"type":"start"} {}`, "frame is not valid JSON"},
		{`[]`, "frame must be a JSON object, not array"},
		{`"start"`, "frame must be a JSON object, not string"},
		{`{}`, `missing field "type"`},
		{`{"Type":"start"}`, `missing field "type"`},
		{`{"type":1}`, `field "type" must be a string, not number`},
		{`{"type":"Start"}`, `unknown frame type "Start"`},
		{`{"type":"queueReply"}`, `missing field "raw"`},
		{`{"type":"queueReply","raw":null}`, `field "raw" must be a string, not null`},
		{`{"type":"queueReply","raw":{"runId":"run-1"}}`, `field "raw" must be a string, not object`},
		{`{"type":"deliver"}`, `missing field "message"`},
		{`{"type":"deliver","message":"1"}`, `field "message" must be a number, not string`},
		{`{"type":"deliver","message":0}`, `not 0`},
		{`{"type":"deliver","message":-1}`, `not -1`},
		{`{"type":"deliver","message":1.5}`, `not 1.5`},
		{`{"type":"deliver","message":1e400}`, `not 1e400`},
		{`{"type":"deliver","message":7}`, "unknown message id 7"},
		{queueReply(strings.Repeat("x", 65537)), "reply size in bytes limit reached (at most 65536)"},
	}
	for _, tt := range tests {
		reason := "invalid_frame"
		switch {
		case strings.Contains(tt.want, "unknown message id"):
			reason = "unknown_message"
		case strings.Contains(tt.want, "limit reached"):
			reason = "limit"
		}
		c.send(tt.frame)
		if got := c.refusal(); !strings.Contains(got.Error, tt.want) || got.Reason != reason {
			t.Errorf("frame %.60q: error %q (reason %q), want it to contain %q (reason %q)", tt.frame, got.Error, got.Reason, tt.want, reason)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.ws.Write(ctx, websocket.MessageBinary, []byte(`{"type":"start"}`)); err != nil {
		t.Fatal(err)
	}
	if got := c.refused(); !strings.Contains(got, "text") {
		t.Errorf("binary frame: %q", got)
	}
	// Nothing changed, and the connection still works.
	f := c.do(`{"type":"deliver","message":1e0}`)
	if f.Seq != base.Seq+1 || len(f.Receipts) != 2 {
		t.Fatalf("after refusals: seq %d (want %d), %d receipts", f.Seq, base.Seq+1, len(f.Receipts))
	}
	// Caps name themselves.
	c.do(`{"type":"queueDeadline"}`)
	c.do(`{"type":"queueDeadline"}`)
	c.send(`{"type":"queueDeadline"}`)
	if got := c.refused(); got != "held messages limit reached (at most 3)" {
		t.Fatalf("queue cap: %q", got)
	}
}

func TestLargeFrames(t *testing.T) {
	t.Parallel()
	_, ts := runLab(t, server.Config{})
	c, _ := dial(t, ts, newID())
	// A 64 KiB reply of characters that JSON must escape is accepted.
	raw := strings.Repeat("\x01", 65536)
	f := c.do(queueReply(raw))
	if len(f.Queue) != 1 || f.Queue[0].Label != raw {
		t.Fatal("a 64 KiB reply was not held exactly")
	}
	// A frame over the hard cap closes the connection with 1009.
	c.send(queueReply(strings.Repeat("y", 1<<20)))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _, err := c.ws.Read(ctx)
	if code := websocket.CloseStatus(err); code != websocket.StatusMessageTooBig {
		t.Fatalf("oversized frame: %v (status %d), want close 1009", err, code)
	}
}

func TestOriginCheck(t *testing.T) {
	t.Parallel()
	_, ts := runLab(t, server.Config{Origins: []string{"proxy.example"}})
	dialFrom := func(origin string) (int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ws, resp, err := websocket.Dial(ctx, wsURL(ts, newID()), &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {origin}}})
		if err == nil {
			ws.CloseNow()
		}
		if resp == nil {
			return 0, err
		}
		return resp.StatusCode, err
	}
	if code, err := dialFrom("http://evil.example"); err == nil || code != http.StatusForbidden {
		t.Fatalf("cross-origin dial: %d %v, want 403", code, err)
	}
	if code, err := dialFrom("https://proxy.example"); err != nil {
		t.Fatalf("allowed origin refused: %d %v", code, err)
	}
	if code, err := dialFrom(ts.URL); err != nil {
		t.Fatalf("same origin refused: %d %v", code, err)
	}
}

// TestShutdownClosesSockets: Shutdown closes with 1001, Restart with 1012,
// each with its reason; afterwards upgrades are refused before they happen,
// and nothing of the server is left running.
func TestShutdownClosesSockets(t *testing.T) {
	for _, tt := range []struct {
		name   string
		stop   func(*server.Server, context.Context) error
		code   websocket.StatusCode
		reason string
	}{
		{"shutdown", (*server.Server).Shutdown, websocket.StatusGoingAway, "the lab server is shutting down"},
		{"restart", (*server.Server).Restart, websocket.StatusServiceRestart, "the lab server is restarting"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			lab := startServer(t, server.Config{})
			ts := httptest.NewServer(lab.Handler())
			defer ts.Close()
			c, _ := dial(t, ts, newID())
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- tt.stop(lab, ctx) }()
			_, _, err := c.ws.Read(ctx)
			var ce websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != tt.code || ce.Reason != tt.reason {
				t.Fatalf("read after %s: %v, want close %d %q", tt.name, err, tt.code, tt.reason)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			// New connections are refused before the upgrade.
			ws, resp, err := websocket.Dial(ctx, wsURL(ts, newID()), nil)
			if err == nil {
				ws.CloseNow()
			}
			if resp == nil || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
				t.Fatalf("dial after %s: %v %v, want 503 with Retry-After", tt.name, resp, err)
			}
		})
	}
}

// TestStuckConnection: a connection that never reads must not block its
// session or the other tabs; it is dropped once a write times out.
func TestStuckConnection(t *testing.T) {
	t.Parallel()
	// The active tab sends 56 frames at once: more than the default frame
	// burst, which this test is not about.
	const writeTimeout = time.Second // the active tab reads a 1 MB frame within it, even on a busy machine
	lab, ts := runLab(t, server.Config{WriteTimeout: writeTimeout, FrameBurst: 1000})
	id := newID()
	stuck, _ := dial(t, ts, id)
	active, _ := dial(t, ts, id)
	// Fill the held queue with large replies so every state frame is big and
	// the stuck connection's socket buffers fill quickly.
	big := strings.Repeat("z", 60000)
	for range 16 {
		active.do(queueReply(big))
	}
	// Read the active tab's frames raw: decoding megabytes of JSON under the
	// race detector would dominate the test.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 40 {
		active.send(`{"type":"deliver","message":1}`)
		if _, data, err := active.ws.Read(ctx); err != nil || !bytes.HasPrefix(data, []byte(`{"type":"state"`)) {
			t.Fatalf("active tab: %v %.80s", err, data)
		}
	}
	if f := active.do(`{"type":"start"}`); f.Seq != 57 {
		t.Fatalf("seq %d, want 57", f.Seq)
	}
	// The server closes the stuck connection by itself: over its byte
	// budget, or at the write timeout. Wait for that without reading from
	// it: reading would unblock the server's write and let the connection
	// recover.
	const slowCloses = "lab_slow_connection_closes_total"
	for metricValue(t, lab, slowCloses) == 0 {
		if ctx.Err() != nil {
			t.Fatal("the stuck connection was never closed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Closed over its budget, it still has a write blocked, which runs
	// into the write timeout too: that is the same slow connection.
	time.Sleep(2 * writeTimeout)
	// Its buffered frames end in an error, not in a wait.
	var err error
	for err == nil {
		_, _, err = stuck.ws.Read(ctx)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatal("the stuck connection stayed open")
	}
	if n := metricValue(t, lab, slowCloses); n != 1 {
		t.Fatalf("%s %v, want 1: one slow connection, counted once", slowCloses, n)
	}
}
