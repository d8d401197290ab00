// Package limit holds the lab's counting mechanisms, each on its own: a
// token bucket for one goroutine (Bucket), a byte budget shared by many
// (Budget) and a table of what each client address holds and may still do
// (AddrTable). The bounds they count against are the server's
// (server/limits.go).
package limit

import "time"

// Bucket allows perSecond events a second in bursts of up to burst,
// full at first: rate.Limiter's Allow for one goroutine. It is on every
// frame's path, where rate.Limiter's lock and bookkeeping cost 1.4 % of the
// server's CPU; this takes one clock reading.
type Bucket struct {
	perSecond, burst float64
	tokens           float64
	last             time.Time // the last allow (zero at first: the bucket stays full)
}

// NewBucket returns a full bucket.
func NewBucket(perSecond float64, burst int) Bucket {
	return Bucket{perSecond: perSecond, burst: float64(burst), tokens: float64(burst)}
}

// Allow takes a token at now, if there is one.
func (b *Bucket) Allow(now time.Time) bool {
	b.refill(now)
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// refill adds the tokens earned since the last refill.
func (b *Bucket) refill(now time.Time) {
	b.tokens = b.tokensAt(now)
	b.last = now
}

func (b *Bucket) tokensAt(now time.Time) float64 {
	return min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.perSecond)
}

// Full says whether the bucket holds its whole burst at now.
func (b *Bucket) Full(now time.Time) bool { return b.tokensAt(now) >= b.burst }

// Resize gives the bucket a new rate and burst at now. A larger burst adds
// its growth to the tokens (a class's new member brings a whole allowance
// of their own); a smaller one keeps at most the new burst.
func (b *Bucket) Resize(now time.Time, perSecond float64, burst int) {
	b.refill(now)
	grow := float64(burst) - b.burst
	b.perSecond, b.burst = perSecond, float64(burst)
	b.tokens = min(b.burst, b.tokens+max(grow, 0))
}

// Wait is how long from now until Allow would take a token (0 if it
// would now).
func (b *Bucket) Wait(now time.Time) time.Duration {
	tokens := b.tokensAt(now)
	if tokens >= 1 {
		return 0
	}
	return time.Duration((1 - tokens) / b.perSecond * float64(time.Second))
}

// PerSecond is the rate the bucket refills at.
func (b *Bucket) PerSecond() float64 { return b.perSecond }

// Burst is the most tokens the bucket holds.
func (b *Bucket) Burst() int { return int(b.burst) }
