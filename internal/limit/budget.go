package limit

import "sync/atomic"

// Budget is a count of bytes shared by many holders against one maximum:
// the bytes waiting in every connection's outbox together, against
// Config.MaxOutboxBytes. Safe for concurrent use.
type Budget struct {
	max  int64
	used atomic.Int64
	peak atomic.Int64 // the most ever used, for tests and docs/limits.md
}

// NewBudget returns an empty budget of max bytes.
func NewBudget(max int64) *Budget { return &Budget{max: max} }

// Take reserves n bytes, or says the budget cannot hold them.
func (b *Budget) Take(n int64) bool {
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

// Give gives back n bytes taken.
func (b *Budget) Give(n int64) { b.used.Add(-n) }

// Used is the bytes taken and not given back.
func (b *Budget) Used() int64 { return b.used.Load() }

// Peak is the most bytes ever taken at once.
func (b *Budget) Peak() int64 { return b.peak.Load() }
