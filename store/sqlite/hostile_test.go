package sqlite

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/toolcall-lab/lab/model"
	"github.com/toolcall-lab/lab/store"
	"github.com/toolcall-lab/lab/store/storetest"
)

// flood appends replies of rawBytes each to many sessions from 8 writers
// until written bytes pass stopAfter or d passes, sampling the write-ahead
// log's size every 20 ms. It returns the largest log seen and the bytes
// written.
func flood(t *testing.T, s *Store, rawBytes int, stopAfter int64, d time.Duration) (maxWAL, written int64) {
	t.Helper()
	ctx := context.Background()
	raw := strings.Repeat("x", rawBytes)
	var total atomic.Int64
	var failed atomic.Int64
	deadline := time.Now().Add(d)
	done := make(chan struct{})
	var writers sync.WaitGroup
	for w := range 8 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for i := 0; time.Now().Before(deadline) && total.Load() < stopAfter; i++ {
				// A new session every 200 records, as a flood of start
				// frames across sessions would.
				id := fmt.Sprintf("flood-%d-%d", w, i/200)
				r := store.Record{Session: id, Seq: uint64(i%200 + 1), Time: storetest.T0, Run: "run-1",
					Event: model.Event{Kind: model.MessageQueued, By: model.Student, Message: model.Message{ID: i%200 + 1, Kind: model.ReplyMessage, From: model.Student, Raw: raw}}}
				if err := s.Append(ctx, r); err != nil {
					failed.Add(1)
					continue
				}
				total.Add(int64(rawBytes))
			}
		}()
	}
	go func() { writers.Wait(); close(done) }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if n := s.walSize(); n > maxWAL {
			maxWAL = n
		}
		select {
		case <-done:
			if n := failed.Load(); n > 0 {
				t.Errorf("%d appends failed during the flood", n)
			}
			return maxWAL, total.Load()
		case <-tick.C:
		}
	}
}

// TestWALStaysBounded: continuous writes (finding 3 of issue 10: the WAL
// grew to 621 MB in 10 s because a passive checkpoint never reaches the end
// of a log that keeps growing) leave the log within its limit plus what one
// move adds (a journal of up to journalMaxBytes and its pages), once
// several times that much was written.
func TestWALStaysBounded(t *testing.T) {
	t.Parallel()
	const limit = 2 << 20
	const slack = 2 * journalMaxBytes
	s := openTemp(t, Options{WALLimit: limit})
	maxWAL, written := flood(t, s, 64<<10, 3*(limit+slack), 30*time.Second)
	t.Logf("wrote %d MiB of replies; largest WAL %.1f MiB (limit %d MiB)", written>>20, float64(maxWAL)/(1<<20), limit>>20)
	if written < 2*(limit+slack) {
		t.Fatalf("only %d bytes written: too few to tell whether the log is bounded", written)
	}
	if maxWAL > limit+slack {
		t.Fatalf("the WAL reached %d bytes under continuous writes, want at most %d", maxWAL, limit+slack)
	}
}

// TestWALFloodFigure measures the WAL under a 10 s flood at the default
// limit, for the record (LAB_WAL_FLOOD=1; docs/limits.md).
func TestWALFloodFigure(t *testing.T) {
	if os.Getenv("LAB_WAL_FLOOD") == "" {
		t.Skip("set LAB_WAL_FLOOD=1 to measure")
	}
	s := openTemp(t, Options{})
	maxWAL, written := flood(t, s, 4<<10, 1<<40, 10*time.Second)
	db, _ := os.Stat(s.Path())
	t.Logf("10 s flood: wrote %d MiB of replies; largest WAL %.1f MiB; database %.1f MiB", written>>20, float64(maxWAL)/(1<<20), float64(db.Size())/(1<<20))
}

// TestReadyFollowsWrites: Ready's probe really writes (finding 5 of issue
// 10: a no-op UPDATE, which SQLite does not write, answered ready while
// every write failed). A child process (this test again) runs with a file
// size limit of 0, so that no file may grow, as on a full disk: Ready
// fails within two seconds, and passes again within two seconds of the
// limit being lifted.
func TestReadyFollowsWrites(t *testing.T) {
	if os.Getenv("LAB_STORE_FSIZE_CHILD") == "1" {
		readyChild(t)
		return
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestReadyFollowsWrites$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "LAB_STORE_FSIZE_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestReadyFollowsWrites") {
		t.Fatalf("child: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "hostile_test.go") {
			t.Log(strings.TrimSpace(line))
		}
	}
}

func readyChild(t *testing.T) {
	signal.Ignore(syscall.SIGXFSZ) // a write past the limit fails with EFBIG instead
	s := openTemp(t, Options{})
	ctx := context.Background()
	for _, r := range storetest.Sample("a")[:3] {
		if err := s.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	// An empty log: the next commit must grow a file.
	if _, err := s.db.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		t.Fatal(err)
	}
	if err := s.Ready(ctx); err != nil {
		t.Fatalf("Ready before the limit: %v", err)
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: 0, Max: old.Max}); err != nil {
		t.Fatal(err)
	}
	failedAt := waitReady(t, s, false)
	if err := s.Append(ctx, storetest.Sample("a")[3]); err == nil {
		t.Error("an append succeeded while no file could grow")
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	backAt := waitReady(t, s, true)
	t.Logf("Ready failed %v after writes began to fail, and passed %v after they worked again", failedAt, backAt)
	if err := s.Append(ctx, storetest.Sample("a")[3]); err != nil {
		t.Fatalf("append after the limit was lifted: %v", err)
	}
}

// waitReady polls Ready until it says ready (or not) and returns how long
// that took, within two seconds.
func waitReady(t *testing.T, s *Store, ready bool) time.Duration {
	t.Helper()
	start := time.Now()
	const within = 2 * time.Second
	for {
		err := s.Ready(context.Background())
		if (err == nil) == ready {
			return time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("Ready still %v after %v, want ready=%v", err, within, ready)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
