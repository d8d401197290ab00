package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/toolcall-lab/lab/model"
	"github.com/toolcall-lab/lab/server"
	"github.com/toolcall-lab/lab/store"
	"github.com/toolcall-lab/lab/store/sqlite"
)

func openSQLite(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "lab.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// randomFrame is one client frame, valid or refused by the model.
func randomFrame(r *rand.Rand, seq uint64) string {
	switch r.IntN(6) {
	case 0:
		return `{"type":"start"}`
	case 1:
		return `{"type":"queueDeadline"}`
	case 2:
		return fmt.Sprintf(`{"type":"deliver","message":%d}`, 1+r.IntN(6))
	case 3:
		return queueReply(reply(fmt.Sprintf("run-%d", 1+r.IntN(3)), "lookup", "completed", "output", fmt.Sprintf("answer %d \x00 é", seq)))
	case 4:
		return queueReply(`{"runId":"run-1"`)
	}
	return queueReply(reply("run-2", "lookup", "rejected", "reason", "no"))
}

// TestReplayGivesLiveState drives random commands into sessions of a server
// on a SQLite file, then starts a fresh server on the same file: every
// session's state frame must be byte-identical, and seq must continue.
func TestReplayGivesLiveState(t *testing.T) {
	t.Parallel()
	for seed := range uint64(3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			st := openSQLite(t)
			r := rand.New(rand.NewPCG(seed, 7))
			_, ts := runLab(t, server.Config{Store: st, Limits: model.Limits{MaxHeld: 5, MaxReceipts: 12}})
			last := map[string][]byte{}
			for range 3 {
				id := newID()
				c, f := dial(t, ts, id)
				for range 25 {
					c.send(randomFrame(r, f.Seq))
					if g := c.read(); g.Type == "state" {
						f = g
					}
				}
				last[id] = f.raw
			}
			lab2, ts2 := runLab(t, server.Config{Store: st, Limits: model.Limits{MaxHeld: 5, MaxReceipts: 12}})
			if got := len(lab2.SessionIDs()); got != 3 {
				t.Fatalf("restarted server holds %d sessions, want 3", got)
			}
			for id, want := range last {
				c, f := dial(t, ts2, id)
				if string(f.raw) != string(want) {
					t.Fatalf("session %s after replay:\n got %s\nwant %s", id, f.raw, want)
				}
				if g := c.do(`{"type":"start"}`); g.Seq != f.Seq+1 {
					t.Fatalf("seq %d after %d", g.Seq, f.Seq)
				}
			}
		})
	}
}

// flakyStore fails every write while broken is set, and every read of a
// session's events while readBroken is.
type flakyStore struct {
	*store.Memory
	broken, readBroken atomic.Bool
}

func (f *flakyStore) EventsAfter(ctx context.Context, id string, after uint64) ([]store.Record, error) {
	if f.readBroken.Load() {
		return nil, errDiskFull
	}
	return f.Memory.EventsAfter(ctx, id, after)
}

var errDiskFull = errors.New("disk full (injected)")

func (f *flakyStore) Append(ctx context.Context, r store.Record) error {
	if f.broken.Load() {
		return errDiskFull
	}
	return f.Memory.Append(ctx, r)
}

func (f *flakyStore) Ready(ctx context.Context) error {
	if f.broken.Load() {
		return errDiskFull
	}
	return f.Memory.Ready(ctx)
}

func TestStoreFailureRefusesAndRecovers(t *testing.T) {
	t.Parallel()
	st := &flakyStore{Memory: store.NewMemory()}
	lab, ts := runLab(t, server.Config{Store: st})
	ctx := context.Background()
	id := newID()
	c, _ := dial(t, ts, id)
	other, _ := dial(t, ts, id)
	acked := []uint64{c.do(`{"type":"queueDeadline"}`).Seq}
	other.state()
	good := c.do(`{"type":"start"}`)
	other.state()
	acked = append(acked, good.Seq)

	st.broken.Store(true)
	if err := lab.Ready(ctx); err == nil {
		t.Fatal("Ready while the store fails")
	}
	for _, frame := range []string{`{"type":"start"}`, queueReply("x"), `{"type":"deliver","message":1}`} {
		c.send(frame)
		if msg := c.refused(); msg != "the lab cannot save right now; try again shortly" {
			t.Fatalf("refusal %q", msg)
		}
	}
	// Nothing was applied: a new tab sees the last acknowledged state, and
	// the other tab got no frame (its next frame is the recovery's).
	if _, f := dial(t, ts, id); string(f.raw) != string(good.raw) {
		t.Fatalf("state after refusals:\n got %s\nwant %s", f.raw, good.raw)
	}

	st.broken.Store(false)
	if err := lab.Ready(ctx); err != nil {
		t.Fatalf("Ready after recovery: %v", err)
	}
	f := c.do(`{"type":"deliver","message":1}`)
	if f.Seq != good.Seq+1 {
		t.Fatalf("seq %d after recovery, want %d", f.Seq, good.Seq+1)
	}
	if g := other.state(); string(g.raw) != string(f.raw) {
		t.Fatalf("other tab saw %s", g.raw)
	}
	acked = append(acked, f.Seq)

	recs, err := st.Events(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var stored []uint64
	for _, r := range recs {
		stored = append(stored, r.Seq)
	}
	if !reflect.DeepEqual(stored, acked) {
		t.Fatalf("stored seqs %v, acknowledged %v", stored, acked)
	}
	if k := store.Kind(recs[2].Event); k != "delivered" || recs[2].Notice != f.Notice || recs[2].Run != "run-2" {
		t.Fatalf("last record %+v", recs[2])
	}
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestIdleSessionsExpire(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	st := store.NewMemory()
	lab, ts := runLab(t, server.Config{Store: st, SessionTTL: time.Hour, Now: clock.Now})
	ctx := context.Background()
	idle, open := newID(), newID()
	c, _ := dial(t, ts, idle)
	c.do(`{"type":"start"}`)
	c.ws.CloseNow()
	keep, _ := dial(t, ts, open)
	keep.do(`{"type":"start"}`)
	waitFor(t, func() bool { return lab.Attached(idle) == 0 }) // its handler has finished

	clock.Advance(59 * time.Minute)
	if err := lab.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if got := len(lab.SessionIDs()); got != 2 {
		t.Fatalf("%d sessions before the TTL passed, want 2", got)
	}
	clock.Advance(2 * time.Minute)
	if err := lab.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(lab.SessionIDs(), idle) {
		t.Fatal("the idle session was not deleted")
	}
	if !slices.Contains(lab.SessionIDs(), open) {
		t.Fatal("a session with an open connection was deleted")
	}
	if recs, _ := st.Events(ctx, idle); len(recs) != 0 {
		t.Fatalf("expired session still has %d stored events", len(recs))
	}
	if recs, _ := st.Events(ctx, open); len(recs) != 1 {
		t.Fatalf("open session has %d stored events, want 1", len(recs))
	}
	// The expired address still works: it starts afresh.
	if _, f := dial(t, ts, idle); f.Seq != 0 {
		t.Fatalf("expired session came back at seq %d", f.Seq)
	}
}

// waitFor polls cond for up to 5 s; it is for asynchronous teardown, not timing.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestSessionCap(t *testing.T) {
	t.Parallel()
	_, ts := runLab(t, server.Config{MaxSessions: 2})
	// Connections that change nothing store nothing and count for nothing.
	for range 5 {
		c, _ := dial(t, ts, newID())
		c.ws.Close(websocket.StatusNormalClosure, "")
	}
	first := newID()
	c1, _ := dial(t, ts, first)
	c1.do(`{"type":"start"}`)
	c2, _ := dial(t, ts, newID())
	c2.do(`{"type":"start"}`)
	// A third session is refused at once, with a reason the page shows.
	if ce := dialClosed(t, ts, newID()); ce.Code != websocket.StatusTryAgainLater || !strings.Contains(ce.Reason, "the lab is full right now") {
		t.Fatalf("third session: %v", ce)
	}
	// Existing sessions still open.
	dial(t, ts, first)
}

func TestExportEndpoints(t *testing.T) {
	t.Parallel()
	const token = "s3cret-token"
	clock := &fakeClock{now: time.Date(2026, 3, 1, 9, 0, 0, 123456789, time.UTC)}
	_, ts := runLab(t, server.Config{InstructorToken: token, Now: clock.Now})
	id := newID()
	c, _ := dial(t, ts, id)
	c.do(`{"type":"queueDeadline"}`)
	c.do(`{"type":"deliver","message":1}`)

	fetch := func(path, auth string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, ts.URL+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	for _, auth := range []string{"", "Bearer wrong", "Basic " + token, token} {
		if resp, _ := fetch("/api/export.csv", auth); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("auth %q: %d, want 401", auth, resp.StatusCode)
		}
	}
	resp, body := fetch("/api/sessions/"+id+"/export", "Bearer "+token)
	want := `{"session":"` + id + `","seq":1,"time":"2026-03-01T09:00:00.123Z","actor":"student","kind":"queued","message":1,"messageKind":"deadline","from":"student","label":"Deadline for run-1/lookup","run":"run-1","notice":"Ready. Queue a reply or a local deadline observation."}
{"session":"` + id + `","seq":2,"time":"2026-03-01T09:00:00.123Z","actor":"student","kind":"delivered","message":1,"run":"run-1","notice":"Unresolved: deadline observed without a final reply."}
`
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-ndjson" || body != want {
		t.Fatalf("JSON lines: %d %s\n%s\nwant\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), body, want)
	}
	if resp, _ := fetch("/api/sessions/"+newID()+"/export", "Bearer "+token); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown session: %d", resp.StatusCode)
	}
	resp, body = fetch("/api/export.csv", "Bearer "+token)
	wantCSV := "session,name,seq,time,actor,kind,message,run,notice\n" +
		id + ",,1,2026-03-01T09:00:00.123Z,student,queued,1,run-1,Ready. Queue a reply or a local deadline observation.\n" +
		id + ",,2,2026-03-01T09:00:00.123Z,student,delivered,1,run-1,Unresolved: deadline observed without a final reply.\n"
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/csv") ||
		!strings.Contains(resp.Header.Get("Content-Disposition"), "filename=") || body != wantCSV {
		t.Fatalf("CSV: %d %s %s\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Content-Disposition"), body)
	}
}

// TestTimelineReadFromTheLog: an instructor's timeline is read from the
// log when asked for (a watch, GET /api/sessions/ID), so a log that cannot
// be read is a refusal that says so, and the same request works again once
// it can.
func TestTimelineReadFromTheLog(t *testing.T) {
	t.Parallel()
	st := &flakyStore{Memory: store.NewMemory()}
	ts := runInstructorLab(t, server.Config{Store: st})
	id := newID()
	c, _ := dial(t, ts, id)
	c.do(`{"type":"start"}`)
	c.do(`{"type":"queueDeadline"}`)
	ws, _, err := dialInstructor(ts, bearerHeader(testToken))
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	watch := func() {
		t.Helper()
		if err := ws.Write(context.Background(), websocket.MessageText, []byte(`{"type":"watch","session":"`+id+`"}`)); err != nil {
			t.Fatal(err)
		}
	}
	const cannotRead = "the lab cannot read this session's history right now; try again shortly"

	st.readBroken.Store(true)
	status, _, body := call(t, ts, "GET", "/api/sessions/"+id, testToken, "", "")
	if status != http.StatusServiceUnavailable || !strings.Contains(string(body), cannotRead) {
		t.Fatalf("GET while the log cannot be read = %d %s", status, body)
	}
	watch()
	if f := readUntil(t, ws, "an error", func(f overviewFrame) bool { return f.Type == "error" || f.Type == "timeline" }); f.Type != "error" || f.Error != cannotRead || f.Reason != "store" {
		t.Fatalf("watch while the log cannot be read: %s", f.raw)
	}

	st.readBroken.Store(false)
	status, _, body = call(t, ts, "GET", "/api/sessions/"+id, testToken, "", "")
	var got struct {
		Timeline []struct {
			Seq  uint64 `json:"seq"`
			Kind string `json:"kind"`
		} `json:"timeline"`
	}
	if err := json.Unmarshal(body, &got); status != http.StatusOK || err != nil || len(got.Timeline) != 2 || got.Timeline[1].Kind != "queued" || got.Timeline[1].Seq != 2 {
		t.Fatalf("GET once the log can be read = %d %s", status, body)
	}
	watch()
	if f := readUntil(t, ws, "the timeline", func(f overviewFrame) bool { return f.Type == "timeline" }); !f.Reset || len(f.Entries) != 2 || f.Entries[0].Kind != "started" {
		t.Fatalf("timeline once the log can be read: %s", f.raw)
	}
	// Later changes come as entries to append.
	c.do(`{"type":"deliver","message":1}`)
	if f := readUntil(t, ws, "the delivery", func(f overviewFrame) bool { return f.Type == "timeline" }); f.Reset || len(f.Entries) != 1 || f.Entries[0].Seq != 3 || f.Entries[0].Kind != "delivered" {
		t.Fatalf("delivery entry: %s", f.raw)
	}
}
