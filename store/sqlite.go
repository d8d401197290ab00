package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver; pure Go, no cgo

	"github.com/toolcall-lab/lab/model"
)

// migrations[v] takes the schema from version v-1 to v. Never edit a
// released one: add the next. Times are Unix milliseconds, UTC.
var migrations = [][]string{
	1: {
		`CREATE TABLE sessions (
			id          TEXT PRIMARY KEY,
			name        TEXT NOT NULL DEFAULT '',
			created     INTEGER NOT NULL
		)`,
		`CREATE TABLE events (
			session      TEXT NOT NULL,
			seq          INTEGER NOT NULL,
			time         INTEGER NOT NULL,
			actor        TEXT NOT NULL,
			kind         TEXT NOT NULL,
			message      INTEGER NOT NULL DEFAULT 0,
			message_kind TEXT NOT NULL DEFAULT '',
			message_from TEXT NOT NULL DEFAULT '',
			raw          BLOB NOT NULL DEFAULT x'',
			key_run      TEXT NOT NULL DEFAULT '',
			key_call     TEXT NOT NULL DEFAULT '',
			run          TEXT NOT NULL DEFAULT '',
			notice       TEXT NOT NULL DEFAULT '',
			PRIMARY KEY (session, seq)
		) WITHOUT ROWID`,
	},
	// 2: a delivery's prediction (model.Prediction's word, '' for none), so
	// that a restart keeps every prediction. Older rows had none.
	2: {
		`ALTER TABLE events ADD COLUMN prediction TEXT NOT NULL DEFAULT ''`,
	},
}

// SchemaVersion is the schema this build writes.
func SchemaVersion() int { return len(migrations) - 1 }

// Options tune a SQLite store. Zero fields take the defaults.
type Options struct {
	// MaxBatch bounds the appends committed in one transaction; 1 turns
	// group commit off (one transaction per append). Default 256.
	MaxBatch int
	// BusyTimeout is how long a write waits for a lock held by another
	// process before it fails. Default 2 s: a student waits no longer.
	BusyTimeout time.Duration
	// FullSync makes every commit wait for an fsync (synchronous=FULL), so
	// that a commit also survives a power cut. The default (NORMAL, in WAL
	// mode) survives a crash or kill -9 of the process, which is what a
	// restart needs; a power cut may then lose the last commits, never
	// corrupt the file. An fsync costs every change about half a
	// millisecond on our machines (BENCHMARKS.md, rtt-durable).
	FullSync bool
}

// SQLite is the durable store: one SQLite file in WAL mode.
//
// Ownership: one writer goroutine, started by OpenSQLite and stopped by
// Close, owns every write. Appends hand it their work over reqs and wait for
// the commit of the transaction their work went into; appends that arrive
// while a transaction commits go together into the next one (group commit),
// so many sessions share one fsync. Reads go straight to the connection pool:
// WAL lets them run beside the writer.
type SQLite struct {
	path     string
	db       *sql.DB
	maxBatch int
	// Appends' statements, prepared once: parsing them again on every
	// commit cost more than the commit.
	insertSession, renameSession, insertEvent *sql.Stmt

	reqs      chan request  // unbuffered: a send succeeds only when the writer takes it
	quit      chan struct{} // closed by Close
	done      chan struct{} // closed by the writer when it has exited
	cpDone    chan struct{} // closed by the checkpointer when it has exited
	closeOnce sync.Once
}

// request is one unit of write work; res receives its outcome.
type request struct {
	op  func(*sql.Tx) error
	res chan error // buffered, 1
}

// OpenSQLite opens (creating it and its directory on first use) the SQLite
// file at path, migrates it to SchemaVersion and starts its writer.
func OpenSQLite(path string, opt Options) (*SQLite, error) {
	if opt.MaxBatch <= 0 {
		opt.MaxBatch = 256
	}
	if opt.BusyTimeout <= 0 {
		opt.BusyTimeout = 2 * time.Second
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("creating the data directory %s: %w", dir, err)
		}
	}
	// See Options.FullSync. Either way group commit shares one commit (and
	// its fsync, if any) among all concurrent appends.
	synchronous := "synchronous(NORMAL)"
	if opt.FullSync {
		synchronous = "synchronous(FULL)"
	}
	q := url.Values{}
	// wal_autocheckpoint(0): checkpoints (which fsync the database) run in
	// the checkpointer goroutine, not inside some student's commit.
	for _, p := range []string{"journal_mode(WAL)", synchronous, "wal_autocheckpoint(0)", fmt.Sprintf("busy_timeout(%d)", opt.BusyTimeout.Milliseconds())} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate") // take the write lock at BEGIN, where busy_timeout applies
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("opening the lab's data file %s: %w", path, err)
	}
	db.SetMaxOpenConns(4)
	if err := migrate(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening the lab's data file %s: %w", path, err)
	}
	s := &SQLite{
		path: path, db: db, maxBatch: opt.MaxBatch,
		reqs: make(chan request), quit: make(chan struct{}), done: make(chan struct{}), cpDone: make(chan struct{}),
	}
	for _, p := range []struct {
		stmt **sql.Stmt
		sql  string
	}{{&s.insertSession, insertSessionSQL}, {&s.renameSession, renameSessionSQL}, {&s.insertEvent, insertEventSQL}} {
		if *p.stmt, err = db.Prepare(p.sql); err != nil {
			db.Close()
			return nil, fmt.Errorf("preparing statements on %s: %w", path, err)
		}
	}
	go s.writer()
	go s.checkpointer()
	return s, nil
}

// migrate brings the schema forward from whatever version the file has.
func migrate(db *sql.DB) error {
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return err
	}
	var v int
	switch err := tx.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&v); {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version) VALUES (0)`); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	if v > SchemaVersion() {
		return fmt.Errorf("schema version %d is newer than this build knows (%d): run a newer lab", v, SchemaVersion())
	}
	for v++; v <= SchemaVersion(); v++ {
		for _, stmt := range migrations[v] {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("migrating to schema version %d: %w", v, err)
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE schema_version SET version = ?`, v); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// Path is the file the store writes.
func (s *SQLite) Path() string { return s.path }

// writer is the one goroutine that writes; it exits when Close is called,
// after committing the batch it holds.
func (s *SQLite) writer() {
	defer close(s.done)
	batch := make([]request, 0, s.maxBatch)
	for {
		select {
		case r := <-s.reqs:
			batch = append(batch[:0], r)
		case <-s.quit:
			return
		}
	collect:
		for len(batch) < s.maxBatch {
			select {
			case r := <-s.reqs:
				batch = append(batch, r)
			default:
				break collect
			}
		}
		s.commit(batch)
	}
}

// commit runs the batch in one transaction. If it fails, each request is
// retried alone, so one bad request does not refuse the others.
func (s *SQLite) commit(batch []request) {
	err := s.inTx(batch)
	if err == nil || len(batch) == 1 {
		for _, r := range batch {
			r.res <- err
		}
		return
	}
	for _, r := range batch {
		r.res <- s.inTx([]request{r})
	}
}

func (s *SQLite) inTx(batch []request) error {
	tx, err := s.db.BeginTx(context.Background(), nil)
	if err != nil {
		return fmt.Errorf("beginning a transaction: %w", err)
	}
	for _, r := range batch {
		if err := r.op(tx); err != nil {
			tx.Rollback()
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("committing: %w", err)
	}
	return nil
}

// write hands op to the writer and waits for its transaction's outcome.
// Once handed over, it waits for the commit even if ctx ends: returning
// early would report as failed a change that may yet be stored.
func (s *SQLite) write(ctx context.Context, op func(*sql.Tx) error) error {
	r := request{op: op, res: make(chan error, 1)}
	select {
	case s.reqs <- r:
	case <-s.quit:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	return <-r.res
}

const (
	insertEventSQL = `INSERT INTO events (session, seq, time, actor, kind, message, message_kind, message_from, raw, key_run, key_call, run, notice, prediction)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	// A session's row is written with its first event; its last activity is
	// its newest event's time, so an append writes one row, not two.
	insertSessionSQL = `INSERT INTO sessions (id, created) VALUES (?, ?)`
	renameSessionSQL = `UPDATE sessions SET name = ? WHERE id = ?`
)

// checkpointer copies the write-ahead log into the database once a second,
// beside the writer (a PASSIVE checkpoint never blocks it), so that commits
// never wait for a checkpoint and the log stays small. It stops with Close.
func (s *SQLite) checkpointer() {
	defer close(s.cpDone)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-tick.C:
			s.checkpoint()
		}
	}
}

// checkpoint runs one PASSIVE checkpoint. A failure is not an error of
// anyone's change: the log keeps the data and the next one tries again.
func (s *SQLite) checkpoint() {
	s.db.Exec("PRAGMA wal_checkpoint(PASSIVE)")
}

// Append stores r and returns once it is committed.
func (s *SQLite) Append(ctx context.Context, r Record) error {
	w, err := encode(r)
	if err != nil {
		return err
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		if w.seq == 1 {
			if _, err := tx.Stmt(s.insertSession).Exec(w.session, w.timeMs); err != nil {
				return err
			}
		}
		if r.Event.Kind == model.Renamed {
			if _, err := tx.Stmt(s.renameSession).Exec(r.Event.Name, w.session); err != nil {
				return err
			}
		}
		_, err := tx.Stmt(s.insertEvent).Exec(w.session, w.seq, w.timeMs, w.actor, w.kind, w.message,
			w.msgKind, w.msgFrom, w.raw, w.keyRun, w.keyCall, w.run, w.notice, w.prediction)
		return err
	})
	if err != nil {
		return fmt.Errorf("appending session %s seq %d to %s: %w", r.Session, r.Seq, s.path, err)
	}
	return nil
}

// Delete removes the sessions with their events, in one transaction.
func (s *SQLite) Delete(ctx context.Context, ids []string) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		for _, id := range ids {
			if _, err := tx.Exec(`DELETE FROM events WHERE session = ?`, id); err != nil {
				return err
			}
			if _, err := tx.Exec(`DELETE FROM sessions WHERE id = ?`, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("deleting %d sessions from %s: %w", len(ids), s.path, err)
	}
	return nil
}

// Ready commits a write that changes nothing: it fails when the file is
// read-only, locked by another process, or the disk is full.
func (s *SQLite) Ready(ctx context.Context) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.Exec(`UPDATE schema_version SET version = version`)
		return err
	})
	if err != nil {
		return fmt.Errorf("writing to %s: %w", s.path, err)
	}
	return nil
}

// Sessions lists the stored sessions, oldest first.
func (s *SQLite) Sessions(ctx context.Context) ([]Session, error) {
	select {
	case <-s.quit:
		return nil, ErrClosed
	default:
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id, name, created,
		COALESCE((SELECT time FROM events WHERE session = sessions.id ORDER BY seq DESC LIMIT 1), created)
		FROM sessions ORDER BY created, id`)
	if err != nil {
		return nil, fmt.Errorf("listing sessions in %s: %w", s.path, err)
	}
	defer rows.Close()
	var out []Session
	for rows.Next() {
		var x Session
		var created, last int64
		if err := rows.Scan(&x.ID, &x.Name, &created, &last); err != nil {
			return nil, fmt.Errorf("listing sessions in %s: %w", s.path, err)
		}
		x.Created, x.LastActive = time.UnixMilli(created).UTC(), time.UnixMilli(last).UTC()
		out = append(out, x)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing sessions in %s: %w", s.path, err)
	}
	return out, nil
}

// Events returns one session's records in order; none for an unknown session.
func (s *SQLite) Events(ctx context.Context, id string) ([]Record, error) {
	select {
	case <-s.quit:
		return nil, ErrClosed
	default:
	}
	rows, err := s.db.QueryContext(ctx, `SELECT session, seq, time, actor, kind, message, message_kind, message_from, raw, key_run, key_call, run, notice, prediction
		FROM events WHERE session = ? ORDER BY seq`, id)
	if err != nil {
		return nil, fmt.Errorf("reading session %s from %s: %w", id, s.path, err)
	}
	defer rows.Close()
	var out []Record
	for rows.Next() {
		var w row
		if err := rows.Scan(&w.session, &w.seq, &w.timeMs, &w.actor, &w.kind, &w.message, &w.msgKind, &w.msgFrom, &w.raw, &w.keyRun, &w.keyCall, &w.run, &w.notice, &w.prediction); err != nil {
			return nil, fmt.Errorf("reading session %s from %s: %w", id, s.path, err)
		}
		r, err := decode(w)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", s.path, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading session %s from %s: %w", id, s.path, err)
	}
	return out, nil
}

// Close commits what the writer holds, stops it and closes the file.
func (s *SQLite) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.quit)
		<-s.done
		<-s.cpDone
		s.checkpoint()
		err = s.db.Close()
	})
	return err
}
