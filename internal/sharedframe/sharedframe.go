// Package sharedframe holds encoded frames that many holders share by
// reference counting, and the pool their buffers go back to.
package sharedframe

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// Frame is a state frame held by its session (the latest state, for
// tabs that open) and by every outbox it waits in. Its buffer goes back to
// the pool when the last holder lets go: allocating a state frame (a few
// KiB, zeroed) for every change was a fifth of the memory path's CPU with
// the collector's share (BENCHMARKS.md). A holder takes its reference with
// Retain before it can be seen by anyone else, and gives it up once with
// Release. Data is read-only while anyone but its session holds a
// reference: the session writes its next state over it only when it holds
// the only one, under the lock it hands the frame out under
// (server's stateEncoder.rewrite).
type Frame struct {
	Data []byte
	refs atomic.Int32
	pool *Pool
}

// Retain takes one more reference.
func (f *Frame) Retain() { f.refs.Add(1) }

// Refs is how many references are held.
func (f *Frame) Refs() int32 { return f.refs.Load() }

// Release gives up one reference; the last one gives the buffer back.
func (f *Frame) Release() {
	switch n := f.refs.Add(-1); {
	case n == 0:
		f.pool.put(f)
	case n < 0:
		panic("sharedframe: a frame released more often than retained")
	}
}

// Pool recycles state frames by size: bucket i holds buffers of
// capacity 2^(minFrameShift+i). Safe for concurrent use; the Server owns
// one, shared by its sessions.
type Pool struct {
	buckets [frameBuckets]sync.Pool
}

const (
	minFrameShift = 10 // 1 KiB
	// frameBuckets: up to 1 MiB; a bigger frame is allocated and left to
	// the collector.
	frameBuckets = 11
)

// Get returns a frame with one reference (the caller's) whose data is
// empty with room for n bytes.
func (p *Pool) Get(n int) *Frame {
	i := 0
	if n > 1<<minFrameShift {
		i = bits.Len(uint(n-1)) - minFrameShift
	}
	var f *Frame
	if i < frameBuckets {
		f, _ = p.buckets[i].Get().(*Frame)
	}
	if f == nil {
		f = &Frame{pool: p, Data: make([]byte, 0, max(1<<(minFrameShift+i), n))}
	}
	f.Data = f.Data[:0]
	f.refs.Store(1)
	return f
}

func (p *Pool) put(f *Frame) {
	i := bits.Len(uint(cap(f.Data))) - 1 - minFrameShift
	if i >= 0 && i < frameBuckets && cap(f.Data) == 1<<(minFrameShift+i) {
		p.buckets[i].Put(f)
	}
}
