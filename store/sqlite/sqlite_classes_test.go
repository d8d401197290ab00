package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/toolcall-lab/lab/store"
	"github.com/toolcall-lab/lab/store/storetest"
)

// TestSQLiteMigratesVersion1 opens a data file written by the release before
// classes (schema version 1): its sessions stay, and classes work.
func TestSQLiteMigratesVersion1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lab.db")
	db := olderFile(t, path, 1)
	if _, err := db.Exec(`INSERT INTO sessions (id, name, created) VALUES ('old', 'Ada', ?)`, storetest.T0.UnixMilli()); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO events (session, seq, time, actor, kind) VALUES ('old', 1, ?, 'student', 'started')`, storetest.T0.UnixMilli()); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var v int
	if err := s.db.QueryRow(`SELECT version FROM schema_version`).Scan(&v); err != nil || v != SchemaVersion() || v < 2 {
		t.Fatalf("schema version %d (%v), want %d", v, err, SchemaVersion())
	}
	ctx := context.Background()
	if recs, err := s.Events(ctx, "old"); err != nil || len(recs) != 1 {
		t.Fatalf("the old session's events: %v %+v", err, recs)
	}
	if err := s.CreateClass(ctx, storetest.NewClass("a", "123456", storetest.T0)); err != nil {
		t.Fatal(err)
	}
	if err := s.AddMember(ctx, store.Member{Session: "new", Class: "a", Name: "Ada", Joined: storetest.T0}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := s.Members(ctx); err != nil || len(got) != 1 || got[0].Name != "Ada" {
		t.Fatalf("members after reopening: %v %+v", err, got)
	}
	if got, err := s.Class(ctx, "a"); err != nil || got.PredictionsRequired {
		t.Fatalf("a migrated class requires no predictions: %v %+v", err, got)
	}
}
