package jsclient

import (
	"context"
	"sync"
	"time"

	"github.com/toolcall-lab/lab/internal/procstat"
	"github.com/toolcall-lab/lab/model"
)

// Pool keeps the sandboxes whose submissions ended cleanly, to load the
// next submission into (issue 42). A new sandbox costs about 15 ms of CPU
// to start, and its new heap about 40 ms of kernel time a check (3,400
// page faults, then its exit), which a kernel that does not preempt
// itself (PREEMPT_NONE) takes from the students' changes whatever the
// sandbox's policy. A sandbox taken from the pool compiles the new source
// into a new program and drops the last one's program and instances
// (serveChild, opLoad), and every case runs in a fresh runtime, as in a
// new sandbox: nothing of one student's program is seen by the next. A
// sandbox goes back only when nothing went wrong in it, and is retired
// after maxUses submissions, poolCPU of CPU time, or once it has held
// poolResident of memory (the runtime keeps what it mapped, which counts
// against the sandbox's cap).
//
// Ownership: mu guards idle and closed. The Pool's owner (the server's
// checker) calls Close when it stops, which ends the idle sandboxes; a
// Submission closed after that ends its own.
type Pool struct {
	max    int
	mu     sync.Mutex
	idle   []*warm
	closed bool
}

// Bounds on a sandbox's reuse.
const (
	maxUses      = 64
	poolCPU      = 5 * time.Second // well below its own CPU cap (serveChild)
	poolResident = 64 << 20
)

// warm is an idle sandbox: its process and pipes, and the budget it was
// started with (its heap watchdog's), which a Load must ask for to use it.
type warm struct {
	budget Budget
	uses   int
	proc
}

// NewPool keeps up to max idle sandboxes.
func NewPool(max int) *Pool {
	return &Pool{max: max}
}

// Load is the package's Load with a sandbox from the pool when one is
// idle; the Submission's Close gives it back.
func (p *Pool) Load(ctx context.Context, source string, b Budget) (model.NewClient, *Submission, error) {
	return loadIn(ctx, p, source, b)
}

// take is an idle sandbox started with budget b, or nil.
func (p *Pool) take(b Budget) *warm {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.idle) - 1; i >= 0; i-- {
		if w := p.idle[i]; w.budget == b {
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
			return w
		}
	}
	return nil
}

// put keeps w, unless the pool is closed or full.
func (p *Pool) put(w *warm) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.idle) >= p.max {
		return false
	}
	p.idle = append(p.idle, w)
	return true
}

// Close ends every idle sandbox; sandboxes in use end when their
// Submissions close.
func (p *Pool) Close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, w := range idle {
		w.end()
	}
}

// reusable says whether s's sandbox may load another submission; s.mu is
// held.
func (s *Submission) reusable() bool {
	if s.pool == nil || s.dead != nil || s.replayed || s.cmd == nil || s.uses+1 >= maxUses {
		return false
	}
	pid := s.cmd.Process.Pid
	cpu, err1 := procstat.CPU(pid)
	peak, err2 := procstat.PeakResident(pid)
	return err1 == nil && err2 == nil && cpu < poolCPU && peak < poolResident
}
