package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/toolcall-lab/lab/internal/diagramsvg"
	"github.com/toolcall-lab/lab/internal/jsclient"
	"github.com/toolcall-lab/lab/internal/limit"
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
	in     model.CodeInput // what the result is (or will be) of; Submissions 0: none
	result *model.Result   // nil while checking
	line   int             // a syntax error's place, 0 when unknown
	column int
	// json is the "code" object as encoded (encoded), "" before the
	// first submission: kept, so a change of something else costs none.
	json string
	// bucket is the session's allowance of submissions (codeSessionRate).
	bucket limit.Bucket
	made   bool // bucket is made
}

// set makes in the input shown, as being checked.
func (c *codeState) set(in model.CodeInput) {
	c.in, c.result, c.line, c.column = in, nil, 0, 0
	c.json = c.encoded()
}

// codeFrame is the state frame's "code" object (docs/protocol.md).
type codeFrame struct {
	Submission int `json:"submission"`
	model.Result
	Line   int `json:"line,omitempty"`
	Column int `json:"column,omitempty"`
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
	Own []model.CaseOutcome `json:"own,omitempty"`
}

const codeChecking = "checking"

// encoded is the "code" object as JSON, "" before the first submission.
func (c *codeState) encoded() string {
	if c.in.Submissions == 0 {
		return ""
	}
	f := codeFrame{Submission: c.in.Submissions, Line: c.line, Column: c.column}
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
	r := &codeRow{Submissions: c.in.Submissions, Status: codeChecking}
	if res := c.result; res != nil {
		r.Status, r.Cases, r.Passed, r.Own = res.Status, res.Cases, res.Passed, res.Own
		if res.Failure != nil {
			r.Property = res.Failure.Property
		}
	}
	return r
}

// failure is the shrunk failing trace shown, nil when there is none.
func (c *codeState) failure() *model.Failure {
	if c.result == nil {
		return nil
	}
	return c.result.Failure
}

// admitCode is the drainer's gate for a submission: the session's and the
// client address's allowances; it picks the campaign's seed, which the
// event then carries.
func (s *session) admitCode(p *pending) error {
	now := time.Now()
	if !s.code.made {
		s.code.bucket, s.code.made = limit.NewBucket(codeSessionRate, codeSessionBurst), true
	}
	if !s.code.bucket.Allow(now) {
		return fmt.Errorf("%w: at most %d at once, then one every %v in a session", errCodeRate, codeSessionBurst, time.Duration(float64(time.Second)/codeSessionRate))
	}
	if p.from != nil && !s.allowCode(p.from.remote) {
		return fmt.Errorf("%w from your network", errCodeRate)
	}
	p.cmd.Seed = rand.Uint64N(model.MaxSeed)
	return nil
}

// codeChanged follows a code event the drainer applied (decided here or
// read from the log): the result shown is of an older input, so the
// session shows "checking" and asks the checker. Called by the drainer
// before it encodes the change.
func (s *session) codeChanged(ev model.Event) {
	if ev.Kind != model.CodeSubmitted && ev.Kind != model.CaseAdded {
		return
	}
	in := s.lab.Code()
	if in.Submissions == 0 {
		return // a case, with nothing to check yet
	}
	s.code.set(in)
	s.check(s, in)
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
	if !d.in.Same(s.code.in) || s.code.result != nil {
		return
	}
	res := d.out.result
	s.code.result, s.code.line, s.code.column = &res, d.out.line, d.out.column
	s.code.json = s.code.encoded()
	s.republish()
	s.changed()
}

// codeOf is the session's code cell and failing trace, as of its last
// frame.
func (s *session) codeOf() (*codeRow, *model.Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.row.Code, s.codeFailure
}

// checker runs the code checks of a Server's sessions, up to workers at
// once (a sandbox each, one per core: Config.CodeWorkers), in the order
// asked, fairly:
//
//   - a session waits in the queue at most once: a newer input replaces the
//     one it waits with, in its place, so the queue is bounded by the
//     sessions held;
//   - a session has at most one check running, and while it runs the
//     session is out of the line: an input it sends meanwhile waits aside
//     and joins the back of the queue when the running check ends, so a
//     session resubmitting never goes ahead of one that queued while it
//     was checked, nor takes a second worker;
//   - a running check whose input a newer one replaced is cancelled (its
//     result would be shown to no one), freeing its worker.
//
// Ownership: mu guards queue, waiting, running, workers and stopped. A
// worker goroutine is started by enqueue while fewer than k.workers run and
// the queue holds a session none of them has taken; each exits when the
// queue is empty or stop is called. stop (Shutdown, Restart) cancels the
// checks under way and waits for every worker.
type checker struct {
	budget   jsclient.Budget
	deadline time.Duration
	log      *slog.Logger
	ctx      context.Context
	cancel   context.CancelFunc
	max      int // workers at most

	mu      sync.Mutex
	queue   []*session                   // sessions in line, each once, none running
	waiting map[*session]model.CodeInput // each queued or set-aside session's newest input
	running map[*session]*runningCheck
	workers int // worker goroutines alive
	stopped bool
	wg      sync.WaitGroup
}

// runningCheck is a check under way: its input, and how to cancel it.
type runningCheck struct {
	in     model.CodeInput
	cancel context.CancelFunc
}

func newChecker(log *slog.Logger, workers int) *checker {
	ctx, cancel := context.WithCancel(context.Background())
	return &checker{
		budget: jsclient.DefaultBudget(), deadline: codeCheckDeadline, log: log, max: max(workers, 1),
		ctx: ctx, cancel: cancel, waiting: make(map[*session]model.CodeInput), running: make(map[*session]*runningCheck),
	}
}

// enqueue asks for a check of s's input in; it never waits.
func (k *checker) enqueue(s *session, in model.CodeInput) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped {
		return
	}
	if r, ok := k.running[s]; ok {
		if r.in.Same(in) {
			delete(k.waiting, s) // the check under way is of this input
			return
		}
		r.cancel() // superseded: its result would be shown to no one
		k.waiting[s] = in
		return // set aside: it joins the queue when the running check ends
	}
	if _, ok := k.waiting[s]; !ok {
		k.queue = append(k.queue, s)
	}
	k.waiting[s] = in
	k.spawn()
}

// spawn starts a worker if one is wanted; mu is held.
func (k *checker) spawn() {
	if k.workers < k.max && len(k.queue) > 0 {
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
	k.queue, k.waiting = nil, map[*session]model.CodeInput{}
	k.mu.Unlock()
	k.cancel()
	k.wg.Wait()
}

func (k *checker) work() {
	defer k.wg.Done()
	for {
		k.mu.Lock()
		if k.stopped || len(k.queue) == 0 {
			k.workers--
			k.mu.Unlock()
			return
		}
		s := k.queue[0]
		k.queue[0] = nil
		k.queue = k.queue[1:]
		in := k.waiting[s]
		delete(k.waiting, s)
		ctx, cancel := context.WithCancel(k.ctx)
		k.running[s] = &runningCheck{in: in, cancel: cancel}
		k.spawn() // more in line: another worker, if one is free
		k.mu.Unlock()

		out := k.run(ctx, in)
		superseded := ctx.Err() != nil
		cancel()

		k.mu.Lock()
		delete(k.running, s)
		if _, ok := k.waiting[s]; ok && !k.stopped {
			k.queue = append(k.queue, s) // what it sent while checked: at the back
		}
		k.mu.Unlock()
		if superseded {
			continue // stopping, or a newer input replaced it: no one's result
		}
		s.codeChecked(in, out)
	}
}

// checkOutcome is a finished check: the result, and a syntax error's place.
type checkOutcome struct {
	result       model.Result
	line, column int
}

// checkDone is a finished check on its way to the session's drainer.
type checkDone struct {
	in  model.CodeInput
	out checkOutcome
}

// run checks one input under the deadline: the source is loaded into a
// sandbox, which then runs the whole check (jsclient.Submission.Check);
// past the deadline, or when ctx ends, the sandbox is killed.
func (k *checker) run(ctx context.Context, in model.CodeInput) checkOutcome {
	ctx, cancel := context.WithTimeout(ctx, k.deadline)
	defer cancel()
	started := time.Now()
	base := model.Result{Status: model.CodeError, Seed: in.Seed}
	_, sub, err := jsclient.Load(ctx, in.Source, k.budget)
	if err != nil {
		var se *jsclient.SourceError
		switch {
		case errors.As(err, &se):
			base.Error = se.Message
			return checkOutcome{result: base, line: se.Line, column: se.Column}
		case ctx.Err() != nil:
			base.Error = fmt.Sprintf("The lab was too busy to check the program within %v; check it again.", k.deadline)
		default:
			k.log.Warn("starting a code check", "err", err)
			base.Error = "The lab could not run the check; check the program again."
		}
		return checkOutcome{result: base}
	}
	res, err := sub.Check(ctx, in.Seed, in.Cases)
	sub.Close()
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
	return checkOutcome{result: res}
}

// ---- the routes ------------------------------------------------------------------

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

// addCases answers POST /api/code/cases: an instructor's case added to the
// target sessions' suites (an event in each log), which re-checks their
// latest submission; a result per session, as /api/inject answers.
func (s *Server) addCases(c echo.Context) error {
	body, err := s.jsonBody(c)
	if err != nil {
		return err
	}
	req, cs, err := decodeCaseRequest(body)
	if err != nil {
		return err
	}
	if err := s.injectAllowed(c, req); err != nil {
		return err
	}
	results := s.submitEach(req, model.Command{Kind: model.AddCase, By: model.Instructor, Case: &cs})
	applied := 0
	for _, res := range results {
		if res.Applied {
			applied++
		}
	}
	out := struct {
		Applied int            `json:"applied"`
		Results []injectResult `json:"results"`
		Error   string         `json:"error,omitempty"`
	}{applied, results, ""}
	if !req.all && req.class == "" && len(results) == 1 && results[0].Reason == "unknown_session" {
		out.Error = results[0].Error
		return c.JSON(http.StatusNotFound, out)
	}
	return c.JSON(http.StatusOK, out)
}

// decodeCaseRequest is the one place POST /api/code/cases bodies are
// decoded:
//
//	{"name": "<case name>", "frames": [<client frames>],
//	 "sessions": ["<id>", …] | "class": "<id>" | "all": true}
//
// Each frame is decoded as the student's WebSocket frames are
// (decodeFrame), and the trace checked as the checker will play it.
func decodeCaseRequest(body []byte) (injectRequest, model.Case, error) {
	var in struct {
		Name     *string           `json:"name"`
		Frames   []json.RawMessage `json:"frames"`
		Sessions []string          `json:"sessions"`
		All      bool              `json:"all"`
		Class    *string           `json:"class"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return injectRequest{}, model.Case{}, badRequest("the body is not a valid case request: %v", err)
	}
	if dec.More() {
		return injectRequest{}, model.Case{}, badRequest("the body must hold one JSON object")
	}
	req, err := decodeTargets(in.Sessions, in.All, in.Class)
	if err != nil {
		return req, model.Case{}, err
	}
	if in.Name == nil || strings.TrimSpace(*in.Name) == "" {
		return req, model.Case{}, badRequest(`give the case a name in "name"`)
	}
	cs := model.Case{Name: strings.TrimSpace(*in.Name), Frames: make(model.Trace, 0, len(in.Frames))}
	if len(in.Frames) > model.MaxCaseFrames {
		return req, model.Case{}, badRequest("a case has at most %d frames, not %d", model.MaxCaseFrames, len(in.Frames))
	}
	for i, raw := range in.Frames {
		cmd, err := decodeFrame(raw, model.Instructor)
		if err != nil {
			return req, model.Case{}, badRequest("frame %d: %v", i+1, err)
		}
		cs.Frames = append(cs.Frames, model.Command{Kind: cmd.Kind, Raw: cmd.Raw, Message: cmd.Message})
	}
	if err := model.ValidateTrace(cs.Frames); err != nil {
		return req, model.Case{}, badRequest("the case cannot be played: %v", err)
	}
	// What the sessions' own checks refuse (the name's length and
	// characters, the text's bytes) is refused here too, before any.
	if _, err := model.NewLab().Decide(model.Command{Kind: model.AddCase, Case: &cs}, model.Limits{}); err != nil {
		return req, model.Case{}, badRequest("%v", err)
	}
	return req, cs, nil
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
