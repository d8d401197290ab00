package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/jackc/pgx/v5"

	"github.com/toolcall-lab/lab/internal/pgtest"
	"github.com/toolcall-lab/lab/model"
	"github.com/toolcall-lab/lab/server"
	"github.com/toolcall-lab/lab/store"
	"github.com/toolcall-lab/lab/store/postgres"
)

// The fault tests run the lab on a PostgreSQL cluster of their own
// (pgtest.NewCluster) and freeze it, or one of its backends, by PID.

const faultTimeout = time.Second // the replicas' StoreTimeout

// faultLab runs a replica on url with a short store deadline, logging to log.
func faultLab(t *testing.T, url string, log *logBuffer) (*server.Server, *httptest.Server) {
	t.Helper()
	st, err := postgres.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return runLab(t, server.Config{
		Store: st, StoreTimeout: faultTimeout, Logger: log.logger(), InstructorToken: testToken,
		FrameRate: 1000, FrameBurst: 1000, Limits: model.Limits{MaxHeld: 1000, MaxReceipts: 1000},
	})
}

// readyWatch polls /readyz every 50 ms and notes each answer's time and
// whether it was 200, and how long the slowest took.
type readyWatch struct {
	mu      sync.Mutex
	answers []readyAnswer
	slowest time.Duration
}

type readyAnswer struct {
	at time.Time
	ok bool
}

func watchReady(ctx context.Context, ts *httptest.Server) *readyWatch {
	w := &readyWatch{}
	client := &http.Client{Timeout: 5 * time.Second}
	go func() {
		for ctx.Err() == nil {
			began := time.Now()
			resp, err := client.Get(ts.URL + "/readyz")
			took := time.Since(began)
			ok := err == nil && resp.StatusCode == http.StatusOK
			if err == nil {
				resp.Body.Close()
			}
			w.mu.Lock()
			w.answers = append(w.answers, readyAnswer{time.Now(), ok})
			w.slowest = max(w.slowest, took)
			w.mu.Unlock()
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return w
}

// slowestAnswer is the slowest answer's time so far.
func (w *readyWatch) slowestAnswer() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.slowest
}

// first is the time of the first answer after since that is ok (or not).
func (w *readyWatch) first(since time.Time, ok bool) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, a := range w.answers {
		if a.at.After(since) && a.ok == ok {
			return a.at, true
		}
	}
	return time.Time{}, false
}

// loadTab changes its own session in a closed loop: it queues reply r<i>,
// waits for its answer (the state showing r<i>, or an error frame), then
// 100 ms, and again. A state it did not ask for (a change whose refusal
// came before the database committed it after all) is counted, not taken
// for an answer.
// nothingLost: a fresh replica on url reads, for each session ids[i], every
// seq its tab tabs[i] was shown.
func nothingLost(t *testing.T, url string, tabs []*loadTab, ids []string) {
	t.Helper()
	var log logBuffer
	_, fresh := faultLab(t, url, &log)
	for i, l := range tabs {
		if _, f := dial(t, fresh, ids[i]); f.Seq < l.acked {
			t.Errorf("session %d: the log holds seq %d, the tab was shown %d", i, f.Seq, l.acked)
		}
	}
}

type loadTab struct {
	ws    *websocket.Conn
	mu    sync.Mutex
	worst time.Duration // the slowest answer
	acked uint64        // the highest seq shown
	lower bool          // a state frame showed a lower seq than one before
	store int           // error frames with reason store
	other []string
	extra int  // states that answered no change
	lost  bool // a change had no answer within 10 s
}

func (l *loadTab) run(ctx context.Context, t *testing.T, wg *sync.WaitGroup) {
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			label := fmt.Sprint("r", i)
			sent := time.Now()
			wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := l.ws.Write(wctx, websocket.MessageText, []byte(queueReply(label)))
			for answered := false; err == nil && !answered; {
				var data []byte
				_, data, err = l.ws.Read(wctx)
				if err != nil {
					break
				}
				var f stateFrame
				if err := json.Unmarshal(data, &f); err != nil {
					t.Errorf("frame %s: %v", data, err)
					break
				}
				l.mu.Lock()
				switch {
				case f.Type == "state":
					if f.Seq < l.acked {
						l.lower = true
					}
					l.acked = max(l.acked, f.Seq)
					if n := len(f.Queue); n > 0 && strings.Contains(f.Queue[n-1].Label, label) {
						answered = true
					} else {
						l.extra++
					}
				case f.Reason == "store":
					l.store++
					answered = true
				default:
					l.other = append(l.other, string(data))
					answered = true
				}
				if answered {
					l.worst = max(l.worst, time.Since(sent))
				}
				l.mu.Unlock()
			}
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					l.mu.Lock()
					l.lost = true
					l.mu.Unlock()
				}
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
}

// TestFaultDatabaseStalled: the whole cluster is frozen (SIGSTOP of the
// postmaster and every backend) for 6 s while 6 tabs change their sessions
// 10 times a second. Every change is answered, by its state or a store
// error, within the deadline and a second; /readyz answers within a second,
// 503 within 2 s of the stall and 200 within 1 s of the resume; the log
// says so once each way; and every seq a tab was shown is in the log.
func TestFaultDatabaseStalled(t *testing.T) {
	cl := pgtest.NewCluster(t)
	var log logBuffer
	_, ts := faultLab(t, cl.URL, &log)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	tabs := make([]*loadTab, 6)
	ids := make([]string, len(tabs))
	for i := range tabs {
		ids[i] = newID()
		c, _ := dial(t, ts, ids[i])
		tabs[i] = &loadTab{ws: c.ws}
		tabs[i].run(ctx, t, &wg)
	}
	ready := watchReady(ctx, ts)
	time.Sleep(time.Second)
	frozen := time.Now()
	cl.Freeze()
	time.Sleep(6 * time.Second)
	resumed := time.Now()
	cl.Resume()
	time.Sleep(2500 * time.Millisecond)
	stop()
	wg.Wait()

	down, ok := ready.first(frozen, false)
	if !ok {
		t.Fatal("/readyz never answered 503 while the database was frozen")
	}
	up, ok := ready.first(resumed, true)
	if !ok {
		t.Fatal("/readyz never answered 200 after the database resumed")
	}
	t.Logf("/readyz: 503 %v after the stall, 200 %v after the resume; slowest answer %v",
		down.Sub(frozen).Round(time.Millisecond), up.Sub(resumed).Round(time.Millisecond), ready.slowestAnswer().Round(time.Millisecond))
	if d := down.Sub(frozen); d > 2*time.Second {
		t.Errorf("/readyz answered 503 only %v after the stall, want within 2s", d)
	}
	if d := up.Sub(resumed); d > time.Second+200*time.Millisecond { // a probe's interval of slack
		t.Errorf("/readyz answered 200 only %v after the resume, want within 1s", d)
	}
	if slowest := ready.slowestAnswer(); slowest > time.Second+200*time.Millisecond {
		t.Errorf("/readyz took %v to answer, want within 1s", slowest)
	}
	var worst time.Duration
	refused, extra := 0, 0
	for i, l := range tabs {
		worst = max(worst, l.worst)
		refused += l.store
		extra += l.extra
		if l.lost {
			t.Errorf("tab %d: a change was never answered", i)
		}
		if len(l.other) > 0 {
			t.Errorf("tab %d: unexpected frames: %.300q", i, l.other)
		}
		if l.lower {
			t.Errorf("tab %d was shown a lower seq than it had", i)
		}
	}
	t.Logf("slowest answer to a change %v; %d changes refused with reason store; %d late frames", worst.Round(time.Millisecond), refused, extra)
	if worst > faultTimeout+time.Second {
		t.Errorf("a change waited %v for its answer, want within %v", worst, faultTimeout+time.Second)
	}
	if refused == 0 {
		t.Error("no change was refused during a 6 s stall")
	}
	logs := log.String()
	for _, line := range []string{"store writes failing", "store writes working again", "listening to other replicas failing", "listening to other replicas working again"} {
		if n := strings.Count(logs, line); n != 1 {
			t.Errorf("%d log lines %q, want 1:\n%s", n, line, logs)
		}
	}
	nothingLost(t, cl.URL, tabs, ids)
}

// TestFaultListenerFrozen: only the listening backends are frozen.
// The replica notices within the deadline (/readyz 503), replaces it, and a
// tab on it shows the changes made on the other replica meanwhile within
// 2 s of the replacement.
func TestFaultListenerFrozen(t *testing.T) {
	cl := pgtest.NewCluster(t)
	var logA, logB logBuffer
	_, a := faultLab(t, cl.URL, &logA)
	_, b := faultLab(t, cl.URL, &logB)
	id := newID()
	writer, _ := dial(t, a, id)
	writer.do(`{"type":"start"}`)
	reader, f := dial(t, b, id)
	if f.Seq != 1 {
		t.Fatalf("replica b shows seq %d, want 1", f.Seq)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	ready := watchReady(ctx, b)
	time.Sleep(300 * time.Millisecond)
	// Both replicas' listeners are frozen (b's is the one that matters;
	// a writes through its pool, never its listener).
	pids := listenerPIDs(t, cl)
	if len(pids) != 2 {
		t.Fatalf("%d listening backends, want 2", len(pids))
	}
	frozen := time.Now()
	for _, pid := range pids {
		cl.FreezePID(pid)
	}
	defer func() {
		for _, pid := range pids {
			cl.ResumePID(pid)
		}
	}()
	for i := range 20 {
		writer.do(queueReply(fmt.Sprint("while frozen ", i)))
	}
	want := uint64(21)
	down, ok := waitReady(ready, frozen, false, 5*time.Second)
	if !ok {
		t.Fatal("/readyz never answered 503 with the listener frozen")
	}
	t.Logf("/readyz 503 %v after the listener froze", down.Sub(frozen).Round(time.Millisecond))
	if d := down.Sub(frozen); d > faultTimeout+500*time.Millisecond {
		t.Errorf("/readyz answered 503 only %v after the listener froze, want within the deadline (%v)", d, faultTimeout)
	}
	up, ok := waitReady(ready, down, true, 5*time.Second)
	if !ok {
		t.Fatal("/readyz never answered 200 again: the frozen listener was not replaced")
	}
	var got uint64
	deadline := time.Now().Add(2 * time.Second)
	for got < want && time.Now().Before(deadline) {
		rctx, cancel := context.WithDeadline(context.Background(), deadline)
		_, data, err := reader.ws.Read(rctx)
		cancel()
		if err != nil {
			break
		}
		var f stateFrame
		if json.Unmarshal(data, &f) == nil && f.Type == "state" {
			if f.Seq < got {
				t.Errorf("replica b showed seq %d after %d", f.Seq, got)
			}
			got = max(got, f.Seq)
		}
	}
	t.Logf("listener replaced %v after it froze; the tab on b at seq %d (want %d) %v after", up.Sub(frozen).Round(time.Millisecond), got, want, time.Since(up).Round(time.Millisecond))
	if got < want {
		t.Errorf("the tab on replica b shows seq %d 2 s after its listener was replaced, want %d", got, want)
	}
}

// waitReady waits up to d for an answer after since that is ok (or not).
func waitReady(w *readyWatch, since time.Time, ok bool, d time.Duration) (time.Time, bool) {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if at, found := w.first(since, ok); found {
			return at, true
		}
	}
	return time.Time{}, false
}

// listenerPIDs are the backends of the replicas' listening connections.
func listenerPIDs(t *testing.T, cl *pgtest.Cluster) []int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return cl.BackendPIDs(ctx, postgres.ListenerName)
}

// replyLost commits an append and then, while lose is set, reports its
// deadline passed: a commit whose reply never came back.
type replyLost struct {
	store.Store
	lose atomic.Bool
}

func (r *replyLost) Append(ctx context.Context, rec store.Record) error {
	return lostReply(r.Store.Append(ctx, rec), &r.lose)
}

// lostReply is a committed append's result as the caller sees it when the
// reply is lost: its deadline passed.
func lostReply(err error, lose *atomic.Bool) error {
	if err == nil && lose.Load() {
		return fmt.Errorf("appending: %w", context.DeadlineExceeded)
	}
	return err
}

// TestFaultAppendOutcomeUnknown: a change whose append ran into its
// deadline is refused, yet may be stored: the session reads the log, and
// the tab that was refused is shown the change right after the refusal
// (never a replica showing a change its client was only told was refused),
// and the next change goes on top of it.
func TestFaultAppendOutcomeUnknown(t *testing.T) {
	t.Run("own store", func(t *testing.T) {
		st := &replyLost{Store: store.NewMemory()}
		_, ts := runLab(t, server.Config{Store: st, InstructorToken: testToken})
		outcomeUnknown(t, ts, st, &st.lose)
	})
	t.Run("replicas", func(t *testing.T) {
		pg, err := postgres.Open(context.Background(), pgtest.Database(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pg.Close() })
		st := &replyLostListener{Store: pg}
		_, ts := runLab(t, server.Config{Store: st, InstructorToken: testToken})
		outcomeUnknown(t, ts, st, &st.lose)
	})
}

// replyLostListener is replyLost for a store shared by replicas.
type replyLostListener struct {
	*postgres.Store
	lose atomic.Bool
}

func (r *replyLostListener) Append(ctx context.Context, rec store.Record) error {
	return lostReply(r.Store.Append(ctx, rec), &r.lose)
}

func outcomeUnknown(t *testing.T, ts *httptest.Server, st store.Store, lose *atomic.Bool) {
	id := newID()
	c, _ := dial(t, ts, id)
	c.do(queueReply("one"))
	lose.Store(true)
	c.send(queueReply("two"))
	if f := c.refusal(); f.Reason != "store" {
		t.Fatalf("refused with %q, want store", f.Reason)
	}
	f := c.state()
	if f.Seq != 2 || len(f.Queue) != 2 || !strings.Contains(f.Queue[1].Label, "two") {
		t.Fatalf("after the refusal the tab shows seq %d with %d held, want seq 2 with the refused change: %s", f.Seq, len(f.Queue), f.raw)
	}
	lose.Store(false)
	if f := c.do(queueReply("three")); f.Seq != 3 {
		t.Fatalf("the next change is at seq %d, want 3", f.Seq)
	}
	recs, err := st.Events(context.Background(), id)
	if err != nil || len(recs) != 3 {
		t.Fatalf("the log holds %d records (%v), want 3", len(recs), err)
	}
}

// TestFaultRestart: PostgreSQL is stopped (fast: connections cut) and
// started again under load. /readyz is 503 while it is down and 200 soon
// after it is back, the tabs' changes go through again, none is shown a
// lower seq, and every seq a tab was shown is in the log.
func TestFaultRestart(t *testing.T) {
	cl := pgtest.NewCluster(t)
	var log logBuffer
	_, ts := faultLab(t, cl.URL, &log)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	tabs := make([]*loadTab, 4)
	ids := make([]string, len(tabs))
	for i := range tabs {
		ids[i] = newID()
		c, _ := dial(t, ts, ids[i])
		tabs[i] = &loadTab{ws: c.ws}
		tabs[i].run(ctx, t, &wg)
	}
	ready := watchReady(ctx, ts)
	time.Sleep(700 * time.Millisecond)
	stopped := time.Now()
	cl.Stop()
	time.Sleep(time.Second)
	cl.Start()
	started := time.Now()
	before := make([]uint64, len(tabs))
	for i, l := range tabs {
		l.mu.Lock()
		before[i] = l.acked
		l.mu.Unlock()
	}
	time.Sleep(2 * time.Second)
	stop()
	wg.Wait()

	down, ok := ready.first(stopped, false)
	if !ok {
		t.Fatal("/readyz never answered 503 while the database was stopped")
	}
	up, ok := ready.first(started, true)
	if !ok {
		t.Fatal("/readyz never answered 200 after the database started again")
	}
	t.Logf("/readyz: 503 %v after the stop began, 200 %v after the start returned; slowest answer %v",
		down.Sub(stopped).Round(time.Millisecond), up.Sub(started).Round(time.Millisecond), ready.slowestAnswer().Round(time.Millisecond))
	if d := up.Sub(started); d > time.Second+200*time.Millisecond {
		t.Errorf("/readyz answered 200 only %v after the database was back, want within 1s", d)
	}
	refused := 0
	for i, l := range tabs {
		refused += l.store
		if l.lost {
			t.Errorf("tab %d: a change was never answered", i)
		}
		if len(l.other) > 0 {
			t.Errorf("tab %d: unexpected frames: %.300q", i, l.other)
		}
		if l.lower {
			t.Errorf("tab %d was shown a lower seq than it had", i)
		}
		if l.acked <= before[i] {
			t.Errorf("tab %d: no change stored in the 2 s after the restart (seq %d)", i, l.acked)
		}
	}
	t.Logf("%d changes refused with reason store across the restart", refused)
	nothingLost(t, cl.URL, tabs, ids)
}

// TestFaultListenerTerminated: the listening backends are terminated
// (pg_terminate_backend). The replica notices (the log says so once each
// way, /readyz 200 again), listens again, and a tab on it shows the
// changes made on the other replica meanwhile within 2 s.
func TestFaultListenerTerminated(t *testing.T) {
	cl := pgtest.NewCluster(t)
	var logA, logB logBuffer
	_, a := faultLab(t, cl.URL, &logA)
	_, b := faultLab(t, cl.URL, &logB)
	id := newID()
	writer, _ := dial(t, a, id)
	writer.do(`{"type":"start"}`)
	reader, f := dial(t, b, id)
	if f.Seq != 1 {
		t.Fatalf("replica b shows seq %d, want 1", f.Seq)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	ready := watchReady(ctx, b)
	time.Sleep(200 * time.Millisecond)
	pids := listenerPIDs(t, cl)
	if len(pids) != 2 {
		t.Fatalf("%d listening backends, want 2", len(pids))
	}
	killed := time.Now()
	conn, err := pgx.Connect(ctx, cl.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid`, pids); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	for i := range 20 {
		writer.do(queueReply(fmt.Sprint("while unheard ", i)))
	}
	want := uint64(21)
	var got uint64
	deadline := time.Now().Add(2 * time.Second)
	for got < want && time.Now().Before(deadline) {
		rctx, cancel := context.WithDeadline(context.Background(), deadline)
		_, data, err := reader.ws.Read(rctx)
		cancel()
		if err != nil {
			break
		}
		var f stateFrame
		if json.Unmarshal(data, &f) == nil && f.Type == "state" {
			if f.Seq < got {
				t.Errorf("replica b showed seq %d after %d", f.Seq, got)
			}
			got = max(got, f.Seq)
		}
	}
	caught := time.Since(killed)
	up, upOK := waitReady(ready, time.Now(), true, 2*time.Second)
	down, downSeen := ready.first(killed, false)
	t.Logf("the tab on b at seq %d (want %d) %v after the listeners were terminated; /readyz 503 seen: %v (%v after), 200 again: %v",
		got, want, caught.Round(time.Millisecond), downSeen, down.Sub(killed).Round(time.Millisecond), upOK)
	if got < want {
		t.Errorf("the tab on replica b shows seq %d 2 s after its listener was terminated, want %d", got, want)
	}
	if !upOK {
		t.Errorf("/readyz not 200 again after the listener was replaced (last %v)", up)
	}
	logs := logB.String()
	for _, line := range []string{"listening to other replicas failing", "listening to other replicas working again"} {
		if n := strings.Count(logs, line); n != 1 {
			t.Errorf("%d log lines %q, want 1:\n%s", n, line, logs)
		}
	}
}
