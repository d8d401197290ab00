// Package store keeps the lab's sessions as event logs: every change to a
// session is a Record, appended before its state frame goes out. A session's
// state is the fold of its records' events through model.Lab, so the log is
// the one source of truth for state, timeline and export.
//
// This package is the domain: the types and their errors, Store (what
// package server consumes), the codec the drivers share (Row), the exports
// and Memory. It imports no database driver. Three implementations share
// one behaviour, which store/storetest checks: store/sqlite (durable, group
// commit; the default), store/postgres (shared by several replicas, with a
// notification per append) and Memory (for tests and demos; gone when the
// process exits).
package store

import (
	"context"
	"encoding/json"
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
	// Ready reports whether the store takes writes now. A store that
	// probes by writing trusts its last probe for up to ProbeEvery.
	Ready(ctx context.Context) error
	// Classes keeps classes, their members and console logins
	// (docs/classes.md).
	Classes
}

// Listener is a Store that several replicas share: it tells of every
// append any of them commits (store/postgres's Listen has the contract).
// With one, server.Start starts the listener (server/replica.go).
//
// alive bounds how long a dead or frozen listening connection goes
// unnoticed: Listen proves its connection answers at least that often, each
// time within that long, and returns an error when it does not.
type Listener interface {
	Listen(ctx context.Context, alive time.Duration, ready func(), notify func(session string, seq uint64)) error
}

// ProbeEvery is how long Ready may trust its last write probe: a flood of
// probes is not a flood of writes.
const ProbeEvery = time.Second

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

// Row is a record flattened into the fields the drivers store: the
// columns of SQLite's older events table and of Postgres's, and what
// store/sqlite's journal and chunks encode. Adding an event kind means
// adding a case to Encode and to Decode. A code submission keeps its
// module's text in Raw and its seed in Message; an instructor's case its
// name and frames, as JSON, in Raw.
type Row struct {
	Session          string
	Seq              int64
	TimeMs           int64
	Actor, Kind      string
	Message          int64
	MsgKind, MsgFrom string
	Raw              []byte // a queued reply's text, exactly as captured
	KeyRun, KeyCall  string // a queued deadline's captured identity
	Run, Notice      string
	Prediction       string // a delivery's model.Prediction word, "" for none
}

// check refuses a record no store can encode: every store checks alike.
func check(r Record) error {
	switch r.Event.Kind {
	case model.RunStarted, model.Renamed, model.MessageQueued, model.MessageInjected:
	case model.CodeSubmitted:
		if r.Event.Seed >= model.MaxSeed {
			return fmt.Errorf("encoding a code submission: seed %d is not below 2^53", r.Event.Seed)
		}
		if _, ok := model.ParseLanguage(r.Event.Lang.String()); !ok {
			return fmt.Errorf("encoding a code submission: unknown language %d", r.Event.Lang)
		}
	case model.CaseAdded, model.CaseRemoved:
		if r.Event.Case == nil {
			return errors.New("encoding a case: no case")
		}
	case model.MessageDelivered:
		if _, ok := model.ParsePrediction(r.Event.Prediction.String()); !ok {
			return fmt.Errorf("encoding a delivery: unknown prediction %d", r.Event.Prediction)
		}
	case model.PracticeDrawn:
		if r.Event.Practice == nil {
			return errors.New("encoding a practice: no practice")
		}
	default:
		return fmt.Errorf("encoding event kind %d: unknown", r.Event.Kind)
	}
	return nil
}

// Encode flattens r into a Row, or refuses a record no store can encode.
func Encode(r Record) (Row, error) {
	if err := check(r); err != nil {
		return Row{}, err
	}
	w := Row{
		Session: r.Session, Seq: int64(r.Seq), TimeMs: r.Time.UnixMilli(),
		Actor: r.Event.By.String(), Kind: Kind(r.Event),
		Message: int64(r.Event.Message.ID), Run: r.Run, Notice: r.Notice,
		Raw: []byte{}, // a NOT NULL column: nil would bind as NULL
	}
	switch r.Event.Kind {
	case model.RunStarted:
	case model.MessageDelivered:
		w.Prediction = r.Event.Prediction.String()
	case model.Renamed:
		w.Raw = append(w.Raw, r.Event.Name...)
	case model.CodeSubmitted:
		w.Raw = append(w.Raw, r.Event.Source...)
		w.Message = int64(r.Event.Seed)
		// The language in the message-kind column, which a submission
		// leaves empty otherwise: "" (every log before ReScript) is
		// JavaScript, so no migration is needed.
		if r.Event.Lang != model.JavaScript {
			w.MsgKind = r.Event.Lang.String()
		}
	case model.CaseAdded, model.CaseRemoved:
		b, err := json.Marshal(r.Event.Case)
		if err != nil {
			return Row{}, fmt.Errorf("encoding a case: %w", err)
		}
		w.Raw = b
	case model.PracticeDrawn:
		b, err := json.Marshal(practiceOf(*r.Event.Practice))
		if err != nil {
			return Row{}, fmt.Errorf("encoding a practice: %w", err)
		}
		w.Raw, w.Message = b, int64(r.Event.Practice.Message.ID)
	case model.MessageQueued, model.MessageInjected:
		m := r.Event.Message
		w.MsgKind, w.MsgFrom = m.Kind.String(), m.From.String()
		switch m.Kind {
		case model.ReplyMessage:
			w.Raw = append(w.Raw, m.Raw...)
		case model.DeadlineMessage:
			w.KeyRun, w.KeyCall = m.Key.RunID, m.Key.CallID
		}
	}
	return w, nil
}

// Decode gives back the record Encode flattened into w; it fails on a
// field no build of the lab writes.
func Decode(w Row) (Record, error) {
	r := Record{
		Session: w.Session, Seq: uint64(w.Seq), Time: time.UnixMilli(w.TimeMs).UTC(),
		Run: w.Run, Notice: w.Notice,
	}
	by, err := actor(w.Actor)
	if err != nil {
		return Record{}, err
	}
	r.Event.By = by
	kind, deliver, ok := model.ParseKindName(w.Kind)
	if !ok {
		return Record{}, fmt.Errorf("session %s seq %d: unknown event kind %q", w.Session, w.Seq, w.Kind)
	}
	r.Event.Kind, r.Event.Deliver = kind, deliver
	if kind != model.CodeSubmitted {
		r.Event.Message.ID = int(w.Message)
	}
	switch kind {
	case model.RunStarted:
	case model.CodeSubmitted:
		if w.Message < 0 || w.Message >= model.MaxSeed {
			return Record{}, fmt.Errorf("session %s seq %d: seed %d is not below 2^53", w.Session, w.Seq, w.Message)
		}
		r.Event.Source, r.Event.Seed = string(w.Raw), uint64(w.Message)
		lang, ok := model.ParseLanguage(w.MsgKind)
		if !ok {
			return Record{}, fmt.Errorf("session %s seq %d: unknown language %q", w.Session, w.Seq, w.MsgKind)
		}
		r.Event.Lang = lang
	case model.CaseAdded, model.CaseRemoved:
		var c model.Case
		if err := json.Unmarshal(w.Raw, &c); err != nil {
			return Record{}, fmt.Errorf("session %s seq %d: %w", w.Session, w.Seq, err)
		}
		if kind == model.CaseRemoved {
			c.Frames = nil // a removal names its case only
		}
		r.Event.Case = &c
	case model.PracticeDrawn:
		var p practiceRow
		if err := json.Unmarshal(w.Raw, &p); err != nil {
			return Record{}, fmt.Errorf("session %s seq %d: %w", w.Session, w.Seq, err)
		}
		pr, err := p.practice()
		if err != nil {
			return Record{}, fmt.Errorf("session %s seq %d: %w", w.Session, w.Seq, err)
		}
		r.Event.Practice = &pr
	case model.MessageDelivered:
		p, ok := model.ParsePrediction(w.Prediction)
		if !ok {
			return Record{}, fmt.Errorf("session %s seq %d: unknown prediction %q", w.Session, w.Seq, w.Prediction)
		}
		r.Event.Prediction = p
	case model.Renamed:
		r.Event.Name = string(w.Raw)
	case model.MessageQueued, model.MessageInjected:
		m := &r.Event.Message
		if m.From, err = actor(w.MsgFrom); err != nil {
			return Record{}, err
		}
		switch w.MsgKind {
		case "reply":
			m.Kind, m.Raw = model.ReplyMessage, string(w.Raw)
		case "deadline":
			m.Kind, m.Key = model.DeadlineMessage, model.Key{RunID: w.KeyRun, CallID: w.KeyCall}
		default:
			return Record{}, fmt.Errorf("session %s seq %d: unknown message kind %q", w.Session, w.Seq, w.MsgKind)
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

// practiceRow is a practice draw (model.Practice) as the Raw column keeps
// it, in words: {"kind": "staleReply", "why": "…", "newRun": true,
// "setup": {…}, "message": {"id": 4, "from": "student", "kind": "reply",
// "raw": "…"}} (a deadline has "runId" and "callId" for "raw").
type practiceRow struct {
	Kind    string      `json:"kind"`
	Why     string      `json:"why"`
	NewRun  bool        `json:"newRun,omitempty"`
	Setup   *messageRow `json:"setup,omitempty"`
	Message messageRow  `json:"message"`
}

type messageRow struct {
	ID     int    `json:"id"`
	From   string `json:"from"`
	Kind   string `json:"kind"`
	Raw    string `json:"raw,omitempty"`
	RunID  string `json:"runId,omitempty"`
	CallID string `json:"callId,omitempty"`
}

func practiceOf(p model.Practice) practiceRow {
	msg := func(m model.Message) messageRow {
		return messageRow{ID: m.ID, From: m.From.String(), Kind: m.Kind.String(), Raw: m.Raw, RunID: m.Key.RunID, CallID: m.Key.CallID}
	}
	out := practiceRow{Kind: p.Kind.String(), Why: p.Why, NewRun: p.NewRun, Message: msg(p.Message)}
	if p.Setup.ID != 0 {
		s := msg(p.Setup)
		out.Setup = &s
	}
	return out
}

func (p practiceRow) practice() (model.Practice, error) {
	kind, ok := model.ParseDeliveryKind(p.Kind)
	if !ok {
		return model.Practice{}, fmt.Errorf("unknown practice kind %q", p.Kind)
	}
	msg := func(m messageRow) (model.Message, error) {
		from, err := actor(m.From)
		if err != nil {
			return model.Message{}, err
		}
		out := model.Message{ID: m.ID, From: from, Lab: true}
		switch m.Kind {
		case "reply":
			out.Kind, out.Raw = model.ReplyMessage, m.Raw
		case "deadline":
			out.Kind, out.Key = model.DeadlineMessage, model.Key{RunID: m.RunID, CallID: m.CallID}
		default:
			return model.Message{}, fmt.Errorf("unknown message kind %q", m.Kind)
		}
		return out, nil
	}
	out := model.Practice{Kind: kind, Why: p.Why, NewRun: p.NewRun}
	var err error
	if out.Message, err = msg(p.Message); err != nil {
		return model.Practice{}, err
	}
	if p.Setup != nil {
		if out.Setup, err = msg(*p.Setup); err != nil {
			return model.Practice{}, err
		}
	}
	return out, nil
}
