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
	if err != nil || b.reps != 2 || b.idle != 100 || b.duration >= time.Second || len(b.scenarios) != 4 || len(b.labs) != 2 {
		t.Fatalf("short: %+v, %v", b, err)
	}
}

// The baseline speaks the lab's protocol shape: a state frame on connect,
// and one to every connection of the session per received frame, with a
// growing seq.
func TestBaseline(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer((&baseline{sessions: map[string]*baseSession{}}).handler())
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
			t.Fatalf("first frame: seq %d, %v", seq, err)
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
		var f struct {
			Type  string
			Seq   uint64
			Queue []struct{ Label string }
		}
		if err := json.Unmarshal(data, &f); err != nil || f.Type != "state" || f.Seq != 1 || len(f.Queue) != 5 || len(data) < 2500 || len(data) > 4000 {
			t.Fatalf("frame of %d bytes: %+v, %v", len(data), f, err)
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

// TestSizedBaselineFrames: the fixed frame is 2.6 KB at every seq; a sized
// one grows from it, as the lab's do, to about 13.6 KB at the end of a
// session, with an 8 KB mean, and every frame is a state frame in JSON.
func TestSizedBaselineFrames(t *testing.T) {
	t.Parallel()
	id := uuid.NewString()
	total := 0
	for seq := range uint64(rotateOps + 1) {
		fixed := appendBaselineFrame(nil, id, seq, false)
		sized := appendBaselineFrame(nil, id, seq, true)
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
		total += len(sized)
	}
	last := len(appendBaselineFrame(nil, id, rotateOps, true))
	if mean := total / (rotateOps + 1); mean < 7600 || mean > 8400 || last < 13000 || last > 14000 {
		t.Fatalf("sized frames: mean %d bytes, last %d; want about 8 KB and 13.6 KB", mean, last)
	}
}

// TestGoalTables: the goals are judged against the baseline, and, when the
// sized baseline ran, again against it in a table of its own.
func TestGoalTables(t *testing.T) {
	r := results{}
	for server, cpu := range map[string]float64{"default": 0.03, "memory": 0.024, "baseline": 0.012, "sized-baseline": 0.017} {
		r.add("throughput", server, metrics{"CPU s/1000 ops": cpu, "ops/s": 1})
	}
	for _, sized := range []bool{false, true} {
		var out strings.Builder
		r.print(&out, &bench{labs: []string{"default", "memory"}, sized: sized, loops: 50, sessions: 30, tabs: 3, idle: 2000})
		got := out.String()
		against := regexp.MustCompile(`server CPU per op.*`).FindAllString(got, -1)
		want := []string{"2.5 MISSED 2 MISSED"}
		if sized {
			want = append(want, "1.76 met 1.41 met")
		}
		if len(against) != len(want) {
			t.Fatalf("sized %v: %d CPU rows, want %d:\n%s", sized, len(against), len(want), got)
		}
		for i, w := range want {
			if !strings.Contains(strings.Join(strings.Fields(against[i]), " "), w) {
				t.Errorf("sized %v: table %d has %q, want %q", sized, i+1, against[i], w)
			}
		}
	}
}
