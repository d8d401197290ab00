package idle

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/toolcall-lab/lab/internal/procstat"
)

// A child started by Start is at SCHED_IDLE (or nice 19) from its start,
// and the caller's thread is not.
func TestStartIsIdleFromTheFirstInstruction(t *testing.T) {
	cmd := exec.Command("sleep", "5")
	if err := Start(cmd); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	f, err := procstat.Fields("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	policy, err := Policy(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if policy != unix.SCHED_IDLE && strings.TrimSpace(f[procstat.Nice]) != "19" {
		t.Fatalf("the child's policy is %d and its nice %s: want SCHED_IDLE or nice 19", policy, f[procstat.Nice])
	}
	if mine, _ := Policy(0); mine == unix.SCHED_IDLE {
		t.Fatal("the caller's thread was left at SCHED_IDLE")
	}
}
