package server

import (
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/toolcall-lab/lab/model"
)

// The exercise (docs/exercise.md) as the server carries it: the state
// frame's "exercise" and "predictions", the progress columns of a session's
// row, a class's step distribution and misconceptions, and the steps' texts
// for the pages. The rules are the model's (model/exercise.go,
// model/explain.go); everything here is a function of a session's events
// and their times.

// appendExercise appends the state frame's progress through the nine steps
// and its prediction counts:
//
//	,"exercise":{"done":[1,2],"current":3,"parts":[[true],…],"predictionsRequired":false},"predictions":{"made":4,"right":3}
//
// parts has one list per step, one boolean per part (docs/exercise.md);
// predictionsRequired is the class setting (docs/classes.md).
func appendExercise(b []byte, x model.Exercise, predicted, right int, predictionsRequired bool) []byte {
	b = append(b, `,"exercise":{"done":[`...)
	first := true
	for s := 1; s <= model.NumSteps; s++ {
		if !x.IsDone(s) {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = strconv.AppendInt(b, int64(s), 10)
	}
	b = append(b, `],"current":`...)
	b = strconv.AppendInt(b, int64(x.Current()), 10)
	b = append(b, `,"parts":[`...)
	for s := 1; s <= model.NumSteps; s++ {
		if s > 1 {
			b = append(b, ',')
		}
		b = append(b, '[')
		_, total := x.Parts(s)
		for i := range total {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendBool(b, x.PartDone(s, i))
		}
		b = append(b, ']')
	}
	b = append(b, `],"predictionsRequired":`...)
	b = strconv.AppendBool(b, predictionsRequired)
	b = append(b, `},"predictions":{"made":`...)
	b = strconv.AppendInt(b, int64(predicted), 10)
	b = append(b, `,"right":`...)
	b = strconv.AppendInt(b, int64(right), 10)
	return append(b, '}')
}

// predictionCount is how many predictions a session made, and how many the
// notices bore out.
type predictionCount struct {
	Made  int `json:"made"`
	Right int `json:"right"`
}

// progress is a session's columns of the progress board, part of its row
// (sessionRow embeds it).
type progress struct {
	Steps   []int `json:"steps"`   // the steps done, in step order
	Current int   `json:"current"` // the lowest step not done, 0 once all are
	// Started: the student has acted (model.Exercise.Started); an
	// injection does not start a session. Until then there is no time on
	// a step and no stuck flag: the board says "not started".
	Started bool `json:"started"`
	// CurrentSince is when the student last ticked a new step, or when the
	// student first acted if none (the session's start before that): the
	// time on the current step counts from it. Only the student's own
	// work ticks a step (model/exercise.go), so an injection never moves it.
	CurrentSince time.Time `json:"currentSince"`
	// Stuck: the student has started, a step remains, and no new step was
	// ticked for Config.StuckAfter; computed when the row is read (stuckAt).
	Stuck       bool            `json:"stuck"`
	Predictions predictionCount `json:"predictions"`
	// Mastery is the student's mastery per kind (practice.go), absent
	// before the first prediction. Read-only, shared with the stepClock.
	Mastery *masteryRow `json:"mastery,omitempty"`
	// tally counts the session's predictions by kind of message, for the
	// class's misconceptions; not part of the row's JSON. Read-only, shared
	// with the session's stepClock; nil before the first receipt.
	tally *model.PredictionTally
}

// stepClock turns the model's DoneAt seqs into times: when each step was
// first done. Owned by the session's drainer (and by restoreSession before
// the session is shared).
type stepClock struct {
	began   time.Time                 // when the session began
	started time.Time                 // the student's first own action, zero before
	at      [model.NumSteps]time.Time // when step s was first done, zero while not
	// tally counts every receipt's prediction; rows share it read-only, so
	// each change that adds receipts makes a new one (receipts), and a
	// change that adds none copies a pointer into its row, not 576 bytes.
	// nil before the first receipt.
	tally *model.PredictionTally
	// done is the last progress's Steps, which the overview's rows share
	// read-only: a new slice only when the steps done change, that is
	// when the exercise's DoneAt (doneAt, as of done) does.
	done   []int
	doneAt [model.NumSteps]uint64
	// masteryRow is mastery as the rows share it read-only: a new one only
	// when mastery may have changed, that is when a prediction was made
	// (masteryAt: the predictions as of masteryRow; with none, it is nil).
	masteryAt  int
	masteryRow *masteryRow
}

// steps records the steps that the event with seq, stored at at, has just
// completed (x is the exercise after it).
func (c *stepClock) steps(x model.Exercise, seq uint64, at time.Time) {
	if x.StartedAt == seq && c.started.IsZero() {
		c.started = at
	}
	for i, done := range x.DoneAt {
		if done != 0 && done == seq && c.at[i].IsZero() {
			c.at[i] = at
		}
	}
}

// receipts counts the predictions of receipts new since the last call, in
// a new tally: the rows published before share the old one read-only.
// Receipts without a prediction leave the tally as it is.
func (c *stepClock) receipts(rs []model.Receipt) {
	var t *model.PredictionTally
	for _, r := range rs {
		if r.Predicted == model.NoPrediction {
			continue
		}
		if t == nil {
			t = new(model.PredictionTally)
			if c.tally != nil {
				*t = *c.tally
			}
		}
		t.Add(r)
	}
	if t != nil {
		c.tally = t
	}
}

// progress is the session's progress columns for v, the view after the
// last steps and receipts.
func (c *stepClock) progress(v model.LabView) progress {
	since := c.began
	if !c.started.IsZero() {
		since = c.started
	}
	for _, t := range c.at {
		if t.After(since) {
			since = t
		}
	}
	if c.done == nil || v.Exercise.DoneAt != c.doneAt {
		c.done, c.doneAt = v.Exercise.Done(), v.Exercise.DoneAt
	}
	if v.Predicted != c.masteryAt {
		c.masteryAt, c.masteryRow = v.Predicted, nil
		if v.Mastery != nil {
			c.masteryRow = newMasteryRow(*v.Mastery)
		}
	}
	return progress{
		Steps: c.done, Current: v.Exercise.Current(), Started: v.Exercise.Started(), CurrentSince: since,
		Predictions: predictionCount{Made: v.Predicted, Right: v.Right},
		Mastery:     c.masteryRow,
		tally:       c.tally,
	}
}

// stuckAt says whether a session with progress p is stuck at now: the
// student has started, a step remains and none was ticked for after.
func (p progress) stuckAt(now time.Time, after time.Duration) bool {
	return p.Started && p.Current != 0 && after > 0 && now.Sub(p.CurrentSince) >= after
}

// stepCounts is a class's step distribution, without names: what the
// projector shows. Computed from any set of session rows (the open lab's, a
// class's).
type stepCounts struct {
	// At[s] counts the sessions working on step s (their lowest step not
	// done); At[0] those that have done all nine.
	At [model.NumSteps + 1]int `json:"at"`
	// Done[s-1] counts the sessions that have done step s.
	Done [model.NumSteps]int `json:"done"`
	// Stuck counts the sessions flagged stuck.
	Stuck int `json:"stuck"`
}

// countSteps computes the step distribution of rows.
func countSteps(rows []sessionRow) stepCounts {
	var c stepCounts
	for _, r := range rows {
		if r.Current >= 0 && r.Current <= model.NumSteps {
			c.At[r.Current]++
		}
		for _, s := range r.Steps {
			if s >= 1 && s <= model.NumSteps {
				c.Done[s-1]++
			}
		}
		if r.Stuck {
			c.Stuck++
		}
	}
	return c
}

// misconception is what a class predicted about one kind of message.
type misconception struct {
	Kind   string `json:"kind"`   // model.DeliveryKind's name: staleReply, duplicate, …
	Phrase string `json:"phrase"` // "a stale reply"
	Made   int    `json:"made"`
	Right  int    `json:"right"`
	Wrong  int    `json:"wrong"` // Made - Right: the chart's other bar
	// Text is the bar in words, for screen readers: "a stale reply: 2
	// right, 5 wrong, of 7 predictions".
	Text string `json:"text"`
	// Said lists every prediction made about the kind, most made first,
	// each with its sentence: "7 of 20 expected a stale reply to be accepted".
	Said []said `json:"said"`
}

type said struct {
	Prediction string `json:"prediction"`
	Count      int    `json:"count"`
	Sentence   string `json:"sentence"`
}

// misconceptions sums the rows' predictions by kind of message: one entry
// per kind with a prediction, in model.MisconceptionKinds's order (the
// chart's bars: model.Misconceptions).
func misconceptions(rows []sessionRow) []misconception {
	var t model.PredictionTally
	for _, r := range rows {
		if r.tally != nil {
			t.Merge(*r.tally)
		}
	}
	chart := model.Misconceptions(t)
	out := make([]misconception, 0, len(chart.Bars))
	for _, b := range chart.Bars {
		m := misconception{Kind: b.Kind.String(), Phrase: b.Phrase, Made: b.Made, Right: b.Right, Wrong: b.Wrong, Text: b.Text}
		for p := model.PredictAccepted; int(p) < model.NumPredictions; p++ {
			if n := b.Said[p]; n > 0 {
				m.Said = append(m.Said, said{Prediction: p.String(), Count: n, Sentence: model.Expectation(b.Kind, p, n, b.Made)})
			}
		}
		slices.SortStableFunc(m.Said, func(a, b said) int { return b.Count - a.Count })
		out = append(out, m)
	}
	return out
}

// classSummary is what the console's progress board shows above the rows.
type classSummary struct {
	// StuckAfter is Config.StuckAfter in seconds: the page flags a row
	// stuck once its time on the current step reaches it.
	StuckAfter     float64         `json:"stuckAfter"`
	Now            time.Time       `json:"now"` // the server's time when the summary was made, for the page's clock
	Steps          stepCounts      `json:"steps"`
	Misconceptions []misconception `json:"misconceptions"`
	// Mastery counts, per kind, the students who mastered it, got it
	// wrong last, are learning it or have not met it (practice.go).
	Mastery []masteryCount `json:"mastery"`
}

func summarize(rows []sessionRow, now time.Time, stuckAfter time.Duration) classSummary {
	return classSummary{StuckAfter: stuckAfter.Seconds(), Now: now.UTC(), Steps: countSteps(rows), Misconceptions: misconceptions(rows), Mastery: countMastery(rows)}
}

// stepView is one checkpoint as the pages read it.
type stepView struct {
	Number int      `json:"number"`
	Goal   string   `json:"goal"`
	Hint   string   `json:"hint"`
	Parts  []string `json:"parts"` // the parts of a step of several, else empty
}

// exerciseSteps answers GET /exercise.json: the nine steps' goals, hints and
// parts (the model's text, one place), and the prediction words, for the
// student page's panel and the console's board.
func (s *Server) exerciseSteps(c echo.Context) error {
	steps := model.Steps()
	out := struct {
		Steps       []stepView `json:"steps"`
		Predictions []string   `json:"predictions"`
	}{Steps: make([]stepView, len(steps))}
	for i, st := range steps {
		out.Steps[i] = stepView{Number: st.Number, Goal: st.Goal, Hint: st.Hint, Parts: append([]string{}, st.Parts...)}
	}
	for p := model.PredictAccepted; int(p) < model.NumPredictions; p++ {
		out.Predictions = append(out.Predictions, p.String())
	}
	c.Response().Header().Set("Cache-Control", "no-cache")
	return c.JSON(http.StatusOK, out)
}

// RequirePredictions sets whether the students of session id must predict
// the outcome before each delivery (the class setting "predictions
// required": the classes code sets it for its sessions). A student's
// deliver frame without "predict" is then refused with the reason
// prediction_required. It reports whether the server holds the session.
func (s *Server) RequirePredictions(id string, on bool) bool {
	sess, ok := s.find(id)
	if ok {
		sess.setRequirePredictions(on)
	}
	return ok
}

// requirePredictionsIn applies a class's setting to every session the
// server holds in it.
func (s *Server) requirePredictionsIn(class string, on bool) {
	for _, sess := range s.sessionsIn(class) {
		sess.setRequirePredictions(on)
	}
}
