package limit

import (
	"math/rand/v2"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// TestBucket: the bucket allows what rate.Limiter's
// Allow allows, event for event, at bursts, at a steady rate and after
// idling.
func TestBucket(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		perSecond float64
		burst     int
		gaps      func(r *rand.Rand) time.Duration // between events
	}{
		{20, 40, func(r *rand.Rand) time.Duration { return time.Duration(r.IntN(int(100 * time.Millisecond))) }},
		{20, 40, func(r *rand.Rand) time.Duration { return time.Duration(r.IntN(int(time.Millisecond))) }},
		{5, 1, func(r *rand.Rand) time.Duration { return time.Duration(r.IntN(int(400 * time.Millisecond))) }},
		{1e6, 1e6, func(r *rand.Rand) time.Duration { return time.Duration(r.IntN(2000)) }},
	} {
		r := rand.New(rand.NewPCG(1, uint64(tc.burst)))
		b := NewBucket(tc.perSecond, tc.burst)
		want := rate.NewLimiter(rate.Limit(tc.perSecond), tc.burst)
		now := time.Now()
		allowed := 0
		for i := range 20000 {
			if i%5000 == 0 {
				now = now.Add(time.Minute) // idle: the bucket refills to its burst
			}
			now = now.Add(tc.gaps(r))
			got := b.Allow(now)
			if w := want.AllowN(now, 1); got != w {
				t.Fatalf("%g/s burst %d, event %d: allow = %v, rate.Limiter says %v", tc.perSecond, tc.burst, i, got, w)
			}
			if got {
				allowed++
			}
		}
		if allowed == 0 || allowed == 20000 && tc.perSecond < 1e6 {
			t.Fatalf("%g/s burst %d: %d of 20000 allowed: the test never reached the limit or never passed it", tc.perSecond, tc.burst, allowed)
		}
	}
}

// TestBucketWait: an empty bucket says how long until its next token.
func TestBucketWait(t *testing.T) {
	t.Parallel()
	now := time.Now()
	b := NewBucket(2, 1)
	if w := b.Wait(now); w != 0 {
		t.Fatalf("a full bucket waits %v", w)
	}
	b.Allow(now)
	if w := b.Wait(now); w != 500*time.Millisecond {
		t.Fatalf("an empty bucket at 2 a second waits %v, want 500ms", w)
	}
	if w := b.Wait(now.Add(400 * time.Millisecond)); w < 99*time.Millisecond || w > 101*time.Millisecond {
		t.Fatalf("400 ms on it waits %v, want 100ms", w)
	}
}
