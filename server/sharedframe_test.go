package server

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/toolcall-lab/lab/model"
)

// TestSharedFramesOutliveNewerOnes: a tab that has not read yet keeps every
// state frame it was sent, byte for byte, while the session publishes newer
// ones from recycled buffers. A frame given back too early would be
// rewritten by a later change: its seq or its queue would not match.
func TestSharedFramesOutliveNewerOnes(t *testing.T) {
	t.Parallel()
	srv, sess := newTestSession(t)
	slow := collector(srv.metrics) // a tab that has not read yet
	sess.subscribe(slow)
	const changes = 40 // below maxPendingStates: every frame stays queued
	for i := 1; i <= changes; i++ {
		done := make(chan outcome, 1)
		sess.submit(pending{cmd: model.Command{Kind: model.QueueReply, By: model.Student, Raw: fmt.Sprintf("reply %d", i)}, done: done})
		if o := <-done; o.err != nil {
			t.Fatal(o.err)
		}
	}
	slow.mu.Lock()
	defer slow.mu.Unlock()
	if len(slow.outbox) != changes+1 {
		t.Fatalf("%d frames queued, want %d", len(slow.outbox), changes+1)
	}
	for i, f := range slow.outbox {
		var st struct {
			Seq   int `json:"seq"`
			Queue []struct {
				Label string `json:"label"`
			} `json:"queue"`
		}
		if err := json.Unmarshal(f.data, &st); err != nil {
			t.Fatalf("frame %d: %v: %q", i, err, f.data)
		}
		if st.Seq != i || len(st.Queue) != i || i > 0 && st.Queue[i-1].Label != fmt.Sprintf("reply %d", i) {
			t.Fatalf("frame %d holds seq %d with %d held messages: %q", i, st.Seq, len(st.Queue), f.data)
		}
		if got := f.shared.refs.Load(); got < 1 {
			t.Fatalf("frame %d has %d references while queued", i, got)
		}
	}
}

// TestFramePool: a buffer comes back with room for what was asked, and a
// frame released more often than retained is a bug that stops the server
// rather than corrupt someone's frame.
func TestFramePool(t *testing.T) {
	t.Parallel()
	var p framePool
	for _, n := range []int{0, 1, 1024, 1025, 9000, 1 << 20, 1<<20 + 1} {
		f := p.get(n)
		if cap(f.data) < n || len(f.data) != 0 || f.refs.Load() != 1 {
			t.Fatalf("get(%d): len %d cap %d refs %d", n, len(f.data), cap(f.data), f.refs.Load())
		}
		f.retain()
		f.release()
		f.release()
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a second release did not panic")
		}
	}()
	f := p.get(10)
	f.release()
	f.release()
}
