package jsclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/toolcall-lab/lab/internal/procstat"
	"github.com/toolcall-lab/lab/model"
)

// The whole check in the sandbox (issue 42). The sandbox is the lab's own
// executable and links model, so one request (opCheck: the seed and the
// instructor's cases) makes it run model.Check itself, against clients
// over its own instances (localClient), and one answer brings back the
// model.Result. Before, every call of the module was a gob round trip
// between the lab and the sandbox: 4,700 to 6,300 a check, most of its
// time (BENCHMARKS.md, "A class presses Check").
//
// The local client makes and fails its calls exactly as the lab's client
// over the pipe does (client.go), so that the Result is the same for the
// same source, seed and cases either way (TestCheckInSandboxIsTheSame):
// the same instance per case, the same budget check before each call, the
// same errors. The model's own work runs on the program's thread too (so
// at SCHED_IDLE), outside the program's budget, which counts only the
// program's calls (guard).

// checkAllowance is the CPU time, past the program's whole budget, that
// the lab lets a sandbox running a check use before it kills it: the
// model's own playing, comparing and shrinking (about 0.1 s for the seed's
// module), and a builtin an interrupt cannot reach.
const checkAllowance = 3 * time.Second

// checkPoll is how often the lab reads a checking sandbox's CPU time.
const checkPoll = 100 * time.Millisecond

// wireFrame is a case's frame on the pipe: the fields a trace has.
type wireFrame struct {
	Kind    model.CommandKind
	Raw     string
	Message int
}

type wireCase struct {
	Name   string
	Frames []wireFrame
}

func toWire(cases []model.Case) []wireCase {
	out := make([]wireCase, len(cases))
	for i, c := range cases {
		out[i].Name = c.Name
		for _, f := range c.Frames {
			out[i].Frames = append(out[i].Frames, wireFrame{Kind: f.Kind, Raw: f.Raw, Message: f.Message})
		}
	}
	return out
}

func fromWire(cases []wireCase) []model.Case {
	out := make([]model.Case, len(cases))
	for i, c := range cases {
		out[i] = model.Case{Name: c.Name, Frames: make(model.Trace, 0, len(c.Frames))}
		for _, f := range c.Frames {
			out[i].Frames = append(out[i].Frames, model.Command{Kind: f.Kind, Raw: f.Raw, Message: f.Message})
		}
	}
	return out
}

// Check runs model.Check(seed, cases) on the loaded program in its
// sandbox: one request, one answer. The lab kills the sandbox when it has
// used the program's budget plus checkAllowance of CPU, or when ctx ends
// (the check's wall deadline, a shutdown): the latter returns ctx's error.
// A sandbox that ends in the middle (killed, out of memory, a crash) has
// the check played again the old way, a round trip per call in a fresh
// sandbox, so that the Result says where and how it stopped exactly as
// before. The Submission is spent afterwards: Close it.
func (s *Submission) Check(ctx context.Context, seed uint64, cases []model.Case) (model.Result, error) {
	resp, err := s.checkTrip(ctx, request{Op: opCheck, Seed: seed, Cases: toWire(cases)})
	if ctx.Err() != nil {
		return model.Result{}, ctx.Err()
	}
	if err == nil && resp.Err != "" {
		err = errors.New(resp.Err)
	}
	if err == nil {
		var res model.Result
		if err := json.Unmarshal(resp.JSON, &res); err != nil {
			return model.Result{}, fmt.Errorf("jsclient: the sandbox's result: %w", err)
		}
		return res, nil
	}
	if !s.isDead() {
		return model.Result{}, err
	}
	return s.replay(ctx, seed, cases)
}

// checkTrip sends opCheck and waits for its answer, killing the sandbox
// past its CPU allowance or when ctx ends. Its watcher goroutine is owned
// by the call: it exits when the answer comes (or the pipe breaks), and
// checkTrip waits for it.
func (s *Submission) checkTrip(ctx context.Context, req request) (response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var resp response
	if s.dead != nil {
		return resp, s.dead
	}
	pid := s.cmd.Process.Pid
	cpu0, err0 := procstat.CPU(pid)
	limit := s.budget.Total + s.allowance
	answered := make(chan struct{})
	var watcher sync.WaitGroup
	var killed bool // written by the watcher, read after it exits
	watcher.Go(func() {
		tick := time.NewTicker(checkPoll)
		defer tick.Stop()
		for {
			select {
			case <-answered:
				return
			case <-ctx.Done():
			case <-tick.C:
				cpu, err := procstat.CPU(pid)
				if err0 != nil || err != nil || cpu-cpu0 < limit {
					continue
				}
			}
			killed = true
			_ = s.cmd.Process.Kill()
			return
		}
	})
	err := s.enc.Encode(&req)
	if err == nil {
		err = s.dec.Decode(&resp)
	}
	close(answered)
	watcher.Wait()
	if err != nil {
		why := s.crash("the check", killed, limit)
		s.stop(why)
		return resp, why
	}
	s.used = resp.Used
	s.spent = s.used >= s.budget.Total
	return resp, nil
}

func (s *Submission) isDead() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dead != nil
}

// replay plays the check the old way, in a fresh sandbox under the same
// slot: a round trip per call, each under its own kill timer, so that a
// program that ends its sandbox is stopped at the call that does it.
func (s *Submission) replay(ctx context.Context, seed uint64, cases []model.Case) (model.Result, error) {
	r, err := start(s.budget)
	if err != nil {
		return model.Result{}, err
	}
	defer func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.stop(errors.New("the replay ended"))
	}()
	unhook := context.AfterFunc(ctx, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.stop(fmt.Errorf("the check was stopped before it ended: %w", model.ErrStop))
	})
	defer unhook()
	resp, err := r.roundTrip(request{Op: opLoad, A: s.source}, s.budget.PerCall)
	if err == nil && resp.Err != "" {
		err = resp.sourceError()
	}
	if err != nil {
		return model.Result{}, err
	}
	res := model.Check(r.newClient, seed, cases)
	if ctx.Err() != nil {
		return model.Result{}, ctx.Err()
	}
	s.mu.Lock()
	s.used, s.spent = r.Used(), r.Spent()
	s.replayed = true
	s.mu.Unlock()
	return res, nil
}

// Replayed says whether the check was played again the old way, its
// sandbox having ended in the middle.
func (s *Submission) Replayed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replayed
}

// ---- in the sandbox ----------------------------------------------------------

// runCheck is opCheck in the sandbox: model.Check over local clients, the
// Result as JSON (gob would read an empty notice back as none).
func (p *program) runCheck(seed uint64, cases []wireCase) ([]byte, error) {
	res := model.Check(p.newLocalClient, seed, fromWire(cases))
	return json.Marshal(res)
}

// spentError is what the lab's client says before a call once the
// program's budget is spent (Submission.roundTrip).
func (p *program) spentError() error {
	if p.used >= p.budget.Total {
		return &CallError{Kind: OutOfTime, Message: fmt.Sprintf("The program has used all of its %v of time.", p.budget.Total)}
	}
	return nil
}

// newLocalClient is model.NewClient in the sandbox: a fresh instance.
func (p *program) newLocalClient() (model.Client, error) {
	if err := p.spentError(); err != nil {
		return nil, err
	}
	in, err := p.newInstance()
	if err != nil {
		return nil, err
	}
	return &localClient{in: in}, nil
}

// localClient is one instance of the module, driven in the sandbox; its
// calls are the instance's handles.
type localClient struct{ in *instance }

type localCall struct {
	in *instance
	id int
}

func (c *localClient) ref(call model.ClientCall) (int, error) {
	r, ok := call.(localCall)
	if !ok || r.in != c.in {
		return 0, errors.New("the host passed a call this instance never returned")
	}
	return r.id, nil
}

func (c *localClient) Begin(runID, callID string) (model.ClientCall, error) {
	if err := c.in.p.spentError(); err != nil {
		return nil, err
	}
	id, err := c.in.begin(runID, callID)
	if err != nil {
		return nil, err
	}
	return localCall{c.in, id}, nil
}

func (c *localClient) Receive(call model.ClientCall, raw string) (model.ClientCall, string, error) {
	return c.update(1, call, raw)
}

func (c *localClient) Expire(call model.ClientCall, runID, callID string) (model.ClientCall, string, error) {
	return c.update(2, call, runID, callID)
}

func (c *localClient) update(which int, call model.ClientCall, args ...string) (model.ClientCall, string, error) {
	id, err := c.ref(call)
	if err != nil {
		return nil, "", err
	}
	if err := c.in.p.spentError(); err != nil {
		return nil, "", err
	}
	next, notice, err := c.in.update(which, id, args...)
	if err != nil {
		return nil, "", err
	}
	return localCall{c.in, next}, notice, nil
}

func (c *localClient) View(call model.ClientCall) (json.RawMessage, error) {
	id, err := c.ref(call)
	if err != nil {
		return nil, err
	}
	if err := c.in.p.spentError(); err != nil {
		return nil, err
	}
	j, err := c.in.view(id)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(j), nil
}

// CallKey is the call value's JSON (model.CallKeyer), so that the search
// run in the sandbox merges states by the module's call too.
func (c *localClient) CallKey(call model.ClientCall) (string, error) {
	id, err := c.ref(call)
	if err != nil {
		return "", err
	}
	if err := c.in.p.spentError(); err != nil {
		return "", err
	}
	k, err := c.in.callKey(id)
	if err != nil {
		return "", err
	}
	return string(k), nil
}
