package server

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

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

	// Join attempts per client address (join.go). Every join request takes
	// from the first allowance: generous, so a class of 500 behind one NAT
	// joins within a minute or two. A code that names no class also takes
	// from the second, small one: guessing codes at 1 every 2 seconds finds
	// one open class among a million codes in about 12 days on average.
	joinRate      = 10 // requests a second, per address
	joinBurst     = 200
	joinMissRate  = 0.5 // unknown codes a second, per address
	joinMissBurst = 20
)

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
	frames, refusals tokenBucket
}

func newFrameLimit(perSecond float64, burst int) frameLimit {
	return frameLimit{frames: newTokenBucket(perSecond, burst), refusals: newTokenBucket(perSecond/4, burst)}
}

// tokenBucket allows perSecond events a second in bursts of up to burst,
// full at first: rate.Limiter's Allow for one goroutine. It is on every
// frame's path, where rate.Limiter's lock and bookkeeping cost 1.4 % of the
// server's CPU (BENCHMARKS.md, round 8); this takes one clock reading.
type tokenBucket struct {
	perSecond, burst float64
	tokens           float64
	last             time.Time // the last allow (zero at first: the bucket stays full)
}

func newTokenBucket(perSecond float64, burst int) tokenBucket {
	return tokenBucket{perSecond: perSecond, burst: float64(burst), tokens: float64(burst)}
}

// allow takes a token at now, if there is one.
func (b *tokenBucket) allow(now time.Time) bool {
	b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.perSecond)
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// outboxBudget is the bytes waiting in every connection's outbox together,
// against Config.MaxOutboxBytes. Each conn also counts its own (conn.queued).
// Safe for concurrent use.
type outboxBudget struct {
	max  int64
	used atomic.Int64
	peak atomic.Int64 // the most ever used, for tests and docs/limits.md
}

// take reserves n bytes, or says the budget cannot hold them.
func (b *outboxBudget) take(n int64) bool {
	for {
		u := b.used.Load()
		if u+n > b.max {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			for p := b.peak.Load(); u+n > p && !b.peak.CompareAndSwap(p, u+n); p = b.peak.Load() {
			}
			return true
		}
	}
}

func (b *outboxBudget) give(n int64) { b.used.Add(-n) }

// addrTable keeps what each client address (Echo's RealIP, which
// -trusted-proxies decides) holds and may still do: open WebSockets, the
// sessions it created, and its allowances of new connections, of wrong
// credentials and of join attempts.
//
// Ownership: mu guards m and every addrState in it. It is a leaf lock: taken
// under Server.mu at times, never the other way round.
type addrTable struct {
	connRate  rate.Limit
	connBurst int
	authBurst int

	mu sync.Mutex
	m  map[string]*addrState
}

type addrState struct {
	conns    int // open or opening WebSockets
	sessions int // sessions it created that the server holds
	newConns *rate.Limiter
	authFail *rate.Limiter
	joins    *rate.Limiter // join requests
	misses   *rate.Limiter // join requests for a code that names no class
}

func newAddrTable(connRate float64, connBurst, authBurst int) *addrTable {
	return &addrTable{connRate: rate.Limit(connRate), connBurst: connBurst, authBurst: authBurst, m: make(map[string]*addrState)}
}

// get returns addr's entry, creating it. Called with mu held.
func (t *addrTable) get(addr string) *addrState {
	a := t.m[addr]
	if a == nil {
		if len(t.m) >= maxAddrEntries {
			t.pruneLocked(time.Now())
		}
		a = &addrState{
			newConns: rate.NewLimiter(t.connRate, t.connBurst),
			authFail: rate.NewLimiter(rate.Every(authFailureEvery), t.authBurst),
			joins:    rate.NewLimiter(joinRate, joinBurst),
			misses:   rate.NewLimiter(joinMissRate, joinMissBurst),
		}
		t.m[addr] = a
	}
	return a
}

// prune forgets the addresses that hold nothing and whose allowances are
// full again: remembering them would change nothing.
func (t *addrTable) prune(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pruneLocked(now)
}

func (t *addrTable) pruneLocked(now time.Time) {
	for k, a := range t.m {
		if a.conns == 0 && a.sessions == 0 &&
			a.newConns.TokensAt(now) >= float64(t.connBurst) && a.authFail.TokensAt(now) >= float64(t.authBurst) &&
			a.joins.TokensAt(now) >= joinBurst && a.misses.TokensAt(now) >= joinMissBurst {
			delete(t.m, k)
		}
	}
}

// enter counts one more WebSocket (open, opening or being refused) of addr,
// unless it has max already: then it is refused before the upgrade, as
// cheaply as can be. leave undoes it.
func (t *addrTable) enter(addr string, max int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	a := t.get(addr)
	if a.conns >= max {
		return false
	}
	a.conns++
	return true
}

func (t *addrTable) leave(addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.get(addr).conns--
}

// allowNew spends one of addr's allowance of new connections, or says it
// has opened too many lately.
func (t *addrTable) allowNew(addr string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.get(addr).newConns.Allow() {
		return fmt.Errorf("%w (too many new ones lately); try again in a few seconds", errAddrFull)
	}
	return nil
}

// addSession counts a session created by addr, unless addr holds max.
func (t *addrTable) addSession(addr string, max int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	a := t.get(addr)
	if a.sessions >= max {
		return fmt.Errorf("%w: %d sessions were started from your network (the most the lab keeps for one address)", errTooManySessions, max)
	}
	a.sessions++
	return nil
}

func (t *addrTable) dropSession(addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.get(addr).sessions--
}

// allowJoin spends one of addr's join attempts, and says whether it had
// one and has not used up its allowance of misses either.
func (t *addrTable) allowJoin(addr string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	a := t.get(addr)
	return a.joins.Allow() && a.misses.Tokens() >= 1
}

// joinMissed spends one of addr's allowance of join requests for a code
// that names no class.
func (t *addrTable) joinMissed(addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.get(addr).misses.Allow()
}

// authAllowed says whether addr may present credentials now: it has not
// used up its allowance of wrong ones.
func (t *addrTable) authAllowed(addr string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.get(addr).authFail.Tokens() >= 1
}

// authFailed spends one of addr's allowance of wrong credentials.
func (t *addrTable) authFailed(addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.get(addr).authFail.Allow()
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
	if addr != "" {
		if err := s.addrs.addSession(addr, s.cfg.MaxAddrSessions); err != nil {
			return err
		}
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
		s.addrs.dropSession(sess.creator)
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
	case ev.Kind == model.RunStarted && runs >= c.runs:
		return &model.LimitError{Cap: "runs in one session", Max: c.runs}
	case ev.Kind == model.Renamed && renames >= c.renames:
		return &model.LimitError{Cap: "renames in one session", Max: c.renames}
	}
	return nil
}
