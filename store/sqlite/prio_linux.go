package sqlite

import (
	"runtime"
	"syscall"
)

// moverNice is the nice value of the mover's thread: it runs when a core
// is free, and yields one at once to the appends and the connections,
// whose latency a move's tens of milliseconds of CPU would otherwise
// delay by a scheduler's slice (BENCHMARKS.md, issue 35).
const moverNice = 10

// background locks the calling goroutine to its thread and lowers the
// thread's priority to moverNice; the thread ends with the goroutine,
// which never unlocks it, so no other goroutine runs at that priority.
// Best effort: a refused priority leaves the thread as it was.
func background() {
	runtime.LockOSThread()
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), moverNice)
}
