package limit

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// AddrConfig is what AddrTable allows each client address.
type AddrConfig struct {
	ConnRate  float64 // new connections a second
	ConnBurst int
	AuthEvery time.Duration // refills one wrong credential
	AuthBurst int
	JoinRate  float64 // join requests a second
	JoinBurst int
	MissRate  float64 // join requests a second for a code that names no class
	MissBurst int
	CodeRate  float64 // programs submitted for the code check a second
	CodeBurst int
	// MaxEntries bounds the addresses the table remembers; past it the
	// idle ones are forgotten at once rather than at the next Prune.
	MaxEntries int
}

// AddrTable keeps what each client address (Echo's RealIP, which
// -trusted-proxies decides) holds and may still do: open WebSockets, the
// sessions it created, and its allowances of new connections, of wrong
// credentials and of join attempts.
//
// Ownership: mu guards m and every addrState in it. It is a leaf lock: taken
// under Server.mu at times, never the other way round.
type AddrTable struct {
	cfg AddrConfig

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
	codes    *rate.Limiter // programs submitted for the code check
}

// NewAddrTable returns an empty table.
func NewAddrTable(cfg AddrConfig) *AddrTable {
	return &AddrTable{cfg: cfg, m: make(map[string]*addrState)}
}

// get returns addr's entry, creating it. Called with mu held.
func (t *AddrTable) get(addr string) *addrState {
	a := t.m[addr]
	if a == nil {
		if len(t.m) >= t.cfg.MaxEntries {
			t.pruneLocked(time.Now())
		}
		a = &addrState{
			newConns: rate.NewLimiter(rate.Limit(t.cfg.ConnRate), t.cfg.ConnBurst),
			authFail: rate.NewLimiter(rate.Every(t.cfg.AuthEvery), t.cfg.AuthBurst),
			joins:    rate.NewLimiter(rate.Limit(t.cfg.JoinRate), t.cfg.JoinBurst),
			misses:   rate.NewLimiter(rate.Limit(t.cfg.MissRate), t.cfg.MissBurst),
			codes:    rate.NewLimiter(rate.Limit(t.cfg.CodeRate), t.cfg.CodeBurst),
		}
		t.m[addr] = a
	}
	return a
}

// Prune forgets the addresses that hold nothing and whose allowances are
// full again: remembering them would change nothing.
func (t *AddrTable) Prune(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pruneLocked(now)
}

func (t *AddrTable) pruneLocked(now time.Time) {
	for k, a := range t.m {
		if a.conns == 0 && a.sessions == 0 &&
			a.newConns.TokensAt(now) >= float64(t.cfg.ConnBurst) && a.authFail.TokensAt(now) >= float64(t.cfg.AuthBurst) &&
			a.joins.TokensAt(now) >= float64(t.cfg.JoinBurst) && a.misses.TokensAt(now) >= float64(t.cfg.MissBurst) &&
			a.codes.TokensAt(now) >= float64(t.cfg.CodeBurst) {
			delete(t.m, k)
		}
	}
}

// Enter counts one more WebSocket (open, opening or being refused) of addr,
// unless it has max already: then it is refused before the upgrade, as
// cheaply as can be. Leave undoes it.
func (t *AddrTable) Enter(addr string, max int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	a := t.get(addr)
	if a.conns >= max {
		return false
	}
	a.conns++
	return true
}

// Leave undoes one Enter.
func (t *AddrTable) Leave(addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.get(addr).conns--
}

// AllowNew spends one of addr's allowance of new connections, or says it
// has opened too many lately.
func (t *AddrTable) AllowNew(addr string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.get(addr).newConns.Allow()
}

// AddSession counts a session created by addr, unless addr holds max.
// DropSession undoes it.
func (t *AddrTable) AddSession(addr string, max int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	a := t.get(addr)
	if a.sessions >= max {
		return false
	}
	a.sessions++
	return true
}

// DropSession undoes one AddSession.
func (t *AddrTable) DropSession(addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.get(addr).sessions--
}

// AllowJoin spends one of addr's join attempts, and says whether it had
// one and has not used up its allowance of misses either.
func (t *AddrTable) AllowJoin(addr string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	a := t.get(addr)
	return a.joins.Allow() && a.misses.Tokens() >= 1
}

// JoinMissed spends one of addr's allowance of join requests for a code
// that names no class.
func (t *AddrTable) JoinMissed(addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.get(addr).misses.Allow()
}

// AuthAllowed says whether addr may present credentials now: it has not
// used up its allowance of wrong ones.
func (t *AddrTable) AuthAllowed(addr string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.get(addr).authFail.Tokens() >= 1
}

// AuthFailed spends one of addr's allowance of wrong credentials.
func (t *AddrTable) AuthFailed(addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.get(addr).authFail.Allow()
}

// AllowCode spends one of addr's allowance of programs submitted for the
// code check, or says it has submitted too many lately.
func (t *AddrTable) AllowCode(addr string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.get(addr).codes.Allow()
}
