package limit

import (
	"sync"
	"testing"
)

// TestBudget: takes past the maximum are refused whole, gives make room
// again, and the peak is the most ever held.
func TestBudget(t *testing.T) {
	t.Parallel()
	b := NewBudget(100)
	for _, step := range []struct {
		take       int64 // < 0: give -take
		ok         bool
		used, peak int64
	}{
		{60, true, 60, 60},
		{41, false, 60, 60},
		{40, true, 100, 100},
		{1, false, 100, 100},
		{-70, true, 30, 100},
		{0, true, 30, 100},
		{70, true, 100, 100},
		{-100, true, 0, 100},
		{101, false, 0, 100},
	} {
		ok := true
		if step.take < 0 {
			b.Give(-step.take)
		} else {
			ok = b.Take(step.take)
		}
		if ok != step.ok || b.Used() != step.used || b.Peak() != step.peak {
			t.Fatalf("after %+d: ok %v, used %d, peak %d; want %v, %d, %d", step.take, ok, b.Used(), b.Peak(), step.ok, step.used, step.peak)
		}
	}
}

// TestBudgetConcurrent: holders taking and giving at once never hold more
// than the maximum together, and every byte given back is counted.
func TestBudgetConcurrent(t *testing.T) {
	t.Parallel()
	const max, holders, rounds = 1000, 8, 5000
	b := NewBudget(max)
	var wg sync.WaitGroup
	refused := make([]int, holders)
	for h := range holders {
		wg.Go(func() {
			n := int64(h + 1)
			for range rounds {
				if !b.Take(n * 30) {
					refused[h]++
					continue
				}
				if u := b.Used(); u > max {
					t.Errorf("%d bytes used of %d", u, max)
				}
				b.Give(n * 30)
			}
		})
	}
	wg.Wait()
	if b.Used() != 0 || b.Peak() > max || b.Peak() < 8*30 {
		t.Fatalf("used %d, peak %d of %d after every holder gave back", b.Used(), b.Peak(), max)
	}
}
