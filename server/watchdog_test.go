package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestWriteWatchdog: the watchdog times the running write from that write's
// own start. An idle connection disarms it; a write that began less than the
// timeout ago keeps its connection and the watchdog armed for the rest; one
// that began the timeout ago or more closes the connection, and the write
// learns that it timed out.
func TestWriteWatchdog(t *testing.T) {
	t.Parallel()
	accepted := make(chan *websocket.Conn, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			t.Error(err)
			return
		}
		accepted <- ws
	}))
	defer ts.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	peer, _, err := websocket.Dial(ctx, "ws"+ts.URL[len("http"):], nil)
	if err != nil {
		t.Fatal(err)
	}
	defer peer.CloseNow()
	ws := <-accepted
	defer ws.CloseNow()

	c := &conn{ws: ws, writeTimeout: time.Hour, born: time.Now().Add(-3 * time.Hour)}
	timer := time.AfterFunc(time.Hour, func() {}) // stands in: the test calls watchWrite itself
	defer timer.Stop()
	c.writeTimer.Store(timer)
	began := func(ago time.Duration) int64 { return int64(time.Since(c.born)-ago) + 1 }

	c.watchArmed.Store(true)
	c.watchWrite()
	if c.watchArmed.Load() {
		t.Fatal("idle: the watchdog stayed armed")
	}

	c.writeStart.Store(began(time.Minute))
	c.watchWrite()
	if c.writeStart.Load() == writeTimedOut || !c.watchArmed.Load() {
		t.Fatalf("a write a minute old of an hour's timeout: start %d, armed %v; want it running and the watchdog armed", c.writeStart.Load(), c.watchArmed.Load())
	}

	c.watchArmed.Store(false)
	c.writeStart.Store(began(time.Hour + time.Second))
	c.watchWrite()
	if c.writeStart.Load() != writeTimedOut {
		t.Fatalf("a write past the timeout: start %d, want it timed out", c.writeStart.Load())
	}
	if _, _, err := peer.Read(ctx); err == nil || ctx.Err() != nil {
		t.Fatalf("the peer read %v after the watchdog fired, want the connection closed", err)
	}
}
