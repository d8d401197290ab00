package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
)

// The check-burst scenario (issue 42): a class presses Check together.
// burstSessions sessions, from one client address (a class behind one
// school router), submit the same module at once over the WebSocket
// protocol; what is measured is the time from each submission to its
// result (median and slowest), beside a lone check of the same module in
// the same run, for each of burstModules. Then the class scenario runs
// twice on the same lab, plain and while classes press Check in turn, and
// the class's last-tab p99 with the checks is divided by the one without.
//
// Each burst comes from a loopback address of its own (127.0.0.2, .3, …):
// one class behind one router each, a group of its own in the lab's fair
// line (server/code.go).

// burstModule is one module the burst submits: its file under the
// module's root and the language its submitCode frame names.
type burstModule struct {
	name     string // the metrics' label
	path     string // under the module's root
	language string // "" for JavaScript (today's frame, no "language")
	source   string
}

// defaultBurstModules: the lesson's module (it passes) and a wrong one
// (it fails, so the check shrinks its failure).
var defaultBurstModules = []string{
	"internal/jsclient/testdata/ToolCall.res.js",
	"internal/jsclient/testdata/wrong/last-final-wins.js",
}

// languageOf is the submitCode frame's "language" for a module file, by
// its extension: a .res file is submitted as ReScript
// ({"type":"submitCode","language":"rescript","source":…}), which the lab
// compiles when it has the compiler (LAB_RESCRIPT, or ./node_modules from
// `npm install rescript@12.2.0`); one without refuses the burst.
func languageOf(path string) string {
	switch {
	case strings.HasSuffix(path, ".res"):
		return "rescript"
	}
	return "" // .js (the seed's compiled .res.js included): JavaScript
}

// burstName names a module in the table: its file without .js, and
// "(ReScript)" after a .res file's (ToolCall.res.js is the compiled one).
func burstName(path string) string {
	name := strings.TrimSuffix(filepath.Base(path), ".js")
	if languageOf(path) == "rescript" {
		name += " (ReScript)"
	}
	return name
}

// submitCodeFrame is a submitCode frame for source in language ("" is
// JavaScript, whose frame names no language).
func submitCodeFrame(source, language string) ([]byte, error) {
	f := map[string]string{"type": "submitCode", "source": source}
	if language != "" {
		f["language"] = language
	}
	return json.Marshal(f)
}

// burstModulesOf reads the modules named, relative to the module's root.
func burstModulesOf(paths []string) ([]burstModule, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	var out []burstModule
	for _, p := range paths {
		src, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			return nil, err
		}
		out = append(out, burstModule{name: burstName(p), path: p, language: languageOf(p), source: string(src)})
	}
	return out, nil
}

// fromAddr is an HTTP client whose connections come from a loopback
// address of its own (127.0.0.k; Linux routes all of 127/8 to lo).
func fromAddr(k int) *http.Client { return fromNet(0, k) }

// fromNet is an HTTP client whose connections come from 127.0.n.k.
func fromNet(n, k int) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, byte(n), byte(k))}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 64}}
}

// addrs hands out the loopback addresses of the bursts, one per class.
type addrs struct {
	mu   sync.Mutex
	next int
}

func (a *addrs) take() *http.Client {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.next++
	return fromAddr(1 + a.next%250)
}

// checkBurst measures on a fresh lab of kind t: per module a lone check
// and a burst, then the class plain and beside bursts.
func (b *bench) checkBurst(ctx context.Context, t target) (m metrics, err error) {
	mods, err := burstModulesOf(b.burstModules)
	if err != nil {
		return nil, err
	}
	m = metrics{}
	for _, mod := range mods {
		// As a class meets a lab just started: 30 new sessions connect,
		// wait 200 ms, all submit a program of their own, each waits for
		// its result (no lone check first: no sandbox warm yet).
		took, err := freshBurst(ctx, t, mod, b.burstSessions)
		if err != nil {
			return nil, fmt.Errorf("%s, on a fresh lab: %w", mod.name, err)
		}
		m["slowest s, "+mod.name+", each different, fresh lab"] = took[len(took)-1].Seconds()
	}
	srv, stop, err := launch(ctx, t)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, stop()) }()
	var from addrs
	for _, mod := range mods {
		lone, err := burst(ctx, srv, from.take(), mod, 1, false)
		if err != nil {
			return nil, fmt.Errorf("%s, lone: %w", mod.name, err)
		}
		took, err := burst(ctx, srv, from.take(), mod, b.burstSessions, false)
		if err != nil {
			return nil, fmt.Errorf("%s, burst: %w", mod.name, err)
		}
		each, err := burst(ctx, srv, from.take(), mod, b.burstSessions, true)
		if err != nil {
			return nil, fmt.Errorf("%s, burst of different modules: %w", mod.name, err)
		}
		m["lone s, "+mod.name] = lone[0].Seconds()
		m["median s, "+mod.name] = took[len(took)/2].Seconds()
		m["slowest s, "+mod.name] = took[len(took)-1].Seconds()
		m["slowest s, "+mod.name+", each different"] = each[len(each)-1].Seconds()
	}
	// The class, plain and while classes press Check one after another
	// (the first module, each burst from an address of its own, every
	// student's module changed: 30 checks to run, not one, and 30 new
	// sessions a burst, as many as a burst's checks take to run).
	shape := classShape{sessions: b.sessions, tabs: b.tabs, interval: b.interval, duration: b.classDuration}
	plain, err := b.class(ctx, srv, shape)
	if err != nil {
		return nil, fmt.Errorf("class, plain: %w", err)
	}
	m["last-tab p99 ms, plain"] = plain.last.ms(99)
	bursting, cancel := context.WithCancel(ctx)
	var bursts int
	var burstErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		for bursting.Err() == nil {
			bursts++ // begun: one may outlast the class, and is stopped with it
			if _, err := burst(bursting, srv, from.take(), mods[0], b.burstSessions, true); err != nil {
				if bursting.Err() == nil {
					burstErr = err
				}
				return
			}
		}
	}()
	with, err := b.class(ctx, srv, shape)
	cancel()
	<-done
	if err != nil {
		return nil, fmt.Errorf("class with checks: %w", err)
	}
	if burstErr != nil {
		return nil, fmt.Errorf("bursts beside the class: %w", burstErr)
	}
	m["last-tab p99 ms, checks"] = with.last.ms(99)
	m["bursts begun beside the class"] = float64(bursts)
	return m, nil
}

// freshBurst launches a lab of kind t and runs one burst of n different
// programs on it, 200 ms after the sessions connect.
func freshBurst(ctx context.Context, t target, mod burstModule, n int) (took []time.Duration, err error) {
	srv, stop, err := launch(ctx, t)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, stop()) }()
	return burstAfter(ctx, srv, fromAddr(251), mod, n, true, 200*time.Millisecond)
}

// burst dials n sessions through client, then has all of them submit mod
// at once; it returns each one's time from its submission to its result,
// sorted. A refusal (the lab's allowance included) is an error: a class
// pressing Check together must not be refused.
//
// The lab checks one program once (the seed is the program's, and the
// checker keeps outcomes by input): so that no burst takes the outcome of
// an earlier one, each burst's module ends with a comment of its own
// (burstCount), and with each, every session's does (30 programs, 30
// checks: the class whose students all changed the module).
func burst(ctx context.Context, srv *server, client *http.Client, mod burstModule, n int, each bool) ([]time.Duration, error) {
	return burstAfter(ctx, srv, client, mod, n, each, 0)
}

// burstAfter is burst, waiting pause between the sessions' connecting and
// their submissions.
func burstAfter(ctx context.Context, srv *server, client *http.Client, mod burstModule, n int, each bool, pause time.Duration) ([]time.Duration, error) {
	k := burstCount.Add(1)
	frames := make([][]byte, n)
	for i := range frames {
		tail := fmt.Sprintf("\n// burst %d\n", k)
		if each {
			tail = fmt.Sprintf("\n// burst %d, student %d\n", k, i)
		}
		f, err := submitCodeFrame(mod.source+tail, mod.language)
		if err != nil {
			return nil, err
		}
		frames[i] = f
	}
	conns := make([]*websocket.Conn, n)
	defer func() {
		for _, ws := range conns {
			if ws != nil {
				ws.CloseNow()
			}
		}
	}()
	err := parallel(n, 32, func(i int) error {
		ws, err := dial(ctx, srv, uuid.NewString(), client)
		if err != nil {
			return err
		}
		conns[i] = ws
		_, err = readState(ctx, ws)
		return err
	})
	if err != nil {
		return nil, err
	}
	time.Sleep(pause)
	took := make([]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i, ws := range conns {
		wg.Go(func() {
			<-gate
			t0 := time.Now()
			if errs[i] = send(ctx, ws, frames[i]); errs[i] != nil {
				return
			}
			status, refused, err := awaitCheck(ctx, ws, 1)
			switch {
			case err != nil:
				errs[i] = err
			case refused:
				errs[i] = errors.New("the submission was refused (rate_limit): a class cannot press Check together")
			case status == "checking" || status == "":
				errs[i] = fmt.Errorf("no status: %q", status)
			}
			took[i] = time.Since(t0)
		})
	}
	close(gate)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	slices.Sort(took)
	return took, nil
}

// burstCount numbers the bursts of a labbench run (burst).
var burstCount atomic.Int64

// checkBurstRows are the scenario's lines of the tables.
func checkBurstRows(b *bench) []row {
	var out []row
	for _, p := range b.burstModules {
		name := burstName(p)
		// A ReScript module is compiled first: the issue gives its class
		// 5 s, compile included.
		slowestGoal := 3.0
		if languageOf(p) == "rescript" {
			slowestGoal = 5
		}
		slowest := "slowest s, " + name
		lone := "lone s, " + name
		ratio := func(r results, server string) (float64, bool) {
			s, ok1 := r.median("check-burst", server, slowest)
			l, ok2 := r.median("check-burst", server, lone)
			if !ok1 || !ok2 || l == 0 {
				return 0, false
			}
			return s / l, true
		}
		out = append(out,
			row{scenario: "check-burst", metric: lone},
			row{scenario: "check-burst", metric: "median s, " + name},
			row{scenario: "check-burst", metric: slowest, goal: goal{def: slowestGoal, onLab: true},
				headline: fmt.Sprintf("check-burst: %d sessions submit %s at once, the slowest result, s", b.burstSessions, name)},
			row{scenario: "check-burst", metric: "slowest ÷ lone, " + name, goal: goal{def: 6, onLab: true}, derived: ratio,
				headline: fmt.Sprintf("check-burst: %s, the burst's slowest ÷ a lone check", name)},
			row{scenario: "check-burst", metric: slowest + ", each different", goal: goal{def: slowestGoal, onLab: true},
				headline: fmt.Sprintf("check-burst: %d sessions submit %s at once, each changed (a comment), the slowest result, s", b.burstSessions, name)},
			row{scenario: "check-burst", metric: slowest + ", each different, fresh lab", goal: goal{def: slowestGoal, onLab: true},
				headline: fmt.Sprintf("check-burst: on a lab just started, %d new sessions connect, wait 200 ms and submit %s, each changed, the slowest result, s", b.burstSessions, name)},
		)
	}
	classRatio := func(r results, server string) (float64, bool) {
		with, ok1 := r.median("check-burst", server, "last-tab p99 ms, checks")
		without, ok2 := r.median("check-burst", server, "last-tab p99 ms, plain")
		if !ok1 || !ok2 || without == 0 {
			return 0, false
		}
		return with / without, true
	}
	return append(out,
		row{scenario: "check-burst", metric: "last-tab p99 ms, plain"},
		row{scenario: "check-burst", metric: "last-tab p99 ms, checks"},
		row{scenario: "check-burst", metric: "bursts begun beside the class"},
		row{scenario: "check-burst", metric: "checks ÷ plain", goal: goal{def: 1.5, onLab: true}, derived: classRatio,
			headline: "check-burst: the class's last-tab p99 while classes press Check ÷ without"},
	)
}
