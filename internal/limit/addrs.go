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
	PlayRate  float64 // plays of a failing step (and kept cases) a second
	PlayBurst int
	// MaxEntries bounds the addresses the table remembers; past it the
	// idle ones are forgotten at once rather than at the next Prune.
	MaxEntries int
}

// AddrTable keeps what each payer holds and may still do: open WebSockets,
// the sessions it created, and its allowances of new connections, of wrong
// credentials, of join attempts and of plays. A payer (Who) is a client
// address (Echo's RealIP, which -trusted-proxies decides), or a class whose
// members joined through its door: they count as people, not as the one
// address a school's router gives them, so a class's allowances of rates
// are a lone address's times its members (Who.Scale).
//
// Ownership: mu guards m and every addrState in it. It is a leaf lock: taken
// under Server.mu at times, never the other way round.
type AddrTable struct {
	cfg AddrConfig

	mu sync.Mutex
	m  map[string]*addrState
}

// Who is what an allowance is charged to: Key names the payer (an
// address, or a class, whose key its caller makes apart from any address),
// Scale how many people it stands for (at least 1): its rates and bursts
// are the table's times Scale.
type Who struct {
	Key   string
	Scale int
}

// Addr is a client address as a payer.
func Addr(addr string) Who { return Who{Key: addr, Scale: 1} }

type addrState struct {
	scale    int
	conns    int // open or opening WebSockets
	sessions int // sessions it created that the server holds
	newConns Bucket
	authFail *rate.Limiter
	joins    Bucket        // join requests
	misses   *rate.Limiter // join requests for a code that names no class
	plays    Bucket        // plays of a failing step, kept cases
}

// NewAddrTable returns an empty table.
func NewAddrTable(cfg AddrConfig) *AddrTable {
	return &AddrTable{cfg: cfg, m: make(map[string]*addrState)}
}

// get returns addr's entry, creating it at scale 1. Called with mu held.
func (t *AddrTable) get(addr string) *addrState { return t.at(addr, 0) }

// of returns w's entry, its rates and bursts those of w.Scale people: a
// class that gained members gets their allowance from then on (the tokens
// it holds stay, and refill at the new rate). Called with mu held.
func (t *AddrTable) of(w Who) *addrState { return t.at(w.Key, max(w.Scale, 1)) }

// at returns key's entry, made full at scale n, or resized to n; n 0
// keeps an entry's scale. Called with mu held.
func (t *AddrTable) at(key string, n int) *addrState {
	a := t.m[key]
	if a == nil {
		if len(t.m) >= t.cfg.MaxEntries {
			t.pruneLocked(time.Now())
		}
		a = &addrState{
			scale:    1,
			newConns: NewBucket(t.cfg.ConnRate, t.cfg.ConnBurst),
			authFail: rate.NewLimiter(rate.Every(t.cfg.AuthEvery), t.cfg.AuthBurst),
			joins:    NewBucket(t.cfg.JoinRate, t.cfg.JoinBurst),
			misses:   rate.NewLimiter(rate.Limit(t.cfg.MissRate), t.cfg.MissBurst),
			plays:    NewBucket(t.cfg.PlayRate, t.cfg.PlayBurst),
		}
		t.m[key] = a
	}
	if n != 0 && n != a.scale {
		now := time.Now()
		a.scale = n
		f := float64(n)
		a.newConns.Resize(now, t.cfg.ConnRate*f, t.cfg.ConnBurst*n)
		a.joins.Resize(now, t.cfg.JoinRate*f, t.cfg.JoinBurst*n)
		a.plays.Resize(now, t.cfg.PlayRate*f, t.cfg.PlayBurst*n)
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
			a.newConns.Full(now) && full(a.authFail, now) && a.joins.Full(now) && full(a.misses, now) && a.plays.Full(now) {
			delete(t.m, k)
		}
	}
}

// full says whether l holds its whole burst at now.
func full(l *rate.Limiter, now time.Time) bool {
	return l.TokensAt(now) >= float64(l.Burst())
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

// AllowNew spends one of w's allowance of new connections, or says it
// has opened too many lately.
func (t *AddrTable) AllowNew(w Who) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.of(w).newConns.Allow(time.Now())
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

// MayKnock says whether addr may try a code at the door: it has not used
// up its allowance of codes that name no class (JoinMissed). It spends
// nothing: a code that names a class is charged to it (AllowJoin).
func (t *AddrTable) MayKnock(addr string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.get(addr).misses.Tokens() >= 1
}

// AllowJoin spends one of w's join attempts (w: the class the code names,
// or an address), or says it has made too many lately.
func (t *AddrTable) AllowJoin(w Who) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.of(w).joins.Allow(time.Now())
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

// AllowPlay spends one of w's allowance of plays of a failing step (and
// of kept cases), or says how long until it has one again.
func (t *AddrTable) AllowPlay(w Who) (ok bool, wait time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := &t.of(w).plays
	now := time.Now()
	if d := b.Wait(now); d > 0 {
		return false, d
	}
	b.Allow(now)
	return true, 0
}
