package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/jackc/pgx/v5"

	"github.com/toolcall-lab/lab/internal/pgtest"
	"github.com/toolcall-lab/lab/model"
	"github.com/toolcall-lab/lab/server"
	"github.com/toolcall-lab/lab/store/postgres"
)

// openPostgres opens a store on url, as one replica would: each replica
// has its own pool and listener on the shared database.
func openPostgres(t *testing.T, url string) *postgres.Store {
	t.Helper()
	st, err := postgres.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// replicas runs n lab servers on one fresh PostgreSQL database, each with
// the test's instructor token and rate limits that let a test send fast.
func replicas(t *testing.T, n int) ([]*server.Server, []*httptest.Server, string) {
	t.Helper()
	url := pgtest.Database(t)
	var labs []*server.Server
	var tss []*httptest.Server
	for range n {
		lab, ts := runLab(t, server.Config{
			Store: openPostgres(t, url), InstructorToken: testToken,
			FrameRate: 1000, FrameBurst: 1000, Limits: model.Limits{MaxHeld: 1000, MaxReceipts: 1000},
		})
		labs, tss = append(labs, lab), append(tss, ts)
	}
	return labs, tss, url
}

// TestReplicasInterleave: a student tab on each of two replicas, one
// session, both sending as fast as they can. Every change is decided on one
// replica and stored once; both tabs get the same state frames, byte for
// byte, for every seq in order; each tab's changes are all there, in the
// order it sent them; and the log says the same.
func TestReplicasInterleave(t *testing.T) {
	t.Parallel()
	labs, tss, url := replicas(t, 2)
	id := newID()
	tabs := make([]*client, 2)
	for i := range tabs {
		tabs[i], _ = dial(t, tss[i], id)
	}
	const each = 30 // under the outbox's 64 waiting states: no frame may be dropped
	frame := func(tab, i int) string {
		switch i % 5 {
		case 1:
			return `{"type":"start"}`
		case 2:
			return `{"type":"queueDeadline"}`
		case 3:
			return `{"type":"deliver","message":1}` // queued by each tab's first frame
		}
		return queueReply(fmt.Sprintf("tab %d frame %d", tab, i))
	}
	frames := make([][]stateFrame, 2)
	var wg sync.WaitGroup
	for tab := range tabs {
		wg.Go(func() {
			for i := range each {
				tabs[tab].send(frame(tab, i))
			}
		})
		wg.Go(func() {
			for {
				f := tabs[tab].read()
				if f.Type != "state" {
					t.Errorf("tab %d: %s", tab, f.raw)
					return
				}
				frames[tab] = append(frames[tab], f)
				if f.Seq == 2*each {
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	// A catch-up publishes the state after the last event it read, so a
	// tab may skip seqs another replica stored together; it never sees one
	// twice, or out of order, and a seq both tabs saw is the same frame.
	bySeq := make(map[uint64][]byte)
	for tab := range tabs {
		var prev uint64
		for _, f := range frames[tab] {
			if f.Seq <= prev {
				t.Fatalf("tab %d: seq %d after seq %d: a change was reordered or shown twice", tab, f.Seq, prev)
			}
			prev = f.Seq
			if other, ok := bySeq[f.Seq]; ok && !bytes.Equal(other, f.raw) {
				t.Fatalf("seq %d differs between replicas:\n%s\n%s", f.Seq, other, f.raw)
			}
			bySeq[f.Seq] = f.raw
		}
	}
	last := frames[0][len(frames[0])-1]
	for tab := range tabs {
		var mine []string
		for _, q := range last.Queue {
			if q.Kind == "reply" && strings.Contains(q.Label, fmt.Sprintf("tab %d ", tab)) {
				mine = append(mine, q.Label)
			}
		}
		var want []string
		for i := range each {
			if strings.Contains(frame(tab, i), `"queueReply"`) {
				want = append(want, fmt.Sprintf("tab %d frame %d", tab, i))
			}
		}
		if len(mine) != len(want) {
			t.Fatalf("tab %d's replies in the final queue: %q, want %q", tab, mine, want)
		}
		for i := range want {
			if !strings.Contains(mine[i], want[i]) {
				t.Fatalf("tab %d's replies in the final queue: %q, want %q in that order", tab, mine, want)
			}
		}
	}
	// The log agrees: a fresh replica replays it into the same state.
	_, fresh := runLab(t, server.Config{Store: openPostgres(t, url)})
	if _, f := dial(t, fresh, id); !bytes.Equal(f.raw, last.raw) {
		t.Fatalf("a third replica reads the log into\n%s\nwant\n%s", f.raw, last.raw)
	}
	var conflicts float64
	for _, lab := range labs {
		conflicts += metricValue(t, lab, "lab_seq_conflicts_total")
	}
	t.Logf("%d changes from two replicas, %v seq conflicts resolved", 2*each, conflicts)
}

// TestReplicaInstructorInjects: the student is on replica B, the
// instructor on replica A. A learns of the session from B's first change,
// shows it in the class table, injects into it (the student sees the
// message), and A's watcher sees the student's next change on B.
func TestReplicaInstructorInjects(t *testing.T) {
	t.Parallel()
	_, tss, _ := replicas(t, 2)
	a, b := tss[0], tss[1]
	id := newID()
	student, _ := dial(t, b, id)
	student.do(`{"type":"rename","name":"Bea"}`)
	student.do(`{"type":"start"}`) // a run before the current one, for a stale reply

	ws, _, err := dialInstructor(a, bearerHeader(testToken))
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	readUntil(t, ws, "Bea's session in A's class table", func(f overviewFrame) bool {
		return f.Type == "overview" && slices.ContainsFunc(f.Sessions, func(r overviewRow) bool { return r.ID == id && r.Name == "Bea" })
	})
	if err := ws.Write(context.Background(), websocket.MessageText, []byte(`{"type":"watch","session":"`+id+`"}`)); err != nil {
		t.Fatal(err)
	}
	readUntil(t, ws, "the watched timeline", func(f overviewFrame) bool { return f.Type == "timeline" && f.Reset })

	code, res := injectAPI(t, a, `{"sessions":["`+id+`"],"mode":"hold","preset":"staleReply"}`)
	if code != 200 || len(res.Results) != 1 || !res.Results[0].Applied {
		t.Fatalf("inject on A answered %d %+v", code, res)
	}
	f := student.state()
	if f.Seq != 3 || len(f.Queue) != 1 || f.Queue[0].From != "instructor" {
		t.Fatalf("the student on B got %s, want the injected message held", f.raw)
	}
	// A's watcher may first get the states before it (A catches up with
	// B's changes as it hears of them); the one of the injection must be
	// the student's frame, byte for byte.
	readUntil(t, ws, "the injection's state, the same bytes as the student's", func(g overviewFrame) bool {
		return g.Type == "state" && bytes.Equal(g.raw, f.raw)
	})
	f = student.do(`{"type":"deliver","message":1}`)
	if f.Seq != 4 {
		t.Fatalf("the student's delivery is seq %d, want 4", f.Seq)
	}
	readUntil(t, ws, "the delivery's state, the same bytes as the student's", func(g overviewFrame) bool {
		return g.Type == "state" && bytes.Equal(g.raw, f.raw)
	})
}

// TestReplicaHearsAgain: when a replica's listening connection is cut, it
// is not ready until it listens again, and then it catches up with what it
// missed meanwhile.
func TestReplicaHearsAgain(t *testing.T) {
	t.Parallel()
	_, tss, url := replicas(t, 2)
	a, b := tss[0], tss[1]
	id := newID()
	onA, _ := dial(t, a, id)
	onB, _ := dial(t, b, id)
	onA.do(`{"type":"start"}`)
	if f := onB.state(); f.Seq != 1 {
		t.Fatalf("B got %s", f.raw)
	}
	// Cut every listening connection, and change the session on B before
	// anyone can listen again (the listeners wait 100 ms before trying).
	admin, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	var cut int
	if err := admin.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`, postgres.ListenerName).Scan(&cut); err != nil || cut != 2 {
		t.Fatalf("cut %d listeners: %v", cut, err)
	}
	f := onB.do(`{"type":"queueDeadline"}`)
	got := onA.state()
	if !bytes.Equal(got.raw, f.raw) {
		t.Fatalf("A after listening again:\n%s\nwant\n%s", got.raw, f.raw)
	}
	waitFor(t, func() bool { return get(t, a, "/readyz").StatusCode == 200 && get(t, b, "/readyz").StatusCode == 200 })
}

// metricValue reads one unlabelled metric of lab from its /metrics.
func metricValue(t *testing.T, lab *server.Server, name string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	lab.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for line := range strings.Lines(rec.Body.String()) {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			if err := json.Unmarshal([]byte(strings.TrimSpace(v)), &f); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestReplicaClasses: a class made on replica A; a student joins it on B.
// A lists the student's session in the class; requiring predictions on A
// holds for the student on B; deleting it on A closes the student's tab on
// B (4001) and B forgets the session.
func TestReplicaClasses(t *testing.T) {
	t.Parallel()
	labs, tss, _ := replicas(t, 2)
	a, b := tss[0], tss[1]
	cl := createClass(t, a, "Section 2")
	status, loc, page := joinAs(t, browserClient(t, "127.0.0.2"), b, cl.Code, "Grace")
	m := labPath.FindStringSubmatch(loc)
	if status != http.StatusSeeOther || m == nil {
		t.Fatalf("joining on B: %d %q %s", status, loc, page)
	}
	id := m[1]
	tab, first := dial(t, b, id)
	if first.Name != "Grace" {
		t.Fatalf("the member's first state: %s", first.raw)
	}
	waitFor(t, func() bool {
		_, out := callJSON(t, a, "GET", "/api/classes/"+cl.ID, testToken, "")
		return len(out.Sessions) == 1 && out.Sessions[0].ID == id && out.Sessions[0].Name == "Grace"
	})
	// The class's setting, changed on A, holds for the student on B.
	if status, out := callJSON(t, a, "POST", "/api/classes/"+cl.ID+"/settings", testToken, `{"predictionsRequired": true}`); status != 200 || !out.Class.PredictionsRequired {
		t.Fatalf("requiring predictions on A: %d %+v", status, out)
	}
	if g := tab.state(); !exerciseOf(t, g).Exercise.PredictionsRequired {
		t.Fatalf("the tab on B after A required predictions: %s", g.raw)
	}
	tab.do(`{"type":"queueDeadline"}`)
	tab.send(`{"type":"deliver","message":1}`)
	if e := tab.refusal(); e.Reason != "prediction_required" {
		t.Fatalf("a delivery without a prediction on B: %+v", e)
	}
	if status, out := callJSON(t, a, "DELETE", "/api/sessions/"+id, testToken, ""); status != 200 || !slices.Equal(out.Deleted, []string{id}) {
		t.Fatalf("deleting on A: %d %+v", status, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, _, err := tab.ws.Read(ctx); websocket.CloseStatus(err) != 4001 {
		t.Fatalf("the tab on B: %v, want close 4001", err)
	}
	waitFor(t, func() bool { return !slices.Contains(labs[1].SessionIDs(), id) })
}

// TestReplicaRefusesOnlyWhenCaughtUp: a tab on B delivers the message a
// tab on A has just queued, before B may have heard of it. B must not
// refuse it from its stale copy: a refusal is final only after catching up.
func TestReplicaRefusesOnlyWhenCaughtUp(t *testing.T) {
	t.Parallel()
	_, tss, _ := replicas(t, 2)
	id := newID()
	onA, _ := dial(t, tss[0], id)
	onB, _ := dial(t, tss[1], id)
	for i := 1; i <= 20; i++ {
		onA.do(queueReply(fmt.Sprintf("reply %d", i))) // seq 2i-1 on A
		onB.send(fmt.Sprintf(`{"type":"deliver","message":%d}`, i))
		for {
			f := onB.read()
			if f.Type != "state" {
				t.Fatalf("B refused delivering message %d, queued on A: %s", i, f.raw)
			}
			if f.Seq == uint64(2*i) {
				break
			}
		}
		if f := onA.state(); f.Seq != uint64(2*i) || len(f.Receipts) != i {
			t.Fatalf("A after B's delivery: %s", f.raw)
		}
	}
}
