package server

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
	"github.com/labstack/echo/v4"

	"github.com/toolcall-lab/lab/model"
)

// overviewInterval is the shortest time between two overview frames to one
// instructor connection. A class of 200 students clicking away changes
// something every few milliseconds; the console needs a table that is at most
// a fraction of a second old, not one frame per click.
const overviewInterval = 250 * time.Millisecond

// maxTimeline bounds the timeline a session keeps in memory.
const maxTimeline = 2000

// maxLabelBytes bounds a held message's text in a timeline entry: the
// timeline says which message it was, the state frame holds the whole text.
const maxLabelBytes = 200

// sessionRow is one session in the class overview and in GET /api/sessions.
type sessionRow struct {
	ID           string    `json:"id"`
	Class        string    `json:"class"` // the class it joined, "" for the open lab
	Name         string    `json:"name"`
	Tabs         int       `json:"tabs"`
	RunID        string    `json:"runId"`
	Status       string    `json:"status"`
	Held         int       `json:"held"`
	Receipts     int       `json:"receipts"`
	Seq          uint64    `json:"seq"`
	LastActivity time.Time `json:"lastActivity"`
}

func newRow(id string, v model.LabView, now time.Time) sessionRow {
	return sessionRow{
		ID: id, Name: v.Name, RunID: v.Call.RunID, Status: v.Call.Status,
		Held: v.Held, Receipts: v.Received, Seq: v.Seq, LastActivity: now,
	}
}

// timelineEntry is one change of a session as the instructor reads it.
type timelineEntry struct {
	Seq     uint64    `json:"seq"`
	Time    time.Time `json:"time"`
	Actor   string    `json:"actor"`
	Kind    string    `json:"kind"`
	Message int       `json:"message"` // the held message concerned, 0 for none
	Label   string    `json:"label"`   // its label (cut to maxLabelBytes), or the new name
	Notice  string    `json:"notice"`  // the session's notice after the change
}

// newTimelineEntry describes ev, which has just left l with notice.
func newTimelineEntry(ev model.Event, l *model.Lab, notice string, at time.Time) timelineEntry {
	e := timelineEntry{Seq: l.Seq(), Time: at, Actor: ev.By.String(), Notice: notice}
	switch ev.Kind {
	case model.RunStarted:
		e.Kind = "start"
	case model.MessageQueued:
		e.Kind = "queueReply"
		if ev.Message.Kind == model.DeadlineMessage {
			e.Kind = "queueDeadline"
		}
	case model.MessageDelivered:
		e.Kind = "deliver"
	case model.MessageInjected:
		e.Kind = "injectHold"
		if ev.Deliver {
			e.Kind = "injectDeliver"
		}
	case model.Renamed:
		e.Kind, e.Label = "rename", ev.Name
	}
	if m, ok := l.Message(ev.Message.ID); ok {
		e.Message, e.Label = m.ID, cut(m.Label(), maxLabelBytes)
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

// timeline is a ring of the last maxTimeline entries; its owner guards it.
type timeline struct {
	buf  []timelineEntry
	next int // where the oldest entry is once buf is full
}

func (t *timeline) add(e timelineEntry) {
	if len(t.buf) < maxTimeline {
		t.buf = append(t.buf, e)
		return
	}
	t.buf[t.next] = e
	t.next = (t.next + 1) % maxTimeline
}

// entries returns a copy, oldest first.
func (t *timeline) entries() []timelineEntry {
	out := make([]timelineEntry, 0, len(t.buf))
	out = append(out, t.buf[t.next:]...)
	return append(out, t.buf[:t.next]...)
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

// overviewFrame carries the whole class table. Whole tables rather than
// changed rows: any frame alone is the truth, so a connection's outbox may
// drop older ones, and a table of 200 rows is about 40 KB.
func overviewFrame(rows []sessionRow) []byte {
	return mustJSON(struct {
		Type     string       `json:"type"`
		Sessions []sessionRow `json:"sessions"`
	}{"overview", rows})
}

// mustJSON encodes values whose types cannot fail to encode.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("encoding an instructor frame: " + err.Error())
	}
	return b
}

// overview sends the class table to every instructor connection, coalesced:
// a change marks it dirty, and a flush at most every overviewInterval sends
// one whole table to all of them: each connection gets its scope's (a
// class's sessions, or the open lab's). When nothing changes, nothing is sent and
// no goroutine waits.
//
// Ownership: mu guards conns, timer, last and stopped. flushing serializes
// building and handing out tables, so every connection gets them in the
// order they were built. A flush runs in the timer's goroutine, which ends
// with it; stop cancels a pending one. Lock order: flushing, then mu; rows
// are read (session.mu) with neither mu held.
type overview struct {
	rows func(scope string) []sessionRow

	flushing sync.Mutex
	mu       sync.Mutex
	conns    map[*conn]string // connection -> its scope: a class id, "" for the open lab
	timer    *time.Timer      // a pending flush, nil when none
	last     time.Time        // when the last flush began
	stopped  bool
}

func newOverview(rows func(scope string) []sessionRow) *overview {
	return &overview{rows: rows, conns: make(map[*conn]string)}
}

// mark says that a row may have changed.
func (o *overview) mark() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.timer != nil || o.stopped || len(o.conns) == 0 {
		return
	}
	o.timer = time.AfterFunc(max(0, overviewInterval-time.Since(o.last)), o.flush)
}

func (o *overview) flush() {
	o.flushing.Lock()
	defer o.flushing.Unlock()
	o.mu.Lock()
	o.timer = nil
	o.last = time.Now()
	conns := make(map[*conn]string, len(o.conns))
	for c, scope := range o.conns {
		conns[c] = scope
	}
	stopped := o.stopped
	o.mu.Unlock()
	if stopped || len(conns) == 0 {
		return
	}
	frames := make(map[string][]byte) // one table per scope
	for c, scope := range conns {
		frame, ok := frames[scope]
		if !ok {
			frame = overviewFrame(o.rows(scope))
			frames[scope] = frame
		}
		c.sendState(frame)
	}
}

// subscribe adds c with its scope and hands it the table as it is now.
func (o *overview) subscribe(c *conn, scope string) {
	o.flushing.Lock()
	defer o.flushing.Unlock()
	o.mu.Lock()
	o.conns[c] = scope
	o.mu.Unlock()
	c.sendState(overviewFrame(o.rows(scope)))
}

func (o *overview) unsubscribe(c *conn) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.conns, c)
}

// stop cancels a pending flush and refuses later ones.
func (o *overview) stop() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.stopped = true
	if o.timer != nil {
		o.timer.Stop()
		o.timer = nil
	}
}

// rows returns every session's overview row, ordered by id.
func (s *Server) rows() []sessionRow {
	all := s.allSessions()
	rows := make([]sessionRow, len(all))
	for i, sess := range all {
		rows[i] = sess.overviewRow()
		rows[i].Class = s.classOfSession(sess.id)
	}
	return rows
}

// allSessions returns the sessions ordered by id.
func (s *Server) allSessions() []*session {
	s.mu.Lock()
	all := make([]*session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		all = append(all, sess)
	}
	s.mu.Unlock()
	slices.SortFunc(all, func(a, b *session) int { return strings.Compare(a.id, b.id) })
	return all
}

// existing returns an existing session; instructors never create one.
func (s *Server) existing(id string) (*session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.sessions[id]
	return sess, ok
}

// instructorSocket upgrades to the instructor WebSocket (behind
// requireInstructor), with the same Origin check as the student one.
// ?class=<id> scopes it to that class; without, it is the open lab's.
func (s *Server) instructorSocket(c echo.Context) error {
	scope := c.QueryParam("class")
	if scope != "" {
		if _, err := s.grantedClass(c, scope); err != nil {
			return handled(err)
		}
	} else if !grantFrom(c).all {
		return answerError(c, http.StatusForbidden, errForbidden.Error())
	}
	ws, err := websocket.Accept(c.Response(), c.Request(), &websocket.AcceptOptions{OriginPatterns: s.cfg.Origins})
	if err != nil {
		return nil // Accept has written the response
	}
	s.serveInstructor(ws, c.RealIP(), scope)
	return nil
}

// serveInstructor runs one instructor connection to its end: the overview
// from the start, and the one session it watches.
func (s *Server) serveInstructor(ws *websocket.Conn, remote, scope string) {
	ws.SetReadLimit(maxInstructorFrame)
	log := s.log.With("role", "instructor", "remote", remote)
	c := s.newConn(ws, model.Instructor, log)
	if !s.attach(c) {
		ws.Close(websocket.StatusGoingAway, "the lab is shutting down")
		return
	}
	defer s.handlers.Done()
	opened := time.Now()
	gauge := s.metrics.connections.WithLabelValues(model.Instructor.String())
	gauge.Inc()
	log.Info("websocket open")
	s.overview.subscribe(c, scope)
	var watched *session // owned by this goroutine
	err := c.instructorLoop(s, scope, &watched)
	if watched != nil {
		watched.unwatch(c)
	}
	s.overview.unsubscribe(c)
	c.stop()
	ws.CloseNow()
	s.detach(c)
	gauge.Dec()
	log.Info("websocket closed", "code", int(websocket.CloseStatus(err)), "duration", time.Since(opened).Round(time.Millisecond))
}
