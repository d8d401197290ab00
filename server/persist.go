package server

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/toolcall-lab/lab/store"
)

// Store keeps sessions' events. package store has two: store.SQLite (durable)
// and store.Memory (tests and demos).
type Store interface {
	// Append returns once r is committed; an error means it was not stored.
	Append(ctx context.Context, r store.Record) error
	// Sessions lists the stored sessions.
	Sessions(ctx context.Context) ([]store.Session, error)
	// Events returns one session's records in seq order.
	Events(ctx context.Context, id string) ([]store.Record, error)
	// Delete removes sessions with their events.
	Delete(ctx context.Context, ids []string) error
	// Ready reports whether the store takes writes now.
	Ready(ctx context.Context) error
	// Classes keeps classes, their members and console logins.
	store.Classes
}

// load rebuilds every stored session by replaying its events, so that state
// frames are byte-identical to those before a restart and seq continues.
func (s *Server) load(ctx context.Context) error {
	infos, err := s.cfg.Store.Sessions(ctx)
	if err != nil {
		return fmt.Errorf("loading sessions: %w", err)
	}
	for _, info := range infos {
		recs, err := s.cfg.Store.Events(ctx, info.ID)
		if err != nil {
			return fmt.Errorf("loading sessions: %w", err)
		}
		sess, err := restoreSession(info, recs, &s.cfg, s.metrics, s.overview.mark)
		if err != nil {
			return fmt.Errorf("loading sessions: %w", err)
		}
		s.sessions[info.ID] = sess
	}
	return nil
}

// SessionIDs lists the sessions the server holds, sorted.
func (s *Server) SessionIDs() []string {
	s.mu.Lock()
	ids := make([]string, 0, len(s.sessions))
	for id := range s.sessions {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	slices.Sort(ids)
	return ids
}

// Ready reports whether the server can take changes: it is not shutting
// down and its store takes writes. For a readiness probe.
func (s *Server) Ready(ctx context.Context) error {
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing {
		return errShuttingDown
	}
	if err := s.cfg.Store.Ready(ctx); err != nil {
		return fmt.Errorf("the store does not take writes: %w", err)
	}
	return nil
}

// startJanitor starts the goroutine that deletes idle sessions; the Server
// owns it and CloseSockets stops it.
func (s *Server) startJanitor() {
	s.quit = make(chan struct{})
	s.janitorDone = make(chan struct{})
	var once sync.Once
	s.stopJanitor = func() { once.Do(func() { close(s.quit) }) }
	every := max(min(s.cfg.SessionTTL/4, time.Minute), time.Second)
	go func() {
		defer close(s.janitorDone)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-s.quit:
				return
			case <-tick.C:
				if err := s.sweep(context.Background()); err != nil {
					s.cfg.Logger.Warn("deleting idle sessions", "err", err)
				}
			}
		}
	}()
}

// sweep deletes the sessions idle for longer than the TTL: no change and no
// open connection since. They are marked expiring (connections to them are
// refused meanwhile) while the store deletes them, outside every lock, and
// leave the map only once the store has; if the store fails they stay.
func (s *Server) sweep(ctx context.Context) error {
	cutoff := s.cfg.Now().Add(-s.cfg.SessionTTL)
	var expired []*session
	s.mu.Lock()
	for _, sess := range s.sessions {
		sess.mu.Lock()
		idle := sess.admitted == 0 && !sess.draining && sess.lastActive.Before(cutoff)
		sess.mu.Unlock()
		if idle && !sess.expiring {
			sess.expiring = true
			expired = append(expired, sess)
		}
	}
	s.mu.Unlock()
	if len(expired) == 0 {
		return nil
	}
	ids := make([]string, len(expired))
	for i, sess := range expired {
		ids[i] = sess.id
	}
	err := s.cfg.Store.Delete(ctx, ids)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sess := range expired {
		if err != nil {
			sess.expiring = false
		} else {
			delete(s.sessions, sess.id)
			delete(s.classOf, sess.id) // the store forgot the membership with the session
		}
	}
	if err != nil {
		return fmt.Errorf("deleting %d idle sessions: %w", len(ids), err)
	}
	s.cfg.Logger.Info("deleted idle sessions", "count", len(ids))
	return nil
}
