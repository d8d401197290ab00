package server

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestOverviewStopWaitsForFlush: a flush that is running when stop is
// called finishes before stop returns, so nothing is sent after it.
func TestOverviewStopWaitsForFlush(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	o := newOverview(func(string) ([]sessionRow, [][]byte) {
		if calls.Add(1) == 2 { // the flush's call (the first is subscribe's)
			close(entered)
			<-release
		}
		return nil, nil
	}, func(rows []sessionRow) classSummary { return summarize(rows, time.Now(), time.Minute) })
	c := collector(nil)
	o.subscribe(c, "")
	o.mark()
	<-entered
	// The flush is inside rows now. Let it go a little later: a stop that
	// did not wait would return first, and the check below would fail.
	go func() {
		time.Sleep(50 * time.Millisecond)
		close(release)
	}()
	o.stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.out.frames) != 2 {
		t.Fatalf("%d frames when stop returned, want 2 (subscribe's and the running flush's)", len(c.out.frames))
	}
}

// TestOverviewFrameIsMarshal: the table built from the rows' own JSON is
// the bytes json.Marshal writes for the whole frame, whatever the rows
// hold (escaped names, a code row, no rows, a nil table).
func TestOverviewFrameIsMarshal(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 2, 9, 30, 0, 123456789, time.UTC)
	rows := []sessionRow{
		{ID: "a", Name: `<Ada> & "Bea"` + "\u2028", Tabs: 2, RunID: "run-1", Status: "Pending", Seq: 7, LastActivity: at},
		{ID: "b", Class: "c", Code: &codeRow{Submissions: 2, Status: codeChecking}, progress: progress{Steps: []int{1, 2}, Current: 3, Started: true, CurrentSince: at, Stuck: true}},
	}
	sum := summarize(rows, at, time.Minute)
	for _, rows := range [][]sessionRow{rows, rows[:1], {}, nil} {
		var encoded [][]byte
		if rows != nil {
			encoded = make([][]byte, len(rows))
		}
		for i, r := range rows {
			encoded[i] = mustJSON(r)
		}
		want := mustJSON(struct {
			Type     string       `json:"type"`
			Sessions []sessionRow `json:"sessions"`
			Exercise classSummary `json:"exercise"`
		}{"overview", rows, sum})
		if got := overviewFrame(encoded, sum); string(got) != string(want) {
			t.Errorf("%d rows:\n got %s\nwant %s", len(rows), got, want)
		}
	}
}

// TestTableRowEncodedOnChange: a session's row is encoded again for the
// table when it has changed, when its class or its stuck flag (the
// clock's) differs, and not otherwise.
func TestTableRowEncodedOnChange(t *testing.T) {
	t.Parallel()
	srv, sess := newTestSession(t)
	var now atomic.Int64
	now.Store(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC).UnixNano())
	sess.now = func() time.Time { return time.Unix(0, now.Load()).UTC() }
	sess.stuckAfter = time.Minute
	sess.mu.Lock()
	sess.row.Started, sess.row.Current, sess.row.CurrentSince = true, 1, sess.now()
	sess.rowGen++
	sess.mu.Unlock()
	check := func(what, class string, fresh bool, last []byte) []byte {
		t.Helper()
		r, b := sess.tableRow(class)
		if string(b) != string(mustJSON(r)) {
			t.Fatalf("%s: the row's JSON %s is not the row %+v", what, b, r)
		}
		if same := last != nil && &b[0] == &last[0]; same == fresh {
			t.Fatalf("%s: encoded again %v, want %v", what, !same, fresh)
		}
		return b
	}
	b := check("the first table", "", true, nil)
	b = check("unchanged", "", false, b)
	sess.subscribe(collector(srv.metrics)) // a tab opens: tabs 1
	b = check("a tab opened", "", true, b)
	if !strings.Contains(string(b), `"tabs":1`) {
		t.Fatalf("the row after a tab opened: %s", b)
	}
	b = check("in a class", "c1", true, b)
	b = check("in a class, unchanged", "c1", false, b)
	now.Add(int64(2 * time.Minute))
	b = check("stuck by the clock", "c1", true, b)
	if !strings.Contains(string(b), `"stuck":true`) {
		t.Fatalf("the row after two minutes: %s", b)
	}
	check("still stuck", "c1", false, b)
}
