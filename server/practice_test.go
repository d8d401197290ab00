package server_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/toolcall-lab/lab/server"
)

// practiceFrame is the state frame's mastery and practice (docs/protocol.md,
// "Practice"), and the receipts' practice flag.
type practiceFrame struct {
	Mastery map[string]struct {
		Predicted int  `json:"predicted"`
		Right     int  `json:"right"`
		Streak    int  `json:"streak"`
		Mastered  bool `json:"mastered"`
	} `json:"mastery"`
	Practice *struct {
		Message int    `json:"message"`
		Number  string `json:"number"`
		Kind    string `json:"kind"`
		Why     string `json:"why"`
		Done    bool   `json:"done"`
	} `json:"practice"`
	Call struct {
		Status string `json:"status"`
	} `json:"call"`
	Receipts []struct {
		Message   int    `json:"message"`
		Kind      string `json:"kind"`
		Practice  bool   `json:"practice"`
		Predicted string `json:"predicted"`
		Right     bool   `json:"right"`
	} `json:"receipts"`
	Queue []struct {
		ID    int    `json:"id"`
		Label string `json:"label"`
		From  string `json:"from"`
	} `json:"queue"`
}

// allKinds are the ten kinds, in the order the state frame lists them.
var allKinds = []string{"matchingReply", "staleReply", "duplicate", "contradictory", "deadline",
	"lateReply", "staleDeadline", "wrongCallId", "malformedJson", "wrongShape"}

func practiceOf(t *testing.T, f stateFrame) practiceFrame {
	t.Helper()
	var p practiceFrame
	if err := json.Unmarshal(f.raw, &p); err != nil {
		t.Fatalf("state frame %s: %v", f.raw, err)
	}
	if len(p.Mastery) != len(allKinds) {
		t.Fatalf("mastery has %d kinds, want all ten: %s", len(p.Mastery), f.raw)
	}
	return p
}

// lastReceiptOf is the frame's last receipt.
func lastReceiptOf(t *testing.T, p practiceFrame) struct {
	Message   int    `json:"message"`
	Kind      string `json:"kind"`
	Practice  bool   `json:"practice"`
	Predicted string `json:"predicted"`
	Right     bool   `json:"right"`
} {
	t.Helper()
	if len(p.Receipts) == 0 {
		t.Fatal("no receipt")
	}
	return p.Receipts[len(p.Receipts)-1]
}

// TestPracticeDrawsAWrongStaleReply: after a wrong prediction about a stale
// reply, practice holds a stale reply and says why; its delivery without a
// prediction is refused; with one, the receipt has the kind drawn. A
// restart shows the same state.
func TestPracticeDrawsAWrongStaleReply(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "lab.db")
	st, ts := labOnFile(t, path)
	id := newID()
	c, f := dial(t, ts, id)
	if p := practiceOf(t, f); p.Practice != nil || p.Mastery["staleReply"].Predicted != 0 {
		t.Fatalf("a new session's practice: %s", f.raw)
	}
	c.do(queueReply(reply("run-1", "lookup", "completed", "output", "Old answer")))
	c.do(`{"type":"start"}`)
	f = c.do(`{"type":"deliver","message":1,"predict":"accepted"}`)
	if m := practiceOf(t, f).Mastery["staleReply"]; m.Predicted != 1 || m.Right != 0 || m.Streak != 0 || m.Mastered {
		t.Fatalf("mastery after a wrong stale reply: %+v", m)
	}
	f = c.do(`{"type":"practice"}`)
	p := practiceOf(t, f)
	want := "You expected run-1's reply to be accepted after run-2 began (message 1)."
	if p.Practice == nil || p.Practice.Kind != "staleReply" || p.Practice.Why != want || p.Practice.Message != 2 || p.Practice.Number != "2" {
		t.Fatalf("practice %s", f.raw)
	}
	if held := p.Queue[len(p.Queue)-1]; held.ID != 2 || held.Label != reply("run-1", "lookup", "completed", "output", "Old answer") || held.From != "student" {
		t.Fatalf("held %+v, want run-1's own reply", held)
	}
	c.send(`{"type":"deliver","message":2}`)
	if r := c.refusal(); r.Reason != "prediction_required" {
		t.Fatalf("a practice delivered without a prediction: %s", r.raw)
	}
	c.send(`{"type":"practice"}`)
	if r := c.refusal(); r.Reason != "not_applicable" || !strings.Contains(r.Error, "deliver message 2 first") {
		t.Fatalf("a second practice while one is held: %s", r.raw)
	}
	f = c.do(`{"type":"deliver","message":2,"predict":"ignored"}`)
	p = practiceOf(t, f)
	if r := lastReceiptOf(t, p); r.Kind != "staleReply" || !r.Practice || !r.Right || p.Practice != nil {
		t.Fatalf("the practice's receipt: %s", f.raw)
	}
	if !strings.Contains(string(f.raw), `"practice":true`) {
		t.Fatalf("no receipt says practice: %s", f.raw)
	}

	// A restart replays the draw: the same state, byte for byte.
	ts2 := restartOnFile(t, ts, st, path)
	if _, g := dial(t, ts2, id); string(g.raw) != string(f.raw) {
		t.Fatalf("state after the restart:\n got %s\nwant %s", g.raw, f.raw)
	}
}

// rightWord is what a student who understands predicts for the practice
// drawn, from its kind and the call it will meet.
func rightWord(kind, status string) string {
	switch kind {
	case "matchingReply", "lateReply":
		return "accepted"
	case "malformedJson", "wrongShape":
		return "diagnostic"
	case "deadline":
		if status == "Completed" || status == "Rejected" {
			return "ignored"
		}
		return "unresolved"
	}
	return "ignored"
}

// practiseToTheEnd draws and predicts right until every kind is mastered,
// checking that no mastered kind is drawn and each receipt has the kind
// drawn; it returns the kinds drawn, in order.
func practiseToTheEnd(t *testing.T, c *client, f stateFrame) ([]string, stateFrame) {
	t.Helper()
	var drawn []string
	for {
		p := practiceOf(t, f)
		if p.Practice != nil && p.Practice.Done {
			return drawn, f
		}
		if len(drawn) > 3*len(allKinds) {
			t.Fatalf("%d draws and not done: %s", len(drawn), f.raw)
		}
		f = c.do(`{"type":"practice"}`)
		p = practiceOf(t, f)
		if p.Practice == nil || p.Practice.Message == 0 {
			t.Fatalf("no practice drawn: %s", f.raw)
		}
		kind := p.Practice.Kind
		if p.Mastery[kind].Mastered {
			t.Fatalf("drew %s, already mastered: %s", kind, f.raw)
		}
		drawn = append(drawn, kind)
		f = c.do(`{"type":"deliver","message":` + strconv.Itoa(p.Practice.Message) + `,"predict":"` + rightWord(kind, p.Call.Status) + `"}`)
		if r := lastReceiptOf(t, practiceOf(t, f)); r.Kind != kind || !r.Practice || !r.Right {
			t.Fatalf("drew %s, the receipt is %+v", kind, r)
		}
	}
}

// TestPracticeUntilAllMastered: a student who always predicts right is
// drawn every kind, masters all ten (three right in a row each), is never
// drawn a mastered kind, and is then told practice is done.
func TestPracticeUntilAllMastered(t *testing.T) {
	t.Parallel()
	ts := runInstructorLab(t, server.Config{FrameRate: 1000, FrameBurst: 1000})
	id := newID()
	c, f := dial(t, ts, id)
	drawn, f := practiseToTheEnd(t, c, f)
	p := practiceOf(t, f)
	if len(drawn) != 3*len(allKinds) {
		t.Fatalf("drew %d times (%v), want three of each kind", len(drawn), drawn)
	}
	for _, k := range allKinds {
		if m := p.Mastery[k]; !m.Mastered || m.Streak != 3 || m.Right != 3 || m.Predicted != 3 || slices.Index(drawn, k) < 0 {
			t.Fatalf("%s: %+v, drawn %v", k, m, drawn)
		}
	}
	// Never predicted first, in the order the nine steps meet them.
	if !slices.Equal(drawn[:len(allKinds)], allKinds) {
		t.Fatalf("first draws %v, want %v", drawn[:len(allKinds)], allKinds)
	}
	c.send(`{"type":"practice"}`)
	if r := c.refusal(); r.Reason != "not_applicable" || !strings.Contains(r.Error, "mastered") {
		t.Fatalf("practice once all are mastered: %s", r.raw)
	}
	row := apiSession(t, ts, id)
	if row.Session.Mastery == nil || row.Session.Mastery.Mastered != 10 || row.Session.Mastery.Kinds["deadline"] != "mastered" {
		t.Fatalf("GET /api/sessions/{id}: %+v", row.Session.Mastery)
	}
	_, g := grades(t, ts)
	if cells := g[id]; cells[len(cells)-6] != "10" || cells[18] != "mastered" {
		t.Fatalf("grades %q", cells)
	}
}

type sessionDetail struct {
	Session struct {
		Mastery *struct {
			Kinds    map[string]string `json:"kinds"`
			Mastered int               `json:"mastered"`
		} `json:"mastery"`
	} `json:"session"`
	State json.RawMessage `json:"state"`
}

func apiSession(t *testing.T, ts *httptest.Server, id string) sessionDetail {
	t.Helper()
	code, _, b := call(t, ts, "GET", "/api/sessions/"+id, testToken, "", "")
	var out sessionDetail
	if err := json.Unmarshal(b, &out); code != http.StatusOK || err != nil {
		t.Fatalf("GET /api/sessions/%s: %d %s %v", id, code, b, err)
	}
	if !strings.Contains(string(out.State), `"mastery":{`) {
		t.Fatalf("the session's state has no mastery: %s", out.State)
	}
	return out
}

// TestInjectPractice: the practice preset draws each session's own next
// kind (a duplicate for the student who predicted a duplicate wrong, a
// deadline for the one who predicted a deadline wrong), held; delivered at
// once it is a 400. The board counts mastery per kind.
func TestInjectPractice(t *testing.T) {
	t.Parallel()
	ts := runInstructorLab(t, server.Config{})
	dup, dl := newID(), newID()
	a, _ := dial(t, ts, dup)
	a.do(queueReply(reply("run-1", "lookup", "completed", "output", "Done")))
	a.do(`{"type":"deliver","message":1,"predict":"accepted"}`)
	a.do(`{"type":"deliver","message":1,"predict":"accepted"}`) // a duplicate is ignored
	b, _ := dial(t, ts, dl)
	b.do(`{"type":"queueDeadline"}`)
	b.do(`{"type":"deliver","message":1,"predict":"ignored"}`) // a deadline while Pending: Unresolved

	code, _, body := call(t, ts, "POST", "/api/inject", testToken, "", `{"sessions":["`+dup+`","`+dl+`"],"mode":"deliver","preset":"practice"}`)
	if code != http.StatusBadRequest || !strings.Contains(string(body), `"error"`) {
		t.Fatalf("the practice preset delivered at once: %d %s", code, body)
	}
	code, _, body = call(t, ts, "POST", "/api/inject", testToken, "", `{"sessions":["`+dup+`","`+dl+`"],"preset":"practice"}`)
	if code != http.StatusOK || !strings.Contains(string(body), `"applied":2`) {
		t.Fatalf("the practice preset: %d %s", code, body)
	}
	for _, tc := range []struct {
		c    *client
		kind string
		why  string
	}{{a, "duplicate", "You expected the final reply delivered again to be accepted (message 1)."}, {b, "deadline", "You expected run-1's own deadline to be ignored (message 1)."}} {
		f := tc.c.state()
		p := practiceOf(t, f)
		if p.Practice == nil || p.Practice.Kind != tc.kind || p.Practice.Why != tc.why {
			t.Fatalf("want a %s drawn: %s", tc.kind, f.raw)
		}
		held := p.Queue[len(p.Queue)-1]
		if held.ID != p.Practice.Message || held.From != "instructor" {
			t.Fatalf("held %+v for %s", held, f.raw)
		}
		f = tc.c.do(`{"type":"deliver","message":` + strconv.Itoa(held.ID) + `,"predict":"` + rightWord(tc.kind, p.Call.Status) + `"}`)
		if r := lastReceiptOf(t, practiceOf(t, f)); r.Kind != tc.kind || !r.Practice {
			t.Fatalf("drew %s, delivered %+v", tc.kind, r)
		}
	}
	if d := apiSession(t, ts, dup); d.Session.Mastery == nil || d.Session.Mastery.Kinds["duplicate"] != "learning" || d.Session.Mastery.Kinds["staleReply"] != "new" {
		t.Fatalf("GET /api/sessions/{id} mastery: %+v", d.Session.Mastery)
	}
	// The board's counts per kind: each has one right in a row of its own
	// kind now (learning), and the first a matching reply right.
	var sum struct {
		Exercise struct {
			Mastery []struct {
				Kind     string `json:"kind"`
				Mastered int    `json:"mastered"`
				Wrong    int    `json:"wrong"`
				Learning int    `json:"learning"`
				New      int    `json:"new"`
			} `json:"mastery"`
		} `json:"exercise"`
	}
	f := readOverview(t, ts, &sum)
	m := sum.Exercise.Mastery
	if len(m) != len(allKinds) || m[2].Kind != "duplicate" || m[2].Learning != 1 || m[2].New != 1 || m[4].Kind != "deadline" || m[4].Learning != 1 || m[0].Learning != 1 || m[0].New != 1 {
		t.Fatalf("the board's mastery counts: %s", f.raw)
	}
}
