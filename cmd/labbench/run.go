package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// bench is one benchmark run's settings.
type bench struct {
	scenarios     []string
	duration      time.Duration
	sessions      int
	tabs          int
	interval      time.Duration
	idle          int
	loops         int
	reps          int
	scaleSessions int
	scaleTabs     int
	scaleInterval time.Duration
	labBin        string
	labFlags      []string
	self          string
	stderr        io.Writer
}

var allScenarios = []string{"rtt", "rtt-durable", "class", "idle", "throughput", "slow", "scale"}

// run is the whole program; it returns the exit status: 0 when the
// benchmark ran (whether or not goals were met), 1 when it broke, 2 for bad
// flags.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The hidden child mode: the baseline server, measured on its own.
	if len(args) == 3 && args[1] == "-serve-baseline" {
		if err := serveBaseline(ctx, args[2], stdout); err != nil {
			fmt.Fprintf(stderr, "labbench baseline: %v\n", err)
			return 1
		}
		return 0
	}
	b, err := parseFlags(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "labbench: %v\n", err)
		return 2
	}
	if err := b.run(ctx, stdout); err != nil {
		fmt.Fprintf(stderr, "labbench: %v\n", err)
		return 1
	}
	return 0
}

func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (*bench, error) {
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	scen := fs.String("scenarios", "rtt,rtt-durable,class,idle,throughput,slow", "comma-separated scenarios: "+strings.Join(allScenarios, ", ")+" (scale is 5,000 connections, lab only, run once)")
	b := &bench{stderr: stderr}
	fs.DurationVar(&b.duration, "duration", 3*time.Second, "measured time of one scenario against one server (a fifth more warms up)")
	fs.IntVar(&b.sessions, "sessions", 30, "class: sessions")
	fs.IntVar(&b.tabs, "tabs", 3, "class: tabs per session")
	fs.DurationVar(&b.interval, "interval", 100*time.Millisecond, "class: time between one session's ops, ±50%")
	fs.IntVar(&b.idle, "idle", 2000, "idle: connections (on a tenth as many sessions)")
	fs.IntVar(&b.loops, "loops", 50, "throughput: closed-loop sessions")
	fs.IntVar(&b.reps, "reps", 3, "repetitions; the table shows medians")
	fs.IntVar(&b.scaleSessions, "scale-sessions", 2500, "scale: sessions")
	fs.IntVar(&b.scaleTabs, "scale-tabs", 2, "scale: tabs per session")
	fs.DurationVar(&b.scaleInterval, "scale-interval", 2*time.Second, "scale: time between one session's ops, ±50%")
	fs.StringVar(&b.labBin, "lab-bin", getenv("LABBENCH_LAB_BIN"), "lab binary to measure (default: go build ./cmd/lab into a temp dir)")
	labFlags := fs.String("lab-flags", "", `extra lab flags, space-separated, e.g. "-data /tmp/x.db"`)
	short := fs.Bool("short", false, "a smoke run of a few seconds (CI): one rep, small loads")
	if err := fs.Parse(args[1:]); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *short {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		def := func(name string, p *int, v int) {
			if !set[name] {
				*p = v
			}
		}
		if !set["duration"] {
			b.duration = 400 * time.Millisecond
		}
		def("reps", &b.reps, 1)
		def("sessions", &b.sessions, 5)
		def("idle", &b.idle, 100)
		def("loops", &b.loops, 5)
	}
	for _, s := range strings.Split(*scen, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !slices.Contains(allScenarios, s) {
			return nil, fmt.Errorf("-scenarios: unknown scenario %q (want %s)", s, strings.Join(allScenarios, ", "))
		}
		b.scenarios = append(b.scenarios, s)
	}
	switch {
	case len(b.scenarios) == 0:
		return nil, errors.New("-scenarios: none given")
	case b.duration <= 0 || b.interval <= 0 || b.scaleInterval <= 0:
		return nil, errors.New("-duration and the intervals must be positive")
	case b.sessions < 1 || b.tabs < 2 || b.idle < 1 || b.loops < 1 || b.reps < 1 || b.scaleSessions < 1 || b.scaleTabs < 2:
		return nil, errors.New("-sessions, -idle, -loops, -reps and -scale-sessions must be at least 1, -tabs and -scale-tabs at least 2")
	}
	b.labFlags = strings.Fields(*labFlags)
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding labbench's own binary: %w", err)
	}
	b.self = self
	return b, nil
}

// target is a server kind: how to start a fresh one.
type target struct {
	name string
	bin  string
	args []string
	env  []string
}

func (b *bench) run(ctx context.Context, stdout io.Writer) error {
	nofile, err := raiseFileLimit()
	if err != nil {
		return err
	}
	if b.labBin == "" {
		dir, err := os.MkdirTemp("", "labbench")
		if err != nil {
			return fmt.Errorf("making a build dir: %w", err)
		}
		defer os.RemoveAll(dir)
		b.labBin = filepath.Join(dir, "lab")
		build := exec.CommandContext(ctx, "go", "build", "-o", b.labBin, "github.com/toolcall-lab/lab/cmd/lab")
		build.Stdout, build.Stderr = b.stderr, b.stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("building the lab (run from the module, or pass -lab-bin): %w", err)
		}
	}
	lab := target{
		name: "lab", bin: b.labBin,
		// In memory unless -lab-flags says otherwise: the ratios compare
		// the servers; rtt-durable measures the event log on its own.
		args: append([]string{"-addr", "127.0.0.1:0", "-data", ":memory:"}, b.labFlags...),
		// The workload is closed loops far above a person's click rate, so
		// the per-connection frame limit is lifted (it still runs, and is
		// measured); -lab-flags win over these.
		env: append(os.Environ(), "LAB_FRAME_RATE=1000000", "LAB_FRAME_BURST=1000000", "LAB_INSTRUCTOR_TOKEN="+instructorToken),
	}
	base := target{name: "baseline", bin: b.self, args: []string{"-serve-baseline", "127.0.0.1:0"}, env: os.Environ()}

	fmt.Fprintf(stdout, "labbench %s: %d reps, %v per measurement, open-file limit %d (inherited by both servers), lab flags %q\n",
		time.Now().Format(time.RFC3339), b.reps, b.duration, nofile, strings.Join(b.labFlags, " "))
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Fprintf(stdout, "load average at start: %s", load)
	}
	res := results{}
	for rep := range b.reps {
		for _, sc := range b.scenarios {
			order := []target{lab, base}
			if rep%2 == 1 {
				order = []target{base, lab}
			}
			if sc == "scale" {
				if rep > 0 {
					continue
				}
				order = []target{lab}
			}
			for _, t := range order {
				fmt.Fprintf(b.stderr, "rep %d/%d: %s on %s\n", rep+1, b.reps, sc, t.name)
				m, err := b.measure(ctx, sc, t)
				if err != nil {
					return fmt.Errorf("%s on %s: %w", sc, t.name, err)
				}
				res.add(sc, t.name, m)
			}
		}
	}
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Fprintf(stdout, "load average at end: %s", load)
	}
	res.print(stdout, b)
	return nil
}

// measure runs one scenario against a fresh server of kind t, so that
// memory and CPU are that scenario's alone.
func (b *bench) measure(ctx context.Context, sc string, t target) (m metrics, err error) {
	args := t.args
	if sc == "rtt-durable" && t.name == "lab" {
		// A fresh SQLite file on the disk, fsynced on every commit.
		dir, err := os.MkdirTemp("", "labbench-data")
		if err != nil {
			return nil, fmt.Errorf("making a data dir: %w", err)
		}
		defer os.RemoveAll(dir)
		args = append(slices.Clone(args), "-data", filepath.Join(dir, "lab.db"))
	}
	srv, err := start(ctx, t.name, t.bin, args, t.env)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, srv.stop()) }()
	switch sc {
	case "rtt", "rtt-durable":
		return b.rtt(ctx, srv)
	case "throughput":
		return b.throughput(ctx, srv)
	case "idle":
		return b.idleConns(ctx, srv)
	case "class":
		r, err := b.class(ctx, srv, classShape{sessions: b.sessions, tabs: b.tabs, interval: b.interval, duration: b.duration})
		if err != nil {
			return nil, err
		}
		m := metrics{"sender p50 ms": r.sender.ms(50), "sender p99 ms": r.sender.ms(99), "last-tab p50 ms": r.last.ms(50), "last-tab p99 ms": r.last.ms(99)}
		if r.watcher.len() > 0 {
			m["instructor lag p50 ms"], m["instructor lag p99 ms"] = r.watcher.ms(50), r.watcher.ms(99)
		}
		return m, nil
	case "slow":
		// Twice as long, half of it with the connection that never reads.
		r, err := b.class(ctx, srv, classShape{sessions: b.sessions, tabs: b.tabs, interval: b.interval, duration: 2 * b.duration, slow: true})
		if err != nil {
			return nil, err
		}
		return metrics{"others p99 ms, no slow": r.last.ms(99), "others p99 ms, slow": r.lastSlow.ms(99)}, nil
	case "scale":
		r, err := b.class(ctx, srv, classShape{sessions: b.scaleSessions, tabs: b.scaleTabs, interval: b.scaleInterval, duration: b.duration})
		if err != nil {
			return nil, err
		}
		return metrics{"last-tab p50 ms": r.last.ms(50), "last-tab p99 ms": r.last.ms(99), "ops": float64(r.sender.len())}, nil
	}
	return nil, fmt.Errorf("unknown scenario %q", sc)
}

// results are every measurement, by scenario, then server.
type results map[string]map[string][]metrics

func (r results) add(sc, server string, m metrics) {
	if r[sc] == nil {
		r[sc] = map[string][]metrics{}
	}
	r[sc][server] = append(r[sc][server], m)
}

// median of one metric over the reps; ok false when not measured.
func (r results) median(sc, server, metric string) (float64, bool) {
	var v []float64
	for _, m := range r[sc][server] {
		if x, ok := m[metric]; ok {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return 0, false
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2], true
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2, true
}

// row is one line of the table. goal > 0 is a ceiling on the ratio (or on
// the lab's own value when onLab).
type row struct {
	scenario, metric string
	goal             float64
	onLab            bool
	derived          func(r results, server string) (float64, bool)
}

func rows(b *bench) []row {
	slowRatio := func(r results, server string) (float64, bool) {
		with, ok1 := r.median("slow", server, "others p99 ms, slow")
		without, ok2 := r.median("slow", server, "others p99 ms, no slow")
		if !ok1 || !ok2 || without == 0 {
			return 0, false
		}
		return with / without, true
	}
	scaleName := fmt.Sprintf("last-tab p99 ms (%d conns)", b.scaleSessions*b.scaleTabs)
	return []row{
		{scenario: "rtt", metric: "p50 ms"},
		{scenario: "rtt", metric: "p99 ms", goal: 1.5},
		{scenario: "rtt-durable", metric: "p50 ms"},
		{scenario: "rtt-durable", metric: "p99 ms", goal: 2},
		{scenario: "class", metric: "sender p50 ms"},
		{scenario: "class", metric: "sender p99 ms"},
		{scenario: "class", metric: "last-tab p50 ms"},
		{scenario: "class", metric: "last-tab p99 ms", goal: 1.5},
		{scenario: "class", metric: "instructor lag p50 ms"},
		{scenario: "class", metric: "instructor lag p99 ms"},
		{scenario: "idle", metric: "RSS KiB/conn", goal: 1.3},
		{scenario: "throughput", metric: "ops/s"},
		{scenario: "throughput", metric: "CPU s/1000 ops", goal: 1.5},
		{scenario: "slow", metric: "others p99 ms, no slow"},
		{scenario: "slow", metric: "others p99 ms, slow"},
		{scenario: "slow", metric: "slow ÷ no slow", goal: 1.2, onLab: true, derived: slowRatio},
		{scenario: "scale", metric: "ops"},
		{scenario: "scale", metric: "last-tab p50 ms"},
		{scenario: "scale", metric: scaleName, goal: 100, onLab: true, derived: func(r results, server string) (float64, bool) {
			return r.median("scale", server, "last-tab p99 ms")
		}},
	}
}

func (r results) print(w io.Writer, b *bench) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tmetric\tlab\tbaseline\tratio\tgoal\t\t")
	for _, rw := range rows(b) {
		if r[rw.scenario] == nil {
			continue
		}
		get := func(server string) (float64, bool) {
			if rw.derived != nil {
				return rw.derived(r, server)
			}
			return r.median(rw.scenario, server, rw.metric)
		}
		lab, okL := get("lab")
		base, okB := get("baseline")
		cell := func(v float64, ok bool) string {
			if !ok {
				return "-"
			}
			return fmt.Sprintf("%.3g", v)
		}
		ratio, okR := 0.0, okL && okB && base != 0 && !rw.onLab
		if okR {
			ratio = lab / base
		}
		goal, verdict := "", ""
		if rw.goal > 0 {
			measured, ok := ratio, okR
			if rw.onLab {
				measured, ok = lab, okL
				goal = fmt.Sprintf("lab ≤ %g", rw.goal)
			} else {
				goal = fmt.Sprintf("≤ %g", rw.goal)
			}
			switch {
			case !ok:
				verdict = "n/a"
			case measured <= rw.goal:
				verdict = "met"
			default:
				verdict = "MISSED"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", rw.scenario, rw.metric, cell(lab, okL), cell(base, okB), cell(ratio, okR), goal, verdict)
	}
	tw.Flush()
}
