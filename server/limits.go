package server

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/time/rate"

	"github.com/toolcall-lab/lab/model"
)

// Every bound the server keeps, in counts and bytes: per connection, per
// session, per server. The configurable ones are in Config (defaults in
// DefaultConfig); these are fixed.

const (
	// maxInbox bounds the changes waiting in one session, so one client
	// cannot queue unbounded work behind a slow apply.
	maxInbox = 64

	// maxPendingStates bounds the state frames waiting for one connection.
	// A connection further behind loses the oldest waiting state: frames
	// are whole states, so a newer one is always enough to catch up.
	maxPendingStates = 64

	// maxPendingErrors bounds the error frames waiting for a connection
	// that sends refused frames faster than it reads; past it the
	// connection is closed (closeTooManyRefusals).
	maxPendingErrors = 16

	// maxInstructorFrame caps an instructor's frame: they name a session
	// at most.
	maxInstructorFrame = 4 << 10

	// maxTimeline bounds the timeline a session keeps in memory.
	maxTimeline = 2000

	// maxLabelBytes bounds a held message's text in a timeline entry: the
	// timeline says which message it was, the state frame holds the whole
	// text.
	maxLabelBytes = 200

	// maxLogins bounds the live console logins; the oldest gives way to a
	// new one.
	maxLogins = 64
)

// minFrameBytes is the least frame cap that still lets a reply at the limit
// through, written with JSON escapes (up to 6 bytes a byte) and its frame.
func minFrameBytes(l model.Limits) int64 {
	return int64(l.MaxReplyBytes)*6 + 1024
}

// newLoginLimiter throttles console logins for the whole server: a burst of
// 5, then one a second. Guessing the token is slow, and a teacher who
// mistypes it a few times is not locked out for long.
func newLoginLimiter() *rate.Limiter {
	return rate.NewLimiter(rate.Every(time.Second), 5)
}

// frameLimit is one connection's frame rate limit. Frames over it are
// refused; refusals have an allowance of their own (the burst, refilled at a
// quarter of the rate), so a burst of clicks gets error frames while a client
// that keeps going over is closed (closeRateAbuse).
type frameLimit struct {
	frames, refusals *rate.Limiter
}

func newFrameLimit(perSecond float64, burst int) frameLimit {
	r := rate.Limit(perSecond)
	return frameLimit{frames: rate.NewLimiter(r, burst), refusals: rate.NewLimiter(r/4, burst)}
}

// errTooManyFrames refuses a frame over the connection's rate limit.
var errTooManyFrames = errors.New("too many frames")

// errRateAbuse ends a connection that kept sending over its rate limit.
var errRateAbuse = errors.New("closed: kept sending over the frame rate limit")

// admit reserves a place for one more connection to session id, creating
// the session on first use, or says which cap is full. It runs before the
// upgrade, so a refusal is an HTTP answer; release gives the place back.
func (s *Server) admit(id string) (*session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.admitted >= s.cfg.MaxConns {
		return nil, fmt.Errorf("the lab is full: %d connections are open (the most it takes); try again later", s.cfg.MaxConns)
	}
	sess, err := s.getOrCreate(id)
	if err != nil {
		return nil, err
	}
	if sess.admitted >= s.cfg.MaxSessionConns {
		return nil, fmt.Errorf("this session has %d connections open (the most it takes); close a tab and try again", s.cfg.MaxSessionConns)
	}
	s.admitted++
	sess.admitted++
	return sess, nil
}

// release gives back the place admit reserved, and notes the session's
// activity for the janitor.
func (s *Server) release(sess *session) {
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.admitted--
	sess.admitted--
	sess.mu.Lock()
	sess.lastActive = now
	sess.mu.Unlock()
}
