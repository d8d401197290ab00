// Package storetest checks that a store.Store behaves as package server
// needs, whichever implementation it is: Run is the conformance suite that
// store (Memory), store/sqlite and store/postgres run on fresh stores of
// their own, as testing/fstest does for file systems. What is one
// driver's alone (files, migrations, the journal, notifications) is tested
// beside that driver.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolcall-lab/lab/model"
	"github.com/toolcall-lab/lab/store"
)

// Store is what the suite tests: the store package server consumes, with
// Close.
type Store interface {
	store.Store
	Close() error
}

// Run runs the conformance suite, each test on a fresh, empty store that
// open returns (open may also close it with t.Cleanup; some tests close it
// themselves, to test Close). The event-log tests run in parallel.
func Run(t *testing.T, open func(t *testing.T) Store) {
	for _, tc := range []struct {
		name     string
		parallel bool
		test     func(t *testing.T, s Store)
	}{
		{"Stores", true, testStores},
		{"StoresKeepLongSessions", true, testStoresKeepLongSessions},
		{"StoresKeepTextExactly", true, testStoresKeepTextExactly},
		{"Classes", false, testClasses},
		{"Members", false, testMembers},
		{"Logins", false, testLogins},
		{"ClassSettings", false, testClassSettings},
		{"RenameMember", false, testRenameMember},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.parallel {
				t.Parallel()
			}
			tc.test(t, open(t))
		})
	}
}

// T0 is when the suite's records happen.
var T0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// Sample is one record of every shape, with text a store could mangle.
func Sample(session string) []store.Record {
	evs := []model.Event{
		{Kind: model.MessageQueued, By: model.Student, Message: model.Message{ID: 1, Kind: model.ReplyMessage, From: model.Student, Raw: "{\"a\":\"\x00 é \U0001F600\"}\n"}},
		{Kind: model.MessageQueued, By: model.Instructor, Message: model.Message{ID: 2, Kind: model.DeadlineMessage, From: model.Instructor, Key: model.Key{RunID: "run-1", CallID: "lookup"}}},
		{Kind: model.MessageDelivered, By: model.Student, Message: model.Message{ID: 2}},
		{Kind: model.MessageDelivered, By: model.Student, Message: model.Message{ID: 1}, Prediction: model.PredictIgnored},
		{Kind: model.RunStarted, By: model.Instructor},
		{Kind: model.MessageQueued, By: model.Student, Message: model.Message{ID: 3, Kind: model.ReplyMessage, From: model.Student, Raw: ""}},
		{Kind: model.Renamed, By: model.Student, Name: "Ada \u2713"},
		{Kind: model.MessageInjected, By: model.Instructor, Message: model.Message{ID: 4, Kind: model.ReplyMessage, From: model.Instructor, Raw: "{"}},
		{Kind: model.MessageInjected, By: model.Instructor, Deliver: true, Message: model.Message{ID: 5, Kind: model.DeadlineMessage, From: model.Instructor, Key: model.Key{RunID: "run-0", CallID: "lookup"}}},
		{Kind: model.CodeSubmitted, By: model.Student, Source: "export function begin() {}\n// \x00 é \U0001F600", Seed: model.MaxSeed - 1},
		{Kind: model.CodeSubmitted, By: model.Student, Source: "let begin = (runId, callId) => ()", Lang: model.ReScript, Seed: 3},
		{Kind: model.CaseAdded, By: model.Instructor, Case: &model.Case{Name: "late \u2713", Frames: model.Trace{
			{Kind: model.QueueReply, Raw: "{\"runId\":\"run-1\"}\u2028"}, {Kind: model.StartRun}, {Kind: model.QueueDeadline}, {Kind: model.Deliver, Message: 1}}}},
		{Kind: model.CaseRemoved, By: model.Instructor, Case: &model.Case{Name: "late \u2713"}},
		{Kind: model.PracticeDrawn, By: model.Student, Message: model.Message{ID: 7}, Practice: &model.Practice{Kind: model.KindLateReply, Why: "You expected \u2713 (message 2).", NewRun: true,
			Setup:   model.Message{ID: 6, Kind: model.DeadlineMessage, From: model.Student, Key: model.Key{RunID: "run-2", CallID: "lookup"}, Lab: true},
			Message: model.Message{ID: 7, Kind: model.ReplyMessage, From: model.Student, Raw: "{\"x\":\"\x00\"}", Lab: true}}},
		{Kind: model.PracticeDrawn, By: model.Instructor, Message: model.Message{ID: 8}, Practice: &model.Practice{Kind: model.KindWrongShape,
			Message: model.Message{ID: 8, Kind: model.ReplyMessage, From: model.Instructor, Raw: "", Lab: true}}},
	}
	out := make([]store.Record, len(evs))
	for i, e := range evs {
		out[i] = store.Record{Session: session, Seq: uint64(i + 1), Time: T0.Add(time.Duration(i) * time.Second), Event: e, Run: "run-1", Notice: fmt.Sprintf("notice %d", i)}
	}
	return out
}

// Walkthrough is the record a student's seq-th change in a session makes
// in labbench's loops: queue a reply, deliver it, start a run.
func Walkthrough(id string, seq uint64) store.Record {
	ev := model.Event{Kind: model.RunStarted, By: model.Student}
	switch seq % 3 {
	case 1:
		ev = model.Event{Kind: model.MessageQueued, By: model.Student, Message: model.Message{ID: int(seq), Kind: model.ReplyMessage, From: model.Student, Raw: walkthroughRaw}}
	case 2:
		ev = model.Event{Kind: model.MessageDelivered, By: model.Student, Message: model.Message{ID: int(seq - 1)}}
	}
	return store.Record{Session: id, Seq: seq, Time: T0, Event: ev, Run: "run-2", Notice: "Accepted completion."}
}

var walkthroughRaw = `{"runId":"run-1","callId":"lookup","kind":"completed","output":"Preloaded answer 1: ` + strings.Repeat("lorem ipsum dolor sit amet ", 9) + `"}`

// NewClass is a class the suite makes, with the key "key-" + id.
func NewClass(id, code string, at time.Time) store.Class {
	return store.Class{ID: id, Code: code, Title: "Class " + id, Open: true, Created: at, KeyHash: store.HashSecret("key-" + id)}
}

func testStores(t *testing.T, s Store) {
	ctx := context.Background()
	a, b := Sample("a"), Sample("b")[:2]
	for _, r := range append(append([]store.Record(nil), a...), b...) {
		if err := s.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	// Another replica's seq 1 or seq 3: taken, whatever the event.
	for _, r := range []store.Record{a[0], b[0], {Session: "a", Seq: 3, Time: T0, Event: a[5].Event}} {
		if err := s.Append(ctx, r); !errors.Is(err, store.ErrSeqTaken) {
			t.Fatalf("appending a taken seq %d: %v, want ErrSeqTaken", r.Seq, err)
		}
	}
	got, err := s.Events(ctx, "a")
	if err != nil || !reflect.DeepEqual(got, a) {
		t.Fatalf("Events(a) = %v\n%+v\nwant %+v", err, got, a)
	}
	for _, after := range []uint64{0, 3, 7, 8, 9} {
		got, err := s.EventsAfter(ctx, "a", after)
		want := a[min(after, uint64(len(a))):]
		if err != nil || len(got) != len(want) || len(want) > 0 && !reflect.DeepEqual(got, want) {
			t.Fatalf("EventsAfter(a, %d) = %v %+v, want %+v", after, err, got, want)
		}
	}
	if got, err := s.EventsAfter(ctx, "nobody", 0); err != nil || len(got) != 0 {
		t.Fatalf("EventsAfter(nobody) = %v %+v", err, got)
	}
	sessions, err := s.Sessions(ctx)
	want := []store.Session{{ID: "a", Name: "Ada \u2713", Created: T0, LastActive: a[len(a)-1].Time}, {ID: "b", Created: T0, LastActive: b[1].Time}}
	if err != nil || !reflect.DeepEqual(sessions, want) {
		t.Fatalf("Sessions = %v %+v, want %+v", err, sessions, want)
	}
	if err := s.Delete(ctx, []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Events(ctx, "a"); len(got) != 0 {
		t.Fatalf("deleted session still has %d events", len(got))
	}
	if sessions, _ := s.Sessions(ctx); len(sessions) != 1 || sessions[0].ID != "b" {
		t.Fatalf("after delete: %+v", sessions)
	}
	if err := s.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := s.Append(ctx, Sample("c")[0]); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
}

// TestStoresKeepLongSessions: a session of 700 records (the memory store
// keeps them in chunks of 8, 16, … up to 256) reads back whole and from
// every chunk's edges.
func testStoresKeepLongSessions(t *testing.T, s Store) {
	ctx := context.Background()
	var recs []store.Record
	for seq := uint64(1); seq <= 700; seq++ {
		r := Walkthrough("long", seq)
		recs = append(recs, r)
		if err := s.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	for _, after := range []uint64{0, 1, 7, 8, 9, 23, 24, 25, 120, 248, 249, 503, 504, 505, 699, 700} {
		got, err := s.EventsAfter(ctx, "long", after)
		if want := recs[after:]; err != nil || len(got) != len(want) || len(want) > 0 && !reflect.DeepEqual(got, want) {
			t.Fatalf("EventsAfter(long, %d) = %v, %d records from seq %v, want %d", after, err, len(got), firstSeq(got), len(want))
		}
	}
}

// firstSeq is the seq of the first record, 0 if none.
func firstSeq(recs []store.Record) uint64 {
	if len(recs) == 0 {
		return 0
	}
	return recs[0].Seq
}

// TestStoresKeepTextExactly: notices quote replies, which may hold NUL and
// any Unicode, or bytes that are not UTF-8 at all; every store must give
// them back byte for byte.
func testStoresKeepTextExactly(t *testing.T, s Store) {
	ctx := context.Background()
	weird := "\x00 é \U0001F600 \xff"
	recs := Sample("a")[:2]
	recs[0].Notice = "Accepted completion: " + weird
	recs[0].Run = "run-\x001"
	recs[0].Event.Message.Raw = weird
	recs[1].Event.Message.Key = model.Key{RunID: "r" + weird, CallID: "c" + weird}
	rename := store.Record{Session: "a", Seq: 3, Time: T0, Event: model.Event{Kind: model.Renamed, By: model.Student, Name: "n" + weird}}
	recs = append(recs, rename)
	for _, r := range recs {
		if err := s.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Events(ctx, "a")
	if err != nil || !reflect.DeepEqual(got, recs) {
		t.Fatalf("%v\n%+v\nwant %+v", err, got, recs)
	}
	if ss, err := s.Sessions(ctx); err != nil || len(ss) != 1 || ss[0].Name != rename.Event.Name {
		t.Fatalf("Sessions = %v %+v, want the name %q", err, ss, rename.Event.Name)
	}
}
