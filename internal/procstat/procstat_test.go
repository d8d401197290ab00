package procstat

import (
	"os"
	"testing"
	"time"
)

// TestProcessCPU: the CPU time grows with work done, the parent is the
// parent, and a process that is gone has neither.
func TestProcessCPU(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	before, err := CPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Work until 50 ms of CPU are counted, for at most 5 s of the wall
	// clock: on a loaded machine 100 ms of wall time may be 30 of CPU.
	var after time.Duration
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end) && after-before < 50*time.Millisecond; {
		for spin := time.Now().Add(10 * time.Millisecond); time.Now().Before(spin); {
		}
		after, _ = CPU(os.Getpid())
	}
	if after-before < 50*time.Millisecond {
		t.Fatalf("5 s of work counted as %v", after-before)
	}
	if p, err := Parent(os.Getpid()); err != nil || p != os.Getppid() {
		t.Fatalf("parent %d, %v; want %d", p, err, os.Getppid())
	}
	if _, err := CPU(1 << 30); err == nil {
		t.Fatal("a CPU time for a process that does not exist")
	}
}
