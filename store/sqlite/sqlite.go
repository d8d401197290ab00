// Package sqlite is the lab's durable store and its default: one SQLite
// file in WAL mode (modernc.org/sqlite, pure Go), appends written first to
// a journal beside it (journal.go) with group commit, classes in the same
// file (sqlite_classes.go). It implements store.Store; cmd/lab opens it for
// a -data path.
package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver; pure Go, no cgo

	"github.com/toolcall-lab/lab/model"
	"github.com/toolcall-lab/lab/store"
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
	2: classesSchema, // sqlite_classes.go
	// recent takes appends in the order they come (see Store); the mover
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
	5: classSettingsSchema, // sqlite_classes.go
	// 6: the epoch of the journal whose rows the database has not taken
	// in yet (journal.go). Appends go to the journal since; recent only
	// holds what an older build left, moved at open.
	6: {
		`CREATE TABLE journal (epoch INTEGER NOT NULL)`,
		`INSERT INTO journal (epoch) VALUES (0)`,
	},
	// 7: a move writes each session's events as one row, a chunk: the
	// events framed as the journal frames them (journal.go), first and
	// last their seqs, last_time the last one's time. With a row per
	// event a durable append spends most of its CPU in SQLite's
	// B-tree. Open takes what older builds left in
	// events and recent into chunks (convertOlder); both stay, empty.
	7: {
		`CREATE TABLE chunks (
			session   TEXT NOT NULL,
			first     INTEGER NOT NULL,
			last      INTEGER NOT NULL,
			last_time INTEGER NOT NULL,
			data      BLOB NOT NULL,
			PRIMARY KEY (session, first)
		) WITHOUT ROWID`,
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

// Store is the durable store: one SQLite file in WAL mode, and its
// journal (journal.go).
//
// An append is a record written to the journal, one write(2) for a whole
// group commit: once written it survives kill -9, which is what SQLite's
// own log gives a commit at synchronous=NORMAL, for a quarter to a
// twentieth of its CPU (BENCHMARKS.md). The rows
// stay in memory (pending) until a move takes them all into the chunks
// table in one transaction and empties the journal: when appends pause for
// a second, when they pass journalMoveRows or journalMoveBytes, and before
// any other write (a deletion, a class change, Ready's probe), so that
// every write and every read of the database sees every append before it.
// Reads of a session's events add its pending rows to what the database
// holds.
//
// Ownership: no goroutine of its own writes. Writes queue their requests
// under mu; the first writer that finds no commit running becomes the
// leader, commits everything queued (group commit, so many sessions share
// one write) and hands the leadership to the oldest request still queued,
// whose goroutine commits the next batch; the others wait for their result.
// So an append with no one else writing commits on its own goroutine, with
// no handoff, and a busy store still commits every waiting append
// together. The leader owns the journal; pendMu guards pending for the
// readers. Reads go straight to the connection pool: WAL lets them run
// beside the writer. The checkpointer goroutine (started by Open,
// stopped by Close) moves the journal and checkpoints.
type Store struct {
	path     string
	db       *sql.DB
	maxBatch int
	every    time.Duration
	// wconn is the writers' own connection, and the statements prepared
	// on it once: parsing them again on every commit cost more than the
	// commit, BEGIN and COMMIT included (database/sql's Tx parses both each
	// time). All are owned by the leader (see Store); chunk, rows, errs
	// and batch are its scratch space.
	wconn   *sql.Conn
	w       txConn
	lastSeq *sql.Stmt
	rows    []*store.Row
	errs    []error
	batch   []request
	// mconn is the mover's connection (see Store), owned by the
	// checkpointer goroutine, as is its m.
	mconn *sql.Conn
	m     txConn
	// txMu is held by every transaction that takes journal rows into the
	// database (a move on mconn, inTx on wconn): one at a time, and a
	// transaction never sees a move half done.
	txMu sync.Mutex

	// j is the journal segment appends are written to, owned by the
	// leader; jerr is why a write to it or its emptying after a move
	// failed (appends repair it first, and fail while that fails: see
	// repairJournal). other is the second segment file: the leader's while
	// moving is false, the mover's while it is true (see Store).
	j     *journal
	jerr  error
	other *journal
	// moving: other holds the first moveRows pending rows, handed to the
	// mover (moveReq wakes it). Guarded by moveMu.
	moveMu   sync.Mutex
	moving   bool
	moveRows int
	moveReq  chan struct{}
	// moveDue: the checkpointer's looks found rows pending while appends
	// came (looks counts them, owned by the checkpointer goroutine); the
	// leader hands them to the mover after its next commit.
	moveDue atomic.Bool
	looks   int
	// pending holds the journal's rows in the order appended, bySession
	// each session's (a suffix of its log). The leader adds them after
	// their write and drops them once a move has committed; readers look.
	// Guarded by pendMu.
	pendMu    sync.Mutex
	pending   []*store.Row
	bySession map[string][]*store.Row
	appends   uint64 // rows ever added to pending: the checkpointer's sign of appends coming
	// known holds every session with an event, stored or pending: this
	// process is the file's only writer (the journal is locked), so a
	// session not here has none, and a new session's first read and first
	// append need not ask the database (each a query, 1% of the changes in
	// labbench's rtt scenario, and its p99). The leader adds a session
	// with its first append and removes it once its deletion commits;
	// guarded by pendMu.
	known map[string]struct{}

	// seqs is the last committed seq of each session appended since open,
	// and txSeqs those of the transaction being built (0: deleted in it);
	// both are owned by the leader (requests' ops run on it). An
	// append must be its session's next seq, as in Memory: the journal
	// has no key that would refuse a duplicate.
	seqs, txSeqs map[string]uint64

	// mu guards queue (requests not yet taken into a batch, in arrival
	// order), leading (some goroutine is the leader) and shut (Close has
	// begun: no new requests); idle is signalled when leading turns false.
	mu      sync.Mutex
	idle    sync.Cond
	queue   []request
	leading bool
	shut    bool

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

var _ store.Store = (*Store)(nil)

// request is one unit of write work: op, then (for an append) the row to
// write with the batch's others, to the journal or into chunks; res
// receives its outcome.
type request struct {
	op  func(*sql.Conn) error
	row *store.Row
	res chan error // buffered, 1; errLead passes the leadership
}

// errLead, sent on a queued request's res, makes its goroutine the leader
// (see Store); its own result comes later on the same channel.
var errLead = errors.New("store: lead the next commit")

// Open opens (creating it and its directory on first use) the SQLite
// file at path, migrates it to SchemaVersion and starts its checkpointer.
func Open(path string, opt Options) (*Store, error) {
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
	// temp_store(MEMORY): a statement that keeps a statement journal of
	// the pages it changes keeps it in memory, not in a temporary file
	// (a pwrite saved per append under load); the moves' INSERTs keep
	// none (insertEventSQL).
	for _, p := range []string{"journal_mode(WAL)", synchronous, "wal_autocheckpoint(0)", "temp_store(MEMORY)", fmt.Sprintf("busy_timeout(%d)", opt.BusyTimeout.Milliseconds()),
		fmt.Sprintf("journal_size_limit(%d)", opt.WALLimit)} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate") // take the write lock at BEGIN, where busy_timeout applies
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("opening the lab's data file %s: %w", path, err)
	}
	db.SetMaxOpenConns(5) // the writer's, the mover's, and readers'
	if err := migrate(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening the lab's data file %s: %w", path, err)
	}
	s := &Store{
		path: path, db: db, maxBatch: opt.MaxBatch, every: opt.every, walLimit: opt.WALLimit,
		quit: make(chan struct{}), cpDone: make(chan struct{}), moveReq: make(chan struct{}, 1),
		seqs: make(map[string]uint64), txSeqs: make(map[string]uint64), bySession: make(map[string][]*store.Row), known: make(map[string]struct{}),
	}
	if s.wconn, err = db.Conn(context.Background()); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening the lab's data file %s: %w", path, err)
	}
	fail := func(err error) (*Store, error) {
		s.wconn.Close()
		if s.mconn != nil {
			s.mconn.Close()
		}
		db.Close()
		for _, j := range []*journal{s.j, s.other} {
			if j != nil {
				j.close()
			}
		}
		return nil, fmt.Errorf("opening the lab's data file %s: %w", path, err)
	}
	if s.mconn, err = db.Conn(context.Background()); err != nil {
		return fail(err)
	}
	if s.w, err = prepareTx(s.wconn); err != nil {
		return fail(err)
	}
	if s.m, err = prepareTx(s.mconn); err != nil {
		return fail(err)
	}
	if s.lastSeq, err = s.wconn.PrepareContext(context.Background(), lastSeqSQL); err != nil {
		return fail(fmt.Errorf("preparing statements: %w", err))
	}
	s.idle.L = &s.mu
	// Rows an older build left in events and recent move first.
	if err := s.convertOlder(); err != nil {
		return fail(err)
	}
	var epoch int64
	if err := db.QueryRow(`SELECT epoch FROM journal`).Scan(&epoch); err != nil {
		return fail(err)
	}
	if err := s.loadKnown(); err != nil {
		return fail(err)
	}
	j, other, recovered, err := openJournals(path, epoch, opt.FullSync)
	if err != nil {
		return fail(err)
	}
	s.j, s.other = j, other
	// What the journal held when the last process stopped (a crash, or
	// kill -9) goes into the database before anything else.
	s.addPending(recovered)
	for _, w := range recovered {
		s.seqs[w.Session] = uint64(w.Seq)
		s.known[w.Session] = struct{}{}
	}
	if len(recovered) > 0 {
		if err := s.inTx(nil); err != nil {
			return fail(err)
		}
	}
	go s.checkpointer()
	return s, nil
}

// txConn is a connection that takes journal rows into the database, and
// the statements prepared on it once: parsing them again on every commit
// cost more than the commit, BEGIN and COMMIT included (database/sql's Tx
// parses both each time). chunk and rows are its owner's scratch space.
type txConn struct {
	conn                                                                         *sql.Conn
	begin, commit, rollback, insertChunk, insertSession, renameSession, setEpoch *sql.Stmt
	chunk                                                                        []byte
	rows                                                                         []*store.Row
}

func prepareTx(c *sql.Conn) (txConn, error) {
	t := txConn{conn: c}
	for _, p := range []struct {
		stmt **sql.Stmt
		sql  string
	}{
		// IMMEDIATE: take the write lock at BEGIN, where busy_timeout applies.
		{&t.begin, `BEGIN IMMEDIATE`}, {&t.commit, `COMMIT`}, {&t.rollback, `ROLLBACK`},
		{&t.insertChunk, insertChunkSQL}, {&t.insertSession, insertSessionSQL}, {&t.renameSession, renameSessionSQL},
		{&t.setEpoch, `UPDATE journal SET epoch = ?`},
	} {
		var err error
		if *p.stmt, err = c.PrepareContext(context.Background(), p.sql); err != nil {
			return t, fmt.Errorf("preparing statements: %w", err)
		}
	}
	return t, nil
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
func (s *Store) Path() string { return s.path }

// lead commits the queued requests in batches of up to maxBatch: the first
// batch on this goroutine, then it hands the leadership to the goroutine of
// the oldest request still queued (whose result it would otherwise delay),
// or gives it up when none is.
func (s *Store) lead() {
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
// (TRUNCATE checkpoint) once it has passed walLimit. Every transaction
// that takes journal rows in runs it after its commit, holding txMu, on
// its own connection c: run beside a writer that never pauses, it would
// wait for the write lock forever. The mover's runs beside the appends,
// which go on into the journal; the leader's (a transaction other than
// the appends, or a move the mover fell behind on) hold those queued.
func (s *Store) truncateLog(c *sql.Conn) {
	if s.walSize() > s.walLimit {
		c.ExecContext(context.Background(), "PRAGMA wal_checkpoint(TRUNCATE)")
	}
}

// commit commits the batch: a batch of appends alone to the journal
// (journalCommit), any other in one transaction (inTx). If a transaction
// fails, each request is retried alone, so one bad request does not refuse
// the others.
func (s *Store) commit(batch []request) {
	if s.appendsOnly(batch) {
		s.journalCommit(batch)
		return
	}
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

func (s *Store) appendsOnly(batch []request) bool {
	for _, r := range batch {
		if r.row == nil {
			return false
		}
	}
	return true
}

// journalCommit writes a batch of appends to the journal in one write,
// each append whose seq is right; then the rows are pending (readers see
// them) and their appenders are answered. A journal past journalMoveRows
// or journalMoveBytes is moved into the database right after.
func (s *Store) journalCommit(batch []request) {
	var err error
	if s.jerr != nil {
		err = s.repairJournal()
	}
	clear(s.txSeqs)
	s.rows, s.errs = s.rows[:0], s.errs[:0]
	for _, r := range batch {
		e := r.op(s.wconn) // checks the seq, writes nothing
		s.errs = append(s.errs, e)
		if e == nil {
			s.rows = append(s.rows, r.row)
		}
	}
	if err == nil && len(s.rows) > 0 {
		if err = s.j.append(s.rows); err != nil {
			s.jerr = err
		}
	}
	if err == nil {
		s.commitSeqs()
		s.addPending(s.rows)
	}
	for i, r := range batch {
		if s.errs[i] == nil {
			s.errs[i] = err
		}
		r.res <- s.errs[i]
	}
	s.dropRows()
	if n := s.pendingRows(); n > 0 && (n >= journalMoveRows || s.j.size >= journalMoveBytes || s.moveDue.Load()) {
		s.handOff(n)
	}
}

// handOff gives the journal's n pending rows to the mover: the segment
// that holds them becomes other, and appends go on into the emptied
// other one, so that no append waits for the move. With a move still
// running it waits for that one, unless the journal has grown to
// journalMaxRows or journalMaxBytes: then the leader moves the rows itself
// (inTx), holding the appends behind it, so that a mover that cannot keep
// up (or keeps failing) does not let the journal and pending grow without
// bound.
func (s *Store) handOff(n int) {
	s.moveMu.Lock()
	busy := s.moving
	s.moveMu.Unlock()
	if busy {
		if n >= journalMaxRows || s.j.size >= journalMaxBytes {
			// A failure is no one's change: the rows stay pending and in
			// the journal, and the next move tries again.
			s.inTx(nil)
		}
		return
	}
	// The rows pending now are all in j: a move (inTx or the mover's)
	// drops the rows of other before it ends.
	if err := s.other.reset(s.j.epoch + 1); err != nil {
		s.inTx(nil) // as above; other is reset again at the next hand-off
		return
	}
	s.moveDue.Store(false)
	s.j, s.other = s.other, s.j
	s.moveMu.Lock()
	s.moving, s.moveRows = true, n
	s.moveMu.Unlock()
	select {
	case s.moveReq <- struct{}{}:
	default: // already woken
	}
}

// move takes the rows handed off (handOff) into the database in one
// transaction on the mover's connection, beside the appends. It runs on
// the checkpointer goroutine. A failure is no one's change: the rows stay
// pending and in their segment, and the next look tries again.
func (s *Store) move() {
	s.txMu.Lock()
	defer s.txMu.Unlock()
	s.moveMu.Lock()
	moving, n, seg := s.moving, s.moveRows, s.other
	s.moveMu.Unlock()
	if !moving {
		return // inTx took them first
	}
	s.pendMu.Lock()
	s.m.rows = append(s.m.rows[:0], s.pending[:n]...) // the leader only adds after them
	s.pendMu.Unlock()
	// The database's epoch becomes the segment appends go to now: seg's
	// rows are in it (a restart skips seg), the live one's are not.
	err := s.m.run(seg.epoch+1, nil)
	s.truncateLog(s.mconn)
	if err != nil {
		return
	}
	s.dropPending(n)
	s.moveMu.Lock()
	s.moving, s.moveRows = false, 0
	s.moveMu.Unlock()
}

// repairJournal empties the journal after a write to it failed (it may
// hold part of what failed) or after a move could not empty it (it holds
// rows the database has): by a move, if rows are pending, which empties it
// too. Until it succeeds appends fail.
func (s *Store) repairJournal() error {
	if s.pendingRows() > 0 {
		if err := s.inTx(nil); err != nil {
			return err
		}
		return s.jerr
	}
	s.jerr = s.j.reset(s.j.epoch)
	return s.jerr
}

// journalMoveRows and journalMoveBytes bound the rows waiting in the
// journal's live segment (and in memory) and its size before the leader
// hands them to the mover; journalMaxRows and journalMaxBytes, those
// waiting while a move runs, before the leader moves them itself,
// holding the appends behind it (handOff).
const (
	journalMoveRows  = 8192
	journalMoveBytes = 4 << 20
	journalMaxRows   = 2 * journalMoveRows
	journalMaxBytes  = 2 * journalMoveBytes
)

// pendingRows counts the rows in the journal not yet moved.
func (s *Store) pendingRows() int {
	s.pendMu.Lock()
	defer s.pendMu.Unlock()
	return len(s.pending)
}

// addPending adds rows, just written to the journal, to pending.
func (s *Store) addPending(rows []*store.Row) {
	s.pendMu.Lock()
	defer s.pendMu.Unlock()
	s.appends += uint64(len(rows))
	for _, w := range rows {
		s.pending = append(s.pending, w)
		s.bySession[w.Session] = append(s.bySession[w.Session], w)
	}
}

// dropPending forgets the first n pending rows, once a move has committed
// them to the database.
func (s *Store) dropPending(n int) {
	s.pendMu.Lock()
	defer s.pendMu.Unlock()
	for _, w := range s.pending[:n] {
		rows := s.bySession[w.Session]
		if len(rows) == 1 {
			delete(s.bySession, w.Session)
		} else {
			s.bySession[w.Session] = rows[1:] // a session's rows are in order
		}
	}
	rest := copy(s.pending, s.pending[n:])
	clear(s.pending[rest:])
	s.pending = s.pending[:rest]
}

// inTx runs the batch in one transaction, after moving the journal's rows
// into the database in it: every write sees every append before it. With
// no batch it only moves them.
func (s *Store) inTx(batch []request) error {
	s.txMu.Lock() // after a move running, if one is: it moves rows before these
	defer s.txMu.Unlock()
	s.pendMu.Lock()
	moved := len(s.pending)
	s.w.rows = append(s.w.rows[:0], s.pending...) // only the leader adds to pending
	s.pendMu.Unlock()
	if moved == 0 && len(batch) == 0 {
		return nil
	}
	clear(s.txSeqs)
	var epoch int64
	if moved > 0 {
		// Every pending row is in: those of j and, should a hand-off not
		// have been moved yet, those of other, a segment before it.
		epoch = s.j.epoch + 1
	}
	err := s.w.run(epoch, func() error {
		for _, r := range batch {
			if r.row == nil {
				// Any other work sees the rows appended before it.
				if err := s.w.insertRows(); err != nil {
					return err
				}
			}
			if err := r.op(s.wconn); err != nil {
				return err
			}
			if r.row != nil {
				s.w.rows = append(s.w.rows, r.row)
			}
		}
		return nil
	})
	s.truncateLog(s.wconn)
	if err != nil {
		return err
	}
	s.commitSeqs()
	if moved > 0 {
		s.dropPending(moved)
		s.moveMu.Lock()
		s.moving, s.moveRows = false, 0 // a hand-off's rows were among them
		s.moveMu.Unlock()
		// Should this fail, the journal keeps rows of the epoch before,
		// which a restart knows to skip; appends empty it first (jerr).
		s.jerr = s.j.reset(epoch)
	}
	return nil
}

// run runs, in one transaction on t, body and then the insertion of
// t.rows, and sets the database's journal epoch to epoch unless it is 0
// (no journal rows in it); t.rows is empty after it either way.
func (t *txConn) run(epoch int64, body func() error) error {
	defer t.dropRows()
	if _, err := t.begin.Exec(); err != nil {
		return fmt.Errorf("beginning a transaction: %w", err)
	}
	err := func() error {
		if epoch > 0 {
			if _, err := t.setEpoch.Exec(epoch); err != nil {
				return err
			}
		}
		if body != nil {
			if err := body(); err != nil {
				return err
			}
		}
		if err := t.insertRows(); err != nil {
			return err
		}
		if _, err := t.commit.Exec(); err != nil {
			// A COMMIT that failed (busy) leaves the transaction open.
			return fmt.Errorf("committing: %w", err)
		}
		return nil
	}()
	if err != nil {
		t.rollback.Exec()
	}
	return err
}

// commitSeqs makes the seqs of the batch just stored (txSeqs) the
// sessions' last: a session deleted in it (0) is forgotten.
func (s *Store) commitSeqs() {
	for id, seq := range s.txSeqs {
		if seq == 0 {
			delete(s.seqs, id)
			s.pendMu.Lock()
			delete(s.known, id) // deleted: a read of it need not look
			s.pendMu.Unlock()
		} else {
			s.seqs[id] = seq
		}
	}
}

// insertRows inserts t.rows into chunks, with a session's row for its
// first event and its renames, and empties t.rows.
func (t *txConn) insertRows() error {
	defer t.dropRows()
	if err := t.insertChunks(t.rows); err != nil {
		return err
	}
	for _, w := range t.rows { // sorted: a session's renames stay in order
		if w.Seq == 1 {
			if _, err := t.insertSession.Exec(w.Session, w.TimeMs); err != nil {
				return err
			}
		}
		if w.Kind == model.KindRenamed {
			if _, err := t.renameSession.Exec(string(w.Raw), w.Session); err != nil {
				return err
			}
		}
	}
	return nil
}

// insertChunks sorts rows by session and seq and inserts each session's
// as one chunk. A session's rows must be consecutive seqs after those
// chunks already hold, as a move's and an older build's are.
func (t *txConn) insertChunks(rows []*store.Row) error {
	slices.SortFunc(rows, func(a, b *store.Row) int {
		return cmp.Or(strings.Compare(a.Session, b.Session), cmp.Compare(a.Seq, b.Seq))
	})
	for len(rows) > 0 {
		n := 1
		for n < len(rows) && rows[n].Session == rows[0].Session {
			n++
		}
		b := t.chunk[:0]
		for _, w := range rows[:n] {
			b = appendRecord(b, w)
		}
		t.chunk = b
		last := rows[n-1]
		if _, err := t.insertChunk.Exec(last.Session, rows[0].Seq, last.Seq, last.TimeMs, b); err != nil {
			return err
		}
		rows = rows[n:]
	}
	if cap(t.chunk) > 1<<20 {
		t.chunk = nil // a burst of big replies: do not keep its buffer
	}
	return nil
}

// dropRows empties the leader's rows, dropping their references to the
// rows' text.
func (s *Store) dropRows() {
	clear(s.rows)
	s.rows = s.rows[:0]
}

// dropRows empties t.rows, as Store.dropRows.
func (t *txConn) dropRows() {
	clear(t.rows)
	t.rows = t.rows[:0]
}

// loadKnown fills known from the sessions table: a session's row is
// written with its first event (insertRows).
func (s *Store) loadKnown() error {
	rows, err := s.db.Query(`SELECT id FROM sessions`)
	if err != nil {
		return fmt.Errorf("listing sessions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return fmt.Errorf("listing sessions: %w", err)
		}
		s.known[id] = struct{}{}
	}
	return rows.Err()
}

// isKnown reports whether session id may have events (see known).
func (s *Store) isKnown(id string) bool {
	s.pendMu.Lock()
	defer s.pendMu.Unlock()
	_, ok := s.known[id]
	return ok
}

// flush moves the journal's rows into the database (through the group
// commit, as any write).
func (s *Store) flush(ctx context.Context) error {
	return s.write(ctx, func(*sql.Conn) error { return nil })
}

// write runs op in a transaction (see Store) and returns its outcome.
// Once queued, it waits for the commit even if ctx ends: returning early
// would report as failed a change that may yet be stored.
//
// It runs on a goroutine of its own, which it waits for: leading a commit
// grows the goroutine's stack by the driver's depth, and a long-lived
// caller would keep that stack (Ready on every WebSocket upgrade cost each
// idle connection 1.8 KiB, BENCHMARKS.md). Append, the hot path, leads on
// its caller's goroutine.
func (s *Store) write(ctx context.Context, op func(*sql.Conn) error) error {
	res := make(chan error, 1)
	go func() { res <- s.send(ctx, request{op: op}) }()
	return <-res
}

// send queues r and waits for its transaction's outcome, as write does,
// leading the commit when no one else does.
func (s *Store) send(ctx context.Context, r request) error {
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
		return store.ErrClosed
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

// eventCols are the columns of events and recent, where older builds kept
// a row per event (convertOlder).
const eventCols = `session, seq, time, actor, kind, message, message_kind, message_from, raw, key_run, key_call, run, notice, prediction`

const (
	// OR FAIL: a failing statement keeps the rows it inserted before, so
	// SQLite keeps no statement journal of the pages it changes (a copy of
	// each page before its first change, 2 % of the default lab's CPU);
	// the transaction it is in rolls back on any error anyway (inTx).
	insertChunkSQL = `INSERT OR FAIL INTO chunks (session, first, last, last_time, data) VALUES (?, ?, ?, ?, ?)`
	// A session with no pending row (not in seqs) has all of them in chunks.
	lastSeqSQL = `SELECT COALESCE(MAX(last), 0) FROM chunks WHERE session = ?`
	// A session's row is written with its first event; its last activity is
	// its newest event's time, so an append writes one row, not two.
	insertSessionSQL = `INSERT INTO sessions (id, created) VALUES (?, ?)`
	renameSessionSQL = `UPDATE sessions SET name = ? WHERE id = ?`
)

// convertOlder takes into chunks, in one transaction, the events older
// builds left a row each: in events, and in recent (an arrival table the
// journal replaced, whose rows are newer). It reads a session at a time.
func (s *Store) convertOlder() error {
	var left bool
	if err := s.db.QueryRow(`SELECT EXISTS (SELECT 1 FROM events) OR EXISTS (SELECT 1 FROM recent)`).Scan(&left); err != nil {
		return fmt.Errorf("looking for events to convert: %w", err)
	}
	if !left {
		return nil
	}
	ctx := context.Background()
	err := s.write(ctx, func(c *sql.Conn) error {
		for _, table := range []string{"events", "recent"} {
			var ids []string
			if err := queryRows(ctx, c, `SELECT DISTINCT session FROM `+table, nil, func(r *sql.Rows) error {
				var id string
				err := r.Scan(&id)
				ids = append(ids, id)
				return err
			}); err != nil {
				return err
			}
			for _, id := range ids {
				var rows []*store.Row
				// recent's pos and events' seq both order a session's rows.
				err := queryRows(ctx, c, `SELECT `+eventCols+` FROM `+table+` WHERE session = ? ORDER BY seq`, []any{id}, func(r *sql.Rows) error {
					var w store.Row
					rows = append(rows, &w)
					return r.Scan(&w.Session, &w.Seq, &w.TimeMs, &w.Actor, &w.Kind, &w.Message, &w.MsgKind, &w.MsgFrom, &w.Raw, &w.KeyRun, &w.KeyCall, &w.Run, &w.Notice, &w.Prediction)
				})
				if err != nil {
					return err
				}
				if err := s.w.insertChunks(rows); err != nil {
					return err
				}
			}
			if _, err := c.ExecContext(ctx, `DELETE FROM `+table); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("converting older events: %w", err)
	}
	return nil
}

// queryRows runs q on c and calls scan for each row.
func queryRows(ctx context.Context, c *sql.Conn, q string, args []any, scan func(*sql.Rows) error) error {
	rows, err := c.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// checkpointer is the mover: it moves the segments the leader hands it
// (handOff) into the database, beside the appends, which go on into the
// other segment. It looks every second (every): if appends paused, it
// moves the journal through the leader (flush); if they keep coming, the
// leader hands it what is pending after its next commit once moveLooks
// looks in a row found them coming, so that under traffic a move comes
// every few seconds with those seconds' changes, rather than a full
// journal's at once. A move writes a chunk per session in it, so its cost
// goes with the sessions more than with their changes: 2,000 students
// at a change a second each cost one insert per change when moved every
// second, a quarter of one every four (BENCHMARKS.md, issue 35). It
// copies the write-ahead log into the database file beside the commits
// (a PASSIVE checkpoint never blocks them). Its thread runs at a lower
// priority (background). It stops with Close.
func (s *Store) checkpointer() {
	defer close(s.cpDone)
	defer background()()
	tick := time.NewTicker(s.every)
	defer tick.Stop()
	var last uint64
	for {
		select {
		case <-s.quit:
			return
		case <-s.moveReq:
			s.move()
		case <-tick.C:
			s.move() // one that failed before
			last = s.moveIfIdle(last)
			s.checkpoint()
		}
	}
}

// moveLooks is how many of the checkpointer's looks in a row find appends
// coming before it has the leader hand them to the mover.
const moveLooks = 4

// moveIfIdle moves the journal into the database if no append came since
// the checkpointer's last look, when the appends counted were last, and
// otherwise, at the moveLooks-th look in a row that finds them coming, has
// the leader hand off what is pending (moveDue); it returns the count now.
func (s *Store) moveIfIdle(last uint64) uint64 {
	s.pendMu.Lock()
	waiting, n := len(s.pending) > 0, s.appends
	s.pendMu.Unlock()
	switch {
	case !waiting:
		s.looks = 0
	case n == last:
		// A failure is no one's change: the rows stay pending and in the
		// journal, and the next move tries again.
		s.looks = 0
		s.flush(context.Background())
	default:
		if s.looks++; s.looks >= moveLooks {
			s.looks = 0
			s.moveDue.Store(true)
		}
	}
	return n
}

// walSize is the size of the write-ahead log file, 0 if there is none.
func (s *Store) walSize() int64 {
	fi, err := os.Stat(s.path + "-wal")
	if err != nil {
		return 0
	}
	return fi.Size()
}

// checkpoint runs one PASSIVE checkpoint. A failure is not an error of
// anyone's change: the log keeps the data and the next one tries again.
func (s *Store) checkpoint() {
	s.db.Exec("PRAGMA wal_checkpoint(PASSIVE)")
}

// Append stores r and returns once it is committed.
func (s *Store) Append(ctx context.Context, r store.Record) error {
	w, err := store.Encode(r)
	if err != nil {
		return err
	}
	// The leader checks the seq here, then writes w with the rest of its
	// batch: to the journal, or into chunks with a transaction's other
	// work (insertRows writes the session's row and its renames).
	err = s.send(ctx, request{row: &w, op: func(c *sql.Conn) error {
		last, ok := s.txSeqs[w.Session]
		if !ok {
			last, ok = s.seqs[w.Session]
		}
		if !ok && s.isKnown(w.Session) {
			if err := s.lastSeq.QueryRow(w.Session).Scan(&last); err != nil {
				return err
			}
		}
		if uint64(w.Seq) != last+1 {
			if uint64(w.Seq) <= last {
				return store.ErrSeqTaken
			}
			return fmt.Errorf("seq %d, want %d", w.Seq, last+1)
		}
		s.txSeqs[w.Session] = uint64(w.Seq)
		if w.Seq == 1 {
			// Known before its row is anywhere a read could find it;
			// should the append fail, a read of it costs a query, no more.
			s.pendMu.Lock()
			s.known[w.Session] = struct{}{}
			s.pendMu.Unlock()
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
func (s *Store) Delete(ctx context.Context, ids []string) error {
	err := s.write(ctx, func(c *sql.Conn) error {
		for _, id := range ids {
			if _, err := c.ExecContext(context.Background(), `DELETE FROM chunks WHERE session = ?`, id); err != nil {
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

// Ready reports whether the store takes writes now: a write probe commits.
// The probe really writes: it negates the schema version and negates it
// back in one transaction, so the page is written (SQLite skips writing a
// row set to what it holds, which is why a no-op UPDATE proved nothing). It
// fails when the file is read-only, locked by another process, or the disk
// is full. Probes run once a second at most, and at once after an append
// failed; in between the last one's result stands. mu also makes
// concurrent callers share one probe rather than each write.
func (s *Store) Ready(ctx context.Context) error {
	s.probeMu.Lock()
	defer s.probeMu.Unlock()
	if !s.failed.Swap(false) && !s.probedAt.IsZero() && time.Since(s.probedAt) < store.ProbeEvery {
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
func (s *Store) Sessions(ctx context.Context) ([]store.Session, error) {
	select {
	case <-s.quit:
		return nil, store.ErrClosed
	default:
	}
	// A session's row is written when its first event moves in.
	if err := s.flush(ctx); err != nil {
		return nil, fmt.Errorf("listing sessions in %s: %w", s.path, err)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id, name, created,
		COALESCE((SELECT last_time FROM chunks WHERE session = sessions.id ORDER BY first DESC LIMIT 1), created)
		FROM sessions ORDER BY created, id`)
	if err != nil {
		return nil, fmt.Errorf("listing sessions in %s: %w", s.path, err)
	}
	defer rows.Close()
	var out []store.Session
	for rows.Next() {
		var x store.Session
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
func (s *Store) Events(ctx context.Context, id string) ([]store.Record, error) {
	return s.EventsAfter(ctx, id, 0)
}

// EventsAfter returns one session's records after seq after, in order.
func (s *Store) EventsAfter(ctx context.Context, id string, after uint64) ([]store.Record, error) {
	select {
	case <-s.quit:
		return nil, store.ErrClosed
	default:
	}
	// Pending rows first: one that moves meanwhile is then found in one
	// place or both, never in neither. They are the newest of the session's.
	s.pendMu.Lock()
	var newest []*store.Row
	for _, w := range s.bySession[id] {
		if uint64(w.Seq) > after {
			newest = append(newest, w)
		}
	}
	_, known := s.known[id]
	s.pendMu.Unlock()
	if !known {
		return nil, nil // a new session, as every student's first
	}
	rows, err := s.db.QueryContext(ctx, `SELECT data FROM chunks WHERE session = ? AND last > ? ORDER BY first`, id, int64(after))
	if err != nil {
		return nil, fmt.Errorf("reading session %s from %s: %w", id, s.path, err)
	}
	defer rows.Close()
	var out []store.Record
	var data []byte
	for rows.Next() {
		if err := rows.Scan(&data); err != nil {
			return nil, fmt.Errorf("reading session %s from %s: %w", id, s.path, err)
		}
		ws, n := decodeRecords(data)
		if n != int64(len(data)) {
			return nil, fmt.Errorf("reading session %s from %s: a damaged chunk (%d of its %d bytes decode)", id, s.path, n, len(data))
		}
		for _, w := range ws {
			if uint64(w.Seq) <= after {
				continue
			}
			r, err := store.Decode(*w)
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", s.path, err)
			}
			out = append(out, r)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading session %s from %s: %w", id, s.path, err)
	}
	for _, w := range newest {
		if len(out) > 0 && uint64(w.Seq) <= out[len(out)-1].Seq {
			continue // moved while this read ran: read from chunks already
		}
		r, err := store.Decode(*w)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", s.path, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// Close commits what is queued, refuses new writes and closes the file.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.quit)
		<-s.cpDone
		// The journal's rows go into the database, so that the file is
		// whole without it. Should that fail, the next open takes them.
		s.flush(context.Background())
		s.mu.Lock()
		s.shut = true
		for s.leading {
			s.idle.Wait()
		}
		s.mu.Unlock()
		s.wconn.Close() // no leader now, and none to come
		s.mconn.Close() // the checkpointer has exited
		s.checkpoint()
		err = errors.Join(s.db.Close(), s.j.close(), s.other.close())
	})
	return err
}
