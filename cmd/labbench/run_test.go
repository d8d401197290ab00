package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
)

func TestFlags(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"labbench", "-scenarios", "rtt,nope"}, func(string) string { return "" }, &stderr, &stderr); code != 2 || !strings.Contains(stderr.String(), `"nope"`) {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	if code := run(context.Background(), []string{"labbench", "-labs", "disk"}, func(string) string { return "" }, &stderr, &stderr); code != 2 || !strings.Contains(stderr.String(), `"disk"`) {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	b, err := parseFlags([]string{"labbench", "-short", "-reps", "2"}, func(string) string { return "" }, &stderr)
	if err != nil || b.reps != 2 || b.idle != 100 || b.duration >= time.Second || b.classDuration != b.duration || len(b.scenarios) != 5 || b.courseSessions >= 2000 || len(b.labs) != 2 {
		t.Fatalf("short: %+v, %v", b, err)
	}
	// The class's p99 takes a longer measurement than the closed loops.
	if b, err := parseFlags([]string{"labbench"}, func(string) string { return "" }, &stderr); err != nil || b.classDuration < 2*b.duration {
		t.Fatalf("defaults: class %v, others %v, %v", b.classDuration, b.duration, err)
	}
}

// Either baseline speaks the lab's protocol shape: a state frame on
// connect, and its frame at the next seq to every connection of the
// session per received frame.
func TestBaseline(t *testing.T) {
	t.Parallel()
	for _, fixed := range []bool{false, true} {
		ts := httptest.NewServer((&baseline{fixed: fixed, sessions: map[string]*baseSession{}}).handler())
		defer ts.Close()
		srv := &server{name: "baseline", base: ts.URL}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		id := uuid.NewString()
		a, err := dial(ctx, srv, id, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer a.CloseNow()
		b, err := dial(ctx, srv, id, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer b.CloseNow()
		for _, ws := range []*websocket.Conn{a, b} {
			if seq, err := readState(ctx, ws); err != nil || seq != 0 {
				t.Fatalf("fixed %v: first frame: seq %d, %v", fixed, seq, err)
			}
		}
		var g opGen
		if err := send(ctx, a, g.next()); err != nil {
			t.Fatal(err)
		}
		for _, ws := range []*websocket.Conn{a, b} {
			_, data, err := ws.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if want := appendBaselineFrame(nil, id, 1, fixed); !bytes.Equal(data, want) {
				t.Fatalf("fixed %v: got %.300s, want %.300s", fixed, data, want)
			}
		}
	}
}

func TestOps(t *testing.T) {
	t.Parallel()
	var g opGen
	for i := 1; i <= preloads; i++ {
		if !json.Valid(g.preload(i)) {
			t.Fatal("preload frame is not JSON")
		}
	}
	want := []string{`{"type":"queueReply"`, `{"type":"deliver","message":6}`, `{"type":"start"}`}
	for _, w := range want {
		if f := g.next(); !json.Valid(f) || !strings.HasPrefix(string(f), w) {
			t.Fatalf("op %s, want %s", f, w)
		}
	}
	if seq, ok := frameSeq([]byte(`{"type":"state","session":"x","seq":42,"call":{}}`)); !ok || seq != 42 {
		t.Fatalf("frameSeq = %d, %v", seq, ok)
	}
	if _, ok := frameSeq([]byte(`{"type":"error","error":"no"}`)); ok {
		t.Fatal("an error frame has no seq")
	}
}

// TestLoopKeepsItsSession: a closed loop run in short turns moves to a
// fresh session every rotateOps ops, as one run at a stretch does, not at
// every turn; each op is one seq on its session.
func TestLoopKeepsItsSession(t *testing.T) {
	t.Parallel()
	base := &baseline{sessions: map[string]*baseSession{}}
	ts := httptest.NewServer(base.handler())
	defer ts.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := &loopClient{srv: &server{name: "baseline", base: ts.URL}}
	defer c.close()
	ops, turns := 0, 0
	for ; turns < 50 && (turns < 4 || ops < 2*rotateOps); turns++ {
		until := time.Now().Add(2 * time.Millisecond)
		n, err := c.run(ctx, until, nil)
		if err != nil {
			t.Fatal(err)
		}
		ops += n
	}
	base.mu.Lock()
	defer base.mu.Unlock()
	var seqs uint64
	for _, s := range base.sessions {
		seqs += s.seq
	}
	if want := (ops + rotateOps - 1) / rotateOps; len(base.sessions) != want || seqs != uint64(ops) {
		t.Fatalf("%d ops in %d turns made %d sessions with %d seqs in all, want %d sessions", ops, turns, len(base.sessions), seqs, want)
	}
}

// TestBaselineFrames: every frame of either baseline is a state frame in
// JSON with its seq; the fixed one is 2.6 KB at every seq (how big the
// other is, TestBaselineIsStateSized checks against the lab).
func TestBaselineFrames(t *testing.T) {
	t.Parallel()
	id := uuid.NewString()
	for seq := range uint64(rotateOps + 1) {
		fixed := appendBaselineFrame(nil, id, seq, true)
		sized := appendBaselineFrame(nil, id, seq, false)
		for _, f := range [][]byte{fixed, sized} {
			var st struct {
				Type  string            `json:"type"`
				Seq   uint64            `json:"seq"`
				Queue []json.RawMessage `json:"queue"`
			}
			if err := json.Unmarshal(f, &st); err != nil || st.Type != "state" || st.Seq != seq {
				t.Fatalf("seq %d: %v %+v", seq, err, st)
			}
		}
		if n := len(fixed); n < 2500 || n > 2700 {
			t.Fatalf("seq %d: fixed frame of %d bytes, want 2.6 KB", seq, n)
		}
	}
}

// TestGoalTables: the goals are judged against the baseline, and, when the
// fixed baseline ran, again against it in a table of its own.
func TestGoalTables(t *testing.T) {
	r := results{}
	for server, cpu := range map[string]float64{"default": 0.03, "memory": 0.024, "baseline": 0.017, "fixed-baseline": 0.012} {
		r.add("throughput", server, metrics{"CPU s/1000 ops": cpu, "ops/s": 1})
	}
	for _, fixed := range []bool{false, true} {
		var out strings.Builder
		r.print(&out, &bench{labs: []string{"default", "memory"}, fixed: fixed, loops: 50, sessions: 30, tabs: 3, idle: 2000})
		got := out.String()
		against := regexp.MustCompile(`server CPU per op.*`).FindAllString(got, -1)
		want := []string{"1.76 met 1.41 met"}
		if fixed {
			want = append(want, "2.5 MISSED 2 MISSED")
		}
		if len(against) != len(want) {
			t.Fatalf("fixed %v: %d CPU rows, want %d:\n%s", fixed, len(against), len(want), got)
		}
		for i, w := range want {
			if !strings.Contains(strings.Join(strings.Fields(against[i]), " "), w) {
				t.Errorf("fixed %v: table %d has %q, want %q", fixed, i+1, against[i], w)
			}
		}
		if medians := regexp.MustCompile(`(?m)^ *scenario +metric.*$`).FindString(got); strings.Contains(medians, "fixed-baseline") != fixed {
			t.Errorf("fixed %v: medians' columns %q", fixed, medians)
		}
	}
}
