package postgres

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolcall-lab/lab/internal/pgtest"
	"github.com/toolcall-lab/lab/model"
	"github.com/toolcall-lab/lab/store"
	"github.com/toolcall-lab/lab/store/storetest"
)

// TestConformance runs the suite every store passes (store/storetest) on
// a database of its own for each test; it skips without PostgreSQL.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store { return openPG(t) })
}

// openPG opens a Postgres store on a database of its own (pgtest).
func openPG(t testing.TB) *Store {
	t.Helper()
	s, err := Open(context.Background(), pgtest.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openPair opens two stores on one new database, as two replicas would.
func openPair(t testing.TB) (a, b *Store) {
	t.Helper()
	url := pgtest.Database(t)
	for _, s := range []**Store{&a, &b} {
		st, err := Open(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		*s = st
	}
	return a, b
}

// listen has s listen until ctx ends and returns once it hears: heard
// gets "<session> <seq>" for each notification (buffered, n), listened
// what Listen returned.
func listen(t testing.TB, ctx context.Context, s *Store, n int) (heard chan string, listened <-chan error) {
	t.Helper()
	heard = make(chan string, n)
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.Listen(ctx, 2*time.Second, func() { close(ready) }, func(id string, seq uint64) { heard <- fmt.Sprint(id, " ", seq) })
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Listen returned before ready: %v", err)
	}
	return heard, done
}

// TestPostgresReopensAndRefusesNewer: a second open (another replica, a
// restart) finds the data and migrates nothing; a schema from a newer
// release stops the lab with an error that says so.
func TestPostgresReopensAndRefusesNewer(t *testing.T) {
	t.Parallel()
	url := pgtest.Database(t)
	ctx := context.Background()
	s, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range storetest.Sample("a") {
		if err := s.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	other, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := other.Events(ctx, "a"); err != nil || !reflect.DeepEqual(got, storetest.Sample("a")) {
		t.Fatalf("the second store reads %v %+v", err, got)
	}
	other.Close()
	if _, err := s.pool.Exec(ctx, `UPDATE schema_version SET version = $1`, SchemaVersion()+1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err := Open(ctx, url); err == nil || !strings.Contains(err.Error(), "newer") {
		if s != nil {
			s.Close()
		}
		t.Fatalf("newer schema: %v", err)
	}
	if _, err := Open(ctx, "postgres://nobody:secret@127.0.0.1:1/none?connect_timeout=2"); err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("unreachable database: %v, want an error without the password", err)
	}
}

// TestPostgresListen: every committed append, from any store on the
// database, is heard as (session, seq); a refused one is not; a deletion is
// heard as seq 0; a session another replica deleted takes no append but a
// new first one.
func TestPostgresListen(t *testing.T) {
	t.Parallel()
	a, b := openPair(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	heard, listened := listen(t, ctx, a, 16)
	recs := storetest.Sample("s")
	for i, st := range []store.Store{a, b, a} {
		if err := st.Append(ctx, recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Append(ctx, recs[1]); !errors.Is(err, store.ErrSeqTaken) {
		t.Fatalf("taken seq: %v", err)
	}
	if err := b.Delete(ctx, []string{"s", "unknown"}); err != nil {
		t.Fatal(err)
	}
	if err := a.Append(ctx, recs[3]); err == nil || errors.Is(err, store.ErrSeqTaken) {
		t.Fatalf("append to a deleted session: %v, want a refusal that is not ErrSeqTaken", err)
	}
	if err := a.Append(ctx, recs[0]); err != nil {
		t.Fatalf("a new first append after delete: %v", err)
	}
	var got []string
	for len(got) < 6 {
		select {
		case h := <-heard:
			got = append(got, h)
		case <-time.After(10 * time.Second):
			t.Fatalf("heard only %q", got)
		}
	}
	if want := []string{"s 1", "s 2", "s 3", "s 0", "unknown 0", "s 1"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("heard %q, want %q", got, want)
	}
	cancel()
	if err := <-listened; err != nil {
		t.Fatalf("Listen after its context ended: %v, want nil", err)
	}
}

// TestPostgresMigratesVersion2 opens a database of schema version 2 (no
// prediction column), as a replica of the release before would have left
// it: its deliveries read back without a prediction, new ones keep theirs.
func TestPostgresMigratesVersion2(t *testing.T) {
	t.Parallel()
	url := pgtest.Database(t)
	ctx := context.Background()
	old, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	stmts := []string{`CREATE TABLE schema_version (version integer NOT NULL)`, `INSERT INTO schema_version (version) VALUES (2)`}
	stmts = append(append(append(stmts, pgMigrations[1]...), pgMigrations[2]...),
		`INSERT INTO sessions (id, created) VALUES ('a', 0)`,
		`INSERT INTO events (session, seq, time, actor, kind, message, message_kind, message_from, key_run, key_call, run, notice)
			VALUES ('a', 1, 0, 'student', 'queued', 1, 'deadline', 'student', 'run-1', 'lookup', 'run-1', 'Ready.')`,
		`INSERT INTO events (session, seq, time, actor, kind, message, run, notice)
			VALUES ('a', 2, 1, 'student', 'delivered', 1, 'run-1', 'Unresolved.')`)
	for _, q := range stmts {
		if _, err := old.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	old.Close(ctx)

	s, err := Open(ctx, url)
	if err != nil {
		t.Fatalf("opening a version 2 database: %v", err)
	}
	defer s.Close()
	recs, err := s.Events(ctx, "a")
	if err != nil || len(recs) != 2 || recs[1].Event.Kind != model.MessageDelivered || recs[1].Event.Prediction != model.NoPrediction {
		t.Fatalf("events after migrating: %v %+v", err, recs)
	}
	next := store.Record{Session: "a", Seq: 3, Time: storetest.T0, Run: "run-1", Notice: "Still unresolved.",
		Event: model.Event{Kind: model.MessageDelivered, By: model.Student, Message: model.Message{ID: 1}, Prediction: model.PredictUnresolved}}
	if err := s.Append(ctx, next); err != nil {
		t.Fatal(err)
	}
	if recs, err = s.Events(ctx, "a"); err != nil || len(recs) != 3 || recs[2].Event.Prediction != model.PredictUnresolved {
		t.Fatalf("a new prediction after migrating: %v %+v", err, recs)
	}
	var v int
	if err := s.pool.QueryRow(ctx, `SELECT version FROM schema_version`).Scan(&v); err != nil || v != SchemaVersion() {
		t.Fatalf("schema version %d (%v), want %d", v, err, SchemaVersion())
	}
}
