package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/toolcall-lab/lab/model"
	"github.com/toolcall-lab/lab/server/store"
)

// maxInbox bounds the changes waiting in one session, so one client cannot
// queue unbounded work behind a slow apply.
const maxInbox = 64

// session is one lab session, named by a UUID.
//
// Ownership: mu guards inbox, draining, conns, frame, attached and
// lastActive. expiring is guarded by Server.mu. The lab is owned by
// the goroutine that drains the inbox; at most one drains at a time (chosen
// under mu, by the draining flag), so changes apply one at a time in arrival
// order, and frames are handed to connections under mu in that same order.
// No goroutine of its own: whoever submits into an idle session drains it.
type session struct {
	id      string
	limits  model.Limits
	metrics *metrics
	store   Store
	now     func() time.Time

	mu       sync.Mutex
	inbox    []pending
	draining bool
	conns    map[*conn]struct{}
	frame    []byte // the encoded state as of the last change

	attached   int       // connections attached (registered with the Server)
	lastActive time.Time // the last change or disconnect
	expiring   bool      // the janitor is deleting it; guarded by Server.mu

	lab *model.Lab // owned by the current drainer
}

// pending is a command waiting to be applied, with where its refusal goes.
type pending struct {
	cmd  model.Command
	from *conn        // the connection that sent it, for its error frame; may be nil
	done chan<- error // optional; receives the result (buffered by the caller)
}

func newSession(id string, cfg *Config, m *metrics) *session {
	s := &session{id: id, limits: cfg.Limits, metrics: m, store: cfg.Store, now: cfg.Now,
		conns: make(map[*conn]struct{}), lab: model.NewLab(), lastActive: cfg.Now()}
	s.frame = appendStateFrame(nil, id, s.lab.View())
	return s
}

// restoreSession rebuilds a stored session by replaying its records.
func restoreSession(info store.Session, recs []store.Record, cfg *Config, m *metrics) (*session, error) {
	s := newSession(info.ID, cfg, m)
	s.lastActive = info.LastActive
	for _, r := range recs {
		if r.Seq != s.lab.Seq()+1 {
			return nil, fmt.Errorf("session %s: stored seq %d follows seq %d", info.ID, r.Seq, s.lab.Seq())
		}
		if _, err := s.lab.Apply(r.Event); err != nil {
			return nil, fmt.Errorf("session %s: replaying seq %d: %w", info.ID, r.Seq, err)
		}
	}
	s.frame = appendStateFrame(nil, s.id, s.lab.View())
	return s, nil
}

// subscribe adds c and hands it the current state, under mu so that it sees
// every later frame after this one.
func (s *session) subscribe(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conns[c] = struct{}{}
	c.sendState(s.frame)
}

func (s *session) unsubscribe(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
}

// submit queues a command and, if nobody is draining the session, drains it
// in the calling goroutine.
func (s *session) submit(p pending) {
	s.mu.Lock()
	if len(s.inbox) >= maxInbox {
		s.mu.Unlock()
		s.refuse(p, errSessionBusy)
		return
	}
	s.inbox = append(s.inbox, p)
	if s.draining {
		s.mu.Unlock()
		return
	}
	s.draining = true
	s.mu.Unlock()
	s.drain()
}

func (s *session) drain() {
	for {
		s.mu.Lock()
		if len(s.inbox) == 0 {
			s.draining = false
			s.inbox = s.inbox[:0]
			s.mu.Unlock()
			return
		}
		p := s.inbox[0]
		s.inbox[0] = pending{}
		s.inbox = s.inbox[1:]
		s.mu.Unlock()
		s.apply(p)
	}
}

// apply decides, stores, applies and publishes one command. It runs outside
// mu: deciding, storing and encoding are the session's work, not the
// connections'. A change is applied only once the store has committed it, so
// no client ever sees a change that a crash could lose; a failed append
// refuses the change and leaves the session as it was.
func (s *session) apply(p pending) {
	ev, err := s.lab.Decide(p.cmd, s.limits)
	if err != nil {
		s.refuse(p, err)
		return
	}
	notice, run, err := s.lab.Preview(ev)
	if err != nil {
		s.refuse(p, err)
		return
	}
	now := s.now().UTC().Truncate(time.Millisecond)
	rec := store.Record{Session: s.id, Seq: s.lab.Seq() + 1, Time: now, Event: ev, Run: run, Notice: notice}
	started := time.Now()
	err = s.store.Append(context.Background(), rec)
	s.metrics.appendLatency.Observe(time.Since(started).Seconds())
	if err != nil {
		s.refuse(p, fmt.Errorf("%w: %w", errCannotSave, err))
		return
	}
	if _, err := s.lab.Apply(ev); err != nil {
		// Preview accepted ev, so this cannot happen; the stored record
		// would then disagree with the session, which a restart resolves.
		s.refuse(p, fmt.Errorf("applying a stored event: %w", err))
		return
	}
	if ev.Kind == model.MessageDelivered {
		s.metrics.deliveries.WithLabelValues(notice).Inc()
	}
	frame := appendStateFrame(make([]byte, 0, len(s.frame)+256), s.id, s.lab.View())
	s.mu.Lock()
	s.frame = frame
	s.lastActive = now
	for c := range s.conns {
		c.sendState(frame)
	}
	s.mu.Unlock()
	if p.done != nil {
		p.done <- nil
	}
}

func (s *session) refuse(p pending, err error) {
	if p.from != nil {
		p.from.sendError(err)
	}
	if p.done != nil {
		p.done <- err
	}
}

// snapshot returns the current state frame.
func (s *session) snapshot() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.frame
}
