package server

import (
	"time"
	"unicode/utf8"

	"github.com/toolcall-lab/lab/model"
	"github.com/toolcall-lab/lab/store"
)

// The instructor's timeline of a session: its recent events, named with the
// model's event kind names (model.Event.KindName), the same words the store
// and the exports use.

// timelineEntry is one change of a session as the instructor reads it.
type timelineEntry struct {
	Seq         uint64    `json:"seq"`
	Time        time.Time `json:"time"`
	Actor       string    `json:"actor"`
	Kind        string    `json:"kind"`                  // model.Event.KindName: started, queued, delivered, …
	MessageKind string    `json:"messageKind,omitempty"` // reply or deadline, for queued and injected events
	Message     int       `json:"message"`               // the held message concerned, 0 for none
	Label       string    `json:"label"`                 // its label (cut to maxLabelBytes), or the new name
	Notice      string    `json:"notice"`                // a delivery's notice; "" for other changes
	Number      string    `json:"number,omitempty"`      // the message's number as the student sees it: "2", "I1"
	// Predicted is what the student expected of a delivery, and Right
	// whether the notice bore it out; both absent without a prediction.
	Predicted string `json:"predicted,omitempty"`
	Right     *bool  `json:"right,omitempty"`
}

// newTimelineEntry describes ev, stored as seq with notice at at, in the
// session l (at seq or later: a message never changes once held). Only a
// delivery says its notice: the session's notice is unchanged by queueing
// or renaming, and repeating the last delivery's notice on a queued row
// read as if queueing had failed.
func newTimelineEntry(ev model.Event, seq uint64, l *model.Lab, notice string, at time.Time) timelineEntry {
	e := timelineEntry{Seq: seq, Time: at, Actor: ev.By.String(), Kind: ev.KindName()}
	if ev.Kind == model.MessageDelivered || ev.Kind == model.MessageInjected && ev.Deliver {
		e.Notice = notice
	}
	switch ev.Kind {
	case model.MessageQueued, model.MessageInjected:
		e.MessageKind = ev.Message.Kind.String()
	case model.Renamed:
		e.Label = ev.Name
	case model.CodeSubmitted, model.CaseAdded, model.CaseRemoved:
		e.Label = store.CodeLabel(ev)
	}
	if m, ok := l.Message(ev.Message.ID); ok {
		e.Message, e.Label, e.Number = m.ID, cut(m.Label(), maxLabelBytes), m.Number
	}
	if ev.Kind == model.PracticeDrawn {
		e.Label = cut(store.PracticeLabel(ev)+": "+e.Label, maxLabelBytes)
	}
	if ev.Kind == model.MessageDelivered && ev.Prediction != model.NoPrediction {
		right := model.ClassifyNotice(notice) == ev.Prediction // as model.Receipt.Right
		e.Predicted, e.Right = ev.Prediction.String(), &right
	}
	return e
}

// cut shortens s to at most n bytes on a character boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// timelineFrom makes the entries of recs, records of session l up to its
// seq; later ones (another replica's, not yet applied here) are left out.
func timelineFrom(recs []store.Record, l *model.Lab) []timelineEntry {
	entries := make([]timelineEntry, 0, len(recs))
	for _, r := range recs {
		if r.Seq > l.Seq() {
			break
		}
		entries = append(entries, newTimelineEntry(r.Event, r.Seq, l, r.Notice, r.Time))
	}
	return entries
}

// timelineFrame carries timeline entries of one session to an instructor:
// the whole timeline when reset, else entries to append.
func timelineFrame(id string, reset bool, entries []timelineEntry) []byte {
	return mustJSON(struct {
		Type    string          `json:"type"`
		Session string          `json:"session"`
		Reset   bool            `json:"reset"`
		Entries []timelineEntry `json:"entries"`
	}{"timeline", id, reset, entries})
}
