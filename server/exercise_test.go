package server_test

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolcall-lab/lab/server"
	"github.com/toolcall-lab/lab/store"
	"github.com/toolcall-lab/lab/store/sqlite"
)

// exerciseFrame is the state frame's exercise and prediction fields, and
// the receipts' and queue's added fields (docs/protocol.md).
type exerciseFrame struct {
	Exercise struct {
		Done    []int    `json:"done"`
		Current int      `json:"current"`
		Parts   [][]bool `json:"parts"`
		// PredictionsRequired is the class setting (docs/classes.md).
		PredictionsRequired bool `json:"predictionsRequired"`
	} `json:"exercise"`
	Predictions struct {
		Made  int `json:"made"`
		Right int `json:"right"`
	} `json:"predictions"`
	Queue []struct {
		ID     int    `json:"id"`
		Number string `json:"number"`
		From   string `json:"from"`
	} `json:"queue"`
	Receipts []struct {
		Message   int    `json:"message"`
		Notice    string `json:"notice"`
		By        string `json:"by"`
		Number    string `json:"number"`
		From      string `json:"from"`
		Why       string `json:"why"`
		Kind      string `json:"kind"`
		Predicted string `json:"predicted"`
		Right     *bool  `json:"right"`
	} `json:"receipts"`
}

func exerciseOf(t *testing.T, f stateFrame) exerciseFrame {
	t.Helper()
	var x exerciseFrame
	if err := json.Unmarshal(f.raw, &x); err != nil {
		t.Fatalf("state frame %s: %v", f.raw, err)
	}
	return x
}

// seedSteps is the seed's walkthrough ("Try delayed and reordered
// replies") as frames, step by step, as its text numbers the messages.
var seedSteps = [][]string{
	1: {queueReply(reply("run-1", "lookup", "completed", "output", "Old answer"))},
	2: {`{"type":"start"}`, queueReply(reply("run-2", "lookup", "completed", "output", "New answer")), `{"type":"deliver","message":2}`},
	3: {`{"type":"deliver","message":1}`},
	4: {`{"type":"deliver","message":2}`,
		queueReply(reply("run-2", "lookup", "completed", "output", "Another answer")), `{"type":"deliver","message":3}`,
		queueReply(reply("run-2", "lookup", "rejected", "reason", "Changed my mind")), `{"type":"deliver","message":4}`},
	5: {`{"type":"start"}`, `{"type":"queueDeadline"}`, queueReply(reply("run-3", "lookup", "completed", "output", "Answer for run-3")),
		`{"type":"deliver","message":5}`, `{"type":"deliver","message":6}`},
	6: {`{"type":"start"}`, `{"type":"queueDeadline"}`, queueReply(reply("run-4", "lookup", "rejected", "reason", "The query is empty")),
		`{"type":"deliver","message":7}`, `{"type":"deliver","message":8}`},
	7: {`{"type":"start"}`, `{"type":"queueDeadline"}`, queueReply(reply("run-5", "lookup", "completed", "output", "Answer for run-5")),
		`{"type":"deliver","message":10}`, `{"type":"deliver","message":9}`,
		`{"type":"queueDeadline"}`, `{"type":"start"}`, `{"type":"deliver","message":11}`},
	8: {queueReply(reply("run-6", "search", "completed", "output", "Wrong call")), `{"type":"deliver","message":12}`,
		queueReply(`{`), `{"type":"deliver","message":13}`,
		queueReply(`{"runId":"run-6","callId":"lookup","kind":"completed","output":42}`), `{"type":"deliver","message":14}`},
	9: {`{"type":"start"}`, queueReply(reply("run-7", "lookup", "completed", "output", "")), `{"type":"deliver","message":15}`,
		`{"type":"start"}`, queueReply(reply("run-8", "lookup", "completed", "output", "<strong>Found it</strong>")), `{"type":"deliver","message":16}`},
}

// TestExerciseTicksTheSeedsSteps walks the seed's nine steps over the
// protocol: after each, the state frame's exercise has exactly the steps so
// far done, and the next one current.
func TestExerciseTicksTheSeedsSteps(t *testing.T) {
	t.Parallel()
	_, ts := runLab(t, server.Config{})
	c, f := dial(t, ts, newID())
	if x := exerciseOf(t, f).Exercise; len(x.Done) != 0 || x.Current != 1 || len(x.Parts) != 9 || len(x.Parts[3]) != 3 {
		t.Fatalf("a new session's exercise: %+v", x)
	}
	for step := 1; step <= 9; step++ {
		for i, frame := range seedSteps[step] {
			f = c.do(frame)
			done := exerciseOf(t, f).Exercise.Done
			// A step ticks with its last frame, not before.
			want := step - 1
			if i == len(seedSteps[step])-1 {
				want = step
			}
			if len(done) != want || (want > 0 && done[want-1] != want) {
				t.Fatalf("step %d, frame %d (%s): done %v, want steps 1 to %d", step, i+1, frame, done, want)
			}
		}
		wantCurrent := step + 1
		if step == 9 {
			wantCurrent = 0
		}
		if x := exerciseOf(t, f).Exercise; x.Current != wantCurrent {
			t.Fatalf("after step %d the current step is %d, want %d", step, x.Current, wantCurrent)
		}
	}
}

// TestDeliverPredictions: a deliver frame's predict is recorded in the
// receipt with whether the notice bore it out, and counted; a predict that
// is not one of the four words is refused as invalid_frame and changes
// nothing.
func TestDeliverPredictions(t *testing.T) {
	t.Parallel()
	_, ts := runLab(t, server.Config{})
	c, _ := dial(t, ts, newID())
	c.do(queueReply(reply("run-1", "lookup", "completed", "output", "Answer")))
	f := c.do(`{"type":"deliver","message":1,"predict":"accepted"}`)
	x := exerciseOf(t, f)
	r := x.Receipts[0]
	if r.Predicted != "accepted" || r.Right == nil || !*r.Right || r.Number != "1" || r.From != "student" || r.Kind != "matchingReply" ||
		r.Why != "the reply matches run-1/lookup, which was Pending: the first final reply wins" {
		t.Fatalf("receipt %+v", r)
	}
	f = c.do(`{"type":"deliver","message":1,"predict":"accepted"}`)
	x = exerciseOf(t, f)
	if r := x.Receipts[1]; r.Predicted != "accepted" || r.Right == nil || *r.Right || r.Kind != "duplicate" {
		t.Fatalf("a wrong prediction's receipt %+v", r)
	}
	f = c.do(`{"type":"deliver","message":1}`)
	x = exerciseOf(t, f)
	if r := x.Receipts[2]; r.Predicted != "" || r.Right != nil {
		t.Fatalf("a receipt without prediction %+v (%s)", r, f.raw)
	}
	if x.Predictions.Made != 2 || x.Predictions.Right != 1 {
		t.Fatalf("predictions %+v, want 2 made, 1 right", x.Predictions)
	}
	for _, bad := range []string{`"Accepted"`, `""`, `"maybe"`, `1`, `null`, `true`, `["ignored"]`} {
		c.send(`{"type":"deliver","message":1,"predict":` + bad + `}`)
		if e := c.refusal(); e.Reason != "invalid_frame" || !strings.Contains(e.Error, `"predict"`) {
			t.Errorf("predict %s: %s, want invalid_frame naming the field", bad, e.raw)
		}
	}
	if g := c.do(`{"type":"start"}`); g.Seq != f.Seq+1 {
		t.Fatalf("refused frames changed the session: seq %d after %d", g.Seq, f.Seq)
	}
}

// TestInstructorMessagesNumberedApart: an instructor's held message is I1
// and does not shift the student's numbers, so the seed's "deliver message
// 2" (the student's second message) still completes step 2.
func TestInstructorMessagesNumberedApart(t *testing.T) {
	t.Parallel()
	ts := runInstructorLab(t, server.Config{})
	id := newID()
	c, _ := dial(t, ts, id)
	for _, frame := range seedSteps[1] {
		c.do(frame)
	}
	c.do(`{"type":"start"}`)
	// Held before step 2's own message: the student's run-1 reply again.
	if code, r := injectAPI(t, ts, `{"sessions":["`+id+`"],"preset":"staleReply"}`); code != http.StatusOK || r.Applied != 1 {
		t.Fatalf("inject: %d %+v", code, r)
	}
	c.state()
	f := c.do(queueReply(reply("run-2", "lookup", "completed", "output", "New answer")))
	x := exerciseOf(t, f)
	var numbers []string
	for _, m := range x.Queue {
		numbers = append(numbers, fmt.Sprintf("%d=%s/%s", m.ID, m.Number, m.From))
	}
	if want := []string{"1=1/student", "2=I1/instructor", "3=2/student"}; !slices.Equal(numbers, want) {
		t.Fatalf("queue numbers %v, want %v", numbers, want)
	}
	// The page's "Deliver message 2" is the student's second: id 3.
	f = c.do(`{"type":"deliver","message":3}`)
	x = exerciseOf(t, f)
	if !slices.Equal(x.Exercise.Done, []int{1, 2}) || f.Call.Status != "Completed" {
		t.Fatalf("after delivering the student's message 2: %s", f.raw)
	}
	f = c.do(`{"type":"deliver","message":2}`)
	x = exerciseOf(t, f)
	if r := x.Receipts[1]; r.Number != "I1" || r.From != "instructor" || r.By != "student" || r.Why != "this reply is for run-1; the current call is run-2/lookup" {
		t.Fatalf("the instructor's message's receipt %+v", r)
	}
	// The student delivered the instructor's stale reply: an instructor's
	// message never ticks a step (model/exercise.go), so step 3 waits for
	// the student's own.
	if !slices.Equal(x.Exercise.Done, []int{1, 2}) || x.Exercise.Current != 3 {
		t.Fatalf("done %v, current %d after delivering the held stale reply", x.Exercise.Done, x.Exercise.Current)
	}
}

// sessionsRow is a row of GET /api/sessions with the exercise's columns.
type sessionsRow struct {
	ID           string    `json:"id"`
	Name         string    `json:"name"`
	Steps        []int     `json:"steps"`
	Current      int       `json:"current"`
	CurrentSince time.Time `json:"currentSince"`
	Stuck        bool      `json:"stuck"`
	LastActivity time.Time `json:"lastActivity"`
	Predictions  struct {
		Made  int `json:"made"`
		Right int `json:"right"`
	} `json:"predictions"`
}

func apiSessions(t *testing.T, ts *httptest.Server) map[string]sessionsRow {
	t.Helper()
	code, _, b := call(t, ts, "GET", "/api/sessions", testToken, "", "")
	var out struct {
		Sessions []sessionsRow `json:"sessions"`
	}
	if err := json.Unmarshal(b, &out); code != http.StatusOK || err != nil {
		t.Fatalf("GET /api/sessions: %d %s %v", code, b, err)
	}
	rows := map[string]sessionsRow{}
	for _, r := range out.Sessions {
		if r.Steps == nil {
			t.Fatalf("row %s has no steps list: %s", r.ID, b)
		}
		rows[r.ID] = r
	}
	return rows
}

// grades reads GET /api/grades.csv, keyed by session.
func grades(t *testing.T, ts *httptest.Server) ([]string, map[string][]string) {
	t.Helper()
	code, h, b := call(t, ts, "GET", "/api/grades.csv", testToken, "", "")
	if code != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "text/csv") {
		t.Fatalf("GET /api/grades.csv: %d %s %s", code, h.Get("Content-Type"), b)
	}
	recs, err := csv.NewReader(strings.NewReader(string(b))).ReadAll()
	if err != nil || len(recs) == 0 {
		t.Fatalf("grades CSV %q: %v", b, err)
	}
	rows := map[string][]string{}
	for i, r := range recs[1:] {
		rows[r[2]] = r
		// In name order, as a teacher reads a class list.
		if i > 0 && strings.ToLower(recs[i][0]) > strings.ToLower(r[0]) {
			t.Fatalf("grades not in name order: %q before %q", recs[i][0], r[0])
		}
	}
	return recs[0], rows
}

// TestGradesAgreeWithTheBoard: two students at different steps, with
// predictions; the grades CSV has one row each that agrees with their rows
// on the board (steps, times, predictions), and formula-like names are
// defused.
func TestGradesAgreeWithTheBoard(t *testing.T) {
	t.Parallel()
	ts := runInstructorLab(t, server.Config{})
	a, b := newID(), newID()
	ca, _ := dial(t, ts, a)
	cb, _ := dial(t, ts, b)
	ca.do(`{"type":"rename","name":"=HYPERLINK(\"x\")"}`)
	cb.do(`{"type":"rename","name":"Grace"}`)
	for step := 1; step <= 3; step++ {
		for _, frame := range seedSteps[step] {
			frame = strings.Replace(frame, `"message":1}`, `"message":1,"predict":"accepted"}`, 1) // wrong: a stale reply is ignored
			frame = strings.Replace(frame, `"message":2}`, `"message":2,"predict":"accepted"}`, 1) // right
			ca.do(frame)
		}
	}
	cb.do(seedSteps[1][0])

	header, csvRows := grades(t, ts)
	wantHeader := []string{"name", "class", "session", "step 1", "step 2", "step 3", "step 4", "step 5", "step 6", "step 7", "step 8", "step 9",
		"steps done", "current step", "stuck", "predictions made", "predictions right", "last activity",
		"mastery matchingReply", "mastery staleReply", "mastery duplicate", "mastery contradictory", "mastery deadline",
		"mastery lateReply", "mastery staleDeadline", "mastery wrongCallId", "mastery malformedJson", "mastery wrongShape", "kinds mastered",
		"code_submissions", "code_status", "code_passed", "code_cases", "code_property"}
	if !slices.Equal(header, wantHeader) {
		t.Fatalf("grades header %q", header)
	}
	board := apiSessions(t, ts)
	if len(csvRows) != 2 {
		t.Fatalf("%d grade rows, want 2: %v", len(csvRows), csvRows)
	}
	for _, id := range []string{a, b} {
		row, g := board[id], csvRows[id]
		if g == nil {
			t.Fatalf("no grade row for %s", id)
		}
		var done []int
		latest := ""
		for s := 1; s <= 9; s++ {
			if g[2+s] != "" {
				done = append(done, s)
				latest = max(latest, g[2+s])
			}
		}
		if !slices.Equal(done, row.Steps) || g[12] != fmt.Sprint(len(row.Steps)) || g[13] != fmt.Sprint(row.Current) || g[14] != map[bool]string{true: "yes", false: "no"}[row.Stuck] {
			t.Errorf("%s: grades have steps %v (%s, current %s, stuck %s), the board %+v", id, done, g[12], g[13], g[14], row)
		}
		if latest != row.CurrentSince.UTC().Format(store.TimeFormat) {
			t.Errorf("%s: last step at %s in the grades, the board counts from %s", id, latest, row.CurrentSince)
		}
		if g[15] != fmt.Sprint(row.Predictions.Made) || g[16] != fmt.Sprint(row.Predictions.Right) {
			t.Errorf("%s: grades predictions %s/%s, board %+v", id, g[15], g[16], row.Predictions)
		}
		if g[17] != row.LastActivity.UTC().Format(store.TimeFormat) {
			t.Errorf("%s: last activity %s in the grades, %s on the board", id, g[17], row.LastActivity)
		}
	}
	if got := board[a]; !slices.Equal(got.Steps, []int{1, 2, 3}) || got.Current != 4 || got.Predictions.Made != 2 || got.Predictions.Right != 1 {
		t.Fatalf("board row of the first student %+v", got)
	}
	if name := csvRows[a][0]; name != `'=HYPERLINK("x")` {
		t.Fatalf("a formula-like name in the grades: %q", name)
	}
}

// TestRestartKeepsTicksAndPredictions: a new server on the same SQLite file
// shows every tick and prediction as before: the same state frame, the same
// board row, the same grades.
func TestRestartKeepsTicksAndPredictions(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "lab.db")
	st, ts := labOnFile(t, path)
	id := newID()
	c, _ := dial(t, ts, id)
	var f stateFrame
	for step := 1; step <= 5; step++ {
		for _, frame := range seedSteps[step] {
			if strings.Contains(frame, `"deliver"`) {
				frame = strings.TrimSuffix(frame, "}") + `,"predict":"ignored"}`
			}
			f = c.do(frame)
		}
	}
	x := exerciseOf(t, f)
	if !slices.Equal(x.Exercise.Done, []int{1, 2, 3, 4, 5}) || x.Predictions.Made == 0 || x.Predictions.Right == 0 {
		t.Fatalf("before the restart: %+v", x)
	}
	before := apiSessions(t, ts)[id]
	_, gradesBefore := grades(t, ts)

	ts2 := restartOnFile(t, ts, st, path)
	_, g := dial(t, ts2, id)
	if string(g.raw) != string(f.raw) {
		t.Fatalf("state after the restart:\n got %s\nwant %s", g.raw, f.raw)
	}
	after := apiSessions(t, ts2)[id]
	before.Stuck, after.Stuck = false, false
	if !slices.Equal(after.Steps, before.Steps) || !after.CurrentSince.Equal(before.CurrentSince) || after.Predictions != before.Predictions {
		t.Fatalf("board row after the restart %+v, before %+v", after, before)
	}
	if _, gradesAfter := grades(t, ts2); !slices.Equal(gradesAfter[id], gradesBefore[id]) {
		t.Fatalf("grades after the restart %q, before %q", gradesAfter[id], gradesBefore[id])
	}
}

// TestInjectionOutcomes: a deadline delivered at once to three sessions
// reports what it did in each, and the class distribution.
func TestInjectionOutcomes(t *testing.T) {
	t.Parallel()
	ts := runInstructorLab(t, server.Config{})
	ids := []string{newID(), newID(), newID()}
	for i, id := range ids {
		c, _ := dial(t, ts, id)
		if i == 2 {
			c.do(queueReply(reply("run-1", "lookup", "completed", "output", "Done")))
			c.do(`{"type":"deliver","message":1}`)
		}
	}
	code, _, b := call(t, ts, "POST", "/api/inject", testToken, "", `{"all":true,"mode":"deliver","preset":"deadline"}`)
	var out struct {
		Applied  int            `json:"applied"`
		Outcomes map[string]int `json:"outcomes"`
		Results  []struct {
			Session, Notice, Outcome string
		} `json:"results"`
	}
	if err := json.Unmarshal(b, &out); code != http.StatusOK || err != nil {
		t.Fatalf("inject: %d %s %v", code, b, err)
	}
	if out.Applied != 3 || out.Outcomes["unresolved"] != 2 || out.Outcomes["ignored"] != 1 || len(out.Outcomes) != 2 {
		t.Fatalf("outcomes %s", b)
	}
	for _, r := range out.Results {
		want := "Unresolved: deadline observed without a final reply."
		if r.Session == ids[2] {
			want = "Ignored deadline: final outcome already recorded."
		}
		if r.Notice != want {
			t.Errorf("%s: notice %q, want %q", r.Session, r.Notice, want)
		}
	}
	// A held injection delivers nothing: no notice, no outcome.
	code, _, b = call(t, ts, "POST", "/api/inject", testToken, "", `{"all":true,"preset":"deadline"}`)
	if code != http.StatusOK || strings.Contains(string(b), `"notice"`) || !strings.Contains(string(b), `"outcomes":{}`) {
		t.Fatalf("held injection: %d %s", code, b)
	}
}

// TestStuckFlag: with no new step for Config.StuckAfter a student is
// flagged stuck; a new step clears it; a student who has done all nine is
// never stuck.
func TestStuckFlag(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}
	ts := runInstructorLab(t, server.Config{Now: clock.Now, StuckAfter: 2 * time.Minute})
	id := newID()
	c, _ := dial(t, ts, id)
	c.do(`{"type":"start"}`) // not a step
	clock.Advance(119 * time.Second)
	if r := apiSessions(t, ts)[id]; r.Stuck {
		t.Fatalf("stuck before the time: %+v", r)
	}
	clock.Advance(time.Second)
	if r := apiSessions(t, ts)[id]; !r.Stuck || r.Current != 1 {
		t.Fatalf("not stuck after two minutes without a step: %+v", r)
	}
	c.do(queueReply(reply("run-2", "lookup", "completed", "output", "x"))) // step 1
	if r := apiSessions(t, ts)[id]; r.Stuck || !r.CurrentSince.Equal(clock.Now()) || r.Current != 2 {
		t.Fatalf("a new step did not clear stuck: %+v (now %v)", r, clock.Now())
	}
	clock.Advance(90 * time.Second)
	c.do(`{"type":"deliver","message":1}`) // step 2 (run-2 completes)
	clock.Advance(90 * time.Second)
	if r := apiSessions(t, ts)[id]; r.Stuck {
		t.Fatalf("stuck 90 s after a step: %+v", r)
	}

	// The overview says how long counts as stuck.
	ws, _, err := dialInstructor(ts, bearerHeader(testToken))
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	f := readInstructor(t, ws)
	var sum struct {
		Exercise struct {
			StuckAfter float64 `json:"stuckAfter"`
			Steps      struct {
				At   []int `json:"at"`
				Done []int `json:"done"`
			} `json:"steps"`
		} `json:"exercise"`
	}
	if err := json.Unmarshal(f.raw, &sum); err != nil || sum.Exercise.StuckAfter != 120 || sum.Exercise.Steps.At[3] != 1 || sum.Exercise.Steps.Done[1] != 1 {
		t.Fatalf("overview's summary %s (%v)", f.raw, err)
	}
}

// TestPredictionsRequired: a session whose class requires predictions
// refuses a student's delivery without one, and nothing changes.
func TestPredictionsRequired(t *testing.T) {
	t.Parallel()
	lab, ts := runLab(t, server.Config{})
	id := newID()
	c, _ := dial(t, ts, id)
	f := c.do(`{"type":"queueDeadline"}`)
	if !lab.RequirePredictions(id, true) || lab.RequirePredictions(newID(), true) {
		t.Fatal("RequirePredictions: wrong answer for a held or an unknown session")
	}
	if g := c.state(); g.Seq != f.Seq || !exerciseOf(t, g).Exercise.PredictionsRequired {
		t.Fatalf("the page is told predictions are required: %s", g.raw)
	}
	c.send(`{"type":"deliver","message":1}`)
	if e := c.refusal(); e.Reason != "prediction_required" {
		t.Fatalf("a delivery without prediction: %s", e.raw)
	}
	if g := c.do(`{"type":"deliver","message":1,"predict":"unresolved"}`); g.Seq != f.Seq+1 || g.Call.Status != "Unresolved" {
		t.Fatalf("a delivery with prediction: %s", g.raw)
	}
	lab.RequirePredictions(id, false)
	if g := c.state(); exerciseOf(t, g).Exercise.PredictionsRequired {
		t.Fatalf("the page is told predictions are no longer required: %s", g.raw)
	}
	c.do(`{"type":"deliver","message":1}`)
}

// readOverview reads the first overview frame an instructor's connection
// gets into v, and returns the frame.
func readOverview(t *testing.T, ts *httptest.Server, v any) overviewFrame {
	t.Helper()
	ws, _, err := dialInstructor(ts, bearerHeader(testToken))
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	f := readInstructor(t, ws)
	if err := json.Unmarshal(f.raw, v); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestOverviewMisconceptions: the console's overview sums the class's
// predictions by kind of message, with the sentences the board shows.
func TestOverviewMisconceptions(t *testing.T) {
	t.Parallel()
	ts := runInstructorLab(t, server.Config{})
	for _, predict := range []string{"accepted", "ignored", "accepted"} {
		c, _ := dial(t, ts, newID())
		c.do(queueReply(reply("run-1", "lookup", "completed", "output", "old")))
		c.do(`{"type":"start"}`)
		c.do(`{"type":"deliver","message":1,"predict":"` + predict + `"}`)
	}
	var sum struct {
		Exercise struct {
			Misconceptions []struct {
				Kind  string `json:"kind"`
				Made  int    `json:"made"`
				Right int    `json:"right"`
				Said  []struct {
					Prediction string `json:"prediction"`
					Count      int    `json:"count"`
					Sentence   string `json:"sentence"`
				} `json:"said"`
			} `json:"misconceptions"`
		} `json:"exercise"`
	}
	f := readOverview(t, ts, &sum)
	m := sum.Exercise.Misconceptions
	if len(m) != 1 || m[0].Kind != "staleReply" || m[0].Made != 3 || m[0].Right != 1 || len(m[0].Said) != 2 ||
		m[0].Said[0].Sentence != "2 of 3 expected a stale reply to be accepted" || m[0].Said[1].Prediction != "ignored" {
		t.Fatalf("misconceptions %s", f.raw)
	}
}

// TestTimelineCarriesPredictions: the instructor's timeline names the
// message's number and the student's prediction with whether it was right.
func TestTimelineCarriesPredictions(t *testing.T) {
	t.Parallel()
	ts := runInstructorLab(t, server.Config{})
	id := newID()
	c, _ := dial(t, ts, id)
	c.do(`{"type":"queueDeadline"}`)
	c.do(`{"type":"deliver","message":1,"predict":"ignored"}`)
	code, _, b := call(t, ts, "GET", "/api/sessions/"+id, testToken, "", "")
	var out struct {
		Timeline []struct {
			Kind      string `json:"kind"`
			Number    string `json:"number"`
			Predicted string `json:"predicted"`
			Right     *bool  `json:"right"`
		} `json:"timeline"`
	}
	if err := json.Unmarshal(b, &out); code != http.StatusOK || err != nil || len(out.Timeline) != 2 {
		t.Fatalf("GET session: %d %s %v", code, b, err)
	}
	if e := out.Timeline[1]; e.Kind != "delivered" || e.Number != "1" || e.Predicted != "ignored" || e.Right == nil || *e.Right {
		t.Fatalf("timeline entry %s", b)
	}
	if e := out.Timeline[0]; e.Predicted != "" || e.Right != nil {
		t.Fatalf("a queued entry with a prediction: %s", b)
	}
	// The JSON lines export carries the prediction too.
	_, _, b = call(t, ts, "GET", "/api/sessions/"+id+"/export", testToken, "", "")
	if !strings.Contains(string(b), `"kind":"delivered","message":1,"run":"run-1","notice":"Unresolved: deadline observed without a final reply.","prediction":"ignored"}`) {
		t.Fatalf("export %s", b)
	}
}

// TestExerciseSteps: /exercise.json serves the nine steps' texts from the
// model, to anyone.
func TestExerciseSteps(t *testing.T) {
	t.Parallel()
	_, ts := runLab(t, server.Config{})
	resp := get(t, ts, "/exercise.json")
	var out struct {
		Steps []struct {
			Number int      `json:"number"`
			Goal   string   `json:"goal"`
			Hint   string   `json:"hint"`
			Parts  []string `json:"parts"`
		} `json:"steps"`
		Predictions []string `json:"predictions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); resp.StatusCode != http.StatusOK || err != nil {
		t.Fatalf("GET /exercise.json: %d %v", resp.StatusCode, err)
	}
	if len(out.Steps) != 9 || out.Steps[3].Number != 4 || len(out.Steps[3].Parts) != 3 || out.Steps[0].Parts == nil || out.Steps[8].Goal == "" ||
		!slices.Equal(out.Predictions, []string{"accepted", "ignored", "unresolved", "diagnostic"}) {
		t.Fatalf("exercise.json %+v", out)
	}
}

// labOnFile runs a lab (with the instructor's token) on a SQLite file of
// its own at path; the store closes after the server's shutdown (cleanups
// run last first).
func labOnFile(t *testing.T, path string) (*sqlite.Store, *httptest.Server) {
	t.Helper()
	st, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, runInstructorLab(t, server.Config{Store: st})
}

// restartOnFile is a restart: the lab ts on store st lets go of its data
// file at path (one lab a file: its journal is locked), and a second opens
// it.
func restartOnFile(t *testing.T, ts *httptest.Server, st *sqlite.Store, path string) *httptest.Server {
	t.Helper()
	ts.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	_, ts2 := labOnFile(t, path)
	return ts2
}
