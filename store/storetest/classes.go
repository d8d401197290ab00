package storetest

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/toolcall-lab/lab/model"
	"github.com/toolcall-lab/lab/store"
)

func testClasses(t *testing.T, s Store) {
	ctx := context.Background()
	a, b := NewClass("a", "123456", T0), NewClass("b", "654321", T0.Add(time.Second))
	for _, c := range []store.Class{a, b} {
		if err := s.CreateClass(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CreateClass(ctx, NewClass("c", "123456", T0)); !errors.Is(err, store.ErrCodeTaken) {
		t.Fatalf("a second open class with code 123456: %v, want ErrCodeTaken", err)
	}
	if got, err := s.Classes(ctx); err != nil || !reflect.DeepEqual(got, []store.Class{a, b}) {
		t.Fatalf("Classes = %v %+v", err, got)
	}
	if got, err := s.Class(ctx, "b"); err != nil || got != b {
		t.Fatalf("Class(b) = %v %+v", err, got)
	}
	if _, err := s.Class(ctx, "zz"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Class(zz): %v", err)
	}
	if got, err := s.ClassByKey(ctx, store.HashSecret("key-a")); err != nil || got.ID != "a" {
		t.Fatalf("ClassByKey: %v %+v", err, got)
	}
	if _, err := s.ClassByKey(ctx, store.HashSecret("nope")); !errors.Is(err, store.ErrNotFound) {
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
	c := NewClass("c", "123456", T0.Add(2*time.Second))
	if err := s.CreateClass(ctx, c); err != nil {
		t.Fatalf("reusing a closed class's code: %v", err)
	}
	if got, err := s.ClassByCode(ctx, "123456"); err != nil || got.ID != "c" {
		t.Fatalf("ClassByCode prefers the open class: %v %+v", err, got)
	}
	if err := s.SetClassOpen(ctx, "a", true, a.Code); !errors.Is(err, store.ErrCodeTaken) {
		t.Fatalf("reopening onto a taken code: %v", err)
	}
	if err := s.SetClassOpen(ctx, "a", true, "111111"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Class(ctx, "a"); !got.Open || got.Code != "111111" {
		t.Fatalf("reopened: %+v", got)
	}
	if err := s.SetClassOpen(ctx, "zz", false, "000000"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("closing an unknown class: %v", err)
	}
	if _, err := s.ClassByCode(ctx, "999999"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown code: %v", err)
	}
}

func testMembers(t *testing.T, s Store) {
	ctx := context.Background()
	for _, c := range []store.Class{NewClass("a", "123456", T0), NewClass("b", "654321", T0)} {
		if err := s.CreateClass(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	ada := store.Member{Session: "s1", Class: "a", Name: "Ada  Lovelace", Joined: T0}
	bob := store.Member{Session: "s2", Class: "a", Name: "Bob", Joined: T0.Add(time.Second)}
	ada2 := store.Member{Session: "s3", Class: "b", Name: "ada lovelace", Joined: T0}
	for _, m := range []store.Member{ada, bob, ada2} {
		if err := s.AddMember(ctx, m); err != nil {
			t.Fatalf("AddMember(%+v): %v", m, err)
		}
	}
	if err := s.AddMember(ctx, store.Member{Session: "s4", Class: "a", Name: "ADA lovelace", Joined: T0}); !errors.Is(err, store.ErrNameTaken) {
		t.Fatalf("same name in another case: %v, want ErrNameTaken", err)
	}
	if err := s.AddMember(ctx, store.Member{Session: "s4", Class: "zz", Name: "X", Joined: T0}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown class: %v", err)
	}
	if err := s.SetClassOpen(ctx, "b", false, "654321"); err != nil {
		t.Fatal(err)
	}
	if err := s.AddMember(ctx, store.Member{Session: "s4", Class: "b", Name: "X", Joined: T0}); !errors.Is(err, store.ErrClassClosed) {
		t.Fatalf("closed class: %v", err)
	}
	if got, err := s.Members(ctx); err != nil || !reflect.DeepEqual(got, []store.Member{ada, bob, ada2}) {
		t.Fatalf("Members = %v %+v", err, got)
	}
	if got, err := s.MemberOf(ctx, "s2"); err != nil || got != bob {
		t.Fatalf("MemberOf(s2) = %v %+v, want %+v", err, got, bob)
	}
	if _, err := s.MemberOf(ctx, "s4"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("MemberOf a session that joined nothing: %v, want ErrNotFound", err)
	}

	// Deleting a session frees its name.
	for _, sid := range []string{"s1", "s2", "s3"} {
		if err := s.Append(ctx, store.Record{Session: sid, Seq: 1, Time: T0, Event: model.Event{Kind: model.Renamed, By: model.Student, Name: "n"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(ctx, []string{"s1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddMember(ctx, store.Member{Session: "s5", Class: "a", Name: "Ada Lovelace", Joined: T0.Add(2 * time.Second)}); err != nil {
		t.Fatalf("a deleted session's name: %v", err)
	}
	if err := s.RemoveMembers(ctx, []string{"s5"}); err != nil {
		t.Fatal(err)
	}

	// Deleting a class deletes its sessions and their events, and
	// nobody else's.
	l := store.Login{IDHash: store.HashSecret("login"), Class: "a", Credential: store.HashSecret("key-a"), Expires: T0.Add(time.Hour)}
	if err := s.SaveLogin(ctx, l, T0, 10); err != nil {
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
	if got, _ := s.Members(ctx); !reflect.DeepEqual(got, []store.Member{ada2}) {
		t.Fatalf("members after DeleteClass: %+v", got)
	}
	if _, err := s.Login(ctx, l.IDHash); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a deleted class's login: %v", err)
	}
	if _, err := s.DeleteClass(ctx, "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleting twice: %v", err)
	}
}

func testLogins(t *testing.T, s Store) {
	ctx := context.Background()
	if err := s.CreateClass(ctx, NewClass("a", "123456", T0)); err != nil {
		t.Fatal(err)
	}
	login := func(id, class string, expires time.Time) store.Login {
		return store.Login{IDHash: store.HashSecret(id), Class: class, Credential: store.HashSecret("cred " + class), Expires: expires}
	}
	server := login("l1", "", T0.Add(3*time.Hour))
	class := login("l2", "a", T0.Add(2*time.Hour))
	old := login("l0", "", T0.Add(time.Minute))
	for _, l := range []store.Login{old, server, class} {
		if err := s.SaveLogin(ctx, l, T0, 10); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := s.Login(ctx, server.IDHash); err != nil || got != server {
		t.Fatalf("Login = %v %+v, want %+v", err, got, server)
	}
	// An expired login goes with the next save; past keep, the
	// soonest to expire goes.
	if err := s.SaveLogin(ctx, login("l3", "", T0.Add(4*time.Hour)), T0.Add(2*time.Minute), 3); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Login(ctx, old.IDHash); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("expired login kept: %v", err)
	}
	if err := s.SaveLogin(ctx, login("l4", "", T0.Add(5*time.Hour)), T0.Add(2*time.Minute), 3); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Login(ctx, class.IDHash); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the soonest to expire survived past keep: %v", err)
	}
	for _, id := range []string{"l1", "l3", "l4"} {
		if _, err := s.Login(ctx, store.HashSecret(id)); err != nil {
			t.Fatalf("login %s: %v", id, err)
		}
	}
	// Rotating a class key ends its logins only.
	cl := login("l5", "a", T0.Add(time.Hour))
	if err := s.SaveLogin(ctx, cl, T0, 10); err != nil {
		t.Fatal(err)
	}
	if err := s.SetClassKey(ctx, "a", store.HashSecret("new key")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Login(ctx, cl.IDHash); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("login after rotation: %v", err)
	}
	if got, err := s.ClassByKey(ctx, store.HashSecret("new key")); err != nil || got.ID != "a" {
		t.Fatalf("new key: %v %+v", err, got)
	}
	if _, err := s.ClassByKey(ctx, store.HashSecret("key-a")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("old key still works: %v", err)
	}
	if err := s.SetClassKey(ctx, "zz", store.HashSecret("x")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("rotating an unknown class: %v", err)
	}
	if err := s.DeleteLogin(ctx, server.IDHash); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Login(ctx, server.IDHash); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted login: %v", err)
	}
	if err := s.DeleteLogin(ctx, server.IDHash); err != nil {
		t.Fatalf("deleting an unknown login: %v", err)
	}
	s.Close()
	if _, err := s.Classes(ctx); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
}

// TestClassSettings: predictions required is stored at creation, changed
// later, and kept by a reopened data file.
func testClassSettings(t *testing.T, s Store) {
	ctx := context.Background()
	a, b := NewClass("a", "123456", T0), NewClass("b", "654321", T0)
	a.PredictionsRequired = true
	for _, c := range []store.Class{a, b} {
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
	if err := s.SetClassPredictions(ctx, "zz", true); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an unknown class: %v, want ErrNotFound", err)
	}
	got, err := s.Classes(ctx)
	if err != nil || len(got) != 2 || got[0].PredictionsRequired || !got[1].PredictionsRequired {
		t.Fatalf("Classes after the change: %v %+v", err, got)
	}
	if got, err := s.ClassByCode(ctx, "654321"); err != nil || !got.PredictionsRequired {
		t.Fatalf("ClassByCode: %v %+v", err, got)
	}
}

// TestRenameMember: a member's rename keeps names unique in its class.
func testRenameMember(t *testing.T, s Store) {
	ctx := context.Background()
	for _, c := range []store.Class{NewClass("a", "123456", T0), NewClass("b", "654321", T0)} {
		if err := s.CreateClass(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []store.Member{
		{Session: "s1", Class: "a", Name: "Ada", Joined: T0},
		{Session: "s2", Class: "a", Name: "Bob", Joined: T0.Add(time.Second)},
		{Session: "s3", Class: "b", Name: "Cy", Joined: T0},
	} {
		if err := s.AddMember(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RenameMember(ctx, "s2", "ada"); !errors.Is(err, store.ErrNameTaken) {
		t.Fatalf("renaming to a name taken in the class: %v, want ErrNameTaken", err)
	}
	if err := s.RenameMember(ctx, "s1", "ADA"); err != nil {
		t.Fatalf("renaming to one's own name in another case: %v", err)
	}
	if err := s.RenameMember(ctx, "s2", "Cy"); err != nil {
		t.Fatalf("a name taken in another class only: %v", err)
	}
	if err := s.RenameMember(ctx, "zz", "Dee"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("no such member: %v, want ErrNotFound", err)
	}
	// The old name is free, the new one taken at the door.
	if err := s.AddMember(ctx, store.Member{Session: "s4", Class: "a", Name: "bob", Joined: T0}); err != nil {
		t.Fatalf("the renamed member's old name: %v", err)
	}
	if err := s.AddMember(ctx, store.Member{Session: "s5", Class: "a", Name: "cy", Joined: T0}); !errors.Is(err, store.ErrNameTaken) {
		t.Fatalf("the renamed member's new name at the door: %v, want ErrNameTaken", err)
	}
	got, err := s.Members(ctx)
	if err != nil || len(got) != 4 || got[0].Name != "ADA" || got[2].Name != "Cy" {
		t.Fatalf("Members = %v %+v", err, got)
	}
}
