package server

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolcall-lab/lab/model"
	"github.com/toolcall-lab/lab/store"
)

// slowDelete is a store whose Delete waits until released, so that a test
// can act while the janitor is deleting.
type slowDelete struct {
	*store.Memory
	entered, release chan struct{}
}

func (d *slowDelete) Delete(ctx context.Context, ids []string) error {
	close(d.entered)
	<-d.release
	return d.Memory.Delete(ctx, ids)
}

// TestNoChangeSlipsIntoAnExpiringSession: finding 11. While the janitor
// deletes a session, the one lookup misses it (instructors' injections
// included), and a change through a session found just before is refused:
// no event row is left whose session row is gone.
func TestNoChangeSlipsIntoAnExpiringSession(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	var clock atomicTime
	clock.set(now)
	st := &slowDelete{Memory: store.NewMemory(), entered: make(chan struct{}), release: make(chan struct{})}
	s, err := New(Config{Store: st, SessionTTL: time.Hour, Now: clock.get})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(ctx)

	const id = "6f1c7a52-6d2a-4d4b-9c39-2f0e5f6b9a10"
	s.mu.Lock()
	sess, err := s.getOrCreate(id)
	s.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan outcome, 1)
	sess.submit(pending{cmd: model.Command{Kind: model.StartRun, By: model.Student}, done: done})
	if o := <-done; o.err != nil {
		t.Fatal(o.err)
	}
	held, ok := s.find(id) // an injection that looked it up just before the janitor
	if !ok {
		t.Fatal("the stored session is not found")
	}

	clock.set(now.Add(2 * time.Hour))
	swept := make(chan error, 1)
	go func() { swept <- s.sweep(ctx) }()
	<-st.entered
	if _, ok := s.find(id); ok {
		t.Error("the lookup found a session the janitor is deleting")
	}
	inject := model.Command{Kind: model.Inject, By: model.Instructor, Inject: model.Injection{Preset: model.CurrentDeadline}}
	if res := s.submitEach(injectRequest{sessions: []string{id}}, inject); res[0].Applied || res[0].Reason != "unknown_session" {
		t.Errorf("an injection into an expiring session: %+v", res[0])
	}
	held.submit(pending{cmd: inject, done: done})
	if o := <-done; !errors.Is(o.err, errSessionExpiring) {
		t.Errorf("a change through a session found before the janitor: %v, want it refused", o.err)
	}
	close(st.release)
	if err := <-swept; err != nil {
		t.Fatal(err)
	}
	if recs, _ := st.Events(ctx, id); len(recs) != 0 {
		t.Fatalf("%d events left of a deleted session", len(recs))
	}
	if s.StoredSessions() != 0 {
		t.Fatalf("%d sessions still counted", s.StoredSessions())
	}
}

// atomicTime is a clock a test sets.
type atomicTime struct{ v atomic.Pointer[time.Time] }

func (a *atomicTime) set(t time.Time) { a.v.Store(&t) }
func (a *atomicTime) get() time.Time  { return *a.v.Load() }
