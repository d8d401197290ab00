package sqlite

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/toolcall-lab/lab/internal/procstat"
)

// TestMoverRunsInTheBackground: an open store has a thread at the mover's
// nice value (the checkpointer's), and none once it is closed, whichever
// thread it had (the main thread outlives its goroutine).
func TestMoverRunsInTheBackground(t *testing.T) {
	niced := func() int {
		n := 0
		tasks, _ := filepath.Glob("/proc/self/task/*/stat")
		for _, p := range tasks {
			if f, err := procstat.Fields(p); err == nil && f[procstat.Nice] == strconv.Itoa(moverNice) {
				n++
			}
		}
		return n
	}
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("no /proc")
	}
	before := niced()
	s := openTemp(t, Options{})
	for deadline := time.Now().Add(5 * time.Second); niced() == before; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no thread at nice %d with the store open", moverNice)
		}
	}
	s.Close()
	for deadline := time.Now().Add(5 * time.Second); niced() != before; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d threads at nice %d after Close, %d before", niced(), moverNice, before)
		}
	}
}
