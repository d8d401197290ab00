package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/toolcall-lab/lab/model"
	"github.com/toolcall-lab/lab/store"
)

// Group commit, as store/sqlite's: an Append queues its row; the first
// appender that finds no commit running leads it, commits everything
// queued in one transaction and one round trip (commitBatch), and hands
// the leadership to the oldest request still queued, whose goroutine
// commits the next batch; the others wait for their result. So an append
// with no one else writing commits on its own goroutine, and a busy
// replica commits every waiting append together: one pipeline of two
// statements (sessions, then events with one notification for them all),
// which pgx prepares once per connection.
//
// Ownership: mu guards queue (requests not yet taken into a batch, in
// arrival order) and leading (some goroutine is the leader). The leader
// owns batch and cols, its scratch space. A request's res is written once
// by a leader, or with errLead to pass the leadership on.
type appender struct {
	mu      sync.Mutex
	queue   []*appendReq
	leading bool

	batch []*appendReq
	later []*appendReq // queued behind a request of the same session
	seen  map[string]struct{}
	cols  columns

	reqs sync.Pool // *appendReq, recycled once its result is received
}

// appendReq is one Append waiting for its commit.
type appendReq struct {
	ctx context.Context
	row store.Row
	res chan error // buffered, 1
}

// errLead, sent on a queued request's res, makes its goroutine the leader;
// its own result comes later on the same channel.
var errLead = errors.New("postgres: lead the next commit")

// maxBatch bounds the records of one commit: a round trip's arrays stay
// small, and a request queued behind a full batch waits for one more
// commit at most.
const maxBatch = 256

// Append stores r and notifies pgChannel, and returns once it is
// committed, together with the appends of other sessions that arrived
// meanwhile (group commit, see appender). A seq already stored is
// ErrSeqTaken; it fails that record alone.
func (s *Store) Append(ctx context.Context, r store.Record) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	w, err := store.Encode(r)
	if err != nil {
		return err
	}
	q, _ := s.ap.reqs.Get().(*appendReq)
	if q == nil {
		q = &appendReq{res: make(chan error, 1)}
	}
	q.ctx, q.row = ctx, w
	a := &s.ap
	a.mu.Lock()
	a.queue = append(a.queue, q)
	lead := !a.leading
	a.leading = true
	a.mu.Unlock()
	if lead {
		s.lead()
	}
	for {
		select {
		case err = <-q.res:
		case <-ctx.Done():
			select {
			case err = <-q.res:
			default:
				// Its batch may be committing (under a later caller's
				// deadline): the caller is answered at its own, and the
				// outcome is unknown to it (the session reads the log).
				go s.abandon(q)
				s.failed.Store(true)
				return fmt.Errorf("appending session %s seq %d to %s: %w", r.Session, r.Seq, s.name, ctx.Err())
			}
		}
		if err != errLead {
			break
		}
		s.lead()
	}
	q.ctx, q.row = nil, store.Row{}
	s.ap.reqs.Put(q)
	if err != nil {
		if !errors.Is(err, store.ErrSeqTaken) {
			s.failed.Store(true)
		}
		return fmt.Errorf("appending session %s seq %d to %s: %w", r.Session, r.Seq, s.name, err)
	}
	return nil
}

// abandon stands in for the goroutine of a request whose caller stopped
// waiting: it takes the request's result when its batch ends (by then its
// deadline has passed, so that is soon) and leads the next commit if the
// leadership comes to it, so the group commit never waits for a caller
// that left. Started by Append; it exits with the result.
func (s *Store) abandon(q *appendReq) {
	for {
		if err := <-q.res; err != errLead {
			break
		}
		s.lead()
	}
	q.ctx, q.row = nil, store.Row{}
	s.ap.reqs.Put(q)
}

// lead commits one batch of the queued requests: up to maxBatch, at most
// one per session (a session's next seq waits for the commit of the one
// before: the batch's statements match results to records by session),
// none whose caller has given up. Then it hands the leadership to the
// oldest request still queued, or gives it up when none is.
func (s *Store) lead() {
	a := &s.ap
	a.mu.Lock()
	a.batch, a.later = a.batch[:0], a.later[:0]
	if a.seen == nil {
		a.seen = map[string]struct{}{}
	}
	seen := a.seen
	clear(seen)
	n := 0
	for _, q := range a.queue {
		n++
		if _, dup := seen[q.row.Session]; dup {
			a.later = append(a.later, q)
			continue
		}
		seen[q.row.Session] = struct{}{}
		a.batch = append(a.batch, q)
		if len(a.batch) == maxBatch {
			break
		}
	}
	rest := append(a.later, a.queue[n:]...)
	k := copy(a.queue, rest)
	clear(rest)
	a.later = rest[:0]
	clear(a.queue[k:])
	a.queue = a.queue[:k]
	a.mu.Unlock()

	live := a.batch[:0]
	for _, q := range a.batch {
		if err := q.ctx.Err(); err != nil {
			q.res <- err // never sent: not stored
			continue
		}
		live = append(live, q)
	}
	if len(live) > 0 {
		s.commit(live)
	}
	clear(a.batch)

	a.mu.Lock()
	if len(a.queue) == 0 {
		a.leading = false
		a.mu.Unlock()
		return
	}
	next := a.queue[0].res
	a.mu.Unlock()
	next <- errLead
}

// commit commits batch and tells each request its outcome. When the batch
// fails on a statement (a record whose session another replica deleted
// breaks its foreign key), each record is committed alone, so one bad
// record does not refuse the others; a failure to reach the database fails
// them all at once.
func (s *Store) commit(batch []*appendReq) {
	// In the order of their keys, as every replica's batches: two that
	// race for the same new sessions wait for each other in turn, never
	// in a cycle (a deadlock PostgreSQL would break after a second).
	slices.SortFunc(batch, func(a, b *appendReq) int { return strings.Compare(a.row.Session, b.row.Session) })
	ctx, guard, cancel := batchContext(batch)
	defer cancel()
	taken, err := s.commitBatch(ctx, guard, batch)
	var pgErr *pgconn.PgError
	if err != nil && len(batch) > 1 && errors.As(err, &pgErr) && !errors.Is(err, ErrPastDeadline) {
		for _, q := range batch {
			one := []*appendReq{q}
			ctx, guard, cancel := batchContext(one)
			taken, err := s.commitBatch(ctx, guard, one)
			cancel()
			if err == nil && taken[0] {
				err = store.ErrSeqTaken
			}
			q.res <- err
		}
		return
	}
	for i, q := range batch {
		switch {
		case err != nil:
			q.res <- err
		case taken[i]:
			q.res <- store.ErrSeqTaken
		default:
			q.res <- nil
		}
	}
}

// batchContext bounds a batch's commit by the latest of its callers'
// deadlines (none if one of them has none), and is cancelled by none of
// them: a commit under way ends for all of them alike, and a caller whose
// own deadline passed meanwhile still learns whether its record is stored.
// guard is the time past which the database itself refuses to commit the
// batch (commitMargin before that deadline; not Valid without one).
func batchContext(batch []*appendReq) (ctx context.Context, guard pgtype.Timestamptz, cancel context.CancelFunc) {
	ctx = context.WithoutCancel(batch[0].ctx)
	var last time.Time
	for _, q := range batch {
		d, ok := q.ctx.Deadline()
		if !ok {
			ctx, cancel = context.WithCancel(ctx)
			return ctx, guard, cancel
		}
		if d.After(last) {
			last = d
		}
	}
	guard = pgtype.Timestamptz{Time: last.Add(-commitMargin), Valid: true}
	ctx, cancel = context.WithDeadline(ctx, last)
	return ctx, guard, cancel
}

// commitMargin is how long before its caller's deadline a batch must have
// reached its commit. Statements sent to a backend that stalls (stopped,
// swapped out, waiting on a lock) would otherwise commit whenever it
// resumes, long after the caller was told that its change was refused:
// the guard in the statements (deadlineGuard) refuses them instead. The
// margin covers the reply's way back and a small clock difference between
// the lab's machine and the database's. A stall between the guard and the
// commit itself leaves a window of microseconds: there the caller sees its
// deadline pass and cannot know, and reads the log again (server/session.go).
const commitMargin = 100 * time.Millisecond

// ErrPastDeadline says that the database refused to commit an append it
// ran after its deadline (commitMargin): it is not stored.
var ErrPastDeadline = errors.New("not committed: the database ran it past its deadline")

// deadlineMarker is deadlineGuard's refusal, in PostgreSQL's error message.
const deadlineMarker = "lab: append past its deadline" // no quote: it goes into the SQL

// pastDeadline is ErrPastDeadline for the guard's error, err otherwise.
func pastDeadline(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "22P02" && strings.Contains(pgErr.Message, deadlineMarker) {
		return ErrPastDeadline
	}
	return err
}

// columns are a batch's rows as one array per column, the parameters of
// insertEventsSQL; the leader reuses them from batch to batch. Each is a
// column type of columns.go, which pgx has encode itself.
type columns struct {
	session                                   textColumn
	seq, time, message                        int8Column
	actor, kind, msgKind, msgFrom, prediction textColumn
	raw                                       byteaColumn
	keyRun, keyCall, run, notice              byteaText
	newSession                                textColumn
	created                                   int8Column
	stored                                    map[string]struct{}
}

func (c *columns) reset() {
	c.session, c.seq, c.time, c.message = c.session[:0], c.seq[:0], c.time[:0], c.message[:0]
	c.actor, c.kind, c.msgKind, c.msgFrom, c.prediction = c.actor[:0], c.kind[:0], c.msgKind[:0], c.msgFrom[:0], c.prediction[:0]
	clear(c.raw)
	c.raw, c.keyRun, c.keyCall, c.run, c.notice = c.raw[:0], c.keyRun[:0], c.keyCall[:0], c.run[:0], c.notice[:0]
	c.newSession, c.created = c.newSession[:0], c.created[:0]
	if c.stored == nil {
		c.stored = map[string]struct{}{}
	}
	clear(c.stored)
}

// text is s as a bytea parameter: never nil, which pgx would send as NULL
// into a NOT NULL column.
func text(s string) []byte {
	if s == "" {
		return []byte{}
	}
	return []byte(s)
}

// deadlineGuard, in an append's WHERE, is true until the parameter $n
// (a timestamptz, NULL for none) and fails the statement, and so its
// implicit transaction, once the database's clock is past it: a text that
// is no integer (clock_timestamp() is volatile, so it is evaluated when the
// statement runs, not when it is planned).
func deadlineGuard(n int) string {
	p := "$" + strconv.Itoa(n) + "::timestamptz"
	return "(CASE WHEN " + p + " IS NULL OR clock_timestamp() < " + p + " THEN '1' ELSE '" + deadlineMarker + "' END)::int = 1"
}

var (
	// A session's row comes with its first event. Another replica may
	// have stored that first: its seq 1 then conflicts below.
	insertSessionsSQL = `INSERT INTO sessions (id, created)
		SELECT * FROM unnest($1::text[], $2::bigint[]) ON CONFLICT DO NOTHING`
	// The batch's events, a rename's name on its session, and one
	// notification for them all ("<session> <seq>" lines, see pgChannel;
	// several past 7,000 bytes, under PostgreSQL's 8,000), all in one
	// statement; it returns the payloads, which name the stored records.
	// A plain insert, as the lone append's: ON CONFLICT DO NOTHING is a
	// speculative insertion, a lock, an index probe and a WAL record more
	// per row (issue 46), paid for a conflict that only a race between
	// replicas makes. A seq another replica stored fails it on events_pkey
	// instead, and the batch runs again as insertEventsTakenSQL.
	insertEventsSQL = eventsSQL("")
	// The same, leaving out a seq another replica stored: the payloads
	// then name only the records stored.
	insertEventsTakenSQL = eventsSQL("ON CONFLICT DO NOTHING")

	// A lone record (an append with no other waiting: the round trip of
	// labbench's rtt) goes as one statement, in autocommit: one round
	// trip, one implicit transaction, and cheaper for PostgreSQL than the
	// arrays (the CTEs see one snapshot, so a first record's session
	// takes its name, if the record is a rename, in its insert). Its
	// events insert is a plain one, not ON CONFLICT: a speculative
	// insertion costs PostgreSQL a lock, an index probe and a WAL record
	// more per append (issue 46), for a conflict only a race between
	// replicas makes; a taken seq fails the statement on events_pkey
	// instead, and so its implicit transaction (commitOne).
	insertOneSQL = `WITH sess AS (
		INSERT INTO sessions (id, created, name)
		SELECT $1, $3, CASE WHEN $5 = $16 THEN $9::bytea ELSE ''::bytea END WHERE $2 = 1
		ON CONFLICT DO NOTHING
	), ins AS (
		INSERT INTO events (session, seq, time, actor, kind, message, message_kind, message_from, raw, key_run, key_call, run, notice, prediction)
		SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14 WHERE ` + deadlineGuard(15) + `
		RETURNING session, seq, kind, raw
	), renamed AS (
		UPDATE sessions SET name = ins.raw FROM ins WHERE ins.kind = $16 AND sessions.id = ins.session
	)
	SELECT pg_notify($17, session || ' ' || seq) FROM ins`
)

// eventsSQL is the batch's events statement (insertEventsSQL), conflict
// being its events insert's ON CONFLICT clause, or none.
func eventsSQL(conflict string) string {
	return `WITH ins AS (
		INSERT INTO events (session, seq, time, actor, kind, message, message_kind, message_from, raw, key_run, key_call, run, notice, prediction)
		SELECT * FROM unnest($3::text[], $4::bigint[], $5::bigint[], $6::text[], $7::text[], $8::bigint[], $9::text[], $10::text[],
			$11::bytea[], $12::bytea[], $13::bytea[], $14::bytea[], $15::bytea[], $16::text[])
		WHERE ` + deadlineGuard(17) + `
		` + conflict + `
		RETURNING session, seq, kind, raw
	), renamed AS (
		UPDATE sessions SET name = ins.raw FROM ins WHERE ins.kind = $2 AND sessions.id = ins.session
	)
	SELECT payload, pg_notify($1, payload) FROM (
		SELECT string_agg(pair, E'\n') AS payload FROM (
			SELECT session || ' ' || seq AS pair,
				sum(octet_length(session) + 22) OVER (ROWS UNBOUNDED PRECEDING) / 7000 AS chunk
			FROM ins
		) AS pairs GROUP BY chunk
	) AS chunks`
}

// renamedKind is a rename's kind in the events table.
var renamedKind = store.Kind(model.Event{Kind: model.Renamed})

// commitBatch stores the batch (at most one record per session) in one
// implicit transaction and one round trip; taken[i] reports that batch[i]'s
// seq was already stored, so it was not. An error means none was stored.
// A seq another replica stored costs a second round trip: the plain insert
// fails, storing nothing, and the batch runs again without that record.
func (s *Store) commitBatch(ctx context.Context, guard pgtype.Timestamptz, batch []*appendReq) (taken []bool, err error) {
	if guard.Valid && !time.Now().Before(guard.Time) {
		// The database would refuse it (deadlineGuard): no round trip,
		// and no context that may end in the middle of one.
		return nil, ErrPastDeadline
	}
	if len(batch) == 1 {
		return s.commitOne(ctx, guard, &batch[0].row)
	}
	c := &s.ap.cols
	c.reset()
	for _, q := range batch {
		w := &q.row
		c.session = append(c.session, w.Session)
		c.seq = append(c.seq, w.Seq)
		c.time = append(c.time, w.TimeMs)
		c.actor = append(c.actor, w.Actor)
		c.kind = append(c.kind, w.Kind)
		c.message = append(c.message, w.Message)
		c.msgKind = append(c.msgKind, w.MsgKind)
		c.msgFrom = append(c.msgFrom, w.MsgFrom)
		c.raw = append(c.raw, w.Raw)
		c.keyRun = append(c.keyRun, w.KeyRun)
		c.keyCall = append(c.keyCall, w.KeyCall)
		c.run = append(c.run, w.Run)
		c.notice = append(c.notice, w.Notice)
		c.prediction = append(c.prediction, w.Prediction)
		if w.Seq == 1 {
			c.newSession = append(c.newSession, w.Session)
			c.created = append(c.created, w.TimeMs)
		}
	}
	err = s.sendBatch(ctx, guard, insertEventsSQL)
	if pgViolation(err, "events_pkey") {
		if guard.Valid && !time.Now().Before(guard.Time) {
			return nil, ErrPastDeadline
		}
		clear(c.stored)
		err = s.sendBatch(ctx, guard, insertEventsTakenSQL)
	}
	if err != nil {
		return nil, pastDeadline(err)
	}
	taken = make([]bool, len(batch))
	for i, q := range batch {
		_, ok := c.stored[q.row.Session]
		taken[i] = !ok
	}
	return taken, nil
}

// sendBatch runs the leader's columns (cols) in one pipeline and one
// implicit transaction: the sessions insert if the batch has first
// records, then events, an events statement of eventsSQL, which records
// the sessions it stored in cols.stored.
func (s *Store) sendBatch(ctx context.Context, guard pgtype.Timestamptz, events string) (err error) {
	c := &s.ap.cols
	b := &pgx.Batch{}
	sessions := len(c.newSession) > 0
	if sessions {
		b.Queue(insertSessionsSQL, c.newSession, c.created)
	}
	b.Queue(events, pgChannel, renamedKind,
		c.session, c.seq, c.time, c.actor, c.kind, c.message, c.msgKind, c.msgFrom,
		c.raw, c.keyRun, c.keyCall, c.run, c.notice, c.prediction, guard)
	br := s.pool.SendBatch(ctx, b)
	if sessions {
		_, err = br.Exec()
	}
	if err == nil {
		var rows pgx.Rows
		rows, err = br.Query()
		if err == nil {
			var payload string
			_, err = pgx.ForEachRow(rows, []any{&payload, nil}, func() error {
				parsePayload(payload, func(id string, _ uint64) { c.stored[id] = struct{}{} })
				return nil
			})
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// commitOne stores one record as commitBatch does, in one statement
// (insertOneSQL).
func (s *Store) commitOne(ctx context.Context, guard pgtype.Timestamptz, w *store.Row) (taken []bool, err error) {
	rows, err := s.pool.Query(ctx, insertOneSQL, w.Session, w.Seq, w.TimeMs, w.Actor, w.Kind, w.Message, w.MsgKind, w.MsgFrom,
		w.Raw, text(w.KeyRun), text(w.KeyCall), text(w.Run), text(w.Notice), w.Prediction, guard, renamedKind, pgChannel)
	stored := false
	if err == nil {
		for rows.Next() {
			stored = true
		}
		rows.Close()
		err = rows.Err()
	}
	switch {
	case pgViolation(err, "events_pkey"):
		return []bool{true}, nil // another replica stored this seq
	case err != nil:
		return nil, pastDeadline(err)
	}
	return []bool{!stored}, nil
}
