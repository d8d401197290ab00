package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolcall-lab/lab/store"
)

// Several replicas on one database (docs/deploy.md). No replica owns a
// session: each caches the sessions its clients use (session.lab at some
// seq), decides changes there and appends them under the store's unique
// (session, seq); the loser of a race catches up and decides again
// (session.apply). The listener hears every append any replica commits,
// as (session, seq), and has the session catch up and fan the change out
// to this replica's tabs, watchers and overview. With SQLite or Memory
// there is no listener and appends never conflict.

// listener runs the store's Listen, again after each failure.
//
// Ownership: Start starts it (startListener) and keeps it in
// Server.listener; Shutdown and Restart stop it (stop cancels and waits
// for done, then for drains). Its goroutine reads sessions it has not
// heard of and starts a drainer for each session it hears of
// (session.notify), counted in drains; each drainer exits once its
// session has caught up and its inbox is empty. Its retry goroutine (done
// when retried is closed) looks again, every catchUpRetry, at the sessions
// whose log could not be read (stale, guarded by mu, a leaf lock):
// a failed read is retried, never taken for "no events". connected is its
// own, read by Ready.
type listener struct {
	cancel    context.CancelFunc
	done      chan struct{} // closed when the goroutine has returned
	retried   chan struct{} // closed when the retry goroutine has returned
	connected atomic.Bool   // listening now: notifications are heard, and the log was looked at since
	drains    sync.WaitGroup

	mu    sync.Mutex
	stale map[string]struct{} // sessions to read again
}

// shared reports whether other replicas share the server's store.
func (s *Server) shared() bool { return isListener(s.cfg.Store) }

// isListener reports whether st is shared with other replicas.
func isListener(st store.Store) bool {
	_, ok := st.(store.Listener)
	return ok
}

// listenRetry bounds the wait before listening again after a failure: no
// longer than a readiness probe's interval, so that /readyz turns 200
// within about that long of the database answering again.
const listenRetry = 500 * time.Millisecond

// catchUpRetry is how soon a session whose log could not be read is read
// again.
const catchUpRetry = 500 * time.Millisecond

// startListener starts listening and waits for the first attempt: it
// returns once notifications are heard (so that sessions loaded after it
// miss nothing), or with the first attempt's error and nothing running.
func (s *Server) startListener(l store.Listener) (*listener, error) {
	ctx, cancel := context.WithCancel(context.Background())
	ln := &listener{cancel: cancel, done: make(chan struct{}), retried: make(chan struct{}), stale: make(map[string]struct{})}
	first := make(chan error, 1)
	go func() {
		defer close(ln.done)
		firstReady := true
		for wait := 50 * time.Millisecond; ; wait = min(wait*2, listenRetry) {
			err := l.Listen(ctx, s.cfg.StoreTimeout, func() {
				wait = 50 * time.Millisecond
				if firstReady {
					// Start loads every session next; nothing to resync.
					firstReady = false
					ln.connected.Store(true)
					first <- nil
					return
				}
				// Ready only once the log was looked at: what was stored
				// while nobody listened is on its way to the tabs.
				s.resync(ctx, ln)
				ln.connected.Store(true)
				s.listening.ok()
			}, func(id string, seq uint64) { s.heard(ctx, ln, id, seq) })
			ln.connected.Store(false)
			if firstReady {
				first <- err
				return
			}
			if ctx.Err() != nil {
				return
			}
			s.listening.fail(err)
			s.log.Debug("listening for other replicas' changes; trying again", "err", err, "in", wait)
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
	}()
	if err := <-first; err != nil {
		cancel()
		<-ln.done
		return nil, err
	}
	go func() {
		defer close(ln.retried)
		t := time.NewTicker(catchUpRetry)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				s.retryStale(ctx, ln)
			}
		}
	}()
	return ln, nil
}

// markStale has session id read again soon: its log could not be read.
func (ln *listener) markStale(id string) {
	ln.mu.Lock()
	ln.stale[id] = struct{}{}
	ln.mu.Unlock()
}

// retryStale reads again the sessions whose log could not be read: a held
// one catches up, one not held yet is discovered. Each that fails again is
// marked again (by drain or here). Called by the retry goroutine.
func (s *Server) retryStale(ctx context.Context, ln *listener) {
	ln.mu.Lock()
	ids := make([]string, 0, len(ln.stale))
	for id := range ln.stale {
		ids = append(ids, id)
	}
	clear(ln.stale)
	ln.mu.Unlock()
	for _, id := range ids {
		if ctx.Err() != nil {
			return
		}
		if sess, ok := s.find(id); ok {
			sess.notify(math.MaxUint64, &ln.drains)
			continue
		}
		if _, err := s.discover(ctx, id); err != nil {
			ln.markStale(id)
		}
	}
}

// markStale has the listener read session id again soon, if there is one
// (with a store of one's own there is nothing else to read).
func (s *Server) markStale(id string) {
	s.mu.Lock()
	ln := s.listener
	s.mu.Unlock()
	if ln != nil {
		ln.markStale(id)
	}
}

// stop ends the listener and waits for it. Called once (closeSockets takes
// it out of the Server first).
func (ln *listener) stop() {
	ln.cancel()
	<-ln.done
	<-ln.retried
	ln.drains.Wait()
}

// heard is told that another replica (or this one) stored seq of session
// id: a session this replica holds catches up to it, one it does not is
// read from the log, so instructors here see sessions made elsewhere. Seq
// 0 says that a replica deleted the session: its tabs here are closed, as
// they would be on that replica, and it is forgotten.
func (s *Server) heard(ctx context.Context, ln *listener, id string, seq uint64) {
	if class, ok := strings.CutPrefix(id, store.ClassChanged); ok {
		s.classChanged(ctx, class)
		return
	}
	sess, ok := s.find(id)
	if ok && seq != 0 && seq <= sess.shownSeq() {
		// This replica's own append, heard back (or a seq a catch-up
		// read already): the session has it; no drainer, no read.
		return
	}
	if seq == 0 {
		if ok {
			s.closeTabs([]*session{sess})
			s.forget([]string{id})
		}
		return
	}
	if !ok {
		var err error
		if sess, err = s.discover(ctx, id); err != nil {
			ln.markStale(id)
			return
		}
		if sess == nil {
			return
		}
	}
	sess.notify(seq, &ln.drains)
}

// classChanged applies a class's settings, which a replica changed, to the
// sessions of the class this replica holds.
func (s *Server) classChanged(ctx context.Context, class string) {
	cl, err := s.cfg.Store.Class(ctx, class)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			s.log.Warn("reading a class's settings from the store", "class", class, "err", err)
		}
		return
	}
	s.requirePredictionsIn(cl.ID, cl.PredictionsRequired)
}

// discover reads a session the server does not hold from the store and
// holds it: a session another replica created, which a student here
// reconnects to or an instructor here watches. It returns nil when the
// store has no such session or the server holds as many sessions as it
// may (a student's connection then creates or refuses it as usual), and an
// error (errCannotRead) when the store cannot be read: then the session
// must not be taken for a new, empty one. It does I/O, so it is called
// with no lock held.
func (s *Server) discover(ctx context.Context, id string) (*session, error) {
	recs, err := s.cfg.Store.Events(ctx, id)
	if err != nil {
		s.log.Warn("reading a session from the store", "session", id, "err", err)
		return nil, fmt.Errorf("%w: %w", errCannotRead, err)
	}
	if len(recs) == 0 {
		return nil, nil
	}
	info := store.Session{ID: id, Created: recs[0].Time, LastActive: recs[len(recs)-1].Time}
	sess, err := restoreSession(info, recs, &s.cfg, s.metrics, s.frames, s.overview.mark)
	if err != nil {
		s.log.Warn("reading a session from the store", "session", id, "err", err)
		return nil, fmt.Errorf("%w: %w", errCannotRead, err)
	}
	member, err := s.cfg.Store.MemberOf(ctx, id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.Warn("reading a session's class from the store", "session", id, "err", err)
		return nil, fmt.Errorf("%w: %w", errCannotRead, err)
	}
	s.mu.Lock()
	if held, ok := s.lookup(id); ok {
		s.mu.Unlock()
		return held, nil // found meanwhile; it catches up by itself
	}
	if s.sessions[id] != nil || s.stored >= s.cfg.MaxSessions {
		s.mu.Unlock()
		return nil, nil // being deleted here, or no room
	}
	s.holdStored(sess)
	if member.Class != "" {
		s.classOf.join(id, member.Class)
	}
	s.mu.Unlock()
	if member.Class != "" {
		// The class's settings hold for a session made elsewhere too.
		if cl, err := s.cfg.Store.Class(ctx, member.Class); err == nil && cl.PredictionsRequired {
			sess.setRequirePredictions(true)
		}
	}
	s.overview.mark()
	return sess, nil
}

// resync runs after listening again: changes stored while nobody listened
// went unheard, so every held session looks in the log, and sessions
// created meanwhile are read.
func (s *Server) resync(ctx context.Context, ln *listener) {
	for _, sess := range s.allSessions() {
		sess.notify(math.MaxUint64, &ln.drains)
	}
	infos, err := s.cfg.Store.Sessions(ctx)
	if err != nil {
		s.log.Warn("listing sessions after listening again", "err", err)
		return
	}
	for _, info := range infos {
		if _, ok := s.find(info.ID); !ok {
			if _, err := s.discover(ctx, info.ID); err != nil {
				ln.markStale(info.ID)
			}
		}
	}
}

// shownSeq is the seq of the state the session's tabs were last handed:
// a notification of a seq up to it has nothing to catch up.
func (s *session) shownSeq() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.row.Seq
}
