package postgres

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolcall-lab/lab/store/storetest"
)

// BenchmarkAppendParallel: many sessions appending at once, each its next
// seq (labbench's throughput from the store's side): group commit's
// batches, and the CPU per append with -cpuprofile.
func BenchmarkAppendParallel(b *testing.B) {
	s := openPG(b)
	ctx := context.Background()
	var sessions atomic.Int64
	commits := func() float64 {
		// The statistics are the backend's snapshot: clear it to read anew.
		var n float64
		if _, err := s.pool.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
			b.Fatal(err)
		}
		if err := s.pool.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&n); err != nil {
			b.Fatal(err)
		}
		return n
	}
	b.SetParallelism(25) // × GOMAXPROCS goroutines
	c0 := commits()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		id := fmt.Sprint("s", sessions.Add(1))
		for seq := uint64(1); pb.Next(); seq++ {
			if err := s.Append(ctx, storetest.Walkthrough(id, seq)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	// Statistics reach pg_stat_database when a backend goes idle, within
	// a second: an estimate, counting a few of the bench's own queries.
	time.Sleep(1500 * time.Millisecond)
	b.ReportMetric(float64(b.N)/(commits()-c0), "appends/commit")
}
