package server

import (
	"strconv"

	"github.com/toolcall-lab/lab/model"
	"github.com/toolcall-lab/lab/model/jsjson"
)

// Practice as the server carries it (docs/exercise.md, "Practice"): the
// state frame's "mastery" and "practice", the row's mastery for the board,
// and the latest code check handed to a draw. The rules (mastery, the next
// kind, the set-up) are the model's (model/practice.go).

// drawsPractice reports whether cmd draws a practice: the student's
// practice frame, or the instructor's practice preset.
func drawsPractice(cmd model.Command) bool {
	return cmd.Kind == model.DrawPractice || cmd.Kind == model.Inject && cmd.Inject.Preset == model.PracticePreset
}

// latestCheck is the result of the check of the session's latest
// submission, nil when there is none or it has not ended: what a draw
// counts the code's wrong situations from. Called by the drainer.
func (s *session) latestCheck() *model.Result {
	if s.code.result == nil || s.code.in.Submissions == 0 || !s.code.in.Same(s.lab.Code()) {
		return nil
	}
	return s.code.result
}

// appendPractice appends the state frame's mastery and practice:
//
//	,"mastery":{"matchingReply":{"predicted":2,"right":2,"streak":2,"mastered":false},…}
//	,"practice":{"message":4,"number":"4","kind":"staleReply","why":"…"}
//
// mastery has all ten kinds, in the order the nine steps meet them;
// practice is the practice drawn and not yet delivered, {"done":true} once
// every kind is mastered, and absent otherwise.
func appendPractice(b []byte, m model.Mastery, p model.PracticeView) []byte {
	b = append(b, `,"mastery":{`...)
	for i, k := range model.PracticeKinds() {
		if i > 0 {
			b = append(b, ',')
		}
		km := m[k]
		b = jsjson.AppendString(b, k.String())
		b = append(b, `:{"predicted":`...)
		b = strconv.AppendInt(b, int64(km.Predicted), 10)
		b = append(b, `,"right":`...)
		b = strconv.AppendInt(b, int64(km.Right), 10)
		b = append(b, `,"streak":`...)
		b = strconv.AppendInt(b, int64(km.Streak), 10)
		b = append(b, `,"mastered":`...)
		b = strconv.AppendBool(b, km.Mastered)
		b = append(b, '}')
	}
	b = append(b, '}')
	switch {
	case p.Done:
		b = append(b, `,"practice":{"done":true}`...)
	case p.Message != 0:
		b = append(b, `,"practice":{"message":`...)
		b = strconv.AppendInt(b, int64(p.Message), 10)
		b = append(b, `,"number":`...)
		b = jsjson.AppendString(b, p.Number)
		b = append(b, `,"kind":`...)
		b = jsjson.AppendString(b, p.Kind.String())
		b = append(b, `,"why":`...)
		b = jsjson.AppendString(b, p.Why)
		b = append(b, '}')
	}
	return b
}

// masteryRow is a session's mastery as the board's grid shows it: each
// kind's state (model.Mastery.State: mastered, wrong, learning or new) and
// how many are mastered.
type masteryRow struct {
	Kinds    map[string]string `json:"kinds"`
	Mastered int               `json:"mastered"`
}

// newMasteryRow is m as a row's mastery; nil when no prediction was made
// (every kind new), so that a row of the open lab costs nothing.
func newMasteryRow(m model.Mastery) *masteryRow {
	if m == (model.Mastery{}) {
		return nil
	}
	r := &masteryRow{Kinds: make(map[string]string, model.NumDeliveryKinds), Mastered: m.Count()}
	for _, k := range model.PracticeKinds() {
		r.Kinds[k.String()] = m.State(k)
	}
	return r
}

// masteryCount is the class's count of one kind: how many students have
// mastered it, got it wrong last, are learning it, have not met it.
type masteryCount struct {
	Kind     string `json:"kind"`
	Phrase   string `json:"phrase"` // "a stale reply"
	Mastered int    `json:"mastered"`
	Wrong    int    `json:"wrong"`
	Learning int    `json:"learning"`
	New      int    `json:"new"`
}

// countMastery is the class's mastery per kind, in the order the nine
// steps meet the kinds, without names: the board's and the projector's.
func countMastery(rows []sessionRow) []masteryCount {
	kinds := model.PracticeKinds()
	out := make([]masteryCount, len(kinds))
	for i, k := range kinds {
		out[i] = masteryCount{Kind: k.String(), Phrase: k.Phrase()}
		for _, r := range rows {
			state := "new"
			if r.Mastery != nil {
				state = r.Mastery.Kinds[k.String()]
			}
			switch state {
			case "mastered":
				out[i].Mastered++
			case "wrong":
				out[i].Wrong++
			case "learning":
				out[i].Learning++
			default:
				out[i].New++
			}
		}
	}
	return out
}
