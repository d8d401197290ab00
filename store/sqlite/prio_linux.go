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
// thread's priority to moverNice; the returned restore puts the priority
// back and unlocks the thread, for the goroutine to call before it ends
// (a thread is not always ended with its goroutine: Go keeps the main
// one). Best effort: a refused priority leaves the thread as it was.
func background() (restore func()) {
	runtime.LockOSThread()
	tid := syscall.Gettid()
	// The system call's value is 20 - nice (the C library's is nice).
	raw, err := syscall.Getpriority(syscall.PRIO_PROCESS, tid)
	if err != nil || syscall.Setpriority(syscall.PRIO_PROCESS, tid, moverNice) != nil {
		return runtime.UnlockOSThread
	}
	return func() {
		_ = syscall.Setpriority(syscall.PRIO_PROCESS, tid, 20-raw)
		runtime.UnlockOSThread()
	}
}
