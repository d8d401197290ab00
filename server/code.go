package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolcall-lab/lab/internal/diagramsvg"
	"github.com/toolcall-lab/lab/internal/fair"
	"github.com/toolcall-lab/lab/internal/jsclient"
	"github.com/toolcall-lab/lab/internal/limit"
	"github.com/toolcall-lab/lab/internal/rescript"
	"github.com/toolcall-lab/lab/model"
)

// Write the client (docs/code.md, "In the server"): a student's submitCode
// frame is a change like any other (decided, appended, applied, published),
// and its check runs off the session's drain path, in the Server's checker.
// The result is a cache of model.Check(source, seed, cases): never stored,
// computed again after a restart and on every replica, so all agree.

// codeState is a session's code check as its frames show it. Owned by the
// session's drainer; row and failure, copied from it, are guarded by
// session.mu.
type codeState struct {
	in       model.CodeInput // what the result is (or will be) of; Submissions 0: none
	result   *model.Result   // nil while checking
	line     int             // a syntax error's place, 0 when unknown
	column   int
	compiler []model.Diagnostic // a ReScript build's messages, with result
	// tasks are the lesson's compiler tasks the session's ReScript
	// submissions showed; unseen are the earlier ReScript sources whose
	// builds it has not seen yet (superseded before their check ended, or
	// replayed after a restart), the newest maxUnseenSources, which the
	// checker compiles with the next check.
	tasks  model.CompilerTasks
	unseen []string
	// json is the "code" object as encoded (encoded), "" before the
	// first submission: kept, so a change of something else costs none.
	json string
	// bucket is the session's allowance of submissions (codeSessionRate).
	bucket limit.Bucket
	made   bool // bucket is made
	// group is the fair line's group the session's checks wait in: its
	// payer's (Server.payer) at its last submission from a connection;
	// "" for one read from the log (a restart, another replica).
	group string
}

// set makes in the input shown, as being checked. A ReScript source it
// replaces before its build was seen joins unseen, so that its tasks are
// not lost.
func (c *codeState) set(in model.CodeInput) {
	if c.in.Lang == model.ReScript && c.result == nil && c.in.Source != in.Source {
		c.see(c.in.Source)
	}
	c.in, c.result, c.line, c.column, c.compiler = in, nil, 0, 0, nil
	c.json = c.encoded()
}

// maxUnseenSources bounds the earlier ReScript sources a session keeps for
// their tasks: a restart compiles at most this many of a session's again.
const maxUnseenSources = 16

// see keeps an earlier ReScript source whose build is not seen yet.
func (c *codeState) see(source string) {
	if c.tasks == (model.CompilerTasks{MissingRejected: true, AddCancelled: true}) || slices.Contains(c.unseen, source) {
		return
	}
	if len(c.unseen) == maxUnseenSources {
		c.unseen = slices.Delete(c.unseen, 0, 1)
	}
	c.unseen = append(c.unseen, source)
}

// codeFrame is the state frame's "code" object (docs/protocol.md).
type codeFrame struct {
	Submission int `json:"submission"`
	model.Result
	Line     int                 `json:"line,omitempty"`
	Column   int                 `json:"column,omitempty"`
	Lang     model.Language      `json:"language"`
	Compiler []model.Diagnostic  `json:"compiler,omitempty"`
	Tasks    model.CompilerTasks `json:"tasks"`
}

// codeRow is the overview row's "code" (docs/instructor.md).
type codeRow struct {
	Submissions int            `json:"submissions"`
	Status      string         `json:"status"`
	Cases       int            `json:"cases"`
	Passed      int            `json:"passed"`
	Property    model.Property `json:"property,omitempty"`
	// Own is how the program did on each of the instructor's own cases,
	// so that the console says who passes one.
	Own  []model.CaseOutcome `json:"own,omitempty"`
	Lang model.Language      `json:"language"`
	// Warnings are the warning numbers of a refused build's errors, each
	// once ([] for a build refused by plain errors); nil when the build
	// was not refused.
	Warnings []int               `json:"warnings,omitzero"`
	Tasks    model.CompilerTasks `json:"tasks"`
	// Wrong are the lesson's situations the check's search found the
	// program wrong in, in words, so that the board says which the class
	// gets wrong.
	Wrong []string `json:"wrong,omitempty"`
}

const codeChecking = "checking"

// encoded is the "code" object as JSON, "" before the first submission.
func (c *codeState) encoded() string {
	if c.in.Submissions == 0 {
		return ""
	}
	f := codeFrame{Submission: c.in.Submissions, Line: c.line, Column: c.column, Lang: c.in.Lang, Compiler: c.compiler, Tasks: c.tasks}
	if c.result != nil {
		f.Result = *c.result
	} else {
		f.Status, f.Seed = codeChecking, c.in.Seed
	}
	return string(mustJSON(f))
}

// row is the overview's code cell, nil before the first submission.
func (c *codeState) row() *codeRow {
	if c.in.Submissions == 0 {
		return nil
	}
	r := &codeRow{Submissions: c.in.Submissions, Status: codeChecking, Lang: c.in.Lang, Tasks: c.tasks}
	if res := c.result; res != nil {
		r.Status, r.Cases, r.Passed, r.Own = res.Status, res.Cases, res.Passed, res.Own
		if res.Failure != nil {
			r.Property = res.Failure.Property
		}
		r.Warnings = refusedWarnings(c.compiler)
		for _, sit := range res.Coverage {
			if sit.Hit > 0 && !sit.Passed {
				r.Wrong = append(r.Wrong, sit.Text)
			}
		}
	}
	return r
}

// refusedWarnings are the warning numbers of a refused build's errors,
// each once, in order: [] when plain errors refused it, nil when nothing
// did. A slice that is empty but not nil is written as [].
func refusedWarnings(ds []model.Diagnostic) []int {
	var out []int
	for _, d := range ds {
		if d.Severity != model.SeverityError {
			continue
		}
		if out == nil {
			out = []int{}
		}
		if d.Warning != nil && !slices.Contains(out, *d.Warning) {
			out = append(out, *d.Warning)
		}
	}
	slices.Sort(out)
	return out
}

// failure is the shrunk failing trace shown, nil when there is none.
func (c *codeState) failure() *model.Failure {
	if c.result == nil {
		return nil
	}
	return c.result.Failure
}

// admitCode is the drainer's gate for a submission: the session's
// allowance (no address's: the checker shares the cores out instead); it
// sets the campaign's seed (the program's, model.SeedFor), which the event
// then carries, and the group the check will wait in.
func (s *session) admitCode(p *pending) error {
	now := time.Now()
	if !s.code.made {
		s.code.bucket, s.code.made = limit.NewBucket(codeSessionRate, codeSessionBurst), true
	}
	if p.cmd.Lang == model.ReScript && !s.rescript {
		return errNoCompiler
	}
	if wait := s.code.bucket.Wait(now); wait > 0 {
		return fmt.Errorf("%w in this session (%d at once, then one a second): %s", errCodeRate, codeSessionBurst, retryIn(wait))
	}
	s.code.bucket.Allow(now)
	if p.from != nil {
		s.code.group = s.group(s.id, p.from.remote)
	}
	p.cmd.Seed = model.SeedFor(p.cmd.Lang, p.cmd.Source)
	return nil
}

// codeChanged follows a code event the drainer applied (decided here or
// read from the log): the result shown is of an older input, so the
// session shows "checking" and asks the checker. Called by the drainer
// before it encodes the change.
func (s *session) codeChanged(ev model.Event) {
	if ev.Kind != model.CodeSubmitted && ev.Kind != model.CaseAdded && ev.Kind != model.CaseRemoved {
		return
	}
	in := s.lab.Code()
	if in.Submissions == 0 {
		return // a case, with nothing to check yet
	}
	s.code.set(in)
	if len(s.code.unseen) > 0 {
		s.earlier(s, s.code.unseen)
		s.code.unseen = nil
	}
	s.check(s, s.code.group, in)
}

// codeChecked hands a finished check to the session, through its inbox,
// so that the drainer (who owns the encoder) shows it. Called by the
// checker's worker.
func (s *session) codeChecked(in model.CodeInput, out checkOutcome) {
	s.submit(pending{control: codeResult, code: &checkDone{in: in, out: out}})
}

// takeCodeResult shows a finished check, unless the session has moved on
// to another input since (a newer submission or case: its own check is
// queued). Called by the drainer.
func (s *session) takeCodeResult(d *checkDone) {
	// A task once shown stays done, whichever input's build showed it.
	tasks := s.code.tasks.Or(d.out.tasks)
	newTasks := tasks != s.code.tasks
	s.code.tasks = tasks
	if d.in.Submissions > 0 && d.in.Same(s.code.in) && s.code.result == nil {
		res := d.out.result
		s.code.result, s.code.line, s.code.column, s.code.compiler = &res, d.out.line, d.out.column, d.out.compiler
	} else if !newTasks {
		return
	}
	s.code.json = s.code.encoded()
	s.republish()
	s.changed()
}

// publishCode copies the code the session shows where other goroutines
// read it: the row's cell, the failing trace and its input. Called by the
// drainer with mu held (or before the session is shared).
func (s *session) publishCode() {
	s.row.Code, s.codeFailure, s.codeIn = s.code.row(), s.code.failure(), s.code.in
}

// codeInput is the input the session's last frame shows the check of.
func (s *session) codeInput() model.CodeInput {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.codeIn
}

// codeOf is the session's code cell and failing trace, as of its last
// frame.
func (s *session) codeOf() (*codeRow, *model.Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.row.Code, s.codeFailure
}

// checker runs the code checks of a Server's sessions, up to workers at
// once (a sandbox each, one per core: Config.CodeWorkers), fairly: the
// sessions wait in a fair line (internal/fair) whose groups are their
// payers (Server.payer: a class, or a client address), served in turn, and
// inside a group sessions take turns, so a flood from one address delays
// another's check by about one check a competing group, and an address
// alone gets every core:
//
//   - a session waits in the line at most once: a newer input replaces
//     the one it waits with, in its place, so the line is bounded by the
//     sessions held;
//   - a session has at most one check running, and while it runs the
//     session is out of the line: an input it sends meanwhile waits aside
//     and joins the back of its group's line when the running check ends,
//     so a session resubmitting never goes ahead of one that queued while
//     it was checked, nor takes a second worker;
//   - a running check whose input a newer one replaced is cancelled (its
//     result would be shown to no one), freeing its worker;
//   - a check takes a core only when no check or live compile holds one,
//     or while the class is quiet (no change for classQuiet:
//     activity.claim): checks below the class in priority (SCHED_IDLE)
//     were measured not to be enough, a class's changes being slower
//     whenever both cores are busy at all.
//
// Ownership: mu guards line, running, earlier, done, workers and stopped;
// class is atomic, marked by every session's submit. A worker goroutine is
// started by enqueue while fewer than k.workers run and the line holds a
// session none of them has taken; each exits when the line is empty or
// stop is called (one waiting for the class to be quiet wakes for it).
// stop (Shutdown, Restart) cancels the checks under way, waits for every
// worker and ends the pool's idle sandboxes (jsclient.Pool: one per
// worker, reused from check to check).
type checker struct {
	budget   jsclient.Budget
	deadline time.Duration
	log      *slog.Logger
	ctx      context.Context
	cancel   context.CancelFunc
	max      int // workers at most

	rescript Compiler           // nil: the lab has no ReScript compiler
	pool     *jsclient.Pool     // sandboxes to load the next check into
	ran      prometheus.Counter // checks run in a sandbox
	kept     prometheus.Counter // checks answered from done
	under    prometheus.Gauge   // len(running)
	waiting  prometheus.Gauge   // line.Len()
	class    activity           // when the class last made a change

	mu sync.Mutex
	// line is the sessions waiting, each with its newest input, and
	// those running (whose next input waits aside).
	line *fair.Queue[*session, model.CodeInput]
	// earlier are sessions' earlier ReScript sources to compile for their
	// tasks only, with the session's next check (codeState.unseen).
	earlier map[*session][]string
	running map[*session]*runningCheck
	// done are the outcomes of recent checks by their input's Key, the
	// newest last: a class that submits one module (whose seed is the
	// module's, model.SeedFor) runs its check once, and every later
	// session takes the outcome from here. Only outcomes that are the
	// program's own are kept (checkOutcome.final); not kept across a
	// restart, where the checks run again.
	done    map[[32]byte]checkOutcome
	doneOld [][32]byte // done's keys, oldest first
	workers int        // worker goroutines alive
	stopped bool
	wg      sync.WaitGroup
}

// maxDoneChecks bounds the outcomes the checker keeps (checker.done): a
// class's worth of distinct modules and then some, each a few KiB.
const maxDoneChecks = 128

// keep keeps a final outcome, forgetting the oldest past maxDoneChecks;
// mu is held.
func (k *checker) keep(key [32]byte, out checkOutcome) {
	if _, ok := k.done[key]; ok || !out.final {
		return
	}
	if len(k.doneOld) == maxDoneChecks {
		delete(k.done, k.doneOld[0])
		k.doneOld = slices.Delete(k.doneOld, 0, 1)
	}
	k.done[key] = out
	k.doneOld = append(k.doneOld, key)
}

// classQuiet is how long the class must have made no change (a command
// from a tab or the instructor; a submission is not one) before a second
// check runs beside the first. A class clicking through the lesson makes a
// change every few milliseconds; one that has pressed Check waits.
const classQuiet = 250 * time.Millisecond

// activity is when the class last made a change: nanoseconds since base,
// on the monotonic clock, and how many jobs of students' code (checks,
// live compiles) hold a core. Every session's submit writes last, the
// checker's and the live compiler's workers read it and claim cores;
// atomics, no lock.
type activity struct {
	base time.Time
	last atomic.Int64
	busy atomic.Int32
}

// claim takes a core for a job of students' code: at once when no such
// job runs, or when the class has made no change for classQuiet; else it
// says how long until the class will have been quiet that long. Checks
// and live compiles claim from the same count, so that while the class
// makes changes they take one core between them. release gives it back.
func (a *activity) claim() (wait time.Duration, ok bool) {
	if a.busy.CompareAndSwap(0, 1) {
		return 0, true
	}
	if wait := a.quietIn(classQuiet); wait > 0 {
		return wait, false
	}
	a.busy.Add(1)
	return 0, true
}

func (a *activity) release() { a.busy.Add(-1) }

// start makes a quiet since long before now.
func (a *activity) start() {
	a.base = time.Now()
	a.last.Store(-int64(time.Hour))
}

// mark records a change now. Changes come from every session at once: a
// write a millisecond at most keeps the line from bouncing between cores.
func (a *activity) mark() {
	now := int64(time.Since(a.base))
	if now-a.last.Load() >= int64(time.Millisecond) {
		a.last.Store(now)
	}
}

// quietIn is how long until the class will have made no change for d: 0
// once it has.
func (a *activity) quietIn(d time.Duration) time.Duration {
	return max(0, d-(time.Since(a.base)-time.Duration(a.last.Load())))
}

// runningCheck is a check under way: its input, and how to cancel it.
type runningCheck struct {
	in     model.CodeInput
	cancel context.CancelFunc
}

func newChecker(log *slog.Logger, workers int, rescript Compiler, m *metrics) *checker {
	ctx, cancel := context.WithCancel(context.Background())
	k := &checker{
		ran: m.codeChecks.WithLabelValues("ran"), kept: m.codeChecks.WithLabelValues("kept"), under: m.codeRunning, waiting: m.codeWaiting,
		pool:   jsclient.NewPool(max(workers, 1)),
		budget: jsclient.DefaultBudget(), deadline: codeCheckDeadline, log: log, max: max(workers, 1), rescript: rescript,
		ctx: ctx, cancel: cancel, line: fair.New[*session, model.CodeInput](), running: make(map[*session]*runningCheck),
		earlier: make(map[*session][]string), done: make(map[[32]byte]checkOutcome),
	}
	k.class.start()
	return k
}

// remember keeps s's earlier ReScript sources for its next check (the
// newest maxUnseenSources of them); it never waits.
func (k *checker) remember(s *session, sources []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.stopped {
		k.keepEarlier(s, sources)
	}
}

// keepEarlier adds sources to s's earlier ones, keeping the newest
// maxUnseenSources; mu is held.
func (k *checker) keepEarlier(s *session, sources []string) {
	all := append(slices.Clip(k.earlier[s]), sources...)
	k.earlier[s] = all[max(0, len(all)-maxUnseenSources):]
}

// enqueue asks for a check of s's input in, waiting in group's turn (s's
// payer's key; "" for an input read from the log); it never waits.
func (k *checker) enqueue(s *session, group string, in model.CodeInput) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped {
		return
	}
	if r, ok := k.running[s]; ok {
		if r.in.Same(in) {
			k.line.Remove(s) // the check under way is of this input
			return
		}
		r.cancel() // superseded: its result would be shown to no one
		k.line.Put(group, s, in)
		return // set aside: it joins the line when the running check ends
	}
	k.line.Put(group, s, in)
	k.waiting.Set(float64(k.line.Len()))
	k.spawn()
}

// spawn starts a worker if one is wanted; mu is held.
func (k *checker) spawn() {
	if k.workers < k.max && k.line.Len() > 0 {
		k.workers++
		k.wg.Add(1)
		go k.work()
	}
}

// stop cancels the checks under way, forgets the waiting ones and waits for
// the workers to exit.
func (k *checker) stop() {
	k.mu.Lock()
	k.stopped = true
	k.line.Stop()
	k.earlier = map[*session][]string{}
	k.waiting.Set(0)
	k.mu.Unlock()
	k.cancel()
	k.wg.Wait()
	k.pool.Close()
}

func (k *checker) work() {
	defer k.wg.Done()
	for {
		k.mu.Lock()
		s, in, ok := k.line.Peek()
		if k.stopped || !ok {
			k.workers--
			k.mu.Unlock()
			return
		}
		earlier := k.earlier[s]
		key := in.Key()
		out, hit := k.done[key]
		if !hit {
			// A kept outcome takes no core; a check waits for its own.
			if wait, ok := k.class.claim(); !ok {
				k.mu.Unlock()
				k.sleep(wait)
				continue
			}
		}
		k.line.Take()
		k.waiting.Set(float64(k.line.Len()))
		delete(k.earlier, s)
		ctx, cancel := context.WithCancel(k.ctx)
		k.running[s] = &runningCheck{in: in, cancel: cancel}
		k.under.Set(float64(len(k.running)))
		k.spawn() // more in line: another worker, if one is free
		k.mu.Unlock()

		if hit {
			k.kept.Inc()
		} else {
			out = k.run(ctx, in)
			k.class.release()
			k.ran.Inc()
		}
		own := out // the input's alone: what another session may take
		if len(earlier) > 0 {
			ectx, ecancel := context.WithTimeout(ctx, k.deadline)
			out.tasks = out.tasks.Or(k.earlierTasks(ectx, earlier))
			ecancel()
		}
		superseded := ctx.Err() != nil
		cancel()

		k.mu.Lock()
		if !hit && !superseded {
			k.keep(key, own)
		}
		delete(k.running, s)
		k.under.Set(float64(len(k.running)))
		k.line.Done(s) // what it sent while checked: at the back of its group's line
		k.waiting.Set(float64(k.line.Len()))
		if superseded && len(earlier) > 0 && !k.stopped {
			// Its compiles may have been cut short: the next check
			// compiles the earlier sources again (tasks only grow).
			pending := k.earlier[s]
			k.earlier[s] = nil
			k.keepEarlier(s, append(slices.Clip(earlier), pending...))
		}
		k.mu.Unlock()
		if superseded {
			// Stopping, or a newer input replaced it: no one's result,
			// but the tasks its builds showed stay the session's.
			if out.tasks != (model.CompilerTasks{}) && k.ctx.Err() == nil {
				s.codeChecked(model.CodeInput{}, checkOutcome{tasks: out.tasks})
			}
			continue
		}
		s.codeChecked(in, out)
	}
}

// sleep waits d, or until the checker stops.
func (k *checker) sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-k.ctx.Done():
	}
}

// checkOutcome is a finished check: the result, a syntax error's place,
// what the compiler said of a ReScript source, and the lesson's compiler
// tasks the builds showed (of the source and of the earlier ones given).
type checkOutcome struct {
	result       model.Result
	line, column int
	compiler     []model.Diagnostic
	tasks        model.CompilerTasks
	// final says the outcome is the program's own (its build, its load,
	// its check), not the lab's (too busy, a sandbox that would not
	// start): another check of the same input would give it again.
	final bool
}

// checkDone is a finished check on its way to the session's drainer.
type checkDone struct {
	in  model.CodeInput
	out checkOutcome
}

// run checks one input under the deadline: a ReScript source is compiled
// first (and the earlier sources given, for their tasks), then the source
// is loaded into a sandbox, which runs the whole check
// (jsclient.Submission.Check); past the deadline, or when ctx ends, the
// sandbox is killed.
func (k *checker) run(ctx context.Context, in model.CodeInput) checkOutcome {
	ctx, cancel := context.WithTimeout(ctx, k.deadline)
	defer cancel()
	started := time.Now()
	base := model.Result{Status: model.CodeError, Seed: in.Seed}
	var tasks model.CompilerTasks
	source := in.Source
	var diags []model.Diagnostic
	if in.Lang == model.ReScript {
		out, res, ok, final := k.compile(ctx, in)
		diags, tasks = out.Diagnostics, model.TasksOf(out.Diagnostics)
		if !ok {
			return checkOutcome{result: res, compiler: diags, tasks: tasks, final: final}
		}
		source = out.JS
	}
	_, sub, err := k.pool.Load(ctx, source, k.budget)
	if err != nil {
		var se *jsclient.SourceError
		switch {
		case errors.As(err, &se) && in.Lang == model.ReScript:
			// The compiler's output, not the student's text: no place
			// in their source to point at.
			base.Error = se.Message
			return checkOutcome{result: base, compiler: diags, tasks: tasks, final: true}
		case errors.As(err, &se):
			base.Error = se.Message
			return checkOutcome{result: base, line: se.Line, column: se.Column, final: true}
		case ctx.Err() != nil:
			base.Error = fmt.Sprintf("The lab was too busy to check the program within %v; check it again.", k.deadline)
		default:
			k.log.Warn("starting a code check", "err", err)
			base.Error = "The lab could not run the check; check the program again."
		}
		return checkOutcome{result: base, compiler: diags, tasks: tasks}
	}
	res, err := sub.Check(ctx, in.Seed, in.Cases)
	sub.Close()
	final := err == nil
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		base.Error = fmt.Sprintf("The check took longer than %v and was stopped.", k.deadline)
		res = base
	case err != nil:
		if ctx.Err() == nil {
			k.log.Warn("a code check", "err", err)
		}
		base.Error = "The lab could not run the check; check the program again."
		res = base
	}
	k.log.Debug("code check", "status", res.Status, "cases", res.Cases, "passed", res.Passed,
		"took", time.Since(started), "used", sub.Used(), "peakRSS", sub.PeakRSS(), "replayed", sub.Replayed())
	return checkOutcome{result: res, compiler: diags, tasks: tasks, final: final}
}

// Compiler compiles a ReScript module into one JavaScript module
// (internal/rescript's *Compiler, sandboxed there).
type Compiler interface {
	Compile(ctx context.Context, source string) (rescript.Output, error)
	Version() string
}

// compile builds a ReScript submission: ok with the JavaScript to check,
// else the check's result (a refused build, or a compile that did not
// end), final when it is the program's own.
func (k *checker) compile(ctx context.Context, in model.CodeInput) (out rescript.Output, res model.Result, ok, final bool) {
	res = model.Result{Status: model.CodeError, Seed: in.Seed}
	if k.rescript == nil {
		// A replica without the compiler, holding another's submission.
		res.Error = "This copy of the lab has no ReScript compiler; ask your teacher to install ReScript (npm install rescript@12.2.0) and restart it."
		return rescript.Output{}, res, false, false
	}
	out, err := k.rescript.Compile(ctx, in.Source)
	var ce *rescript.Error
	switch {
	case errors.As(err, &ce):
		// A compile stopped at its wall deadline is the machine's load, not
		// the program's: not final, nor one that crashed.
		res.Error, final = ce.Message, ce.Kind != rescript.Crashed && ce.Kind != rescript.TooLong
	case err != nil && ctx.Err() != nil:
		res.Error = fmt.Sprintf("The lab was too busy to compile the program within %v; check it again.", k.deadline)
	case err != nil:
		k.log.Warn("compiling a ReScript submission", "err", err)
		res.Error = "The lab could not run the compiler; check the program again."
	case out.Refused:
		n := 0
		for _, d := range out.Diagnostics {
			if d.Severity == model.SeverityError {
				n++
			}
		}
		problems := "problems"
		if n == 1 {
			problems = "problem"
		}
		res.Error, final = fmt.Sprintf("The program does not compile: %d %s.", n, problems), true
	default:
		return out, res, true, true
	}
	return out, res, false, final
}

// earlierTasks compiles earlier ReScript sources for the lesson's tasks
// they show, skipping a source that cannot show one (the example of the
// missing case names a constructor the source declares).
func (k *checker) earlierTasks(ctx context.Context, sources []string) model.CompilerTasks {
	var t model.CompilerTasks
	if k.rescript == nil {
		return t
	}
	for _, src := range sources {
		if !strings.Contains(src, "Rejected") && !strings.Contains(src, "Cancelled") {
			continue
		}
		if out, err := k.rescript.Compile(ctx, src); err == nil {
			t = t.Or(model.TasksOf(out.Diagnostics))
		}
	}
	return t
}

// ---- the routes ------------------------------------------------------------------

// enableReScript tells a teacher how to give a lab ReScript.
const enableReScript = "ReScript is not installed on this lab. To enable it, install the compiler in the lab's folder (npm install rescript@12.2.0) or name it with -rescript, and restart the lab."

// codeLanguages answers GET /code.json: the languages the lab checks a
// module in, the default first (ReScript, the lesson's own, where the lab
// has its compiler).
func (s *Server) codeLanguages(c echo.Context) error {
	type rescriptInfo struct {
		Version string `json:"version"`
		Types   bool   `json:"types"` // typeAt answers types (live.go)
	}
	out := struct {
		Languages []model.Language `json:"languages"`
		Default   model.Language   `json:"default"`
		ReScript  *rescriptInfo    `json:"rescript"`
		Enable    string           `json:"enable,omitempty"`
	}{Languages: []model.Language{model.JavaScript}, Default: model.JavaScript, Enable: enableReScript}
	if s.cfg.ReScript != nil {
		out.Languages = []model.Language{model.ReScript, model.JavaScript}
		out.Default, out.Enable = model.ReScript, ""
		// The number alone ("12.2.0"), as the page writes "ReScript 12.2.0".
		out.ReScript = &rescriptInfo{Version: strings.TrimPrefix(s.cfg.ReScript.Version(), "ReScript "), Types: s.live.types}
	}
	c.Response().Header().Set("Cache-Control", "no-cache")
	return c.JSON(http.StatusOK, out)
}

// studentFailureSVG answers GET /lab/:id/code/failure.svg: the student's
// own failing trace (the session's address is the grant, as for its
// diagram).
func (s *Server) studentFailureSVG(c echo.Context) error {
	id, err := sessionID(c)
	if err != nil {
		return err
	}
	return s.failureSVG(c, id)
}

// sessionFailureSVG answers GET /api/sessions/:id/code/failure.svg.
func (s *Server) sessionFailureSVG(c echo.Context) error {
	id, err := s.grantedSession(c)
	if err != nil {
		return err
	}
	return s.failureSVG(c, id)
}

// failureSVG draws session id's shrunk failing trace, each frame a tick.
func (s *Server) failureSVG(c echo.Context, id string) error {
	sess, ok := s.find(id)
	if !ok {
		return fmt.Errorf("%w %s", errUnknownSession, id)
	}
	_, f := sess.codeOf()
	if f == nil {
		return errNoFailure
	}
	d, err := model.DiagramOfTrace(f.Frames, model.Limits{})
	if err != nil {
		return err // a shrunk trace plays on a new session: a defect, answered 500
	}
	return answerSVG(c, diagramsvg.Render(d, diagramsvg.Options{}))
}

// codeColumns are the grades' code cells of session id, which made n
// submissions (its log says): the result is the one the session shows, or
// "checking" while the session has not shown the check of its latest.
func (s *Server) codeColumns(id string, n int) []string {
	if n == 0 {
		return []string{"0", "", "", "", ""}
	}
	var row *codeRow
	if sess, ok := s.find(id); ok {
		row, _ = sess.codeOf()
	}
	if row == nil || row.Submissions != n || row.Status == codeChecking {
		return []string{strconv.Itoa(n), codeChecking, "", "", ""}
	}
	return []string{strconv.Itoa(n), row.Status, strconv.Itoa(row.Passed), strconv.Itoa(row.Cases), string(row.Property)}
}
