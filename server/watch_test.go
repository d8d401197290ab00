package server

import "testing"

// TestWatchWithdrawnBeforeItsTurn: a watch still waiting in the session's
// inbox when the instructor stops watching adds nothing (the connection
// would get frames nobody asked for); one not withdrawn adds the watcher
// with the state and the timeline.
func TestWatchWithdrawnBeforeItsTurn(t *testing.T) {
	t.Parallel()
	srv, sess := newTestSession(t)
	c := collector(srv.metrics)
	queued := func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.out.frames)
	}
	watchers := func() int {
		sess.mu.Lock()
		defer sess.mu.Unlock()
		return len(sess.watchers)
	}

	sess.mu.Lock()
	sess.draining = true // busy: the watch waits in the inbox
	sess.mu.Unlock()
	sess.watch(c)
	sess.unwatch(c)
	sess.drain()
	if n, q := watchers(), queued(); n != 0 || q != 0 {
		t.Fatalf("after a withdrawn watch: %d watchers, %d frames queued", n, q)
	}

	sess.watch(c)
	if n, q := watchers(), queued(); n != 1 || q != 2 {
		t.Fatalf("after a watch: %d watchers, %d frames queued, want 1 and 2 (state, timeline)", n, q)
	}
}
