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

// TestResident: a process's resident memory grows by what it touches.
func TestResident(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	before, err := Resident(os.Getpid())
	if err != nil || before <= 0 {
		t.Fatalf("resident %d, %v", before, err)
	}
	b := make([]byte, 64<<20)
	for i := range b {
		if i%4096 == 0 {
			b[i] = 1
		}
	}
	after, err := Resident(os.Getpid())
	if err != nil || after-before < 32<<20 {
		t.Fatalf("resident %d after touching 64 MiB, %d before (%v)", after, before, err)
	}
	if peak, err := PeakResident(os.Getpid()); err != nil || peak < after {
		t.Fatalf("peak resident %d (%v) below resident %d", peak, err, after)
	}
	if b[0] != 1 {
		t.Fatal("unreachable")
	}
}
