package server_test

import (
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/toolcall-lab/lab/server"
	"github.com/toolcall-lab/lab/store/sqlite"
)

// joinedSession joins class code as name from local and returns the session id.
func joinedSession(t *testing.T, ts *httptest.Server, local, code, name string) string {
	t.Helper()
	status, loc, body := joinAs(t, browserClient(t, local), ts, code, name)
	m := labPath.FindStringSubmatch(loc)
	if status != 303 || m == nil {
		t.Fatalf("joining as %s: %d %q %s", name, status, loc, body)
	}
	return m[1]
}

// TestClassPredictionsRequired: a class made requiring predictions refuses
// its students' deliveries without one (prediction_required) and says so in
// the state frame; the open lab accepts them; the setting changed later
// reaches the open tabs at once; a restart keeps it.
func TestClassPredictionsRequired(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "lab.db")
	open := func() (*httptest.Server, func()) {
		st, err := sqlite.Open(path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		lab := startServer(t, server.Config{Store: st, InstructorToken: testToken})
		ts := httptest.NewServer(lab.Handler())
		return ts, func() {
			stopLab(t, lab)
			ts.Close()
			st.Close()
		}
	}
	ts, stop := open()
	status, out := callJSON(t, ts, "POST", "/api/classes", testToken, `{"title": "Predict", "predictionsRequired": true}`)
	if status != 201 || !out.Class.PredictionsRequired {
		t.Fatalf("creating a class requiring predictions: %d %+v", status, out)
	}
	cl := out.Class
	if plain := createClass(t, ts, "Free"); plain.PredictionsRequired {
		t.Fatalf("a class made without the setting requires predictions: %+v", plain)
	}
	id := joinedSession(t, ts, "127.0.0.2", cl.Code, "Ada")
	c, f := dial(t, ts, id)
	if !exerciseOf(t, f).Exercise.PredictionsRequired {
		t.Fatalf("the state frame of a member does not say predictions are required: %s", f.raw)
	}
	f = c.do(`{"type":"queueDeadline"}`)
	c.send(`{"type":"deliver","message":1}`)
	if e := c.refusal(); e.Reason != "prediction_required" {
		t.Fatalf("a delivery without prediction in the class: %s", e.raw)
	}
	if g := c.do(`{"type":"deliver","message":1,"predict":"unresolved"}`); g.Seq != f.Seq+1 || g.Call.Status != "Unresolved" {
		t.Fatalf("a delivery with prediction in the class: %s", g.raw)
	}

	// The open lab: no prediction needed.
	o, g := dial(t, ts, newID())
	if exerciseOf(t, g).Exercise.PredictionsRequired {
		t.Fatalf("the open lab requires predictions: %s", g.raw)
	}
	o.do(`{"type":"queueDeadline"}`)
	if g := o.do(`{"type":"deliver","message":1}`); g.Call.Status != "Unresolved" {
		t.Fatalf("a delivery without prediction in the open lab: %s", g.raw)
	}

	// A restart keeps the setting, in the API and in the session.
	c.ws.CloseNow()
	o.ws.CloseNow()
	stop()
	ts, stop = open()
	defer stop()
	if status, out := callJSON(t, ts, "GET", "/api/classes/"+cl.ID, testToken, ""); status != 200 || !out.Class.PredictionsRequired {
		t.Fatalf("the class after a restart: %d %+v", status, out)
	}
	c, f = dial(t, ts, id)
	if !exerciseOf(t, f).Exercise.PredictionsRequired {
		t.Fatalf("the state frame after a restart: %s", f.raw)
	}
	f = c.do(`{"type":"queueDeadline"}`)
	c.send(`{"type":"deliver","message":2}`)
	if e := c.refusal(); e.Reason != "prediction_required" {
		t.Fatalf("a delivery without prediction after a restart: %s", e.raw)
	}

	// Turned off: the open tab is told at once, and may deliver freely.
	status, out = callJSON(t, ts, "POST", "/api/classes/"+cl.ID+"/settings", cl.Key, `{"predictionsRequired": false}`)
	if status != 200 || out.Class.PredictionsRequired || out.Class.ID != cl.ID {
		t.Fatalf("turning the setting off with the class key: %d %+v", status, out)
	}
	if g := c.state(); g.Seq != f.Seq || exerciseOf(t, g).Exercise.PredictionsRequired {
		t.Fatalf("the tab after the setting went off: %s", g.raw)
	}
	if g := c.do(`{"type":"deliver","message":2}`); g.Seq != f.Seq+1 {
		t.Fatalf("a delivery without prediction once the setting is off: %s", g.raw)
	}
	// And on again: a student joining now is held to it too.
	if status, out := callJSON(t, ts, "POST", "/api/classes/"+cl.ID+"/settings", testToken, `{"predictionsRequired": true}`); status != 200 || !out.Class.PredictionsRequired {
		t.Fatalf("turning the setting on: %d %+v", status, out)
	}
	if g := c.state(); !exerciseOf(t, g).Exercise.PredictionsRequired {
		t.Fatalf("the tab after the setting went on: %s", g.raw)
	}
	b, h := dial(t, ts, joinedSession(t, ts, "127.0.0.3", cl.Code, "Bob"))
	if !exerciseOf(t, h).Exercise.PredictionsRequired {
		t.Fatalf("a student joining after the setting went on: %s", h.raw)
	}
	b.do(`{"type":"queueDeadline"}`)
	b.send(`{"type":"deliver","message":1}`)
	if e := b.refusal(); e.Reason != "prediction_required" {
		t.Fatalf("a new member's delivery without prediction: %s", e.raw)
	}
}

// TestClassNamesStayUnique: a member's rename over the WebSocket to a name
// another member has is refused (name_taken), a blank one too
// (invalid_name); an accepted rename frees the old name at the door and
// takes the new one. The open lab has no such rule.
func TestClassNamesStayUnique(t *testing.T) {
	t.Parallel()
	ts := runInstructorLab(t, server.Config{})
	cl := createClass(t, ts, "Names")
	joinedSession(t, ts, "127.0.0.2", cl.Code, "Ada")
	bob := joinedSession(t, ts, "127.0.0.3", cl.Code, "Bob")
	c, f := dial(t, ts, bob)
	for _, tc := range []struct{ name, reason string }{
		{"ada", "name_taken"},
		{"  ADA  ", "name_taken"},
		{"   ", "invalid_name"},
	} {
		c.send(`{"type":"rename","name":` + quote(tc.name) + `}`)
		if e := c.refusal(); e.Reason != tc.reason {
			t.Fatalf("renaming to %q: %s, want reason %s", tc.name, e.raw, tc.reason)
		}
	}
	if g := c.do(`{"type":"rename","name":"Cy"}`); g.Name != "Cy" || g.Seq != f.Seq+1 {
		t.Fatalf("a free name: %s", g.raw)
	}
	if status, _, body := joinAs(t, browserClient(t, "127.0.0.4"), ts, cl.Code, "cy"); status != 409 {
		t.Fatalf("joining under the renamed member's new name: %d %s", status, body)
	}
	joinedSession(t, ts, "127.0.0.5", cl.Code, "Bob") // the old name is free
	if status, out := callJSON(t, ts, "GET", "/api/classes/"+cl.ID, testToken, ""); status != 200 || len(out.Sessions) != 3 {
		t.Fatalf("the class: %d %+v", status, out)
	}

	// The open lab: two sessions may share a name, or have none.
	for range 2 {
		o, _ := dial(t, ts, newID())
		if g := o.do(`{"type":"rename","name":"Ada"}`); g.Name != "Ada" {
			t.Fatalf("an open-lab rename: %s", g.raw)
		}
		if g := o.do(`{"type":"rename","name":""}`); g.Name != "" {
			t.Fatalf("an open-lab blank rename: %s", g.raw)
		}
	}
}
