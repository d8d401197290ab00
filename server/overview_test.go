package server

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestOverviewStopWaitsForFlush: a flush that is running when stop is
// called finishes before stop returns, so nothing is sent after it.
func TestOverviewStopWaitsForFlush(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	o := newOverview(func(string) []sessionRow {
		if calls.Add(1) == 2 { // the flush's call (the first is subscribe's)
			close(entered)
			<-release
		}
		return nil
	}, func(rows []sessionRow) classSummary { return summarize(rows, time.Now(), time.Minute) })
	c := collector(nil)
	o.subscribe(c, "")
	o.mark()
	<-entered
	// The flush is inside rows now. Let it go a little later: a stop that
	// did not wait would return first, and the check below would fail.
	go func() {
		time.Sleep(50 * time.Millisecond)
		close(release)
	}()
	o.stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.out.frames) != 2 {
		t.Fatalf("%d frames when stop returned, want 2 (subscribe's and the running flush's)", len(c.out.frames))
	}
}
