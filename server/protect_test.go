package server_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/toolcall-lab/lab/server"
)

// A connection over the frame rate gets error frames and an unchanged
// session; one that keeps going is closed with 1008 and a reason.
func TestFrameRateLimit(t *testing.T) {
	t.Parallel()
	// A rate so low that no token comes back during the test: the burst is
	// all the connection gets, and two refusals are all it may earn.
	_, ts := runLab(t, server.Config{FrameRate: 0.001, FrameBurst: 2})
	id := newID()
	c, _ := dial(t, ts, id)
	c.do(`{"type":"start"}`)
	last := c.do(`{"type":"start"}`)
	c.send(`{"type":"start"}`)
	if got := c.refused(); !strings.Contains(got, "too many frames") {
		t.Fatalf("over the limit: %q, want a too-many-frames error", got)
	}
	// Another tab of the session is not limited by this one, and sees the
	// session unchanged.
	other, f := dial(t, ts, id)
	if f.Seq != last.Seq {
		t.Fatalf("refused frame changed the session: seq %d, want %d", f.Seq, last.Seq)
	}
	other.do(`{"type":"queueDeadline"}`)

	c.send(`{"type":"start"}`)
	c.send(`{"type":"start"}`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	for frames := 0; err == nil && frames < 10; frames++ {
		_, _, err = c.ws.Read(ctx) // the other tab's state, the second refusal, then the close
	}
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusPolicyViolation || !strings.Contains(ce.Reason, "too many frames") {
		t.Fatalf("after sustained abuse: %v, want close 1008 naming too many frames", err)
	}
}

// dialClosed expects the upgrade to succeed and the server to close the
// connection at once (a refusal the page can read), and returns the close.
func dialClosed(t *testing.T, ts *httptest.Server, id string) websocket.CloseError {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, wsURL(ts, id), nil)
	if err != nil {
		t.Fatalf("dial %s: %v, want an upgrade then a close", id, err)
	}
	defer ws.CloseNow()
	_, data, err := ws.Read(ctx)
	var ce websocket.CloseError
	if !errors.As(err, &ce) {
		t.Fatalf("dial %s: read %q, %v; want a close", id, data, err)
	}
	return ce
}

func TestConnectionCaps(t *testing.T) {
	t.Parallel()
	_, ts := runLab(t, server.Config{MaxConns: 3, MaxSessionConns: 2})
	a, b := newID(), newID()
	first, _ := dial(t, ts, a)
	dial(t, ts, a)
	if ce := dialClosed(t, ts, a); ce.Code != websocket.StatusTryAgainLater || !strings.Contains(ce.Reason, "too many tabs") {
		t.Fatalf("third tab of a session: %v", ce)
	}
	dial(t, ts, b)
	if ce := dialClosed(t, ts, b); ce.Code != websocket.StatusTryAgainLater || !strings.Contains(ce.Reason, "the lab is full right now") {
		t.Fatalf("fourth connection: %v", ce)
	}
	// A closed connection frees its place (once its handler has gone).
	first.ws.Close(websocket.StatusNormalClosure, "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		ws, _, err := websocket.Dial(ctx, wsURL(ts, a), nil)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		_, data, err := ws.Read(ctx)
		ws.CloseNow()
		if err == nil && strings.Contains(string(data), `"type":"state"`) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no place freed after a close: %v", err)
		}
	}
}
