package server

import (
	"fmt"
	"time"

	"github.com/toolcall-lab/lab/internal/limit"
	"github.com/toolcall-lab/lab/model"
)

// Every bound the server keeps, in counts and bytes: per connection, per
// session, per client address, per server. The configurable ones are in
// Config (defaults in DefaultConfig); these are fixed. docs/limits.md adds
// them up into what one session, one address and the server can cost.

const (
	// maxInbox bounds the changes waiting in one session, so one client
	// cannot queue unbounded work behind a slow apply.
	maxInbox = 64

	// maxPendingStates bounds the state frames waiting for one connection.
	// A connection further behind loses the oldest waiting state: frames
	// are whole states, so a newer one is always enough to catch up. Their
	// bytes are bounded too (Config.MaxConnOutboxBytes).
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

	// authFailureEvery refills the allowance of wrong instructor or metrics
	// credentials (console logins, bearer tokens, cookies) of one client
	// address, whose burst is Config.AuthFailureBurst. Right credentials
	// cost nothing, so a flood of wrong ones from one address never locks
	// out another.
	authFailureEvery = 2 * time.Second

	// maxAddrEntries bounds the client addresses the server remembers; past
	// it the idle ones are forgotten at once rather than at the next sweep.
	maxAddrEntries = 50_000

	// Join attempts (join.go). A request for a class (its name form or its
	// name) takes from the class's allowance, times its members (payer): a
	// hall of 500 behind one NAT joins at 7 a second. A code that names no
	// class takes from its address's second, small one: guessing codes at
	// 1 every 2 seconds finds one open class among a million codes in about
	// 12 days on average.
	joinRate      = 10 // requests a second, per payer
	joinBurst     = 200
	joinMissRate  = 0.5 // unknown codes a second, per address
	joinMissBurst = 20

	// Programs submitted for the code check (code.go). What they cost in
	// CPU is shared out by the checker's fair line (internal/fair), not
	// refused: an address, or a class, alone on the lab gets every core,
	// and several get them in turn. A session's submissions are each an
	// event of up to 64 KiB in the log, so they have an allowance that no
	// person pressing Check meets (10 at once, then one a second), which
	// keeps a script from writing a session's log at the frame rate.
	codeSessionRate  = 1 // a second, per session
	codeSessionBurst = 10

	// Plays of a failing step (and kept cases), per payer (an address, or
	// a class times its members): each starts a sandbox of its own beside
	// the checks, so they are counted.
	playRate  = 2 // a second
	playBurst = 60

	// codeCheckDeadline bounds one check on the wall clock, its wait for
	// the sandbox included: past it the sandbox is closed and the check
	// ends as an error.
	codeCheckDeadline = 20 * time.Second

	// Live compiles and types under the pointer (live.go, issue 52): an
	// allowance per connection of its own, apart from the checks'. A page
	// asks at each pause in typing (300 ms) and when the pointer rests:
	// fast typing asks about 3 a second.
	liveConnRate  = 5 // a second, per connection
	liveConnBurst = 30

	// maxLiveKept bounds the live compiles kept for the next same source
	// (liveCompiles.kept): a class's skeleton and its variants, each a
	// few KiB of messages and the .cmt (32 KB for the lesson's module).
	maxLiveKept = 256
)

// retryIn says when to try again after a refusal that ends in d: whole
// seconds, at least one.
func retryIn(d time.Duration) string {
	n := max(1, int((d+time.Second-1)/time.Second))
	if n == 1 {
		return "try again in 1 second"
	}
	return fmt.Sprintf("try again in %d seconds", n)
}

// minFrameBytes is the least frame cap that still lets a reply at the limit
// through, written with JSON escapes (up to 6 bytes a byte) and its frame.
func minFrameBytes(l model.Limits) int64 {
	return int64(l.MaxReplyBytes)*6 + 1024
}

// maxStateFrameBytes bounds one encoded state frame: every held byte may be
// escaped to 6 (in the queue's labels), plus the draft (at most a reply),
// each held message's and receipt's fixed part and the call. A connection's
// outbox must take at least one such frame.
func maxStateFrameBytes(l model.Limits) int64 {
	return 6*int64(l.MaxHeldBytes+l.MaxReplyBytes) + 256*int64(l.MaxHeld) + 1024*int64(l.MaxReceipts) + 64<<10
}

// frameLimit is one connection's frame rate limit. Frames over it are
// refused; refusals have an allowance of their own (the burst, refilled at a
// quarter of the rate), so a burst of clicks gets error frames while a client
// that keeps going over is closed (closeRateAbuse). Owned by the reader.
type frameLimit struct {
	frames, refusals limit.Bucket
}

func newFrameLimit(perSecond float64, burst int) frameLimit {
	return frameLimit{frames: limit.NewBucket(perSecond, burst), refusals: limit.NewBucket(perSecond/4, burst)}
}

// newAddrTable returns the table of client addresses with cfg's
// allowances and the fixed ones above.
func newAddrTable(cfg *Config) *limit.AddrTable {
	return limit.NewAddrTable(limit.AddrConfig{
		ConnRate: cfg.AddrConnRate, ConnBurst: cfg.MaxAddrConns,
		AuthEvery: authFailureEvery, AuthBurst: cfg.AuthFailureBurst,
		JoinRate: joinRate, JoinBurst: joinBurst,
		MissRate: joinMissRate, MissBurst: joinMissBurst,
		PlayRate: playRate, PlayBurst: playBurst,
		MaxEntries: maxAddrEntries,
	})
}

// memberships is which class each session joined through its door, and
// how many members each class has, so that a class's allowances are sized
// by its members. Guarded by Server.mu.
type memberships struct {
	of      map[string]string // session -> class
	members map[string]int    // class -> its sessions in of
}

func newMemberships() memberships {
	return memberships{of: make(map[string]string), members: make(map[string]int)}
}

// join records that session id is a member of class.
func (m *memberships) join(id, class string) {
	if old, ok := m.of[id]; ok {
		if old == class {
			return
		}
		m.leave(id)
	}
	m.of[id] = class
	m.members[class]++
}

// leave forgets session id's membership, if it has one.
func (m *memberships) leave(id string) {
	class, ok := m.of[id]
	if !ok {
		return
	}
	delete(m.of, id)
	if m.members[class]--; m.members[class] <= 0 {
		delete(m.members, class)
	}
}

// classPayer is class's key in the address table: no address has a space
// in it.
func classPayer(class string, members int) limit.Who {
	return limit.Who{Key: "class " + class, Scale: max(members, 1)}
}

// payer is who pays for what session id does from addr: its class, sized
// by the class's members, when it joined one through the door (a hall
// behind one router counts as its students, not as one address); else the
// address.
func (s *Server) payer(id, addr string) limit.Who {
	s.mu.Lock()
	defer s.mu.Unlock()
	if class, ok := s.classOf.of[id]; ok {
		return classPayer(class, s.classOf.members[class])
	}
	return limit.Addr(addr)
}

// classPayer is class as a payer, sized by its members.
func (s *Server) classPayer(class string) limit.Who {
	s.mu.Lock()
	defer s.mu.Unlock()
	return classPayer(class, s.classOf.members[class])
}

// allowNew spends one of w's allowance of new connections, or says it
// has opened too many lately.
func (s *Server) allowNew(w limit.Who) error {
	if !s.addrs.AllowNew(w) {
		return fmt.Errorf("%w (too many new ones lately); try again in a few seconds", errAddrFull)
	}
	return nil
}

// admit reserves a place for one more connection to session id once its
// upgrade has succeeded, or says which cap is full. A session new to the
// server is made in memory only: it is stored, and counted against
// MaxSessions, with its first change (reserve). release gives the place
// back and forgets a session that never changed.
func (s *Server) admit(id string) (*session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.admitted >= s.cfg.MaxConns {
		return nil, fmt.Errorf("%w: %d connections are open (the most it takes); try again later", errLabFull, s.cfg.MaxConns)
	}
	sess, err := s.getOrCreate(id)
	if err != nil {
		return nil, err
	}
	if sess.admitted >= s.cfg.MaxSessionConns {
		return nil, fmt.Errorf("%w (%d, the most it takes); close a tab and try again", errTabsFull, s.cfg.MaxSessionConns)
	}
	s.admitted++
	sess.admitted++
	return sess, nil
}

// release gives back the place admit reserved. It notes no activity: only a
// change extends a session's life. A session that never changed leaves the
// map with its last connection.
func (s *Server) release(sess *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.admitted--
	sess.admitted--
	if sess.admitted == 0 && !sess.stored && s.sessions[sess.id] == sess && sess.idle() {
		delete(s.sessions, sess.id)
	}
}

// reserve counts sess as stored, against MaxSessions and its creator's
// address, before its first change is appended. Changes after the first
// reserve nothing. unreserve undoes it when that append fails.
func (s *Server) reserve(sess *session, addr string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess.stored {
		return nil
	}
	if cur, ok := s.lookup(sess.id); !ok || cur != sess {
		return errSessionExpiring // forgotten or being deleted: not to be stored
	}
	if s.stored >= s.cfg.MaxSessions {
		return fmt.Errorf("%w: it holds %d sessions", errTooManySessions, s.cfg.MaxSessions)
	}
	if addr != "" && !s.addrs.AddSession(addr, s.cfg.MaxAddrSessions) {
		return fmt.Errorf("%w: %d sessions were started from your network (the most the lab keeps for one address)", errTooManySessions, s.cfg.MaxAddrSessions)
	}
	sess.stored, sess.creator = true, addr
	s.stored++
	return nil
}

func (s *Server) unreserve(sess *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.uncount(sess)
}

// uncount stops counting a stored session against the caps (its first
// append failed, or it was deleted). Called with mu held.
func (s *Server) uncount(sess *session) {
	if !sess.stored {
		return
	}
	if sess.creator != "" {
		s.addrs.DropSession(sess.creator)
	}
	sess.stored, sess.creator = false, ""
	s.stored--
}

// eventCaps bound the events of one session (Config.MaxRuns, MaxRenames,
// MaxEvents), so that one session cannot grow the data file without end:
// held messages and receipts have their own caps (model.Limits).
type eventCaps struct {
	runs, renames, events int
}

// check refuses ev when the session already has as many events of its kind
// (or in all) as the caps allow; counts are the session's so far.
func (c eventCaps) check(ev model.Event, runs, renames int, events uint64) error {
	switch {
	case events >= uint64(c.events):
		return &model.LimitError{Cap: "changes in one session", Max: c.events}
	case (ev.Kind == model.RunStarted || ev.Kind == model.PracticeDrawn && ev.Practice.NewRun) && runs >= c.runs:
		return &model.LimitError{Cap: "runs in one session", Max: c.runs}
	case ev.Kind == model.Renamed && renames >= c.renames:
		return &model.LimitError{Cap: "renames in one session", Max: c.renames}
	}
	return nil
}
