package server_test

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/toolcall-lab/lab/server"
)

// stepClock is a clock the test moves by hand.
type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// TestOverviewWaitingAndOwnActivity: the overview's waiting count is the
// messages never delivered (held counts them all), and lastActivity moves
// only with the student's own changes: not with an injection, nor with a tab
// closing and another opening (as every tab does after a restart). The
// timeline says a notice only on deliveries.
func TestOverviewWaitingAndOwnActivity(t *testing.T) {
	t.Parallel()
	clock := &stepClock{now: time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)}
	ts := runInstructorLab(t, server.Config{Now: clock.Now})
	id := newID()
	c, _ := dial(t, ts, id)
	row := func() (r struct {
		Held, Waiting int
		LastActivity  time.Time
	}) {
		t.Helper()
		_, _, body := call(t, ts, "GET", "/api/sessions/"+id, testToken, "", "")
		var got struct {
			Session  json.RawMessage
			Timeline []struct{ Kind, Notice string }
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		for _, e := range got.Timeline {
			delivery := e.Kind == "delivered" || e.Kind == "injected-delivered"
			if delivery != (e.Notice != "") {
				t.Errorf("timeline entry %s has notice %q", e.Kind, e.Notice)
			}
		}
		if err := json.Unmarshal(got.Session, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}

	own := clock.advance(time.Minute)
	c.do(`{"type":"queueDeadline"}`)
	c.do(`{"type":"queueReply","raw":"{"}`)
	c.do(`{"type":"deliver","message":2}`)
	c.do(`{"type":"deliver","message":2}`)
	if r := row(); r.Held != 2 || r.Waiting != 1 || !r.LastActivity.Equal(own) {
		t.Fatalf("after the student's changes: %+v, want held 2, waiting 1, activity %v", r, own)
	}

	clock.advance(time.Minute)
	injectAPI(t, ts, `{"sessions":["`+id+`"],"preset":"deadline"}`)
	c.read()
	injectAPI(t, ts, `{"sessions":["`+id+`"],"mode":"deliver","preset":"deadline"}`)
	c.read()
	if r := row(); r.Held != 4 || r.Waiting != 2 || !r.LastActivity.Equal(own) {
		t.Fatalf("after two injections: %+v, want held 4, waiting 2, activity still %v", r, own)
	}

	clock.advance(time.Minute)
	c.ws.CloseNow()
	dial(t, ts, id)
	if r := row(); !r.LastActivity.Equal(own) {
		t.Fatalf("a tab reconnecting moved lastActivity to %v, want %v", r.LastActivity, own)
	}
}
