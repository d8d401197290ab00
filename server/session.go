package server

import (
	"sync"

	"github.com/toolcall-lab/lab/model"
)

// maxInbox bounds the changes waiting in one session, so one client cannot
// queue unbounded work behind a slow apply.
const maxInbox = 64

// session is one lab session, named by a UUID.
//
// Ownership: mu guards inbox, draining, conns and frame. The lab is owned by
// the goroutine that drains the inbox; at most one drains at a time (chosen
// under mu, by the draining flag), so changes apply one at a time in arrival
// order, and frames are handed to connections under mu in that same order.
// No goroutine of its own: whoever submits into an idle session drains it.
type session struct {
	id     string
	limits model.Limits

	mu       sync.Mutex
	inbox    []pending
	draining bool
	conns    map[*conn]struct{}
	frame    []byte // the encoded state as of the last change

	lab *model.Lab // owned by the current drainer

	admitted int // connections admitted to it; guarded by Server.mu
}

// pending is a command waiting to be applied, with where its refusal goes.
type pending struct {
	cmd  model.Command
	from *conn        // the connection that sent it, for its error frame; may be nil
	done chan<- error // optional; receives the result (buffered by the caller)
}

func newSession(id string, limits model.Limits) *session {
	s := &session{id: id, limits: limits, conns: make(map[*conn]struct{}), lab: model.NewLab()}
	s.frame = appendStateFrame(nil, id, s.lab.View())
	return s
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

// apply decides, applies and publishes one command. It runs outside mu:
// deciding and encoding are the session's work, not the connections'.
func (s *session) apply(p pending) {
	ev, err := s.lab.Decide(p.cmd, s.limits)
	if err == nil {
		_, err = s.lab.Apply(ev)
	}
	if err != nil {
		s.refuse(p, err)
		return
	}
	frame := appendStateFrame(make([]byte, 0, len(s.frame)+256), s.id, s.lab.View())
	s.mu.Lock()
	s.frame = frame
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
