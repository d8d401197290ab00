package jsclient

import (
	"bufio"
	"context"
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/toolcall-lab/lab/internal/idle"
	"github.com/toolcall-lab/lab/internal/procstat"
	"github.com/toolcall-lab/lab/model"
)

// SandboxMemory is the sandbox's cap on writable memory (RLIMIT_DATA: what
// it has mapped to write, not the address space the Go runtime reserves
// and never touches, which RLIMIT_AS would count); see docs/limits.md.
const SandboxMemory = 256 << 20

// grace is how long past a call's budget (CPU time in the sandbox) the lab
// waits on the wall clock for its answer before killing it: an interrupt
// cannot reach some builtins (a regular expression backtracking) until they
// return, and a busy machine may keep the sandbox off a core for a while.
const grace = 2 * time.Second

// starved bounds a call's wall time when the sandbox has not used its
// time yet: its program thread runs only on a core nothing else wants
// (child.go), so a lab busy with a class may keep it waiting for seconds,
// and the check then takes longer instead of failing. A sandbox kept off
// the cores that long, or stopped, is killed all the same.
const starved = 10 * time.Second

// slots lets one sandbox run per core in the whole server: a check is CPU
// work (one thread's), and its memory is then the cap once per core, not
// once per session.
var slots = make(chan struct{}, runtime.NumCPU())

// Submission is a loaded program and the sandbox that runs it. Its methods
// and its clients' are safe for one goroutine at a time.
type Submission struct {
	budget Budget
	source string // for a replay (check.go)
	// allowance is checkAllowance (check.go); tests lower it.
	allowance time.Duration

	pool *Pool // where Close gives the sandbox back; nil: it ends
	uses int   // submissions the sandbox loaded before this one

	mu sync.Mutex // guards everything below; held over one round trip
	proc
	dead   error // set when the sandbox is gone: every later call fails with it
	used   time.Duration
	spent  bool
	closed bool
	peak   int64 // the sandbox's peak resident memory, once it has ended
	// replayed: the check was played again a round trip per call (check.go)
	replayed bool
}

// proc is a sandbox's process and its pipes.
type proc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	enc    *gob.Encoder
	dec    *gob.Decoder
	stderr *tail
}

// end kills the process and waits for it.
func (p *proc) end() {
	_ = p.stdin.Close()
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

// Load starts a sandbox, loads source into it and returns the way to make
// a fresh instance of the module for each case. It waits for the server's
// sandbox slots (one per core), up to ctx. A source the lab cannot run is a
// *SourceError (syntax, import, export form, missing function, a throw at
// the top level). The caller must Close the Submission.
func Load(ctx context.Context, source string, b Budget) (model.NewClient, *Submission, error) {
	return loadIn(ctx, nil, source, b)
}

// loadIn is Load, in a sandbox from pool when it has one idle.
func loadIn(ctx context.Context, pool *Pool, source string, b Budget) (model.NewClient, *Submission, error) {
	b = b.withDefaults()
	select {
	case slots <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	var s *Submission
	var w *warm
	if pool != nil {
		w = pool.take(b)
	}
	if w != nil {
		s = &Submission{budget: b, allowance: checkAllowance, uses: w.uses, proc: w.proc}
	} else {
		var err error
		if s, err = start(b); err != nil {
			<-slots
			return nil, nil, err
		}
	}
	s.pool = pool
	s.source = source
	resp, err := s.roundTrip(request{Op: opLoad, A: source}, b.PerCall)
	if err == nil && resp.Err != "" {
		err = resp.sourceError()
	}
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	return s.newClient, s, nil
}

// Spent says whether the program used all of its time (Budget.Total).
func (s *Submission) Spent() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.spent
}

// Used is the time the program has run, as the sandbox counts it.
func (s *Submission) Used() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}

// PeakRSS is the most memory the sandbox held, in bytes, known once it
// has ended (after Close).
func (s *Submission) PeakRSS() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}

// Close ends the sandbox, or gives it back to its Pool, and frees the
// server's slot. It is safe to call more than once.
func (s *Submission) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	if s.reusable() {
		w := &warm{budget: s.budget, uses: s.uses + 1, proc: s.proc}
		if s.pool.put(w) {
			s.cmd, s.dead = nil, fmt.Errorf("the check was stopped before it ended: %w", model.ErrStop)
			<-slots
			return
		}
	}
	s.stop(fmt.Errorf("the check was stopped before it ended: %w", model.ErrStop))
	<-slots
}

func start(b Budget) (*Submission, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("jsclient: cannot find the lab's executable for the sandbox: %w", err)
	}
	cmd := exec.Command(exe)
	cmd.Env = []string{
		childEnv + "=" + fmt.Sprint(SandboxMemory),
		childBudEnv + "=" + formatBudget(b),
		"GOMAXPROCS=1", // the program's thread and the collector's share one core
		"GOTRACEBACK=none",
	}
	// No parent-death signal: Linux sends it when the thread that started
	// the child ends, and idle.Start's thread ends at once. A sandbox whose
	// lab has died reads the end of its pipe, or is stopped by its own CPU
	// cap (serveChild).
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	s := &Submission{budget: b, allowance: checkAllowance, proc: proc{cmd: cmd, stdin: stdin, stderr: &tail{}}}
	cmd.Stderr = s.stderr
	if err := idle.Start(cmd); err != nil {
		return nil, fmt.Errorf("jsclient: cannot start the sandbox: %w", err)
	}
	s.enc = gob.NewEncoder(stdin)
	s.dec = gob.NewDecoder(bufio.NewReader(stdout))
	return s, nil
}

// stop kills the sandbox and waits for it; s.mu is held.
func (s *Submission) stop(why error) {
	if s.dead == nil {
		s.dead = why
		var ce *CallError
		if errors.As(why, &ce) {
			ce.dead = true
		}
	}
	if s.cmd != nil {
		s.end()
		if ru, ok := s.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			s.peak = ru.Maxrss << 10 // Linux counts it in KiB
		}
		s.cmd = nil
	}
}

// roundTrip sends one request and waits for its answer, at most limit plus
// grace of the sandbox's CPU time (and starved of wall time); past that it
// kills the sandbox.
func (s *Submission) roundTrip(req request, limit time.Duration) (response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var resp response
	if s.dead != nil {
		return resp, s.dead
	}
	if s.used >= s.budget.Total {
		s.spent = true
		return resp, &CallError{Kind: OutOfTime, Message: fmt.Sprintf("The program has used all of its %v of time.", s.budget.Total)}
	}
	// The timer looks at limit+grace of wall time, and again every grace
	// while the sandbox has used less CPU than that since the call began
	// (it waited for a core); done, set when the answer came, stops it.
	var timedOut, done bool
	var tm sync.Mutex
	pid, began := s.cmd.Process.Pid, time.Now()
	cpu0, err0 := procstat.CPU(pid)
	var t *time.Timer
	tm.Lock()
	t = time.AfterFunc(limit+grace, func() {
		tm.Lock()
		defer tm.Unlock()
		if done {
			return
		}
		if cpu, err := procstat.CPU(pid); err0 == nil && err == nil && cpu-cpu0 < limit+grace && time.Since(began) < starved {
			t.Reset(grace)
			return
		}
		timedOut = true
		_ = s.cmd.Process.Kill()
	})
	tm.Unlock()
	err := s.enc.Encode(&req)
	if err == nil {
		err = s.dec.Decode(&resp)
	}
	tm.Lock()
	done = true
	t.Stop()
	killed := timedOut
	tm.Unlock()
	what := opName(req.Op)
	if err != nil {
		s.stop(s.crash(what, killed, limit))
		s.used += limit
		return resp, s.dead
	}
	s.used = resp.Used
	if resp.CallKind == OutOfTime || s.used >= s.budget.Total {
		s.spent = true
	}
	return resp, nil
}

// crash says why the sandbox ended in the middle of a call.
func (s *Submission) crash(what string, killed bool, limit time.Duration) error {
	out := s.stderr.String()
	switch {
	case killed:
		return &CallError{Kind: TooLong, Message: fmt.Sprintf("%s ran for more than %v inside a builtin and the program was stopped.", capital(what), limit)}
	case strings.Contains(out, "out of memory") || strings.Contains(out, "cannot allocate"):
		return &CallError{Kind: OutOfMemory, Message: fmt.Sprintf("%s used more memory than the sandbox allows (%d MiB) and the program was stopped.", capital(what), SandboxMemory>>20)}
	case strings.Contains(out, "stack overflow") || strings.Contains(out, "stack exceeds"):
		return &CallError{Kind: TooDeep, Message: fmt.Sprintf("%s nested too deeply for the sandbox's stack and the program was stopped.", capital(what))}
	}
	return &CallError{Kind: Crashed, Message: fmt.Sprintf("%s ended the sandbox unexpectedly and the program was stopped.", capital(what))}
}

func opName(o op) string {
	switch o {
	case opLoad:
		return "loading the module"
	case opNew:
		return "starting an instance"
	case opBegin:
		return "begin"
	case opReceive:
		return "receive"
	case opExpire:
		return "expire"
	case opCheck:
		return "the check"
	case opKey:
		return "writing the call as JSON"
	}
	return "view"
}

func (r response) sourceError() error {
	if r.Kind == 0 {
		return &CallError{Kind: r.CallKind, Message: r.Err}
	}
	return &SourceError{Kind: r.Kind, Line: r.Line, Column: r.Col, Message: r.Err}
}

func (r response) callErr() error {
	if r.Err == "" {
		return nil
	}
	return &CallError{Kind: r.CallKind, Message: r.Err}
}

func (s *Submission) newClient() (model.Client, error) {
	resp, err := s.roundTrip(request{Op: opNew}, s.budget.PerCall)
	if err != nil {
		return nil, err
	}
	if resp.Err != "" {
		return nil, resp.sourceError()
	}
	return &client{s: s, inst: resp.Inst}, nil
}

// client is one instance of the module in the sandbox.
type client struct {
	s    *Submission
	inst int
}

// callRef is a call value of the module, kept in the sandbox; the lab only
// holds its number.
type callRef struct {
	inst, id int
}

func (c *client) ref(call model.ClientCall) (int, error) {
	r, ok := call.(callRef)
	if !ok || r.inst != c.inst {
		return 0, errors.New("the host passed a call this instance never returned")
	}
	return r.id, nil
}

func (c *client) Begin(runID, callID string) (model.ClientCall, error) {
	resp, err := c.s.roundTrip(request{Op: opBegin, Inst: c.inst, A: runID, B: callID}, c.s.budget.PerCall)
	if err == nil {
		err = resp.callErr()
	}
	if err != nil {
		return nil, err
	}
	return callRef{c.inst, resp.Call}, nil
}

func (c *client) Receive(call model.ClientCall, raw string) (model.ClientCall, string, error) {
	return c.update(opReceive, call, raw, "")
}

func (c *client) Expire(call model.ClientCall, runID, callID string) (model.ClientCall, string, error) {
	return c.update(opExpire, call, runID, callID)
}

func (c *client) update(o op, call model.ClientCall, a, b string) (model.ClientCall, string, error) {
	id, err := c.ref(call)
	if err != nil {
		return nil, "", err
	}
	resp, err := c.s.roundTrip(request{Op: o, Inst: c.inst, Call: id, A: a, B: b}, c.s.budget.PerCall)
	if err == nil {
		err = resp.callErr()
	}
	if err != nil {
		return nil, "", err
	}
	return callRef{c.inst, resp.Call}, resp.Notice, nil
}

func (c *client) View(call model.ClientCall) (json.RawMessage, error) {
	id, err := c.ref(call)
	if err != nil {
		return nil, err
	}
	resp, err := c.s.roundTrip(request{Op: opView, Inst: c.inst, Call: id}, c.s.budget.PerCall)
	if err == nil {
		err = resp.callErr()
	}
	if err != nil {
		return nil, err
	}
	return json.RawMessage(resp.JSON), nil
}

// tail keeps the first KiB the sandbox wrote to its stderr: a Go crash
// says there why it happened, before its stacks.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if room := 1024 - len(t.buf); room > 0 {
		t.buf = append(t.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
