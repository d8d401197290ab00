package store

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/toolcall-lab/lab/model"
)

// classStore is what every implementation offers for classes.
type classStore interface {
	store
	Classes
}

func classStores() map[string]func(t *testing.T) classStore {
	return map[string]func(t *testing.T) classStore{
		"memory":   func(*testing.T) classStore { return NewMemory() },
		"sqlite":   func(t *testing.T) classStore { return openTemp(t, Options{}) },
		"postgres": func(t *testing.T) classStore { return openPG(t) },
	}
}

func newClass(id, code string, at time.Time) Class {
	return Class{ID: id, Code: code, Title: "Class " + id, Open: true, Created: at, KeyHash: HashSecret("key-" + id)}
}

func TestClasses(t *testing.T) {
	for name, open := range classStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := open(t)
			a, b := newClass("a", "123456", t0), newClass("b", "654321", t0.Add(time.Second))
			for _, c := range []Class{a, b} {
				if err := s.CreateClass(ctx, c); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.CreateClass(ctx, newClass("c", "123456", t0)); !errors.Is(err, ErrCodeTaken) {
				t.Fatalf("a second open class with code 123456: %v, want ErrCodeTaken", err)
			}
			if got, err := s.Classes(ctx); err != nil || !reflect.DeepEqual(got, []Class{a, b}) {
				t.Fatalf("Classes = %v %+v", err, got)
			}
			if got, err := s.Class(ctx, "b"); err != nil || got != b {
				t.Fatalf("Class(b) = %v %+v", err, got)
			}
			if _, err := s.Class(ctx, "zz"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Class(zz): %v", err)
			}
			if got, err := s.ClassByKey(ctx, HashSecret("key-a")); err != nil || got.ID != "a" {
				t.Fatalf("ClassByKey: %v %+v", err, got)
			}
			if _, err := s.ClassByKey(ctx, HashSecret("nope")); !errors.Is(err, ErrNotFound) {
				t.Fatalf("ClassByKey(nope): %v", err)
			}

			// Closing frees the code for another open class; the code then
			// finds the open one, and the closed one once that closes too.
			if err := s.SetClassOpen(ctx, "a", false, a.Code); err != nil {
				t.Fatal(err)
			}
			if got, err := s.ClassByCode(ctx, "123456"); err != nil || got.ID != "a" || got.Open {
				t.Fatalf("ClassByCode of a closed class: %v %+v", err, got)
			}
			c := newClass("c", "123456", t0.Add(2*time.Second))
			if err := s.CreateClass(ctx, c); err != nil {
				t.Fatalf("reusing a closed class's code: %v", err)
			}
			if got, err := s.ClassByCode(ctx, "123456"); err != nil || got.ID != "c" {
				t.Fatalf("ClassByCode prefers the open class: %v %+v", err, got)
			}
			if err := s.SetClassOpen(ctx, "a", true, a.Code); !errors.Is(err, ErrCodeTaken) {
				t.Fatalf("reopening onto a taken code: %v", err)
			}
			if err := s.SetClassOpen(ctx, "a", true, "111111"); err != nil {
				t.Fatal(err)
			}
			if got, _ := s.Class(ctx, "a"); !got.Open || got.Code != "111111" {
				t.Fatalf("reopened: %+v", got)
			}
			if err := s.SetClassOpen(ctx, "zz", false, "000000"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("closing an unknown class: %v", err)
			}
			if _, err := s.ClassByCode(ctx, "999999"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("unknown code: %v", err)
			}
		})
	}
}

func TestMembers(t *testing.T) {
	for name, open := range classStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := open(t)
			for _, c := range []Class{newClass("a", "123456", t0), newClass("b", "654321", t0)} {
				if err := s.CreateClass(ctx, c); err != nil {
					t.Fatal(err)
				}
			}
			ada := Member{Session: "s1", Class: "a", Name: "Ada  Lovelace", Joined: t0}
			bob := Member{Session: "s2", Class: "a", Name: "Bob", Joined: t0.Add(time.Second)}
			ada2 := Member{Session: "s3", Class: "b", Name: "ada lovelace", Joined: t0}
			for _, m := range []Member{ada, bob, ada2} {
				if err := s.AddMember(ctx, m); err != nil {
					t.Fatalf("AddMember(%+v): %v", m, err)
				}
			}
			if err := s.AddMember(ctx, Member{Session: "s4", Class: "a", Name: "ADA lovelace", Joined: t0}); !errors.Is(err, ErrNameTaken) {
				t.Fatalf("same name in another case: %v, want ErrNameTaken", err)
			}
			if err := s.AddMember(ctx, Member{Session: "s4", Class: "zz", Name: "X", Joined: t0}); !errors.Is(err, ErrNotFound) {
				t.Fatalf("unknown class: %v", err)
			}
			if err := s.SetClassOpen(ctx, "b", false, "654321"); err != nil {
				t.Fatal(err)
			}
			if err := s.AddMember(ctx, Member{Session: "s4", Class: "b", Name: "X", Joined: t0}); !errors.Is(err, ErrClassClosed) {
				t.Fatalf("closed class: %v", err)
			}
			if got, err := s.Members(ctx); err != nil || !reflect.DeepEqual(got, []Member{ada, bob, ada2}) {
				t.Fatalf("Members = %v %+v", err, got)
			}
			if got, err := s.MemberOf(ctx, "s2"); err != nil || got != bob {
				t.Fatalf("MemberOf(s2) = %v %+v, want %+v", err, got, bob)
			}
			if _, err := s.MemberOf(ctx, "s4"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("MemberOf a session that joined nothing: %v, want ErrNotFound", err)
			}

			// Deleting a session frees its name.
			for _, sid := range []string{"s1", "s2", "s3"} {
				if err := s.Append(ctx, Record{Session: sid, Seq: 1, Time: t0, Event: model.Event{Kind: model.Renamed, By: model.Student, Name: "n"}}); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Delete(ctx, []string{"s1"}); err != nil {
				t.Fatal(err)
			}
			if err := s.AddMember(ctx, Member{Session: "s5", Class: "a", Name: "Ada Lovelace", Joined: t0.Add(2 * time.Second)}); err != nil {
				t.Fatalf("a deleted session's name: %v", err)
			}
			if err := s.RemoveMembers(ctx, []string{"s5"}); err != nil {
				t.Fatal(err)
			}

			// Deleting a class deletes its sessions and their events, and
			// nobody else's.
			l := Login{IDHash: HashSecret("login"), Class: "a", Credential: HashSecret("key-a"), Expires: t0.Add(time.Hour)}
			if err := s.SaveLogin(ctx, l, t0, 10); err != nil {
				t.Fatal(err)
			}
			gone, err := s.DeleteClass(ctx, "a")
			if err != nil || !reflect.DeepEqual(gone, []string{"s2"}) {
				t.Fatalf("DeleteClass = %v %v", err, gone)
			}
			if recs, _ := s.Events(ctx, "s2"); len(recs) != 0 {
				t.Fatalf("a deleted class's session kept %d events", len(recs))
			}
			if recs, _ := s.Events(ctx, "s3"); len(recs) != 1 {
				t.Fatalf("another class's session lost its events")
			}
			if got, _ := s.Members(ctx); !reflect.DeepEqual(got, []Member{ada2}) {
				t.Fatalf("members after DeleteClass: %+v", got)
			}
			if _, err := s.Login(ctx, l.IDHash); !errors.Is(err, ErrNotFound) {
				t.Fatalf("a deleted class's login: %v", err)
			}
			if _, err := s.DeleteClass(ctx, "a"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("deleting twice: %v", err)
			}
		})
	}
}

func TestLogins(t *testing.T) {
	for name, open := range classStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := open(t)
			if err := s.CreateClass(ctx, newClass("a", "123456", t0)); err != nil {
				t.Fatal(err)
			}
			login := func(id, class string, expires time.Time) Login {
				return Login{IDHash: HashSecret(id), Class: class, Credential: HashSecret("cred " + class), Expires: expires}
			}
			server := login("l1", "", t0.Add(3*time.Hour))
			class := login("l2", "a", t0.Add(2*time.Hour))
			old := login("l0", "", t0.Add(time.Minute))
			for _, l := range []Login{old, server, class} {
				if err := s.SaveLogin(ctx, l, t0, 10); err != nil {
					t.Fatal(err)
				}
			}
			if got, err := s.Login(ctx, server.IDHash); err != nil || got != server {
				t.Fatalf("Login = %v %+v, want %+v", err, got, server)
			}
			// An expired login goes with the next save; past keep, the
			// soonest to expire goes.
			if err := s.SaveLogin(ctx, login("l3", "", t0.Add(4*time.Hour)), t0.Add(2*time.Minute), 3); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Login(ctx, old.IDHash); !errors.Is(err, ErrNotFound) {
				t.Fatalf("expired login kept: %v", err)
			}
			if err := s.SaveLogin(ctx, login("l4", "", t0.Add(5*time.Hour)), t0.Add(2*time.Minute), 3); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Login(ctx, class.IDHash); !errors.Is(err, ErrNotFound) {
				t.Fatalf("the soonest to expire survived past keep: %v", err)
			}
			for _, id := range []string{"l1", "l3", "l4"} {
				if _, err := s.Login(ctx, HashSecret(id)); err != nil {
					t.Fatalf("login %s: %v", id, err)
				}
			}
			// Rotating a class key ends its logins only.
			cl := login("l5", "a", t0.Add(time.Hour))
			if err := s.SaveLogin(ctx, cl, t0, 10); err != nil {
				t.Fatal(err)
			}
			if err := s.SetClassKey(ctx, "a", HashSecret("new key")); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Login(ctx, cl.IDHash); !errors.Is(err, ErrNotFound) {
				t.Fatalf("login after rotation: %v", err)
			}
			if got, err := s.ClassByKey(ctx, HashSecret("new key")); err != nil || got.ID != "a" {
				t.Fatalf("new key: %v %+v", err, got)
			}
			if _, err := s.ClassByKey(ctx, HashSecret("key-a")); !errors.Is(err, ErrNotFound) {
				t.Fatalf("old key still works: %v", err)
			}
			if err := s.SetClassKey(ctx, "zz", HashSecret("x")); !errors.Is(err, ErrNotFound) {
				t.Fatalf("rotating an unknown class: %v", err)
			}
			if err := s.DeleteLogin(ctx, server.IDHash); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Login(ctx, server.IDHash); !errors.Is(err, ErrNotFound) {
				t.Fatalf("deleted login: %v", err)
			}
			if err := s.DeleteLogin(ctx, server.IDHash); err != nil {
				t.Fatalf("deleting an unknown login: %v", err)
			}
			s.Close()
			if _, err := s.Classes(ctx); !errors.Is(err, ErrClosed) {
				t.Fatalf("after close: %v", err)
			}
		})
	}
}

// TestSQLiteMigratesVersion1 opens a data file written by the release before
// classes (schema version 1): its sessions stay, and classes work.
func TestSQLiteMigratesVersion1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lab.db")
	db := olderFile(t, path, 1)
	if _, err := db.Exec(`INSERT INTO sessions (id, name, created) VALUES ('old', 'Ada', ?)`, t0.UnixMilli()); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO events (session, seq, time, actor, kind) VALUES ('old', 1, ?, 'student', 'started')`, t0.UnixMilli()); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s, err := OpenSQLite(path, Options{})
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
	if err := s.CreateClass(ctx, newClass("a", "123456", t0)); err != nil {
		t.Fatal(err)
	}
	if err := s.AddMember(ctx, Member{Session: "new", Class: "a", Name: "Ada", Joined: t0}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = OpenSQLite(path, Options{})
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

func TestCodes(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		c := NewCode()
		if !ValidCode(c) {
			t.Fatalf("NewCode() = %q", c)
		}
		seen[c] = true
	}
	if len(seen) < 190 {
		t.Fatalf("200 codes gave only %d distinct ones", len(seen))
	}
	for _, bad := range []string{"", "12345", "1234567", "12345a", "١٢٣٤٥٦", " 12345"} {
		if ValidCode(bad) {
			t.Errorf("ValidCode(%q) = true", bad)
		}
	}
	if NameKey("  Ada   LOVELACE ") != "ada lovelace" {
		t.Errorf("NameKey = %q", NameKey("  Ada   LOVELACE "))
	}
	if a, b := NewSecret(), NewSecret(); a == b || len(a) < 26 {
		t.Errorf("NewSecret gave %q and %q", a, b)
	}
}

// TestClassSettings: predictions required is stored at creation, changed
// later, and kept by a reopened data file.
func TestClassSettings(t *testing.T) {
	for name, open := range classStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := open(t)
			a, b := newClass("a", "123456", t0), newClass("b", "654321", t0)
			a.PredictionsRequired = true
			for _, c := range []Class{a, b} {
				if err := s.CreateClass(ctx, c); err != nil {
					t.Fatal(err)
				}
			}
			if got, err := s.Class(ctx, "a"); err != nil || !got.PredictionsRequired {
				t.Fatalf("a class made requiring predictions: %v %+v", err, got)
			}
			if err := s.SetClassPredictions(ctx, "a", false); err != nil {
				t.Fatal(err)
			}
			if err := s.SetClassPredictions(ctx, "b", true); err != nil {
				t.Fatal(err)
			}
			if err := s.SetClassPredictions(ctx, "zz", true); !errors.Is(err, ErrNotFound) {
				t.Fatalf("an unknown class: %v, want ErrNotFound", err)
			}
			got, err := s.Classes(ctx)
			if err != nil || len(got) != 2 || got[0].PredictionsRequired || !got[1].PredictionsRequired {
				t.Fatalf("Classes after the change: %v %+v", err, got)
			}
			if got, err := s.ClassByCode(ctx, "654321"); err != nil || !got.PredictionsRequired {
				t.Fatalf("ClassByCode: %v %+v", err, got)
			}
		})
	}
}

// TestRenameMember: a member's rename keeps names unique in its class.
func TestRenameMember(t *testing.T) {
	for name, open := range classStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := open(t)
			for _, c := range []Class{newClass("a", "123456", t0), newClass("b", "654321", t0)} {
				if err := s.CreateClass(ctx, c); err != nil {
					t.Fatal(err)
				}
			}
			for _, m := range []Member{
				{Session: "s1", Class: "a", Name: "Ada", Joined: t0},
				{Session: "s2", Class: "a", Name: "Bob", Joined: t0.Add(time.Second)},
				{Session: "s3", Class: "b", Name: "Cy", Joined: t0},
			} {
				if err := s.AddMember(ctx, m); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.RenameMember(ctx, "s2", "ada"); !errors.Is(err, ErrNameTaken) {
				t.Fatalf("renaming to a name taken in the class: %v, want ErrNameTaken", err)
			}
			if err := s.RenameMember(ctx, "s1", "ADA"); err != nil {
				t.Fatalf("renaming to one's own name in another case: %v", err)
			}
			if err := s.RenameMember(ctx, "s2", "Cy"); err != nil {
				t.Fatalf("a name taken in another class only: %v", err)
			}
			if err := s.RenameMember(ctx, "zz", "Dee"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("no such member: %v, want ErrNotFound", err)
			}
			// The old name is free, the new one taken at the door.
			if err := s.AddMember(ctx, Member{Session: "s4", Class: "a", Name: "bob", Joined: t0}); err != nil {
				t.Fatalf("the renamed member's old name: %v", err)
			}
			if err := s.AddMember(ctx, Member{Session: "s5", Class: "a", Name: "cy", Joined: t0}); !errors.Is(err, ErrNameTaken) {
				t.Fatalf("the renamed member's new name at the door: %v, want ErrNameTaken", err)
			}
			got, err := s.Members(ctx)
			if err != nil || len(got) != 4 || got[0].Name != "ADA" || got[2].Name != "Cy" {
				t.Fatalf("Members = %v %+v", err, got)
			}
		})
	}
}
