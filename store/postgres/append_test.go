package postgres

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolcall-lab/lab/internal/pgtest"
	"github.com/toolcall-lab/lab/store"
	"github.com/toolcall-lab/lab/store/storetest"
)

// commitNow commits recs as one batch of a's group commit and returns
// each record's outcome.
func commitNow(a *Store, recs ...store.Record) []error {
	batch := make([]*appendReq, len(recs))
	for i, r := range recs {
		w, err := store.Encode(r)
		if err != nil {
			panic(err)
		}
		batch[i] = &appendReq{ctx: context.Background(), row: w, res: make(chan error, 1)}
	}
	a.commit(slices.Clone(batch)) // which sorts it
	errs := make([]error, len(recs))
	for i, q := range batch {
		errs[i] = <-q.res
	}
	return errs
}

// TestPostgresBatchFailsOnlyItsBadRecords: in one commit, a seq another
// replica stored (a first or a later one) fails that record alone with
// ErrSeqTaken, an append to a session another replica deleted fails alone
// with another error, and the others are stored, a rename names its
// session, and each stored record is heard once.
func TestPostgresBatchFailsOnlyItsBadRecords(t *testing.T) {
	t.Parallel()
	a, b := openPair(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := storetest.Sample("r")
	for _, rec := range append(append(storetest.Sample("x")[:2], r[:6]...), storetest.Sample("y")[0], storetest.Sample("gone")[0]) {
		if err := b.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Delete(ctx, []string{"gone"}); err != nil {
		t.Fatal(err)
	}

	heard, _ := listen(t, ctx, a, 16)

	// Without the deleted session the batch commits at once; with it, it
	// fails on the foreign key and each record is committed alone.
	k := 0
	for _, tc := range []struct {
		recs  []store.Record
		want  []string // "ok", "taken", "refused"
		heard []string
	}{
		{recs: []store.Record{storetest.Sample("n")[0], storetest.Sample("x")[1], storetest.Sample("y")[0]},
			want: []string{"ok", "taken", "taken"}, heard: []string{"n 1"}},
		{recs: []store.Record{storetest.Sample("m")[0], storetest.Sample("x")[1], r[6], storetest.Sample("gone")[1], storetest.Sample("y")[0]},
			want: []string{"ok", "taken", "ok", "refused", "taken"}, heard: []string{"m 1", "r 7"}},
	} {
		k++
		errs := commitNow(a, tc.recs...)
		got := make([]string, len(errs))
		for i, err := range errs {
			switch {
			case err == nil:
				got[i] = "ok"
			case errors.Is(err, store.ErrSeqTaken):
				got[i] = "taken"
			default:
				got[i] = "refused"
			}
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Fatalf("outcomes %q (%v), want %q", got, errs, tc.want)
		}
		// A marker after them: what is heard before it is the batch's.
		marker := storetest.Sample(fmt.Sprint("marker-", k))[0]
		if err := b.Append(ctx, marker); err != nil {
			t.Fatal(err)
		}
		var h []string
		for {
			select {
			case x := <-heard:
				h = append(h, x)
			case <-time.After(10 * time.Second):
				t.Fatalf("heard only %q", h)
			}
			if h[len(h)-1] == marker.Session+" 1" {
				break
			}
		}
		if want := append(tc.heard, marker.Session+" 1"); !reflect.DeepEqual(h, want) {
			t.Fatalf("heard %q, want %q", h, want)
		}
	}
	for id, n := range map[string]int{"n": 1, "m": 1, "x": 2, "y": 1, "r": 7, "gone": 0} {
		recs, err := a.Events(ctx, id)
		if err != nil || len(recs) != n {
			t.Fatalf("session %s: %v, %d events, want %d", id, err, len(recs), n)
		}
	}
	if got, _ := a.Events(ctx, "r"); !reflect.DeepEqual(got, r[:7]) {
		t.Fatalf("session r reads back %+v, want %+v", got, r[:7])
	}
	wantNames(t, a, map[string]string{"r": r[6].Event.Name})
}

// TestPostgresRacingAppends: two appenders on one store race for every seq
// of many sessions at once (group commit takes a session's second request
// into a later batch): each seq is stored once, the other gets ErrSeqTaken.
func TestPostgresRacingAppends(t *testing.T) {
	t.Parallel()
	s := openPG(t)
	ctx := context.Background()
	const sessions, seqs = 20, 9
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for i := range sessions {
		wg.Go(func() {
			recs := storetest.Sample(fmt.Sprint("s", i))[:seqs]
			for _, rec := range recs {
				var both [2]error
				var pair sync.WaitGroup
				for k := range both {
					pair.Go(func() { both[k] = s.Append(ctx, rec) })
				}
				pair.Wait()
				ok := 0
				for _, err := range both {
					switch {
					case err == nil:
						ok++
					case !errors.Is(err, store.ErrSeqTaken):
						errs <- err
						return
					}
				}
				if ok != 1 {
					errs <- fmt.Errorf("session %s seq %d: stored %d times (%v)", rec.Session, rec.Seq, ok, both)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := range sessions {
		id := fmt.Sprint("s", i)
		if got, err := s.Events(ctx, id); err != nil || !reflect.DeepEqual(got, storetest.Sample(id)[:seqs]) {
			t.Fatalf("session %s reads back %v %+v", id, err, got)
		}
	}
}

// TestParsePayload: a payload of one pair (the only kind older replicas
// send), of several lines, and lines that are not ours.
func TestParsePayload(t *testing.T) {
	for _, tc := range []struct {
		payload string
		want    []string
	}{
		{"s 1", []string{"s 1"}},
		{"s 0", []string{"s 0"}},
		{"class:c 0", []string{"class:c 0"}},
		{"a 1\nb 22\nc 3", []string{"a 1", "b 22", "c 3"}},
		{"a 1\nnot ours\nb x\n\nc 3", []string{"a 1", "c 3"}},
		{"", nil},
		{"s -1", nil},
	} {
		var got []string
		parsePayload(tc.payload, func(id string, seq uint64) { got = append(got, fmt.Sprint(id, " ", seq)) })
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parsePayload(%q) = %q, want %q", tc.payload, got, tc.want)
		}
	}
}

// TestPostgresBigBatchIsHeard: a batch whose notification would pass
// PostgreSQL's 8,000 bytes goes out in several, and every record is heard.
func TestPostgresBigBatchIsHeard(t *testing.T) {
	t.Parallel()
	s := openPG(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	heard, _ := listen(t, ctx, s, maxBatch)
	var recs []store.Record
	want := map[string]bool{}
	for i := range maxBatch {
		id := fmt.Sprintf("%03d-%s", i, strings.Repeat("x", 200))
		recs = append(recs, storetest.Sample(id)[0])
		want[id+" 1"] = true
	}
	for i, err := range commitNow(s, recs...) {
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	for len(want) > 0 {
		select {
		case h := <-heard:
			if !want[h] {
				t.Fatalf("heard %.40q, not in the batch or twice", h)
			}
			delete(want, h)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d records not heard", len(want))
		}
	}
}

// TestPostgresFrozenPastDeadlineStoresNothing: appends whose statements
// reach a frozen (SIGSTOP) PostgreSQL and are refused at their deadline
// are not committed when it resumes, a lone one nor a batch: the
// statements themselves refuse to commit past the deadline.
func TestPostgresFrozenPastDeadlineStoresNothing(t *testing.T) {
	cl := pgtest.NewCluster(t)
	ctx := context.Background()
	s, err := Open(ctx, cl.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	x, y, z := storetest.Sample("x"), storetest.Sample("y"), storetest.Sample("z")
	for _, r := range []store.Record{x[0], y[0]} {
		if err := s.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	// Connections open before the freeze, so that every append below is
	// sent (a new connection would wait for the frozen postmaster).
	// They prepare every statement of an append now: a statement prepared
	// on its first use would wait for the frozen backend before anything
	// is sent.
	var conns []*pgxpool.Conn
	for range 3 {
		c, err := s.pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range appendStatements {
			if _, err := c.Conn().Prepare(ctx, q, q); err != nil {
				t.Fatal(err)
			}
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
	cl.Freeze()
	frozen := true
	defer func() {
		if frozen {
			cl.Resume()
		}
	}()
	const deadline = 300 * time.Millisecond
	dctx, cancel := context.WithTimeout(ctx, deadline)
	err = s.Append(dctx, x[1])
	cancel()
	if err == nil {
		t.Fatal("an append to a frozen database succeeded")
	}
	t.Logf("lone append refused: %v", err)
	dctx, cancel = context.WithTimeout(ctx, deadline)
	batch := make([]*appendReq, 0, 2)
	for _, r := range []store.Record{y[1], z[0]} {
		w, err := store.Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, &appendReq{ctx: dctx, row: w, res: make(chan error, 1)})
	}
	s.commit(slices.Clone(batch))
	cancel()
	for _, q := range batch {
		if err := <-q.res; err == nil {
			t.Fatal("a batch's append to a frozen database succeeded")
		}
	}
	time.Sleep(deadline)
	cl.Resume()
	frozen = false
	time.Sleep(time.Second) // the backends run what they were sent
	for _, c := range []struct {
		id   string
		want int
	}{{"x", 1}, {"y", 1}, {"z", 0}} {
		recs, err := s.EventsAfter(ctx, c.id, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != c.want {
			t.Errorf("session %s holds %d records after the resume, want %d: a refused append was committed late", c.id, len(recs), c.want)
		}
	}
}

// appendStatements are the statements an append runs.
var appendStatements = []string{insertSessionsSQL, insertEventsSQL, insertEventsTakenSQL, insertOneSQL}

// TestPostgresRefusesWithinMargin: an append that reaches the database
// less than commitMargin before its deadline is refused by the database
// (ErrPastDeadline), alone or in a batch, and nothing of it is stored.
func TestPostgresRefusesWithinMargin(t *testing.T) {
	t.Parallel()
	s := openPG(t)
	ctx := context.Background()
	x := storetest.Sample("x")
	late, cancel := context.WithTimeout(ctx, commitMargin/2)
	defer cancel()
	if err := s.Append(late, x[0]); !errors.Is(err, ErrPastDeadline) {
		t.Fatalf("a lone append within the margin: %v, want ErrPastDeadline", err)
	}
	batch := make([]*appendReq, 0, 2)
	for _, r := range []store.Record{x[0], storetest.Sample("y")[0]} {
		w, err := store.Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, &appendReq{ctx: late, row: w, res: make(chan error, 1)})
	}
	s.commit(slices.Clone(batch))
	for _, q := range batch {
		if err := <-q.res; !errors.Is(err, ErrPastDeadline) {
			t.Fatalf("a batch's append within the margin: %v, want ErrPastDeadline", err)
		}
	}
	for _, id := range []string{"x", "y"} {
		if recs, err := s.EventsAfter(ctx, id, 0); err != nil || len(recs) != 0 {
			t.Errorf("session %s: %d records (%v), want none", id, len(recs), err)
		}
	}
	if err := s.Append(ctx, x[0]); err != nil {
		t.Fatalf("the same append without a deadline: %v", err)
	}
}

// TestPostgresLoneFirstRename: a lone append (one statement) whose record
// is its session's first and a rename names the session it creates, and
// a lone append whose seq is taken is ErrSeqTaken.
func TestPostgresLoneFirstRename(t *testing.T) {
	t.Parallel()
	s := openPG(t)
	ctx := context.Background()
	r := storetest.Sample("n")[6] // a rename
	r.Seq = 1
	if err := s.Append(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, r); !errors.Is(err, store.ErrSeqTaken) {
		t.Fatalf("the same seq again: %v, want ErrSeqTaken", err)
	}
	infos, err := s.Sessions(ctx)
	if err != nil || len(infos) != 1 || infos[0].Name != r.Event.Name {
		t.Fatalf("sessions %+v (%v), want one named %q", infos, err, r.Event.Name)
	}
}

// TestPostgresBatchRetriesTakenSeq: a batch whose plain insert fails on a
// seq another replica stored runs again without it, in the same call:
// the others are stored (a first record with its session, a rename with
// its name), taken[i] marks the taken one, nothing else is reported, and
// each stored record is heard once (the failed try notified nobody).
func TestPostgresBatchRetriesTakenSeq(t *testing.T) {
	t.Parallel()
	a, b := openPair(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, x := storetest.Sample("r"), storetest.Sample("x")
	for _, rec := range append(x[:2], r[:6]...) {
		if err := b.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}

	heard, _ := listen(t, ctx, a, 16)

	// In the order of their sessions, as commit sorts them.
	var batch []*appendReq
	for _, rec := range []store.Record{storetest.Sample("n")[0], r[6], x[1]} {
		w, err := store.Encode(rec)
		if err != nil {
			t.Fatal(err)
		}
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		batch = append(batch, &appendReq{ctx: dctx, row: w, res: make(chan error, 1)})
	}
	bctx, guard, bcancel := batchContext(batch)
	defer bcancel()
	taken, err := a.commitBatch(bctx, guard, batch)
	if err != nil {
		t.Fatalf("a batch with a taken seq: %v, want it stored but for that seq", err)
	}
	if want := []bool{false, false, true}; !reflect.DeepEqual(taken, want) {
		t.Fatalf("taken %v, want %v", taken, want)
	}

	marker := storetest.Sample("marker")[0]
	if err := b.Append(ctx, marker); err != nil {
		t.Fatal(err)
	}
	var h []string
	for len(h) == 0 || h[len(h)-1] != "marker 1" {
		select {
		case x := <-heard:
			h = append(h, x)
		case <-time.After(10 * time.Second):
			t.Fatalf("heard only %q", h)
		}
	}
	if want := []string{"n 1", "r 7", "marker 1"}; !reflect.DeepEqual(h, want) {
		t.Fatalf("heard %q, want %q", h, want)
	}
	for id, want := range map[string][]store.Record{"n": storetest.Sample("n")[:1], "r": r[:7], "x": x[:2]} {
		if got, err := a.Events(ctx, id); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("session %s reads back %v %+v, want %+v", id, err, got, want)
		}
	}
	wantNames(t, a, map[string]string{"r": r[6].Event.Name})
}

// wantNames fails t unless every session of s is named as names says
// (unnamed when it is not there).
func wantNames(t *testing.T, s *Store, names map[string]string) {
	t.Helper()
	sessions, err := s.Sessions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, sess := range sessions {
		if want := names[sess.ID]; sess.Name != want {
			t.Fatalf("session %s named %q, want %q", sess.ID, sess.Name, want)
		}
	}
}
