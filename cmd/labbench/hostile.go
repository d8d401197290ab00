package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"

	"github.com/toolcall-lab/lab/internal/procstat"
)

// The hostile scenario (issue 33): the class measured twice on one lab,
// once plain and once while hostile students submit the programs of
// internal/jsclient/testdata/hostile, one after another, as fast as the
// lab's allowance of checks lets them. The code check runs in a sandbox
// child process, one per core in the server; what is measured is that
// the class's last tab keeps its p99 meanwhile, that every hostile check
// ends as status "error", and how much the lab and its sandbox children
// grow in RSS.
//
// The hostile student uses hostileSessions sessions (say, browser
// profiles) from the bench's one address, each submitting its next
// program when its last one is checked (a session's newer input would
// replace the one waiting, skipping a program) and when the session's
// allowance allows (10 at once, then one a second). No address is refused
// checks: the lab's fair line gives the hostile address its turn among the
// others, and while the class makes changes it has one core at most.

// The lab's allowance of checks per session (server/limits.go,
// docs/protocol.md), mirrored so that the student spaces its submissions
// rather than be refused.
const (
	codeSessionRate  = 1 // a second
	codeSessionBurst = 10
)

// hostileDir is where the hostile programs are, under the module's root.
var hostileDir = filepath.Join("internal", "jsclient", "testdata", "hostile")

// hostileProgram is one hostile submission.
type hostileProgram struct{ name, source string }

// hostilePrograms reads the hostile programs from the module the bench
// runs in (it builds the lab from it too).
func hostilePrograms() ([]hostileProgram, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(root, hostileDir, "*.js"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no hostile programs in %s", filepath.Join(root, hostileDir))
	}
	var out []hostileProgram
	for _, f := range files { // Glob sorts them
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		out = append(out, hostileProgram{name: filepath.Base(f), source: string(src)})
	}
	return out, nil
}

// moduleRoot is the nearest directory at or above the working directory
// whose go.mod is the lab's module.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if mod, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.Contains(mod, []byte("module github.com/toolcall-lab/lab\n")) {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("the hostile scenario reads the lab's hostile programs from its module: run labbench inside it")
		}
		dir = up
	}
}

// hostile measures the class on a fresh lab of kind t, plain and with the
// hostile students, in an order that alternates from one rep to the next.
func (b *bench) hostile(ctx context.Context, t target) (m metrics, err error) {
	progs, err := hostilePrograms()
	if err != nil {
		return nil, err
	}
	srv, stop, err := launch(ctx, t)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, stop()) }()
	shape := classShape{sessions: b.sessions, tabs: b.tabs, interval: b.interval, duration: b.classDuration}
	order := []bool{false, true}
	if b.hostileRuns%2 == 1 {
		order = []bool{true, false}
	}
	b.hostileRuns++
	m = metrics{}
	for _, with := range order {
		if !with {
			// Sampled as well: what the class alone adds to the lab.
			var r *classResult
			smp, err := sampling(ctx, srv, func() (err error) {
				r, err = b.class(ctx, srv, shape)
				return err
			})
			if err != nil {
				return nil, fmt.Errorf("plain: %w", err)
			}
			m["last-tab p99 ms, plain"] = r.last.ms(99)
			m["lab RSS growth MB, plain"] = kibToMB(smp.labPeak - smp.before)
			continue
		}
		hm, err := b.withHostile(ctx, srv, shape, progs)
		if err != nil {
			return nil, fmt.Errorf("with the hostile students: %w", err)
		}
		maps.Copy(m, hm)
	}
	return m, nil
}

// withHostile runs the class while the hostile students submit, sampling
// the lab's and its children's memory throughout.
func (b *bench) withHostile(ctx context.Context, srv *server, shape classShape, progs []hostileProgram) (metrics, error) {
	h := &hostileStudent{programs: progs, every: b.hostileEvery, stop: make(chan struct{})}
	var r *classResult
	errs := make([]error, b.hostileSessions+1)
	smp, err := sampling(ctx, srv, func() (err error) {
		var students sync.WaitGroup
		for i := range b.hostileSessions {
			students.Go(func() { errs[i] = h.session(ctx, srv) })
		}
		r, err = b.class(ctx, srv, shape)
		close(h.stop)
		students.Wait() // their last checks end (each within the check's deadline)
		return err
	})
	errs[b.hostileSessions] = err
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	m := metrics{"last-tab p99 ms, hostile": r.last.ms(99), "hostile checks ending as error": 0}
	var failed []string
	var maxTook time.Duration
	for _, c := range h.checks {
		if c.status == "error" {
			m["hostile checks ending as error"]++
		} else {
			failed = append(failed, fmt.Sprintf("%s ended as %q", c.program, c.status))
		}
		maxTook = max(maxTook, c.took)
	}
	m["hostile checks"] = float64(len(h.checks))
	m["hostile check wall max s"] = maxTook.Seconds()
	if len(failed) > 0 {
		fmt.Fprintf(b.stderr, "  hostile checks not ending as error: %s\n", strings.Join(failed, "; "))
	}
	smp.mu.Lock()
	defer smp.mu.Unlock()
	m["lab RSS growth MB"] = kibToMB(smp.labPeak - smp.before)
	m["lab + sandbox RSS growth MB"] = kibToMB(smp.sumPeak - smp.before)
	m["sandboxes sampled"] = float64(len(smp.children))
	for _, c := range smp.children {
		m["sandbox peak RSS MB"] = max(m["sandbox peak RSS MB"], kibToMB(c.hwm))
		m["sandbox CPU max s"] = max(m["sandbox CPU max s"], c.cpu)
	}
	return m, nil
}

// sampling runs f while a procSampler samples srv and its children every
// 20 ms; it returns the sampler, done.
func sampling(ctx context.Context, srv *server, f func() error) (*procSampler, error) {
	smp, err := newProcSampler(srv.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	sampleCtx, stop := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		smp.run(sampleCtx, 20*time.Millisecond)
	}()
	err = f()
	stop()
	<-sampled
	return smp, err
}

func kibToMB(kib int64) float64 { return float64(kib) * 1024 / 1e6 }

// hostileStudent hands the programs out, in turn, to its sessions, and
// collects their checks. mu guards next and checks.
type hostileStudent struct {
	programs []hostileProgram
	every    bool          // go on past stop until every program has been checked once
	stop     chan struct{} // closed when the class is over

	mu     sync.Mutex
	next   int
	checks []hostileCheck
}

// hostileCheck is one finished check of a hostile program.
type hostileCheck struct {
	program, status string
	took            time.Duration // from the submission to its result, waiting for the sandbox included
}

// take is the next program, or ok false when the student is done.
func (h *hostileStudent) take() (p hostileProgram, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.stop:
		if !h.every || h.next >= len(h.programs) {
			return p, false
		}
	default:
	}
	p = h.programs[h.next%len(h.programs)]
	h.next++
	return p, true
}

// hostileSubmissions numbers the hostile student's submissions.
var hostileSubmissions atomic.Int64

// session is one of the hostile student's sessions: it submits the
// programs take gives it, one check at a time, within its allowance.
func (h *hostileStudent) session(ctx context.Context, srv *server) error {
	ws, err := dial(ctx, srv, uuid.NewString(), nil)
	if err != nil {
		return err
	}
	defer ws.CloseNow()
	if _, err := readState(ctx, ws); err != nil {
		return err
	}
	tokens, last := float64(codeSessionBurst), time.Now()
	submitted := 0
	for {
		p, ok := h.take()
		if !ok {
			return nil
		}
		// A comment of its own, so that the lab checks it and does not
		// hand over the outcome of the same program's last check.
		n := hostileSubmissions.Add(1)
		frame, err := json.Marshal(map[string]string{"type": "submitCode", "source": fmt.Sprintf("%s\n// submission %d\n", p.source, n)})
		if err != nil {
			return err
		}
		for {
			now := time.Now()
			tokens = min(codeSessionBurst, tokens+now.Sub(last).Seconds()*codeSessionRate)
			last = now
			if tokens < 1 {
				// A little past the lab's refill, whose clock is not ours.
				wait := time.Duration((1-tokens)/codeSessionRate*float64(time.Second)) + 50*time.Millisecond
				select {
				case <-time.After(wait):
					continue
				case <-ctx.Done():
					return nil
				}
			}
			tokens--
			t0 := time.Now()
			if err := send(ctx, ws, frame); err != nil {
				return err
			}
			status, refused, err := awaitCheck(ctx, ws, submitted+1)
			if err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
			if refused {
				tokens = 0 // the lab's allowance is spent: wait for its refill
				continue
			}
			submitted++
			h.mu.Lock()
			h.checks = append(h.checks, hostileCheck{program: p.name, status: status, took: time.Since(t0)})
			h.mu.Unlock()
			break
		}
	}
}

// awaitCheck reads the session's frames until submission n's check has a
// result (its status), or the submission was refused with rate_limit.
func awaitCheck(ctx context.Context, ws *websocket.Conn, n int) (status string, refused bool, err error) {
	// The check's deadline is 20 s, its wait for the sandbox included.
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			return "", false, fmt.Errorf("waiting for check %d: %w", n, err)
		}
		var f struct {
			Type   string `json:"type"`
			Reason string `json:"reason"`
			Error  string `json:"error"`
			Code   *struct {
				Submission int    `json:"submission"`
				Status     string `json:"status"`
			} `json:"code"`
		}
		if err := json.Unmarshal(data, &f); err != nil {
			return "", false, fmt.Errorf("a frame that is not JSON: %.200s", data)
		}
		switch {
		case f.Type == "error" && f.Reason == "rate_limit":
			return "", true, nil
		case f.Type == "error":
			return "", false, fmt.Errorf("refused: %s (%s)", f.Error, f.Reason)
		case f.Type == "state" && f.Code != nil && f.Code.Submission == n && f.Code.Status != "checking":
			return f.Code.Status, false, nil
		}
	}
}

// procSampler samples the RSS of a lab and its child processes (its
// sandboxes) from /proc. mu guards everything below it.
type procSampler struct {
	lab   int
	ppids map[int]int // every process of the last listing → its parent

	mu       sync.Mutex
	before   int64 // the lab's VmRSS at the start, KiB
	labPeak  int64 // the most the lab's VmRSS was sampled at
	sumPeak  int64 // the most of the lab's VmRSS plus its live children's VmHWM at one sample
	children map[int]*childUse
}

// childUse is a child process's peak RSS (VmHWM, KiB) and CPU seconds, as
// last read.
type childUse struct {
	hwm int64
	cpu float64
}

func newProcSampler(lab int) (*procSampler, error) {
	rss, _, err := procMem(lab)
	if err != nil {
		return nil, fmt.Errorf("reading the lab's memory: %w", err)
	}
	return &procSampler{lab: lab, ppids: map[int]int{}, before: rss, labPeak: rss, sumPeak: rss, children: map[int]*childUse{}}, nil
}

// run samples every interval until ctx is done.
func (p *procSampler) run(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		p.sample()
		select {
		case <-tick.C:
		case <-ctx.Done():
			p.sample()
			return
		}
	}
}

// sample reads the lab's RSS and its children's peak RSS and CPU. A
// process is asked for its parent once, when it first appears: a pid
// reused within one interval would be missed.
func (p *procSampler) sample() {
	d, err := os.Open("/proc")
	if err != nil {
		return
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	ppids := make(map[int]int, len(names))
	var kids []int
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		ppid, seen := p.ppids[pid]
		if !seen {
			if ppid, err = procstat.Parent(pid); err != nil {
				continue // gone
			}
		}
		ppids[pid] = ppid
		if ppid == p.lab {
			kids = append(kids, pid)
		}
	}
	p.ppids = ppids
	labRSS, _, err := procMem(p.lab)
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	sum := labRSS
	for _, pid := range kids {
		_, hwm, err := procMem(pid)
		if err != nil {
			continue // exiting
		}
		c := p.children[pid]
		if c == nil {
			c = &childUse{}
			p.children[pid] = c
		}
		c.hwm = max(c.hwm, hwm)
		if cpu, err := procstat.CPU(pid); err == nil {
			c.cpu = cpu.Seconds()
		}
		sum += hwm
	}
	p.labPeak = max(p.labPeak, labRSS)
	p.sumPeak = max(p.sumPeak, sum)
}

// procMem reads a process's VmRSS and VmHWM (its peak) in KiB from
// /proc/PID/status.
func procMem(pid int) (rss, hwm int64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	var gotRSS, gotHWM bool
	for _, line := range strings.Split(string(data), "\n") {
		for _, f := range []struct {
			key string
			to  *int64
			got *bool
		}{{"VmRSS:", &rss, &gotRSS}, {"VmHWM:", &hwm, &gotHWM}} {
			if rest, ok := strings.CutPrefix(line, f.key); ok {
				if fs := strings.Fields(rest); len(fs) > 0 {
					if *f.to, err = strconv.ParseInt(fs[0], 10, 64); err != nil {
						return 0, 0, err
					}
					*f.got = true
				}
			}
		}
	}
	if !gotRSS || !gotHWM {
		return 0, 0, fmt.Errorf("no VmRSS or VmHWM for process %d", pid)
	}
	return rss, hwm, nil
}

// hostileRows are the hostile scenario's lines of the tables.
func hostileRows(b *bench) []row {
	ratio := func(r results, server string) (float64, bool) {
		with, ok1 := r.median("hostile", server, "last-tab p99 ms, hostile")
		without, ok2 := r.median("hostile", server, "last-tab p99 ms, plain")
		if !ok1 || !ok2 || without == 0 {
			return 0, false
		}
		return with / without, true
	}
	return []row{
		{scenario: "hostile", metric: "last-tab p99 ms, plain"},
		{scenario: "hostile", metric: "last-tab p99 ms, hostile"},
		{scenario: "hostile", metric: "hostile ÷ plain", goal: goal{def: 1.5, onLab: true}, derived: ratio,
			headline: fmt.Sprintf("hostile programs checked (%d sessions of hostile students): the class's last-tab p99 with them ÷ without", b.hostileSessions)},
		{scenario: "hostile", metric: "hostile checks"},
		{scenario: "hostile", metric: "hostile checks ending as error"},
		{scenario: "hostile", metric: "hostile check wall max s"},
		{scenario: "hostile", metric: "sandboxes sampled"},
		{scenario: "hostile", metric: "sandbox CPU max s"},
		{scenario: "hostile", metric: "sandbox peak RSS MB"},
		{scenario: "hostile", metric: "lab RSS growth MB, plain"},
		{scenario: "hostile", metric: "lab RSS growth MB", goal: goal{def: 100, onLab: true},
			headline: "hostile programs checked: the lab's RSS growth, MB"},
		{scenario: "hostile", metric: "lab + sandbox RSS growth MB", goal: goal{def: 100, onLab: true},
			headline: "hostile programs checked: the lab's RSS plus its sandbox's peak, growth in MB"},
	}
}
