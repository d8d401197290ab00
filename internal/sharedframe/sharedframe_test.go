package sharedframe

import "testing"

// TestPool: a buffer comes back with room for what was asked, and a
// frame released more often than retained is a bug that stops the server
// rather than corrupt someone's frame.
func TestPool(t *testing.T) {
	t.Parallel()
	var p Pool
	for _, n := range []int{0, 1, 1024, 1025, 9000, 1 << 20, 1<<20 + 1} {
		f := p.Get(n)
		if cap(f.Data) < n || len(f.Data) != 0 || f.Refs() != 1 {
			t.Fatalf("get(%d): len %d cap %d refs %d", n, len(f.Data), cap(f.Data), f.Refs())
		}
		f.Retain()
		f.Release()
		f.Release()
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a second release did not panic")
		}
	}()
	f := p.Get(10)
	f.Release()
	f.Release()
}
