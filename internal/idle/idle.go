// Package idle starts the sandboxes' processes below every thread of the
// lab, from their first instruction: a check or a compile takes only a
// core no student's change wants.
//
// Linux keeps a scheduling policy per thread and a child made by fork or
// clone inherits its maker's, so a child started from a thread at
// SCHED_IDLE is at SCHED_IDLE through its exec and its runtime's start,
// the 10–15 ms of a Go process's start that a policy set by the child
// itself would leave at the students' priority.
package idle

import (
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"
)

// Thread puts the thread it runs on (tid 0) or thread tid at SCHED_IDLE,
// or, where that is refused, at the lowest nice.
func Thread(tid int) {
	if unix.SchedSetAttr(tid, &unix.SchedAttr{Policy: unix.SCHED_IDLE}, 0) != nil {
		_ = unix.Setpriority(unix.PRIO_PROCESS, tid, 19)
	}
}

// Start starts cmd from a thread of its own at SCHED_IDLE. The thread is
// never given back to the runtime: it ends with its goroutine, and its
// policy with it.
func Start(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		Thread(0)
		done <- cmd.Start()
	}()
	return <-done
}

// Policy is the scheduling policy of thread tid (0: the caller's).
func Policy(tid int) (uint32, error) {
	a, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		return 0, err
	}
	return a.Policy, nil
}
