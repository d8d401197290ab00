package server

import (
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolcall-lab/lab/model"
)

// overviewInterval is the shortest time between two overview frames to one
// instructor connection. A class of 200 students clicking away changes
// something every few milliseconds; the console needs a table that is at most
// a fraction of a second old, not one frame per click.
const overviewInterval = 250 * time.Millisecond

// sessionRow is one session in the class overview and in GET /api/sessions.
type sessionRow struct {
	ID           string    `json:"id"`
	Class        string    `json:"class"` // the class it joined, "" for the open lab
	Name         string    `json:"name"`
	Tabs         int       `json:"tabs"`
	RunID        string    `json:"runId"`
	Status       string    `json:"status"`
	Held         int       `json:"held"`    // held messages in all (a message stays held after delivery)
	Waiting      int       `json:"waiting"` // held messages never delivered
	Receipts     int       `json:"receipts"`
	Seq          uint64    `json:"seq"`
	LastActivity time.Time `json:"lastActivity"`   // the student's own last change, or the session's creation
	Code         *codeRow  `json:"code,omitempty"` // the code check, absent before a submission (code.go)
	progress               // steps, current, currentSince, stuck, predictions (exercise.go)
}

// newRow is the overview's row for a session in state v whose student last
// acted at lastOwn.
func newRow(id string, v model.LabView, lastOwn time.Time) sessionRow {
	return sessionRow{
		ID: id, Name: v.Name, RunID: v.Call.RunID, Status: v.Call.Status,
		Held: v.Held, Waiting: v.Waiting, Receipts: v.Received, Seq: v.Seq, LastActivity: lastOwn,
	}
}

// overviewFrame carries the whole class table, the rows already encoded
// (their JSON as json.Marshal writes them in a slice), and the class's
// progress summary computed from the same rows. Whole tables rather than
// changed rows: any frame alone is the truth, so a connection's outbox may
// drop older ones, and a table of 200 rows is about 40 KB.
func overviewFrame(encoded [][]byte, sum classSummary) []byte {
	n := 64
	for _, r := range encoded {
		n += len(r) + 1
	}
	summary := mustJSON(sum)
	b := make([]byte, 0, n+len(summary))
	b = append(b, `{"type":"overview","sessions":[`...)
	for i, r := range encoded {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, r...)
	}
	if encoded == nil {
		b = append(b[:len(b)-1], "null"...) // as json.Marshal writes a nil slice
	} else {
		b = append(b, ']')
	}
	b = append(b, `,"exercise":`...)
	b = append(b, summary...)
	return append(b, '}')
}

// mustJSON encodes values whose types cannot fail to encode.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("encoding an instructor frame: " + err.Error())
	}
	return b
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

// overview sends the class table to every instructor connection, coalesced:
// a change marks it dirty, and a flush at most every overviewInterval sends
// one whole table to all of them: to each connection its scope's (a class's
// sessions, or the open lab's). When nothing changes, nothing is sent and
// no goroutine waits.
//
// Ownership: mu guards conns, timer, last and stopped; quiet mirrors them
// (no connection, a flush pending, or stopped: a mark has nothing to do),
// so that a change marks without the lock while no one watches, since
// every session's changes would otherwise contend for it. flushing serializes
// building and handing out tables, so every connection gets them in the
// order they were built. A flush runs in the timer's goroutine, which ends
// with it; flushes counts the scheduled and running ones, so that stop
// waits for them. Lock order: flushing, then mu; rows are read
// (session.mu) with neither mu held.
type overview struct {
	rows    func(scope string) ([]sessionRow, [][]byte) // the rows and their JSON
	summary func([]sessionRow) classSummary

	flushing sync.Mutex
	flushes  sync.WaitGroup // a scheduled or running flush; Add under mu while not stopped

	mu      sync.Mutex
	conns   map[*conn]string // connection -> its scope: a class id, "" for the open lab
	timer   *time.Timer      // a pending flush, nil when none
	last    time.Time        // when the last flush began
	stopped bool
	quiet   atomic.Bool // set under mu by setQuiet
}

func newOverview(rows func(scope string) ([]sessionRow, [][]byte), summary func([]sessionRow) classSummary) *overview {
	o := &overview{rows: rows, summary: summary, conns: make(map[*conn]string)}
	o.quiet.Store(true) // no connection yet
	return o
}

// frame builds an overview frame of one scope's rows as they are now.
func (o *overview) frame(scope string) []byte {
	rows, encoded := o.rows(scope)
	return overviewFrame(encoded, o.summary(rows))
}

// mark says that a row may have changed. A row changes before its mark
// reads quiet, and a flush or subscribe clears quiet before it reads rows,
// so a change a quiet mark skips is in the table they read.
func (o *overview) mark() {
	if o.quiet.Load() {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.timer != nil || o.stopped || len(o.conns) == 0 {
		return
	}
	o.flushes.Add(1)
	o.timer = time.AfterFunc(max(0, overviewInterval-time.Since(o.last)), o.flush)
	o.setQuiet()
}

// setQuiet updates quiet. Called with mu held, after any change to conns,
// timer or stopped.
func (o *overview) setQuiet() {
	o.quiet.Store(o.timer != nil || o.stopped || len(o.conns) == 0)
}

func (o *overview) flush() {
	defer o.flushes.Done()
	o.flushing.Lock()
	defer o.flushing.Unlock()
	o.mu.Lock()
	o.timer = nil
	o.setQuiet()
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
			frame = o.frame(scope)
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
	o.setQuiet()
	o.mu.Unlock()
	c.sendState(o.frame(scope))
}

func (o *overview) unsubscribe(c *conn) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.conns, c)
	o.setQuiet()
}

// stop cancels a pending flush, refuses later ones and waits for one that
// is running, so that nothing is sent after it returns.
func (o *overview) stop() {
	o.mu.Lock()
	o.stopped = true
	if o.timer != nil && o.timer.Stop() {
		o.flushes.Done() // cancelled before it ran
	}
	o.timer = nil
	o.setQuiet()
	o.mu.Unlock()
	o.flushes.Wait()
}
