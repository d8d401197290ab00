package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
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
	2: classesSchema, // store/sqlite_classes.go
	// recent takes appends in the order they come (see SQLite); the mover
	// takes them into events in the background.
	3: {
		`CREATE TABLE recent (
			pos          INTEGER PRIMARY KEY,
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
			notice       TEXT NOT NULL DEFAULT ''
		)`,
	},
	// 4: a delivery's prediction (model.Prediction's word, '' for none), so
	// that a restart keeps every prediction. Older rows had none.
	4: {
		`ALTER TABLE events ADD COLUMN prediction TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE recent ADD COLUMN prediction TEXT NOT NULL DEFAULT ''`,
	},
	5: classSettingsSchema, // store/sqlite_classes.go
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

	// every is the mover's and checkpointer's period; default 1 s. Tests
	// set it long, so that rows stay in recent.
	every time.Duration

	// WALLimit bounds the write-ahead log in bytes. Under continuous
	// writes a passive checkpoint never gets to the log's end, so the log
	// never restarts and grows without end; past WALLimit the writer runs
	// a TRUNCATE checkpoint between two commits, which empties the log.
	// The log then stays within WALLimit plus one commit. Default 64 MiB.
	WALLimit int64
}

// SQLite is the durable store: one SQLite file in WAL mode.
//
// An append is one row inserted into the table recent, whose rows are kept
// in arrival order: every append of a group commit lands on the same last
// page or two, so a commit writes a page or two to the log however many
// sessions it carries. events, which keeps each session's rows together for
// reading, would put every session's row on a page of its own (about 1.7
// pages written per append with 50 sessions appending, BENCHMARKS.md). The
// mover takes recent's rows into events in chunks of 1,024, through the
// group commit (see checkpointer); a session's rows touched many times in
// a chunk are then written once. Reads see both tables in one statement,
// so one snapshot.
//
// Ownership: no goroutine of its own writes. Writes queue their requests
// under mu; the first writer that finds no commit running becomes the
// leader, commits everything queued in one transaction (group commit, so
// many sessions share one commit) and hands the leadership to the oldest
// request still queued, whose goroutine commits the next batch; the others
// wait for their result. So an append with no one else writing commits on
// its own goroutine, with no handoff, and a busy store still commits every
// waiting append together. Reads go straight to the connection pool: WAL
// lets them run beside the writer. The checkpointer goroutine (started by
// OpenSQLite, stopped by Close) moves recent and checkpoints.
type SQLite struct {
	path     string
	db       *sql.DB
	maxBatch int
	every    time.Duration
	// wconn is the writers' own connection, and the statements prepared
	// on it once: parsing them again on every commit cost more than the
	// commit, BEGIN and COMMIT included (database/sql's Tx parses both each
	// time). inserts[n] inserts n rows into recent, prepared when first
	// needed. All are owned by the leader (see SQLite); args, rows and
	// batch are its scratch space.
	wconn                                 *sql.Conn
	begin, commitTx, rollback             *sql.Stmt
	insertSession, renameSession, lastSeq *sql.Stmt
	inserts                               [maxInsertRows + 1]*sql.Stmt
	args                                  []any
	rows                                  []*row
	batch                                 []request

	// seqs is the last committed seq of each session appended since open,
	// and txSeqs those of the transaction being built (0: deleted in it);
	// both are owned by the leader (requests' ops run on it). An
	// append must be its session's next seq, as in Memory: recent has no
	// key that would refuse a duplicate.
	seqs, txSeqs map[string]uint64

	// mu guards queue (requests not yet taken into a batch, in arrival
	// order), leading (some goroutine is the leader) and shut (Close has
	// begun: no new requests); idle is signalled when leading turns false.
	mu      sync.Mutex
	idle    sync.Cond
	queue   []request
	leading bool
	shut    bool

	// inRecent holds, for each session that may have rows in recent, the
	// position of its last one: the leader adds (before its commit), the
	// mover removes what it has moved (after its commit), reads look.
	// Every row in recent is covered: open moves what a crash left there.
	// Positions are the leader's lastPos counted on, never reused while
	// open (SQLite would reuse a rowid once recent is empty), so an entry
	// is dropped only when its session's last row has moved.
	recentMu sync.Mutex
	inRecent map[string]int64
	lastPos  int64 // guarded by recentMu, advanced by the leader

	// appended counts the rows committed to recent since open; unmoved
	// those not yet moved (more, after a Delete took some). The leader
	// adds, the mover subtracts and reads them (see checkpointer).
	appended, unmoved atomic.Int64
	txRows            int64 // rows inserted by the transaction being built; the leader's

	// resChans recycles requests' result channels: one is empty again
	// once its result has been received.
	resChans sync.Pool

	quit      chan struct{} // closed by Close
	cpDone    chan struct{} // closed by the checkpointer when it has exited
	closeOnce sync.Once
	walLimit  int64

	// ready caches the write probe (Ready), so that a flood of /readyz
	// costs one write a second at most; probeMu guards it.
	probeMu  sync.Mutex
	probedAt time.Time
	probeErr error
	// failed is set by an append that failed: the next Ready probes again
	// rather than trust its last probe.
	failed atomic.Bool
}

// request is one unit of write work: op, then (for an append) the row to
// insert into recent with the batch's others in one statement; res
// receives its outcome.
type request struct {
	op  func(*sql.Conn) error
	row *row
	res chan error // buffered, 1; errLead passes the leadership
}

// errLead, sent on a queued request's res, makes its goroutine the leader
// (see SQLite); its own result comes later on the same channel.
var errLead = errors.New("store: lead the next commit")

// maxInsertRows bounds the rows of one INSERT statement (15 parameters a
// row; SQLite allows 32766).
const maxInsertRows = 32

// OpenSQLite opens (creating it and its directory on first use) the SQLite
// file at path, migrates it to SchemaVersion and starts its checkpointer.
func OpenSQLite(path string, opt Options) (*SQLite, error) {
	if opt.MaxBatch <= 0 {
		opt.MaxBatch = 256
	}
	if opt.every <= 0 {
		opt.every = time.Second
	}
	if opt.BusyTimeout <= 0 {
		opt.BusyTimeout = 2 * time.Second
	}
	if opt.WALLimit <= 0 {
		opt.WALLimit = 64 << 20
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
	// journal_size_limit: a log that restarts is cut back to WALLimit.
	for _, p := range []string{"journal_mode(WAL)", synchronous, "wal_autocheckpoint(0)", fmt.Sprintf("busy_timeout(%d)", opt.BusyTimeout.Milliseconds()),
		fmt.Sprintf("journal_size_limit(%d)", opt.WALLimit)} {
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
		path: path, db: db, maxBatch: opt.MaxBatch, every: opt.every, walLimit: opt.WALLimit,
		quit: make(chan struct{}), cpDone: make(chan struct{}),
		seqs: make(map[string]uint64), txSeqs: make(map[string]uint64), inRecent: make(map[string]int64),
	}
	if s.wconn, err = db.Conn(context.Background()); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening the lab's data file %s: %w", path, err)
	}
	for _, p := range []struct {
		stmt **sql.Stmt
		sql  string
	}{
		// IMMEDIATE: take the write lock at BEGIN, where busy_timeout applies.
		{&s.begin, `BEGIN IMMEDIATE`}, {&s.commitTx, `COMMIT`}, {&s.rollback, `ROLLBACK`},
		{&s.insertSession, insertSessionSQL}, {&s.renameSession, renameSessionSQL}, {&s.lastSeq, lastSeqSQL},
	} {
		if *p.stmt, err = s.wconn.PrepareContext(context.Background(), p.sql); err != nil {
			s.wconn.Close()
			db.Close()
			return nil, fmt.Errorf("preparing statements on %s: %w", path, err)
		}
	}
	s.idle.L = &s.mu
	// Rows a crash left in recent move first: seqs and inRecent then cover
	// every session with rows in recent.
	if err := s.move(); err != nil {
		s.Close()
		return nil, fmt.Errorf("opening the lab's data file %s: %w", path, err)
	}
	s.unmoved.Store(0) // the move subtracted rows appended before open
	// recent is empty now; should a row have stayed, new ones go after it.
	if err := db.QueryRow(`SELECT COALESCE(MAX(pos), 0) FROM recent`).Scan(&s.lastPos); err != nil {
		s.Close()
		return nil, fmt.Errorf("opening the lab's data file %s: %w", path, err)
	}
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

// lead commits the queued requests in batches of up to maxBatch: the first
// batch on this goroutine, then it hands the leadership to the goroutine of
// the oldest request still queued (whose result it would otherwise delay),
// or gives it up when none is.
func (s *SQLite) lead() {
	s.mu.Lock()
	n := min(len(s.queue), s.maxBatch)
	s.batch = append(s.batch[:0], s.queue[:n]...)
	rest := copy(s.queue, s.queue[n:])
	clear(s.queue[rest:])
	s.queue = s.queue[:rest]
	s.mu.Unlock()
	if len(s.batch) > 0 {
		s.commit(s.batch)
		clear(s.batch)
		// Past walLimit the leader empties the log between two commits
		// (truncateLog): appenders queue behind it meanwhile.
		if s.walSize() > s.walLimit { // a stat: about a microsecond, next to a commit
			s.truncateLog()
		}
	}
	s.mu.Lock()
	if len(s.queue) == 0 {
		s.leading = false
		s.idle.Broadcast()
		s.mu.Unlock()
		return
	}
	next := s.queue[0].res
	s.mu.Unlock()
	next <- errLead
}

// truncateLog copies the whole log into the database and empties it
// (TRUNCATE checkpoint). The writer runs it between two commits: run
// beside a writer that never pauses, it would wait for the write lock
// forever. The commits waiting meanwhile wait for it once.
func (s *SQLite) truncateLog() {
	s.db.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
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
	if _, err := s.begin.Exec(); err != nil {
		return fmt.Errorf("beginning a transaction: %w", err)
	}
	clear(s.txSeqs)
	s.rows, s.txRows = s.rows[:0], 0
	for _, r := range batch {
		if r.row == nil {
			// Any other work sees the rows appended before it.
			if err := s.insertRows(); err != nil {
				s.rollback.Exec()
				return err
			}
		}
		if err := r.op(s.wconn); err != nil {
			s.rollback.Exec()
			return err
		}
		if r.row != nil {
			s.rows = append(s.rows, r.row)
		}
	}
	if err := s.insertRows(); err != nil {
		s.rollback.Exec()
		return err
	}
	if _, err := s.commitTx.Exec(); err != nil {
		// A COMMIT that failed (busy) leaves the transaction open.
		s.rollback.Exec()
		return fmt.Errorf("committing: %w", err)
	}
	s.appended.Add(s.txRows)
	s.unmoved.Add(s.txRows)
	for id, seq := range s.txSeqs {
		if seq == 0 {
			delete(s.seqs, id)
		} else {
			s.seqs[id] = seq
		}
	}
	return nil
}

// insertRows inserts s.rows into recent in arrival order, up to
// maxInsertRows a statement (one statement per group commit, usually), and
// empties s.rows.
func (s *SQLite) insertRows() error {
	defer func() { s.rows = s.rows[:0] }()
	for rows := s.rows; len(rows) > 0; {
		n := min(len(rows), maxInsertRows)
		stmt := s.inserts[n]
		if stmt == nil {
			q := insertEventSQL + strings.Repeat(`, `+insertEventValues, n-1)
			var err error
			if stmt, err = s.wconn.PrepareContext(context.Background(), q); err != nil {
				return err
			}
			s.inserts[n] = stmt
		}
		s.args = s.args[:0]
		s.recentMu.Lock()
		for _, w := range rows[:n] {
			// Noted before the commit: an entry whose rows were rolled back
			// costs a read a look at recent, no more.
			s.lastPos++
			s.inRecent[w.session] = s.lastPos
			s.args = append(s.args, s.lastPos, w.session, w.seq, w.timeMs, w.actor, w.kind, w.message,
				w.msgKind, w.msgFrom, w.raw, w.keyRun, w.keyCall, w.run, w.notice, w.prediction)
		}
		s.recentMu.Unlock()
		_, err := stmt.Exec(s.args...)
		clear(s.args) // drop references to the rows' text
		if err != nil {
			return err
		}
		s.txRows += int64(n)
		rows = rows[n:]
	}
	return nil
}

// write runs op in a transaction (see SQLite) and returns its outcome.
// Once queued, it waits for the commit even if ctx ends: returning early
// would report as failed a change that may yet be stored.
//
// It runs on a goroutine of its own, which it waits for: leading a commit
// grows the goroutine's stack by the driver's depth, and a long-lived
// caller would keep that stack (Ready on every WebSocket upgrade cost each
// idle connection 1.8 KiB, BENCHMARKS.md). Append, the hot path, leads on
// its caller's goroutine.
func (s *SQLite) write(ctx context.Context, op func(*sql.Conn) error) error {
	res := make(chan error, 1)
	go func() { res <- s.send(ctx, request{op: op}) }()
	return <-res
}

// send queues r and waits for its transaction's outcome, as write does,
// leading the commit when no one else does.
func (s *SQLite) send(ctx context.Context, r request) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.res, _ = s.resChans.Get().(chan error)
	if r.res == nil {
		r.res = make(chan error, 1)
	}
	s.mu.Lock()
	if s.shut {
		s.mu.Unlock()
		return ErrClosed
	}
	s.queue = append(s.queue, r)
	lead := !s.leading
	s.leading = true
	s.mu.Unlock()
	if lead {
		s.lead()
	}
	for {
		err := <-r.res
		if err != errLead {
			s.resChans.Put(r.res)
			return err
		}
		s.lead()
	}
}

// eventCols are the columns events and recent share.
const eventCols = `session, seq, time, actor, kind, message, message_kind, message_from, raw, key_run, key_call, run, notice, prediction`

const (
	insertEventValues = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	insertEventSQL    = `INSERT INTO recent (pos, ` + eventCols + `) VALUES ` + insertEventValues
	// A session with no row in recent has all of them in events.
	lastSeqSQL = `SELECT COALESCE(MAX(seq), 0) FROM events WHERE session = ?`
	// A session's row is written with its first event; its last activity is
	// its newest event's time, so an append writes one row, not two.
	insertSessionSQL = `INSERT INTO sessions (id, created) VALUES (?, ?)`
	renameSessionSQL = `UPDATE sessions SET name = ? WHERE id = ?`
)

// moveChunk bounds the rows one move transaction takes: appends that
// arrive meanwhile wait behind it, and commit between chunks. A chunk must
// hold many rows of each session for the move to write each page once:
// 256 rows cost the appends of 50 closed loops 5 µs each more than 1,024
// (BenchmarkAppendLoops), 64 rows 15 µs. The checkpointer moves only whole
// chunks while appends keep coming (see checkpointer).
const moveChunk = 1024

// move takes all of recent's rows into events.
func (s *SQLite) move() error { return s.moveChunks(false) }

// moveChunks takes recent's rows into events, oldest first, a chunk per
// transaction through the group commit (appends waiting there commit
// between chunks), until the rows there when it started are all moved, or
// with wholeOnly until fewer than a chunk are left.
func (s *SQLite) moveChunks(wholeOnly bool) error {
	ctx := context.Background()
	var end sql.NullInt64
	if err := s.db.QueryRowContext(ctx, `SELECT MAX(pos) FROM recent`).Scan(&end); err != nil {
		return fmt.Errorf("moving recent events: %w", err)
	}
	for end.Valid {
		var lo sql.NullInt64
		if err := s.db.QueryRowContext(ctx, `SELECT MIN(pos) FROM recent`).Scan(&lo); err != nil {
			return fmt.Errorf("moving recent events: %w", err)
		}
		if !lo.Valid || lo.Int64 > end.Int64 || wholeOnly && end.Int64-lo.Int64+1 < moveChunk {
			return nil
		}
		hi := min(lo.Int64+moveChunk-1, end.Int64)
		err := s.write(ctx, func(c *sql.Conn) error {
			if _, err := c.ExecContext(ctx, `INSERT INTO events (`+eventCols+`) SELECT `+eventCols+` FROM recent WHERE pos <= ? ORDER BY pos`, hi); err != nil {
				return err
			}
			res, err := c.ExecContext(ctx, `DELETE FROM recent WHERE pos <= ?`, hi)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			s.unmoved.Add(-n)
			return err
		})
		if err != nil {
			return fmt.Errorf("moving recent events: %w", err)
		}
		// Committed: what was in recent up to hi is in events now.
		s.recentMu.Lock()
		for id, pos := range s.inRecent {
			if pos <= hi {
				delete(s.inRecent, id)
			}
		}
		s.recentMu.Unlock()
	}
	return nil
}

// checkpointer moves recent appends into events and copies the write-ahead
// log into the database, beside the commits (a PASSIVE checkpoint never
// blocks them), so that commits never wait for a checkpoint and the log
// stays small. It looks every second: when nothing was appended since the
// last look it moves everything; otherwise only whole chunks, so that
// appends wait behind a move once per moveChunk rows rather than once a
// second (a class of 300 changes a second moved a third of a chunk each
// second, holding appends 1-5 ms each time, BENCHMARKS.md), and each
// session's pages are written once per chunk. It stops with Close.
func (s *SQLite) checkpointer() {
	defer close(s.cpDone)
	tick := time.NewTicker(s.every)
	defer tick.Stop()
	last := s.appended.Load()
	for {
		select {
		case <-s.quit:
			return
		case <-tick.C:
			// A failure is no one's change: the rows stay in recent, where
			// reads find them, and the next tick tries again.
			n := s.appended.Load()
			if idle := n == last; idle || s.unmoved.Load() >= moveChunk {
				s.moveChunks(!idle)
			}
			last = n
			s.checkpoint()
		}
	}
}

// walSize is the size of the write-ahead log file, 0 if there is none.
func (s *SQLite) walSize() int64 {
	fi, err := os.Stat(s.path + "-wal")
	if err != nil {
		return 0
	}
	return fi.Size()
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
	// The leader checks the seq and writes the session's row here, then
	// inserts w with the rest of its batch.
	err = s.send(ctx, request{row: &w, op: func(c *sql.Conn) error {
		last, ok := s.txSeqs[w.session]
		if !ok {
			last, ok = s.seqs[w.session]
		}
		if !ok {
			if err := s.lastSeq.QueryRow(w.session).Scan(&last); err != nil {
				return err
			}
		}
		if uint64(w.seq) != last+1 {
			if uint64(w.seq) <= last {
				return ErrSeqTaken
			}
			return fmt.Errorf("seq %d, want %d", w.seq, last+1)
		}
		s.txSeqs[w.session] = uint64(w.seq)
		if w.seq == 1 {
			if _, err := s.insertSession.Exec(w.session, w.timeMs); err != nil {
				return err
			}
		}
		if r.Event.Kind == model.Renamed {
			if _, err := s.renameSession.Exec(r.Event.Name, w.session); err != nil {
				return err
			}
		}
		return nil
	}})
	if err != nil {
		s.failed.Store(true)
		return fmt.Errorf("appending session %s seq %d to %s: %w", r.Session, r.Seq, s.path, err)
	}
	return nil
}

// Delete removes the sessions with their events, in one transaction.
func (s *SQLite) Delete(ctx context.Context, ids []string) error {
	err := s.write(ctx, func(c *sql.Conn) error {
		for _, id := range ids {
			if _, err := c.ExecContext(context.Background(), `DELETE FROM events WHERE session = ?`, id); err != nil {
				return err
			}
			if _, err := c.ExecContext(context.Background(), `DELETE FROM recent WHERE session = ?`, id); err != nil {
				return err
			}
			s.txSeqs[id] = 0
			if _, err := c.ExecContext(context.Background(), `DELETE FROM sessions WHERE id = ?`, id); err != nil {
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

// probeEvery is how long Ready trusts its last write probe.
const probeEvery = time.Second

// Ready reports whether the store takes writes now: a write probe commits.
// The probe really writes: it negates the schema version and negates it
// back in one transaction, so the page is written (SQLite skips writing a
// row set to what it holds, which is why a no-op UPDATE proved nothing). It
// fails when the file is read-only, locked by another process, or the disk
// is full. Probes run once a second at most, and at once after an append
// failed; in between the last one's result stands. mu also makes
// concurrent callers share one probe rather than each write.
func (s *SQLite) Ready(ctx context.Context) error {
	s.probeMu.Lock()
	defer s.probeMu.Unlock()
	if !s.failed.Swap(false) && !s.probedAt.IsZero() && time.Since(s.probedAt) < probeEvery {
		return s.probeErr
	}
	err := s.write(ctx, func(c *sql.Conn) error {
		for range 2 {
			if _, err := c.ExecContext(context.Background(), `UPDATE schema_version SET version = -version`); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		err = fmt.Errorf("writing to %s: %w", s.path, err)
	}
	s.probedAt, s.probeErr = time.Now(), err
	return err
}

// Sessions lists the stored sessions, oldest first.
func (s *SQLite) Sessions(ctx context.Context) ([]Session, error) {
	select {
	case <-s.quit:
		return nil, ErrClosed
	default:
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id, name, created,
		COALESCE(r.last, (SELECT time FROM events WHERE session = sessions.id ORDER BY seq DESC LIMIT 1), created)
		FROM sessions LEFT JOIN (SELECT session, MAX(time) AS last FROM recent GROUP BY session) AS r ON r.session = sessions.id
		ORDER BY created, id`)
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
	return s.EventsAfter(ctx, id, 0)
}

// EventsAfter returns one session's records after seq after, in order.
func (s *SQLite) EventsAfter(ctx context.Context, id string, after uint64) ([]Record, error) {
	select {
	case <-s.quit:
		return nil, ErrClosed
	default:
	}
	// recent has no index by session (see SQLite): a session with no row
	// there, such as every new one, is read from events alone.
	s.recentMu.Lock()
	_, recent := s.inRecent[id]
	s.recentMu.Unlock()
	q, args := `SELECT `+eventCols+` FROM events WHERE session = ? AND seq > ? ORDER BY seq`, []any{id, int64(after)}
	if recent {
		q = `SELECT ` + eventCols + ` FROM events WHERE session = ? AND seq > ?
		UNION ALL SELECT ` + eventCols + ` FROM recent WHERE session = ? AND seq > ? ORDER BY seq`
		args = append(args, id, int64(after))
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
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

// Close commits what is queued, refuses new writes and closes the file.
func (s *SQLite) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.quit)
		<-s.cpDone
		s.mu.Lock()
		s.shut = true
		for s.leading {
			s.idle.Wait()
		}
		s.mu.Unlock()
		s.wconn.Close() // no leader now, and none to come
		s.checkpoint()
		err = s.db.Close()
	})
	return err
}
