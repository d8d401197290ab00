// Package store keeps the lab's sessions as event logs: every change to a
// session is a Record, appended before its state frame goes out. A session's
// state is the fold of its records' events through model.Lab, so the log is
// the one source of truth for state, timeline and export.
//
// Three implementations share one behaviour: SQLite (durable, group
// commit; the default), Postgres (shared by several replicas, with a
// notification per append) and Memory (for tests and demos; gone when the
// process exits).
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolcall-lab/lab/model"
)

// Record is one stored change of a session.
type Record struct {
	Session string
	Seq     uint64    // the session's seq after this change: 1, 2, 3, …
	Time    time.Time // stamped by the server, millisecond precision, UTC
	Event   model.Event
	Run     string // the run current after the change
	Notice  string // the notice the change left (queueing leaves it unchanged)
}

// Session is one stored session.
type Session struct {
	ID         string
	Name       string // the display name its last rename set, "" if none
	Created    time.Time
	LastActive time.Time // time of the last change
}

// Store keeps sessions' events, and classes: it is what package server
// consumes. Three implement it: store/sqlite (durable, the default),
// store/postgres (shared by replicas; it is also a Listener) and Memory
// (tests and demos); store/storetest checks that they behave alike.
type Store interface {
	// Append returns once r is committed; an error means it was not stored.
	// A seq another replica stored first is ErrSeqTaken.
	Append(ctx context.Context, r Record) error
	// Sessions lists the stored sessions.
	Sessions(ctx context.Context) ([]Session, error)
	// Events returns one session's records in seq order.
	Events(ctx context.Context, id string) ([]Record, error)
	// EventsAfter returns one session's records after seq after, in order.
	EventsAfter(ctx context.Context, id string, after uint64) ([]Record, error)
	// Delete removes sessions with their events.
	Delete(ctx context.Context, ids []string) error
	// Ready reports whether the store takes writes now.
	Ready(ctx context.Context) error
	// Classes keeps classes, their members and console logins
	// (docs/classes.md).
	Classes
}

// Listener is a Store that several replicas share: it tells of every
// append any of them commits (store/postgres's Listen has the contract).
// With one, server.Start starts the listener (server/replica.go).
type Listener interface {
	Listen(ctx context.Context, ready func(), notify func(session string, seq uint64)) error
}

// ClassChanged is the session name a class's notification carries:
// ClassChanged + the class id, with seq 0, says that its settings changed
// (SetClassPredictions), so replicas apply them to the sessions they hold.
const ClassChanged = "class:"

// ErrClosed refuses work after Close.
var ErrClosed = errors.New("the store is closed")

// ErrSeqTaken refuses an append whose (session, seq) is already stored:
// another replica appended that seq first. The caller reads the events it
// lacks (EventsAfter), applies them and decides again. With one process
// (SQLite, Memory) it never happens.
var ErrSeqTaken = errors.New("the seq is already taken")

// Kind is the text the log and the exports use for an event's kind: the
// model's one vocabulary (model.Event.KindName).
func Kind(e model.Event) string { return e.KindName() }

// row is a record flattened into the fields the journal and the chunks
// encode (encodeRecord), the columns older builds' events table had and
// Postgres's has. Adding an event kind means adding a case to encode and
// to decode.
type row struct {
	session          string
	seq              int64
	timeMs           int64
	actor, kind      string
	message          int64
	msgKind, msgFrom string
	raw              []byte // a queued reply's text, exactly as captured
	keyRun, keyCall  string // a queued deadline's captured identity
	run, notice      string
	prediction       string // a delivery's model.Prediction word, "" for none
}

// check refuses a record no store can encode: every store checks alike.
func check(r Record) error {
	switch r.Event.Kind {
	case model.RunStarted, model.Renamed, model.MessageQueued, model.MessageInjected:
	case model.MessageDelivered:
		if _, ok := model.ParsePrediction(r.Event.Prediction.String()); !ok {
			return fmt.Errorf("encoding a delivery: unknown prediction %d", r.Event.Prediction)
		}
	default:
		return fmt.Errorf("encoding event kind %d: unknown", r.Event.Kind)
	}
	return nil
}

func encode(r Record) (row, error) {
	if err := check(r); err != nil {
		return row{}, err
	}
	w := row{
		session: r.Session, seq: int64(r.Seq), timeMs: r.Time.UnixMilli(),
		actor: r.Event.By.String(), kind: Kind(r.Event),
		message: int64(r.Event.Message.ID), run: r.Run, notice: r.Notice,
		raw: []byte{}, // a NOT NULL column: nil would bind as NULL
	}
	switch r.Event.Kind {
	case model.RunStarted:
	case model.MessageDelivered:
		w.prediction = r.Event.Prediction.String()
	case model.Renamed:
		w.raw = append(w.raw, r.Event.Name...)
	case model.MessageQueued, model.MessageInjected:
		m := r.Event.Message
		w.msgKind, w.msgFrom = m.Kind.String(), m.From.String()
		switch m.Kind {
		case model.ReplyMessage:
			w.raw = append(w.raw, m.Raw...)
		case model.DeadlineMessage:
			w.keyRun, w.keyCall = m.Key.RunID, m.Key.CallID
		}
	}
	return w, nil
}

func decode(w row) (Record, error) {
	r := Record{
		Session: w.session, Seq: uint64(w.seq), Time: time.UnixMilli(w.timeMs).UTC(),
		Run: w.run, Notice: w.notice,
	}
	by, err := actor(w.actor)
	if err != nil {
		return Record{}, err
	}
	r.Event.By = by
	r.Event.Message.ID = int(w.message)
	kind, deliver, ok := model.ParseKindName(w.kind)
	if !ok {
		return Record{}, fmt.Errorf("session %s seq %d: unknown event kind %q", w.session, w.seq, w.kind)
	}
	r.Event.Kind, r.Event.Deliver = kind, deliver
	switch kind {
	case model.RunStarted:
	case model.MessageDelivered:
		p, ok := model.ParsePrediction(w.prediction)
		if !ok {
			return Record{}, fmt.Errorf("session %s seq %d: unknown prediction %q", w.session, w.seq, w.prediction)
		}
		r.Event.Prediction = p
	case model.Renamed:
		r.Event.Name = string(w.raw)
	case model.MessageQueued, model.MessageInjected:
		m := &r.Event.Message
		if m.From, err = actor(w.msgFrom); err != nil {
			return Record{}, err
		}
		switch w.msgKind {
		case "reply":
			m.Kind, m.Raw = model.ReplyMessage, string(w.raw)
		case "deadline":
			m.Kind, m.Key = model.DeadlineMessage, model.Key{RunID: w.keyRun, CallID: w.keyCall}
		default:
			return Record{}, fmt.Errorf("session %s seq %d: unknown message kind %q", w.session, w.seq, w.msgKind)
		}
	}
	return r, nil
}

func actor(s string) (model.Actor, error) {
	switch s {
	case "student":
		return model.Student, nil
	case "instructor":
		return model.Instructor, nil
	}
	return 0, fmt.Errorf("unknown actor %q", s)
}
