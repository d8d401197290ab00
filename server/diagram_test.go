package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolcall-lab/lab/server"
	"github.com/toolcall-lab/lab/store"
)

// seedFrames are the seed's nine steps as a student's frames, in the order
// TestBrowserExerciseSeedSteps does them: 16 messages, 17 deliveries, 8 runs.
var seedFrames = []string{
	queueReply(`{"runId":"run-1","callId":"lookup","kind":"completed","output":"Old answer"}`),
	`{"type":"start"}`,
	queueReply(`{"runId":"run-2","callId":"lookup","kind":"completed","output":"New answer"}`),
	`{"type":"deliver","message":2}`,
	`{"type":"deliver","message":1}`,
	`{"type":"deliver","message":2}`,
	queueReply(`{"runId":"run-2","callId":"lookup","kind":"completed","output":"Another answer"}`),
	`{"type":"deliver","message":3}`,
	queueReply(`{"runId":"run-2","callId":"lookup","kind":"rejected","reason":"Changed my mind"}`),
	`{"type":"deliver","message":4}`,
	`{"type":"start"}`,
	`{"type":"queueDeadline"}`,
	queueReply(`{"runId":"run-3","callId":"lookup","kind":"completed","output":"Answer for run-3"}`),
	`{"type":"deliver","message":5}`,
	`{"type":"deliver","message":6}`,
	`{"type":"start"}`,
	`{"type":"queueDeadline"}`,
	queueReply(`{"runId":"run-4","callId":"lookup","kind":"rejected","reason":"The query is empty"}`),
	`{"type":"deliver","message":7}`,
	`{"type":"deliver","message":8}`,
	`{"type":"start"}`,
	`{"type":"queueDeadline"}`,
	queueReply(`{"runId":"run-5","callId":"lookup","kind":"completed","output":"Answer for run-5"}`),
	`{"type":"deliver","message":10}`,
	`{"type":"deliver","message":9}`,
	`{"type":"queueDeadline"}`,
	`{"type":"start"}`,
	`{"type":"deliver","message":11}`,
	queueReply(`{"runId":"run-6","callId":"search","kind":"completed","output":"Wrong call"}`),
	`{"type":"deliver","message":12}`,
	queueReply(`{`),
	`{"type":"deliver","message":13}`,
	queueReply(`{"runId":"run-6","callId":"lookup","kind":"completed","output":42}`),
	`{"type":"deliver","message":14}`,
	`{"type":"start"}`,
	queueReply(`{"runId":"run-7","callId":"lookup","kind":"completed","output":""}`),
	`{"type":"deliver","message":15}`,
	`{"type":"start"}`,
	queueReply(`{"runId":"run-8","callId":"lookup","kind":"completed","output":"<strong>Found it</strong>"}`),
	`{"type":"deliver","message":16}`,
}

// doSeed plays the seed's nine steps in session id.
func doSeed(t *testing.T, c *client) {
	t.Helper()
	for _, f := range seedFrames {
		if got := c.do(f); got.Type != "state" {
			t.Fatalf("%s: %s", f, got.raw)
		}
	}
}

// TestDiagramRoutes: the diagram and the ShiViz log of a session reach the
// server's token, its class's key and the student's own page, and nobody
// else; the SVG is XML that names every message and outcome.
func TestDiagramRoutes(t *testing.T) {
	t.Parallel()
	ts := runInstructorLab(t, server.Config{})
	a, b := createClass(t, ts, "A"), createClass(t, ts, "B")
	_, loc, _ := joinAs(t, browserClient(t, "127.0.0.1"), ts, a.Code, "Ann <b>")
	inA := labPath.FindStringSubmatch(loc)[1]
	st, _ := dial(t, ts, inA)
	doSeed(t, st)
	openLab := newID()
	ol, _ := dial(t, ts, openLab)
	ol.do(`{"type":"start"}`)

	for _, r := range []struct {
		path, bearer string
		status       int
	}{
		{"/api/sessions/" + inA + "/diagram.svg", testToken, 200},
		{"/api/sessions/" + inA + "/diagram.svg?size=large&name=1", a.Key, 200},
		{"/api/sessions/" + inA + "/shiviz.log", a.Key, 200},
		{"/api/sessions/" + openLab + "/diagram.svg", testToken, 200},
		{"/lab/" + inA + "/diagram.svg", "", 200},
		{"/api/sessions/" + inA + "/diagram.svg", b.Key, 403},
		{"/api/sessions/" + inA + "/shiviz.log", b.Key, 403},
		{"/api/sessions/" + openLab + "/diagram.svg", a.Key, 403},
		{"/api/sessions/" + openLab + "/shiviz.log", a.Key, 403},
		// A student holds its own session by its address only: the API
		// refuses a page without credentials.
		{"/api/sessions/" + inA + "/diagram.svg", "", 401},
		{"/api/sessions/" + inA + "/shiviz.log", "", 401},
		{"/api/sessions/" + newID() + "/diagram.svg", testToken, 404},
		{"/lab/" + newID() + "/diagram.svg", "", 404},
		{"/api/sessions/" + inA + "/diagram.svg?size=huge", testToken, 400},
		{"/api/sessions/" + inA + "/diagram.svg?name=yes", testToken, 400},
	} {
		status, h, body := call(t, ts, "GET", r.path, r.bearer, "", "")
		if status != r.status {
			t.Errorf("GET %s (%q): %d, want %d: %s", r.path, r.bearer, status, r.status, body)
			continue
		}
		if status != 200 {
			var e struct{ Error string }
			if json.Unmarshal(body, &e) != nil || e.Error == "" {
				t.Errorf(`GET %s: %d without {"error": …}: %s`, r.path, status, body)
			}
			continue
		}
		if h.Get("Cache-Control") != "no-store" {
			t.Errorf("GET %s: Cache-Control %q", r.path, h.Get("Cache-Control"))
		}
		if strings.Contains(r.path, "shiviz") {
			if ct := h.Get("Content-Type"); ct != "text/plain; charset=UTF-8" {
				t.Errorf("GET %s: Content-Type %q", r.path, ct)
			}
			continue
		}
		if ct := h.Get("Content-Type"); ct != "image/svg+xml; charset=utf-8" {
			t.Errorf("GET %s: Content-Type %q", r.path, ct)
		}
		if r.bearer == "" && bytes.Contains(body, []byte("Ann")) {
			t.Errorf("GET %s: the student's diagram names the student", r.path)
		}
	}

	// The SVG is XML, and every message and delivery is in it as text.
	_, _, svg := call(t, ts, "GET", "/api/sessions/"+inA+"/diagram.svg?name=1", testToken, "", "")
	texts, title := svgTexts(t, svg)
	if title != "Session diagram of Ann <b>" {
		t.Errorf("title %q", title)
	}
	joined := "\n" + strings.Join(texts, "\n") + "\n"
	for n := 1; n <= 16; n++ {
		if !strings.Contains(joined, fmt.Sprintf("\nmsg %d\n", n)) {
			t.Errorf("no delivery of message %d drawn", n)
		}
	}
	for _, word := range []string{"accepted", "ignored:", "identity", "final", "unresolved", "diagnostic", "start run-8"} {
		if !strings.Contains(joined, "\n"+word+"\n") {
			t.Errorf("no %q in the drawing's text", word)
		}
	}
	if got := strings.Count(joined, "\nmsg "); got != 17 {
		t.Errorf("%d deliveries drawn, want 17", got)
	}
	_, _, large := call(t, ts, "GET", "/api/sessions/"+inA+"/diagram.svg?size=large", testToken, "", "")
	if _, title := svgTexts(t, large); title != "Session diagram" {
		t.Errorf("large, without the name: title %q", title)
	}
}

// svgTexts parses an SVG with encoding/xml and returns its <text>s in
// document order and its title.
func svgTexts(t *testing.T, svg []byte) ([]string, string) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	var texts []string
	var title string
	var stack []string
	root := ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Space + " " + tok.Name.Local
			}
			stack = append(stack, tok.Name.Local)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			switch {
			case len(stack) > 0 && stack[len(stack)-1] == "text":
				texts = append(texts, string(tok))
			case len(stack) == 2 && stack[1] == "title":
				title = string(tok)
			}
		}
	}
	if root != "http://www.w3.org/2000/svg svg" {
		t.Fatalf("root element %q", root)
	}
	return texts, title
}

// shivizRegex is ShiViz's default parser regex in Go's syntax.
var shivizRegex = regexp.MustCompile(`(?P<event>.*)\n(?P<host>\S*) (?P<clock>{.*})`)

// TestShiVizLogClocks: the log of the seed's nine steps parses whole with
// ShiViz's default regex, and its vector clocks agree with what happened:
// a host's clocks only grow, a delivery's clock is greater than its
// send's, and a run's start is greater than the client's starting it.
func TestShiVizLogClocks(t *testing.T) {
	t.Parallel()
	ts := runInstructorLab(t, server.Config{})
	id := newID()
	st, _ := dial(t, ts, id)
	doSeed(t, st)
	status, _, log := call(t, ts, "GET", "/api/sessions/"+id+"/shiviz.log", testToken, "", "")
	if status != 200 {
		t.Fatalf("shiviz.log: %d %s", status, log)
	}
	ms := shivizRegex.FindAllSubmatchIndex(log, -1)
	covered := 0
	type event struct {
		text, host string
		clock      map[string]int
	}
	var events []event
	for _, m := range ms {
		if m[0] != covered {
			t.Fatalf("unparsed text at %d: %q", covered, log[covered:m[0]])
		}
		covered = m[1] + 1 // the newline after the clock
		e := event{text: string(log[m[2]:m[3]]), host: string(log[m[4]:m[5]])}
		if err := json.Unmarshal(log[m[6]:m[7]], &e.clock); err != nil {
			t.Fatalf("clock %q: %v", log[m[6]:m[7]], err)
		}
		events = append(events, e)
	}
	if covered != len(log) {
		t.Fatalf("unparsed text at the end: %q", log[min(covered, len(log)):])
	}
	// 8 starts (run-1 with the session; two events each), 16 sends, 17 deliveries.
	if len(events) != 2*8+16+17 {
		t.Fatalf("%d events, want %d:\n%s", len(events), 2*8+16+17, log)
	}
	// less reports whether a happened before b: a ≤ b in every host, and
	// a ≠ b.
	less := func(a, b map[string]int) bool {
		for h, n := range a {
			if b[h] < n {
				return false
			}
		}
		for h, n := range b {
			if a[h] != n {
				return true
			}
		}
		return false
	}
	last := map[string]map[string]int{}
	sent := map[string]map[string]int{}   // by message number
	starts := map[string]map[string]int{} // by run
	deliveries := 0
	for i, e := range events {
		if prev, ok := last[e.host]; ok && !less(prev, e.clock) {
			t.Errorf("event %d (%s): %s's clock %v does not grow from %v", i, e.text, e.host, e.clock, prev)
		}
		last[e.host] = e.clock
		var n, run string
		switch {
		case strings.HasPrefix(e.text, "send message "):
			n = strings.Fields(e.text)[2]
			sent[n] = e.clock
		case strings.HasPrefix(e.text, "deliver message "):
			n = strings.Fields(e.text)[2]
			deliveries++
			if e.host != "client" {
				t.Errorf("event %d delivered on %s", i, e.host)
			}
			if s, ok := sent[n]; !ok || !less(s, e.clock) {
				t.Errorf("delivery of message %s (%s) at %v, sent at %v", n, e.text, e.clock, s)
			}
		case strings.HasPrefix(e.text, "start "):
			run = strings.Fields(e.text)[1]
			starts[run] = e.clock
		case strings.HasSuffix(e.text, " started"):
			run = strings.Fields(e.text)[0]
			if s, ok := starts[run]; !ok || e.host != run || !less(s, e.clock) {
				t.Errorf("%s at %v, its start at %v", e.text, e.clock, s)
			}
		default:
			t.Errorf("event %d: %q", i, e.text)
		}
	}
	if len(sent) != 16 || deliveries != 17 || len(starts) != 8 {
		t.Errorf("%d sends, %d deliveries, %d starts", len(sent), deliveries, len(starts))
	}
}

// eventsFailStore fails every read of a whole session's log while broken.
type eventsFailStore struct {
	*store.Memory
	broken atomic.Bool
}

func (f *eventsFailStore) Events(ctx context.Context, id string) ([]store.Record, error) {
	if f.broken.Load() {
		return nil, errDiskFull
	}
	return f.Memory.Events(ctx, id)
}

// TestDiagramStoreFailure: a log that cannot be read is answered 503 with
// {"error": …}, as every store failure is, on each diagram route.
func TestDiagramStoreFailure(t *testing.T) {
	t.Parallel()
	st := &eventsFailStore{Memory: store.NewMemory()}
	ts := runInstructorLab(t, server.Config{Store: st})
	id := newID()
	c, _ := dial(t, ts, id)
	c.do(`{"type":"start"}`)
	st.broken.Store(true)
	for _, path := range []string{"/api/sessions/" + id + "/diagram.svg", "/api/sessions/" + id + "/shiviz.log", "/lab/" + id + "/diagram.svg"} {
		status, h, body := call(t, ts, "GET", path, testToken, "", "")
		var e struct{ Error string }
		if status != http.StatusServiceUnavailable || !strings.HasPrefix(h.Get("Content-Type"), "application/json") ||
			json.Unmarshal(body, &e) != nil || !strings.Contains(e.Error, "try again") {
			t.Errorf("GET %s with the store failing: %d %q %s", path, status, h.Get("Content-Type"), body)
		}
	}
	st.broken.Store(false)
	if status, _, body := call(t, ts, "GET", "/lab/"+id+"/diagram.svg", "", "", ""); status != 200 {
		t.Errorf("after the store is back: %d %s", status, body)
	}
}
