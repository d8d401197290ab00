package server

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// sharedFrame is a state frame held by its session (the latest state, for
// tabs that open) and by every outbox it waits in. Its buffer goes back to
// the pool when the last holder lets go: allocating a state frame (a few
// KiB, zeroed) for every change was a fifth of the memory path's CPU with
// the collector's share (BENCHMARKS.md). A holder takes its reference with
// retain before it can be seen by anyone else, and gives it up once with
// release. data is read-only while anyone but its session holds a
// reference: the session writes its next state over it only when it holds
// the only one, under the lock it hands the frame out under
// (stateEncoder.rewrite).
type sharedFrame struct {
	data []byte
	refs atomic.Int32
	pool *framePool
}

func (f *sharedFrame) retain() { f.refs.Add(1) }

func (f *sharedFrame) release() {
	switch n := f.refs.Add(-1); {
	case n == 0:
		f.pool.put(f)
	case n < 0:
		panic("server: a state frame released more often than retained")
	}
}

// framePool recycles state frames by size: bucket i holds buffers of
// capacity 2^(minFrameShift+i). Safe for concurrent use; the Server owns
// one, shared by its sessions.
type framePool struct {
	buckets [frameBuckets]sync.Pool
}

const (
	minFrameShift = 10 // 1 KiB
	// frameBuckets: up to 1 MiB; a bigger frame is allocated and left to
	// the collector.
	frameBuckets = 11
)

// get returns a frame with one reference (the caller's) whose data is
// empty with room for n bytes.
func (p *framePool) get(n int) *sharedFrame {
	i := 0
	if n > 1<<minFrameShift {
		i = bits.Len(uint(n-1)) - minFrameShift
	}
	var f *sharedFrame
	if i < frameBuckets {
		f, _ = p.buckets[i].Get().(*sharedFrame)
	}
	if f == nil {
		f = &sharedFrame{pool: p, data: make([]byte, 0, max(1<<(minFrameShift+i), n))}
	}
	f.data = f.data[:0]
	f.refs.Store(1)
	return f
}

func (p *framePool) put(f *sharedFrame) {
	i := bits.Len(uint(cap(f.data))) - 1 - minFrameShift
	if i >= 0 && i < frameBuckets && cap(f.data) == 1<<(minFrameShift+i) {
		p.buckets[i].Put(f)
	}
}
