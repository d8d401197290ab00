package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/toolcall-lab/lab/model"
	"github.com/toolcall-lab/lab/store"
	"github.com/toolcall-lab/lab/store/storetest"
)

// TestConformance runs the suite every store passes (store/storetest).
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store { return openTemp(t, Options{}) })
}

func openTemp(t testing.TB, opt Options) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "data", "lab.db"), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestSQLiteReopens(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "lab.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, r := range storetest.Sample("a") {
		if err := s.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := s.Events(ctx, "a"); err != nil || !reflect.DeepEqual(got, storetest.Sample("a")) {
		t.Fatalf("after reopening: %v %+v", err, got)
	}
}

// TestSQLiteMigratesVersion1Predictions opens a file written by a release of schema
// version 1 (no prediction column): its events read back with no
// prediction, and new deliveries keep theirs.
func TestSQLiteMigratesVersion1Predictions(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "v1.db")
	olderFile(t, path, 1,
		`INSERT INTO sessions (id, created) VALUES ('a', 0)`,
		`INSERT INTO events (session, seq, time, actor, kind, message, message_kind, message_from, raw, key_run, key_call, run, notice)
			VALUES ('a', 1, 0, 'student', 'queued', 1, 'deadline', 'student', x'', 'run-1', 'lookup', 'run-1', 'Ready.')`,
		`INSERT INTO events (session, seq, time, actor, kind, message, run, notice)
			VALUES ('a', 2, 1, 'student', 'delivered', 1, 'run-1', 'Unresolved: deadline observed without a final reply.')`).Close()

	s, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("opening a version 1 file: %v", err)
	}
	defer s.Close()
	ctx := context.Background()
	recs, err := s.Events(ctx, "a")
	if err != nil || len(recs) != 2 {
		t.Fatalf("events after migrating: %v %+v", err, recs)
	}
	if p := recs[1].Event.Prediction; recs[1].Event.Kind != model.MessageDelivered || p != model.NoPrediction {
		t.Fatalf("an old delivery reads back as %+v", recs[1].Event)
	}
	next := store.Record{Session: "a", Seq: 3, Time: storetest.T0, Run: "run-1", Notice: "Still unresolved: no final reply.",
		Event: model.Event{Kind: model.MessageDelivered, By: model.Student, Message: model.Message{ID: 1}, Prediction: model.PredictUnresolved}}
	if err := s.Append(ctx, next); err != nil {
		t.Fatal(err)
	}
	if recs, err = s.Events(ctx, "a"); err != nil || len(recs) != 3 || recs[2].Event.Prediction != model.PredictUnresolved {
		t.Fatalf("a new prediction after migrating: %v %+v", err, recs)
	}
	var v int
	if err := s.db.QueryRow(`SELECT version FROM schema_version`).Scan(&v); err != nil || v != SchemaVersion() {
		t.Fatalf("schema version %d (%v), want %d", v, err, SchemaVersion())
	}
}

// TestSQLiteConvertsOlderEvents opens a file of schema version 6, whose
// builds kept a row per event in events and left newer ones in recent:
// every event reads back in order from the chunks, each session's last
// activity and next seq carry on, and a damaged chunk is an error.
func TestSQLiteConvertsOlderEvents(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "v6.db")
	db := olderFile(t, path, 6)
	a, b := storetest.Sample("a"), storetest.Sample("b")
	later := func(r store.Record, d time.Duration) store.Record { r.Time = r.Time.Add(d); return r }
	put := func(table string, r store.Record) {
		t.Helper()
		w, err := store.Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`INSERT INTO `+table+` (`+eventCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			w.Session, w.Seq, w.TimeMs, w.Actor, w.Kind, w.Message, w.MsgKind, w.MsgFrom, w.Raw, w.KeyRun, w.KeyCall, w.Run, w.Notice, w.Prediction); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"a", "b"} {
		if _, err := db.Exec(`INSERT INTO sessions (id, created) VALUES (?, ?)`, id, storetest.T0.UnixMilli()); err != nil {
			t.Fatal(err)
		}
	}
	// a: its first five in events, the rest in recent, taking turns with b's.
	for i := range a[:5] {
		put("events", a[i])
	}
	for i := 5; i < len(a); i++ {
		a[i] = later(a[i], time.Duration(i)*time.Minute)
		put("recent", a[i])
		put("recent", b[i-5])
	}
	db.Close()

	s, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("opening a version 6 file: %v", err)
	}
	defer s.Close()
	ctx := context.Background()
	if got, err := s.Events(ctx, "a"); err != nil || !reflect.DeepEqual(got, a) {
		t.Fatalf("a after converting: %v %+v", err, got)
	}
	if got, err := s.EventsAfter(ctx, "b", 2); err != nil || !reflect.DeepEqual(got, b[2:len(a)-5]) {
		t.Fatalf("b after converting: %v %+v", err, got)
	}
	for _, table := range []string{"events", "recent"} {
		var n int
		if err := s.db.QueryRow(`SELECT COUNT(*) FROM ` + table).Scan(&n); err != nil || n != 0 {
			t.Fatalf("%d rows left in %s (%v)", n, table, err)
		}
	}
	sessions, err := s.Sessions(ctx)
	if err != nil || len(sessions) != 2 || !sessions[0].LastActive.Equal(a[len(a)-1].Time) {
		t.Fatalf("sessions %+v (%v), want a last active at %v", sessions, err, a[len(a)-1].Time)
	}
	if err := s.Append(ctx, a[0]); !errors.Is(err, store.ErrSeqTaken) {
		t.Fatalf("appending a's first seq again: %v, want ErrSeqTaken", err)
	}
	next := storetest.Walkthrough("a", uint64(len(a)+1))
	if err := s.Append(ctx, next); err != nil {
		t.Fatalf("appending a's next seq: %v", err)
	}

	if _, err := s.db.Exec(`UPDATE chunks SET data = substr(data, 1, length(data) - 1) WHERE session = 'b'`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Events(ctx, "b"); err == nil || !strings.Contains(err.Error(), "damaged chunk") {
		t.Fatalf("reading a damaged chunk: %v, want an error", err)
	}
}

// olderFile writes at path a data file as a release of schema version v
// left it, with stmts run on it, and returns it open.
func olderFile(t *testing.T, path string, v int, stmts ...string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	schema := []string{`CREATE TABLE schema_version (version INTEGER NOT NULL)`, fmt.Sprintf(`INSERT INTO schema_version (version) VALUES (%d)`, v)}
	for _, m := range migrations[1 : v+1] {
		schema = append(schema, m...)
	}
	for _, q := range append(schema, stmts...) {
		if _, err := db.Exec(q); err != nil {
			db.Close()
			t.Fatalf("%s: %v", q, err)
		}
	}
	return db
}

func TestSQLiteRefusesBadFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	corrupt := filepath.Join(dir, "corrupt.db")
	if err := os.WriteFile(corrupt, bytes.Repeat([]byte("not a database "), 512), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(corrupt, Options{}); err == nil || !strings.Contains(err.Error(), corrupt) {
		t.Fatalf("corrupt file: %v, want an error naming it", err)
	}

	newer := filepath.Join(dir, "newer.db")
	s, err := Open(newer, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := sql.Open("sqlite", newer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE schema_version SET version = ?`, SchemaVersion()+1); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(newer, Options{}); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("newer schema: %v", err)
	}
}

// TestSQLiteLockedRecovers holds the write lock from another connection, as
// another process would: appends still go to the journal, but Ready and
// any other write fail, and the journal's rows stay out of the database;
// once the lock is released everything is stored.
func TestSQLiteLockedRecovers(t *testing.T) {
	t.Parallel()
	s := openTemp(t, Options{BusyTimeout: 50 * time.Millisecond})
	ctx := context.Background()
	recs := storetest.Sample("a")
	if err := s.Append(ctx, recs[0]); err != nil {
		t.Fatal(err)
	}
	other, err := sql.Open("sqlite", s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN EXCLUSIVE`); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, recs[1]); err != nil {
		t.Fatalf("append to the journal while the database is locked: %v", err)
	}
	if err := s.Ready(ctx); err == nil {
		t.Fatal("Ready while locked")
	}
	if err := s.Delete(ctx, []string{"b"}); err == nil {
		t.Fatal("a deletion while locked")
	}
	if _, err := conn.ExecContext(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	waitReady(t, s, true) // Ready trusts its last probe for up to a second
	if err := s.Append(ctx, recs[2]); err != nil {
		t.Fatalf("append after unlock: %v", err)
	}
	if got, _ := s.Events(ctx, "a"); !reflect.DeepEqual(got, recs[:3]) {
		t.Fatalf("events %+v", got)
	}
	if err := s.flush(ctx); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := other.QueryRowContext(ctx, `SELECT SUM(last - first + 1) FROM chunks WHERE session = 'a'`).Scan(&n); err != nil || n != 3 {
		t.Fatalf("%d rows in the database (%v), want 3", n, err)
	}
}

// BenchmarkAppend measures appends per second from many concurrent sessions
// on a real file, with group commit (batch 256) and without (batch 1), with
// and without an fsync per commit.
func BenchmarkAppend(b *testing.B) {
	for _, bc := range []struct {
		batch int
		full  bool
	}{{1, false}, {256, false}, {1, true}, {256, true}} {
		b.Run(fmt.Sprintf("batch=%d/fullsync=%v", bc.batch, bc.full), func(b *testing.B) {
			s := openTemp(b, Options{MaxBatch: bc.batch, FullSync: bc.full})
			var sessions atomic.Int64
			b.SetParallelism(32) // 32 appenders per core
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				id := fmt.Sprintf("s%d", sessions.Add(1))
				ev := model.Event{Kind: model.RunStarted}
				for seq := uint64(1); pb.Next(); seq++ {
					if err := s.Append(context.Background(), store.Record{Session: id, Seq: seq, Time: storetest.T0, Event: ev, Run: "run-2", Notice: "Started"}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "appends/s")
		})
	}
}

// TestSQLiteSyncMode: NORMAL unless FullSync asks for an fsync per commit.
func TestSQLiteSyncMode(t *testing.T) {
	t.Parallel()
	for full, want := range map[bool]int{false: 1, true: 2} {
		s := openTemp(t, Options{FullSync: full})
		var got int
		if err := s.db.QueryRow("PRAGMA synchronous").Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("FullSync %v: synchronous = %d, want %d", full, got, want)
		}
	}
}

// cpuTime is this process's user plus system CPU time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchStores are what the append benchmarks measure: the SQLite store
// as the lab opens it, and appendLog, the prototype of a journal alone
// (appendlog_test.go). finish does what the appends left to do in the
// background (moving SQLite's journal into the database), which is their
// cost too.
func benchStores(b *testing.B, bench func(b *testing.B, append func(store.Record) error, finish func())) {
	ctx := context.Background()
	b.Run("sqlite", func(b *testing.B) {
		s := openTemp(b, Options{})
		bench(b, func(r store.Record) error { return s.Append(ctx, r) }, func() {
			if err := s.flush(ctx); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("log", func(b *testing.B) {
		l, err := openAppendLog(filepath.Join(b.TempDir(), "log"))
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		bench(b, func(r store.Record) error { return l.Append(ctx, r) }, func() {})
	})
}

// BenchmarkAppendSerial is one student's closed loop as labbench's rtt
// scenario drives it: appends one at a time (so no group commit helps), a
// new session every 100, the walkthrough's records (storetest.Walkthrough).
// Per op it is the durable path's whole cost; cpu-µs/op is the process's
// CPU time per append.
func BenchmarkAppendSerial(b *testing.B) {
	benchStores(b, func(b *testing.B, append func(store.Record) error, finish func()) {
		var id string
		var seq uint64
		b.ReportAllocs()
		b.ResetTimer()
		c0 := cpuTime(b)
		for i := range b.N {
			if i%100 == 0 {
				id, seq = uuid.NewString(), 0
			}
			seq++
			if err := append(storetest.Walkthrough(id, seq)); err != nil {
				b.Fatal(err)
			}
		}
		finish()
		b.ReportMetric(float64((cpuTime(b)-c0).Microseconds())/float64(b.N), "cpu-µs/op")
	})
}

// BenchmarkAppendLoops is labbench's throughput scenario's store: 50
// closed loops, a new session every 100 appends, group commit.
func BenchmarkAppendLoops(b *testing.B) {
	benchStores(b, func(b *testing.B, append func(store.Record) error, finish func()) {
		const loops = 50
		per := b.N/loops + 1
		b.ReportAllocs()
		b.ResetTimer()
		c0 := cpuTime(b)
		var wg sync.WaitGroup
		for range loops {
			wg.Go(func() {
				var id string
				var seq uint64
				for i := range per {
					if i%100 == 0 {
						id, seq = uuid.NewString(), 0
					}
					seq++
					if err := append(storetest.Walkthrough(id, seq)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		finish()
		b.ReportMetric(float64((cpuTime(b)-c0).Microseconds())/float64(per*loops), "cpu-µs/op")
	})
}

// TestSQLiteJournal: appends land in the journal and move into events
// in the background; reads see them the same wherever they are, across a
// reopen, and an append that is not its session's next seq is refused.
func TestSQLiteJournal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lab.db")
	s, err := Open(path, Options{every: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	recs := storetest.Sample("a")
	count := func() (n int) {
		t.Helper()
		if err := s.db.QueryRow(`SELECT COALESCE(SUM(last - first + 1), 0) FROM chunks`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, r := range recs[:3] {
		if err := s.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if count() != 0 || len(s.pending) != 3 {
		t.Fatalf("before a move: %d rows in events, %d pending", count(), len(s.pending))
	}
	if got, err := s.Events(ctx, "a"); err != nil || !reflect.DeepEqual(got, recs[:3]) {
		t.Fatalf("from the journal: %v %+v", err, got)
	}
	if err := s.flush(ctx); err != nil {
		t.Fatal(err)
	}
	if count() != 3 || len(s.pending) != 0 || len(s.bySession) != 0 {
		t.Fatalf("after a move: %d rows in events, %d pending", count(), len(s.pending))
	}
	if fi, err := os.Stat(path + journalSuffix); err != nil || fi.Size() != int64(journalHeaderSize) {
		t.Fatalf("the journal after a move: %v, %d bytes, want its header alone", err, fi.Size())
	}
	for _, r := range recs[3:] {
		if err := s.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	for _, bad := range []uint64{recs[len(recs)-1].Seq, recs[len(recs)-1].Seq + 2} {
		r := recs[0]
		r.Seq = bad
		if err := s.Append(ctx, r); err == nil {
			t.Fatalf("seq %d appended after seq %d", bad, recs[len(recs)-1].Seq)
		}
	}
	b := storetest.Sample("b")[0]
	b.Seq = 2
	if err := s.Append(ctx, b); err == nil {
		t.Fatal("a new session's first append with seq 2 was stored")
	}
	if got, err := s.Events(ctx, "a"); err != nil || !reflect.DeepEqual(got, recs) {
		t.Fatalf("from both: %v %+v", err, got)
	}
	if got, err := s.EventsAfter(ctx, "a", 2); err != nil || !reflect.DeepEqual(got, recs[2:]) {
		t.Fatalf("after seq 2, from both: %v %+v", err, got)
	}
	if len(s.pending) == 0 {
		t.Fatal("nothing left in the journal to test a reopen with")
	}
	if _, err := Open(path, Options{}); err == nil {
		t.Fatal("a second store opened the data file the first has open")
	}
	// A restart after kill -9: the files as they are, opened elsewhere.
	crash := crashImage(t, path, nil)
	s.Close()
	if s, err = Open(crash, Options{every: time.Hour}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if count() != len(recs) || len(s.pending) != 0 {
		t.Fatalf("after a restart: %d rows in events, %d pending", count(), len(s.pending))
	}
	if got, err := s.Events(ctx, "a"); err != nil || !reflect.DeepEqual(got, recs) {
		t.Fatalf("after a restart: %v %+v", err, got)
	}
	if list, err := s.Sessions(ctx); err != nil || len(list) != 1 || !list[0].LastActive.Equal(recs[len(recs)-1].Time) {
		t.Fatalf("sessions: %v %+v", err, list)
	}
	next := recs[0]
	next.Seq = recs[len(recs)-1].Seq + 1
	if err := s.Append(ctx, next); err != nil {
		t.Fatalf("the next seq after a restart: %v", err)
	}
	if err := s.Delete(ctx, []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Events(ctx, "a"); err != nil || len(got) != 0 || count() != 0 {
		t.Fatalf("after delete: %v %+v", err, got)
	}
	if err := s.Append(ctx, recs[0]); err != nil {
		t.Fatalf("seq 1 after a delete: %v", err)
	}
	if got, err := s.Events(ctx, "a"); err != nil || !reflect.DeepEqual(got, recs[:1]) {
		t.Fatalf("made again after its deletion: %v %+v", err, got)
	}
}

// crashImage copies the store's files at path (the database, its log and
// its journal) into a new directory, as a crash would leave them if
// nothing was being written, with the journal replaced by journal when
// given, and returns the copy's path.
func crashImage(t *testing.T, path string, journal []byte) string {
	t.Helper()
	crash := filepath.Join(t.TempDir(), "lab.db")
	for _, suffix := range []string{"", "-wal", journalSuffix, journalSuffix2} {
		data, err := os.ReadFile(path + suffix)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if suffix == journalSuffix && journal != nil {
			data = journal
		}
		if err := os.WriteFile(crash+suffix, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return crash
}

// TestSQLiteJournalRestarts: a restart takes in what the journal holds of
// its epoch and cuts a torn tail (a write cut short by kill -9, never
// acknowledged); it skips a journal of an earlier epoch, whose rows the
// database took in already (a crash between a move and the journal's
// emptying), so a session deleted since does not come back; and it
// refuses a journal newer than the database.
func TestSQLiteJournalRestarts(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "lab.db")
	s, err := Open(path, Options{every: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	recs := storetest.Sample("a")
	for _, r := range recs {
		if err := s.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	journal, err := os.ReadFile(path + journalSuffix)
	if err != nil {
		t.Fatal(err)
	}

	torn := append(slices.Clone(journal), journal[journalHeaderSize:journalHeaderSize+20]...)
	c, err := Open(crashImage(t, path, torn), Options{every: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.Events(ctx, "a"); err != nil || !reflect.DeepEqual(got, recs) {
		t.Fatalf("with a torn tail: %v %+v", err, got)
	}
	next := recs[0]
	next.Seq = recs[len(recs)-1].Seq + 1
	if err := c.Append(ctx, next); err != nil {
		t.Fatal(err)
	}
	c.Close()

	if err := s.flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, []string{"a"}); err != nil {
		t.Fatal(err)
	}
	c, err = Open(crashImage(t, path, journal), Options{every: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.Events(ctx, "a"); err != nil || len(got) != 0 {
		t.Fatalf("an earlier epoch's journal was taken in: %v %+v", err, got)
	}
	c.Close()

	newer := slices.Clone(journal)
	binary.LittleEndian.PutUint64(newer[len(journalMagic):], 99)
	if _, err := Open(crashImage(t, path, newer), Options{}); err == nil || !strings.Contains(err.Error(), "newer than its database") || !strings.Contains(err.Error(), "move it away") {
		t.Fatalf("a journal of a later epoch: %v", err)
	}
}

// TestSQLiteJournalMovesWhenFull: past journalMoveRows the leader moves
// the journal into the database without waiting for the checkpointer.
func TestSQLiteJournalMovesWhenFull(t *testing.T) {
	t.Parallel()
	s := openTemp(t, Options{every: time.Hour})
	ctx := context.Background()
	for seq := uint64(1); seq <= journalMoveRows+10; seq++ {
		if err := s.Append(ctx, storetest.Walkthrough("a", seq)); err != nil {
			t.Fatal(err)
		}
	}
	// The mover takes the full segment beside the appends.
	waitMoved(t, s, func() bool { return s.pendingRows() == 10 })
	if got, err := s.Events(ctx, "a"); err != nil || len(got) != journalMoveRows+10 {
		t.Fatalf("%v: %d events", err, len(got))
	}
}

// waitMoved waits up to 10 s for the mover to have made moved true.
func waitMoved(t *testing.T, s *Store, moved func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !moved(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not moved within 10 s: %d rows pending", s.pendingRows())
		}
	}
}

// TestSQLiteJournalMovesWhenBig: past journalMoveBytes of journal, big
// replies move long before journalMoveRows.
func TestSQLiteJournalMovesWhenBig(t *testing.T) {
	t.Parallel()
	s := openTemp(t, Options{every: time.Hour})
	ctx := context.Background()
	raw := strings.Repeat("x", 64<<10)
	const n = 2 * journalMoveBytes / (64 << 10) // twice the bound's worth
	for seq := uint64(1); seq <= n; seq++ {
		r := store.Record{Session: "a", Seq: seq, Time: storetest.T0, Run: "run-1",
			Event: model.Event{Kind: model.MessageQueued, By: model.Student, Message: model.Message{ID: int(seq), Kind: model.ReplyMessage, From: model.Student, Raw: raw}}}
		if err := s.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	waitMoved(t, s, func() bool { return s.pendingRows() < n/2+1 })
	if s.j.size > journalMoveBytes+(64<<10)+1024 {
		t.Fatalf("journal %d bytes: want at most a bound's worth", s.j.size)
	}
	if got, err := s.Events(ctx, "a"); err != nil || len(got) != n {
		t.Fatalf("%v: %d events", err, len(got))
	}
}

// TestSQLiteJournalMovesWhenIdle: while appends keep coming, the
// checkpointer's moveLooks-th look in a row has the leader hand what is
// pending to the mover after its next commit (moves paced by time, not by
// a full journal); once they pause, it moves the journal itself.
func TestSQLiteJournalMovesWhenIdle(t *testing.T) {
	t.Parallel()
	s := openTemp(t, Options{every: time.Hour})
	ctx := context.Background()
	if err := s.Append(ctx, storetest.Walkthrough("a", 1)); err != nil {
		t.Fatal(err)
	}
	var last uint64
	for look := 1; look < moveLooks; look++ {
		if last = s.moveIfIdle(last); s.moveDue.Load() {
			t.Fatalf("hand-off due at look %d of %d", look, moveLooks)
		}
		if err := s.Append(ctx, storetest.Walkthrough("a", uint64(look+1))); err != nil { // appends keep coming
			t.Fatal(err)
		}
	}
	last = s.moveIfIdle(last)
	if s.pendingRows() != moveLooks || !s.moveDue.Load() {
		t.Fatalf("appends coming: %d rows pending (want %d), hand-off due %v", s.pendingRows(), moveLooks, s.moveDue.Load())
	}
	if err := s.Append(ctx, storetest.Walkthrough("a", moveLooks+1)); err != nil {
		t.Fatal(err)
	}
	waitMoved(t, s, func() bool { return s.pendingRows() == 0 })
	if err := s.Append(ctx, storetest.Walkthrough("a", moveLooks+2)); err != nil {
		t.Fatal(err)
	}
	last = s.moveIfIdle(last)
	if s.moveIfIdle(last); s.pendingRows() != 0 {
		t.Fatalf("appends paused: %d rows still pending", s.pendingRows())
	}
	if got, err := s.Events(ctx, "a"); err != nil || len(got) != moveLooks+2 {
		t.Fatalf("%v: %d events", err, len(got))
	}
}

// TestSQLiteGroupCommit: many appenders at once, with batches small enough
// that the leadership passes from appender to appender, all commit, each
// session in order; Close while others still append commits what it
// accepted and refuses the rest, and a reopen finds exactly what was
// acknowledged.
func TestSQLiteGroupCommit(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "lab.db")
	s, err := Open(path, Options{MaxBatch: 3, every: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const appenders, each = 16, 40
	acked := make([]int, appenders) // appends acknowledged, by appender
	var wg sync.WaitGroup
	for a := range appenders {
		wg.Go(func() {
			id := fmt.Sprintf("s%d", a)
			for seq := uint64(1); ; seq++ {
				if seq > each && a < appenders/2 {
					return // the rest append until Close
				}
				err := s.Append(ctx, storetest.Walkthrough(id, seq))
				if errors.Is(err, store.ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("%s seq %d: %v", id, seq, err)
					return
				}
				acked[a] = int(seq)
				if a%4 == 0 {
					if err := s.Ready(ctx); err != nil && !errors.Is(err, store.ErrClosed) {
						t.Errorf("ready: %v", err)
					}
				}
			}
		})
	}
	for a := range appenders / 2 {
		id := fmt.Sprintf("s%d", a)
		deadline := time.Now().Add(30 * time.Second)
		for {
			got, err := s.Events(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == each {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d events of %d", id, len(got), each)
			}
			time.Sleep(time.Millisecond)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if s, err = Open(path, Options{}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for a := range appenders {
		id := fmt.Sprintf("s%d", a)
		got, err := s.Events(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != acked[a] {
			t.Errorf("%s: %d events stored, %d acknowledged", id, len(got), acked[a])
		}
		for i, r := range got {
			if want := storetest.Walkthrough(id, uint64(i+1)); !reflect.DeepEqual(r, want) {
				t.Fatalf("%s event %d: %+v, want %+v", id, i, r, want)
			}
		}
	}
}
