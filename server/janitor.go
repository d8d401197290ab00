package server

import (
	"context"
	"fmt"
	"time"
)

// janitor deletes idle sessions on a ticker.
//
// Ownership: Start starts it (startJanitor) and keeps it in Server.janitor;
// Shutdown and Restart stop it (stop closes quit and waits for done). Its
// goroutine owns nothing but the ticker; sweep takes the locks it needs.
type janitor struct {
	quit chan struct{} // closed by stop
	done chan struct{} // closed when the goroutine has returned
}

func (s *Server) startJanitor() *janitor {
	j := &janitor{quit: make(chan struct{}), done: make(chan struct{})}
	every := max(min(s.cfg.SessionTTL/4, time.Minute), time.Second)
	go func() {
		defer close(j.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-j.quit:
				return
			case <-tick.C:
				if err := s.sweep(context.Background()); err != nil {
					s.log.Warn("deleting idle sessions", "err", err)
				}
			}
		}
	}()
	return j
}

// stop ends the janitor and waits for a sweep in progress. Called once
// (closeSockets takes the janitor out of the Server first).
func (j *janitor) stop() {
	close(j.quit)
	<-j.done
}

// sweep deletes the sessions idle for longer than the TTL: no change since,
// and no open connection. They are marked expiring and gone (lookups miss
// them and submit refuses, so no change can slip in) while the store
// deletes them, outside every lock, and leave the map only once the store
// has; if the store fails they stay. Sessions that never changed are not
// stored: they leave the map as soon as nothing holds them. It also forgets
// the client addresses that hold nothing.
func (s *Server) sweep(ctx context.Context) error {
	cutoff := s.cfg.Now().Add(-s.cfg.SessionTTL)
	s.addrs.Prune(time.Now())
	var expired []*session
	s.mu.Lock()
	for id, sess := range s.sessions {
		if sess.admitted > 0 || sess.expiring {
			continue
		}
		sess.mu.Lock()
		idle := !sess.draining && len(sess.inbox) == 0
		old := idle && sess.lastActive.Before(cutoff)
		if !sess.stored && idle || sess.stored && old {
			sess.gone = true
		}
		sess.mu.Unlock()
		switch {
		case !sess.stored && idle:
			delete(s.sessions, id)
		case sess.stored && old:
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
			sess.mu.Lock()
			sess.gone = false
			sess.mu.Unlock()
		} else {
			delete(s.sessions, sess.id)
			s.classOf.leave(sess.id) // the store forgot the membership with the session
			s.uncount(sess)
		}
	}
	if err != nil {
		return fmt.Errorf("deleting %d idle sessions: %w", len(ids), err)
	}
	s.log.Info("deleted idle sessions", "count", len(ids))
	return nil
}
