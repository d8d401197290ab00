package postgres

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/toolcall-lab/lab/store/storetest"
)

// BenchmarkAppendParallel: many sessions appending at once, each its next
// seq (labbench's throughput from the store's side): group commit's
// batches, and the CPU per append with -cpuprofile.
func BenchmarkAppendParallel(b *testing.B) {
	s := openPG(b)
	ctx := context.Background()
	var sessions atomic.Int64
	b.SetParallelism(25) // × GOMAXPROCS goroutines
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
}
