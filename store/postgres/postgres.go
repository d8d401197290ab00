// Package postgres is the store that several replicas share: one
// PostgreSQL database (jackc/pgx), and a notification for every append
// (Listen), so it is a store.Listener as well as a store.Store. cmd/lab
// opens it for a postgres:// -data URL.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolcall-lab/lab/store"
)

// pgMigrations[v] takes a PostgreSQL schema from version v-1 to v, as
// migrations does for SQLite. Never edit a released one: add the next.
// Times are Unix milliseconds, UTC. Texts a reply can reach (its raw text,
// the notice that quotes it, a deadline's captured identity, names) are
// bytea: PostgreSQL's text holds neither NUL nor invalid UTF-8, and the log
// gives text back byte for byte.
var pgMigrations = [][]string{
	1: {
		`CREATE TABLE sessions (
			id      text PRIMARY KEY,
			name    bytea NOT NULL DEFAULT '',
			created bigint NOT NULL
		)`,
		// A session's events go with it; an append to a session another
		// replica has deleted fails on the reference instead of leaving
		// events without their session.
		`CREATE TABLE events (
			session      text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
			seq          bigint NOT NULL,
			time         bigint NOT NULL,
			actor        text NOT NULL,
			kind         text NOT NULL,
			message      bigint NOT NULL DEFAULT 0,
			message_kind text NOT NULL DEFAULT '',
			message_from text NOT NULL DEFAULT '',
			raw          bytea NOT NULL DEFAULT '',
			key_run      bytea NOT NULL DEFAULT '',
			key_call     bytea NOT NULL DEFAULT '',
			run          bytea NOT NULL DEFAULT '',
			notice       bytea NOT NULL DEFAULT '',
			PRIMARY KEY (session, seq)
		)`,
	},
	2: pgClassesSchema, // postgres_classes.go
	// 3: a delivery's prediction (model.Prediction's word, '' for none),
	// as SQLite's version 4.
	3: {
		`ALTER TABLE events ADD COLUMN prediction text NOT NULL DEFAULT ''`,
	},
	// 4: a class's settings (SQLite's version 5): classes made before
	// require no predictions.
	4: {`ALTER TABLE classes ADD COLUMN predictions_required boolean NOT NULL DEFAULT false`},
}

// pgChannel is the LISTEN/NOTIFY channel every append notifies, with the
// payload "<session> <seq>", or several such lines joined by "\n" for the
// appends one commit stored together (parsePayload): a replica that hears
// of a seq it lacks reads the events from the log, so the notification
// carries nothing else.
const pgChannel = "lab_events"

// IsURL reports whether data names a PostgreSQL database rather
// than a SQLite file.
func IsURL(data string) bool {
	return strings.HasPrefix(data, "postgres://") || strings.HasPrefix(data, "postgresql://")
}

// Store is the store that several replicas share: one PostgreSQL
// database, appends under PRIMARY KEY (session, seq), and a notification
// on pgChannel for every committed append.
//
// Ownership: the pool is safe for concurrent use and owns its connections;
// closed is set once by Close. Listen owns the one connection it opens, for
// as long as it runs. No goroutine of its own beyond the pool's: appends
// commit on their callers' goroutines (appender).
type Store struct {
	name   string // the URL without its password, for errors and logs
	pool   *pgxpool.Pool
	closed atomic.Bool

	// Ready's last successful probe: probeMu guards probedAt; failed (an
	// append failed since) makes the next call probe.
	probeMu  sync.Mutex
	probedAt time.Time
	failed   atomic.Bool

	ap appender // Append's group commit (append.go)
}

var (
	_ store.Store    = (*Store)(nil)
	_ store.Listener = (*Store)(nil)
)

// Open connects to the database at rawURL, migrates it to
// SchemaVersion and returns the store.
func Open(ctx context.Context, rawURL string) (*Store, error) {
	name := redact(rawURL)
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		return nil, fmt.Errorf("reading the database address %s: %w", name, err)
	}
	if !strings.Contains(rawURL, "pool_max_conns=") {
		// pgxpool's default, max(4, CPUs), makes a class's appends queue
		// for a connection on a small machine: each append holds one for
		// a round trip. The URL's pool_max_conns wins.
		cfg.MaxConns = defaultPoolConns
	}
	cfg.AfterConnect = func(_ context.Context, conn *pgx.Conn) error {
		registerColumns(conn.TypeMap()) // the batch's arrays (columns.go)
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", name, err)
	}
	if err := pgMigrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("opening the lab's database %s: %w", name, err)
	}
	return &Store{name: name, pool: pool}, nil
}

// SchemaVersion is the PostgreSQL schema this build writes.
func SchemaVersion() int { return len(pgMigrations) - 1 }

// redact drops the password from a database URL.
func redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "the database"
	}
	return u.Redacted()
}

// pgMigrate brings the schema forward in one transaction. Replicas that
// start together serialize on an advisory lock, so each migration runs once.
func pgMigrate(ctx context.Context, pool *pgxpool.Pool) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	// Any constant will do: it names the lab's migration lock.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(7153001)`); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL)`); err != nil {
		return err
	}
	var v int
	switch err := tx.QueryRow(ctx, `SELECT version FROM schema_version`).Scan(&v); {
	case errors.Is(err, pgx.ErrNoRows):
		if _, err := tx.Exec(ctx, `INSERT INTO schema_version (version) VALUES (0)`); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	if v > SchemaVersion() {
		return fmt.Errorf("schema version %d is newer than this build knows (%d): run a newer lab", v, SchemaVersion())
	}
	for v++; v <= SchemaVersion(); v++ {
		for _, stmt := range pgMigrations[v] {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return fmt.Errorf("migrating to schema version %d: %w", v, err)
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE schema_version SET version = $1`, v); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

// Name is the database's URL without its password.
func (s *Store) Name() string { return s.name }

func (s *Store) check() error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return nil
}

// Delete removes the sessions with their events, in one (implicit)
// transaction, and notifies each as seq 0: other replicas drop them.
func (s *Store) Delete(ctx context.Context, ids []string) error {
	if err := s.check(); err != nil {
		return err
	}
	b := &pgx.Batch{}
	b.Queue(`DELETE FROM sessions WHERE id = ANY($1)`, ids)
	b.Queue(notifyDeletedSQL, pgChannel, ids)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("deleting %d sessions from %s: %w", len(ids), s.name, err)
	}
	return nil
}

// notifyDeletedSQL notifies each deleted session ($2) as "<session> 0".
const notifyDeletedSQL = `SELECT pg_notify($1, id || ' 0') FROM unnest($2::text[]) AS id`

// Ready commits a write that changes nothing: it fails when the database is
// unreachable or read-only (a standby). It trusts a success for up to
// ProbeEvery (a flood of probes is not a flood of writes), but never a
// failure: the first call after the database answers again sees it, and
// one caller's cancelled request is never another's answer. An append that
// failed since makes the next call probe.
func (s *Store) Ready(ctx context.Context) error {
	if err := s.check(); err != nil {
		return err
	}
	s.probeMu.Lock()
	defer s.probeMu.Unlock()
	if !s.failed.Swap(false) && !s.probedAt.IsZero() && time.Since(s.probedAt) < store.ProbeEvery {
		return nil
	}
	if _, err := s.pool.Exec(ctx, `UPDATE schema_version SET version = version`); err != nil {
		s.probedAt = time.Time{}
		return fmt.Errorf("writing to %s: %w", s.name, err)
	}
	s.probedAt = time.Now()
	return nil
}

// Sessions lists the stored sessions, oldest first.
func (s *Store) Sessions(ctx context.Context) ([]store.Session, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT id, name, created,
		COALESCE((SELECT time FROM events WHERE session = sessions.id ORDER BY seq DESC LIMIT 1), created)
		FROM sessions ORDER BY created, id`)
	if err != nil {
		return nil, fmt.Errorf("listing sessions in %s: %w", s.name, err)
	}
	var x store.Session
	var name []byte
	var created, last int64
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Session, error) {
		if err := row.Scan(&x.ID, &name, &created, &last); err != nil {
			return store.Session{}, err
		}
		x.Name = string(name)
		x.Created, x.LastActive = time.UnixMilli(created).UTC(), time.UnixMilli(last).UTC()
		return x, nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing sessions in %s: %w", s.name, err)
	}
	return out, nil
}

// Events returns one session's records in order; none for an unknown session.
func (s *Store) Events(ctx context.Context, id string) ([]store.Record, error) {
	return s.EventsAfter(ctx, id, 0)
}

// EventsAfter returns one session's records after seq after, in order.
func (s *Store) EventsAfter(ctx context.Context, id string, after uint64) ([]store.Record, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT session, seq, time, actor, kind, message, message_kind, message_from, raw, key_run, key_call, run, notice, prediction
		FROM events WHERE session = $1 AND seq > $2 ORDER BY seq`, id, int64(after))
	if err != nil {
		return nil, fmt.Errorf("reading session %s from %s: %w", id, s.name, err)
	}
	var w store.Row
	var keyRun, keyCall, run, notice []byte
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Record, error) {
		if err := row.Scan(&w.Session, &w.Seq, &w.TimeMs, &w.Actor, &w.Kind, &w.Message, &w.MsgKind, &w.MsgFrom, &w.Raw, &keyRun, &keyCall, &run, &notice, &w.Prediction); err != nil {
			return store.Record{}, err
		}
		w.KeyRun, w.KeyCall, w.Run, w.Notice = string(keyRun), string(keyCall), string(run), string(notice)
		return store.Decode(w)
	})
	if err != nil {
		return nil, fmt.Errorf("reading session %s from %s: %w", id, s.name, err)
	}
	return out, nil
}

// Listen calls notify with the session and seq of every append committed
// to the database, by any replica, and with seq 0 for every session
// deleted, from the moment it calls ready until ctx ends (it then returns
// nil) or its connection fails (it returns the error; call it again).
// Every alive/2 it pings its connection under a deadline of alive/2, so a
// listening backend that died or froze (its notifications stop without a
// word) is noticed within alive. Between a failure and the next ready,
// appends go unheard: whoever calls it catches up after ready. notify and
// ready run in Listen's goroutine, one at a time.
func (s *Store) Listen(ctx context.Context, alive time.Duration, ready func(), notify func(session string, seq uint64)) error {
	if err := s.check(); err != nil {
		return err
	}
	every := max(alive/2, 10*time.Millisecond)
	cfg := s.pool.Config().ConnConfig.Copy()
	// Named, so that operators (and tests) tell it apart in pg_stat_activity.
	cfg.RuntimeParams["application_name"] = ListenerName
	connectCtx, cancel := context.WithTimeout(ctx, alive)
	conn, err := pgx.ConnectConfig(connectCtx, cfg)
	if err == nil {
		_, err = conn.Exec(connectCtx, "LISTEN "+pgChannel)
	}
	cancel()
	if conn != nil {
		defer func() {
			// A frozen backend never answers the goodbye: bounded.
			closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), every)
			defer cancel()
			conn.Close(closeCtx)
		}()
	}
	if err != nil {
		return listenError(ctx, fmt.Errorf("listening to %s: %w", s.name, err))
	}
	ready()
	pinged := time.Now()
	for {
		// A ping every `every`, busy channel or quiet: a frozen backend
		// sends no notifications and answers no ping.
		if time.Since(pinged) >= every {
			pingCtx, cancel := context.WithTimeout(ctx, every)
			err := conn.Ping(pingCtx)
			cancel()
			switch {
			case ctx.Err() != nil:
				return nil
			case err != nil:
				return listenError(ctx, fmt.Errorf("listening to %s: no answer to a ping within %v: %w", s.name, every, err))
			}
			pinged = time.Now()
		}
		wait, cancel := context.WithTimeout(ctx, every-time.Since(pinged))
		n, err := conn.WaitForNotification(wait)
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && (pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded)):
			continue
		case err != nil:
			return listenError(ctx, fmt.Errorf("listening to %s: %w", s.name, err))
		}
		parsePayload(n.Payload, notify)
	}
}

// parsePayload calls notify with each "<session> <seq>" line of a
// pgChannel payload, in order; a line that is not one is skipped (not
// ours: someone else notified the channel).
func parsePayload(payload string, notify func(session string, seq uint64)) {
	for line := range strings.SplitSeq(payload, "\n") {
		id, seqText, ok := strings.Cut(line, " ")
		seq, err := strconv.ParseUint(seqText, 10, 64)
		if ok && err == nil {
			notify(id, seq)
		}
	}
}

// defaultPoolConns is each replica's pool size unless the URL sets
// pool_max_conns: PostgreSQL's default max_connections (100) then holds
// three replicas and a listener each.
const defaultPoolConns = 25

// ListenerName is the application_name of each replica's listening
// connection.
const ListenerName = "lab listener"

// listenError is nil once ctx has ended: stopping is not a failure.
func listenError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// Unreachable reports whether err (from Open, or any call) says that the
// database cannot be reached or does not take connections now: refused,
// timed out, starting up, shutting down, out of connections. A replica
// that starts then waits for it (cmd/lab) rather than exit; other errors,
// such as a bad URL or a schema newer than this build, do not pass.
func Unreachable(err error) bool {
	var ce *pgconn.ConnectError
	var ne net.Error
	var pe *pgconn.PgError
	switch {
	case err == nil:
		return false
	case errors.As(err, &ce), errors.As(err, &ne), pgconn.Timeout(err),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return true
	case errors.As(err, &pe):
		// 08: connection exception; 57P: operator intervention (shutdown,
		// starting up); 53300: too many connections.
		return strings.HasPrefix(pe.Code, "08") || strings.HasPrefix(pe.Code, "57P") || pe.Code == "53300"
	}
	return false
}

// Close closes the pool; every later call fails with ErrClosed.
func (s *Store) Close() error {
	if !s.closed.Swap(true) {
		s.pool.Close()
	}
	return nil
}
