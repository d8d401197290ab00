package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
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
	fixed          bool // -fixed-baseline
	scenarios      []string
	duration       time.Duration
	classDuration  time.Duration // the class and replicas scenarios' -duration
	sessions       int
	tabs           int
	interval       time.Duration
	idle           int
	loops          int
	reps           int
	scaleSessions  int
	courseSessions int
	scaleTabs      int
	scaleInterval  time.Duration
	labBin         string
	labFlags       []string
	labs           []string // lab configurations measured: default, memory, postgres
	instructor     bool     // class: an instructor watches (lab only)
	pgURL          string   // replicas: the PostgreSQL database both replicas share
	// hostile: the hostile students' sessions; every: they go on until
	// every program has been checked once; runs: hostile measurements so
	// far (the order of plain and hostile alternates).
	hostileSessions int
	hostileEvery    bool
	hostileRuns     int
	// check-burst: the sessions that press Check together, and the
	// modules they submit (paths under the module's root).
	burstSessions int
	burstModules  []string
	// hall: the students behind one address, and how long their joins
	// are spread over.
	hallSize int
	hallJoin time.Duration
	// typing: the students typing beside the class (typing.go).
	typists int
	self    string
	stderr  io.Writer
}

var allScenarios = []string{"rtt", "class", "idle", "throughput", "course", "slow", "scale", "replicas", "hostile", "check-burst", "hall", "typing"}

// allLabs are the lab's configurations: "default" is the lab started as the
// README starts it (its SQLite file ./lab-data/lab.db, in a fresh temporary
// working directory), "memory" the same with -data :memory:, "postgres"
// one replica on a fresh PostgreSQL database on -pg's server (rtt and
// throughput only; skipped without -pg).
var allLabs = []string{"default", "memory", postgresLab}

// run is the whole program; it returns the exit status: 0 when the
// benchmark ran (whether or not goals were met), 1 when it broke, 2 for bad
// flags.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The hidden child mode: the baseline server, measured on its own.
	if len(args) == 3 && (args[1] == "-serve-baseline" || args[1] == "-serve-fixed-baseline") {
		if err := serveBaseline(ctx, args[2], args[1] == "-serve-fixed-baseline", stdout); err != nil {
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
	scen := fs.String("scenarios", "rtt,class,idle,throughput,course", "comma-separated scenarios: "+strings.Join(allScenarios, ", ")+" (scale is 5,000 connections, lab only, run once; replicas is the class on two lab replicas sharing -pg, lab only; hostile is the class with and without hostile programs checked, lab only; check-burst is a class pressing Check together, lab only; hall is a lecture hall behind one address joining, checking twice, and a flood from another, lab only; typing is the class while students type and the compiler answers, lab only)")
	labs := fs.String("labs", "default,memory,postgres", "comma-separated lab configurations: default (SQLite file, as the README starts it), memory (-data :memory:), postgres (one replica on a fresh database on -pg's server; rtt and throughput only, skipped without -pg; rtt measures the cluster's durable one-row INSERT beside it, the goal's yardstick, so measure it on a cluster with fsync on, as deployed, never CI's fsync=off one: e.g. as the postgres user, initdb -D DIR -A trust && pg_ctl -D DIR -o \"-c fsync=on -c synchronous_commit=on -p 5433\" start, then -pg postgres://postgres@127.0.0.1:5433/postgres)")
	b := &bench{stderr: stderr}
	fs.BoolVar(&b.fixed, "fixed-baseline", true, "also measure the baseline with fixed 2.6 KB frames (column fixed-baseline), issue 14's \"about 3 KB\", and judge the goals against it in a second table")
	fs.BoolVar(&b.instructor, "instructor", false, "class: an instructor connection watches the class on the lab, and its overview lag is reported")
	fs.DurationVar(&b.duration, "duration", 3*time.Second, "measured time of one scenario against one server (a fifth more warms up); the class and replicas take -class-duration")
	fs.DurationVar(&b.classDuration, "class-duration", 8*time.Second, "class and replicas: measured time against one server (a fifth more warms up); their p99 needs more ops than -duration gives them (about 300 a second)")
	fs.IntVar(&b.sessions, "sessions", 30, "class: sessions")
	fs.IntVar(&b.tabs, "tabs", 3, "class: tabs per session")
	fs.DurationVar(&b.interval, "interval", 100*time.Millisecond, "class: time between one session's ops, ±50%")
	fs.IntVar(&b.idle, "idle", 2000, "idle: connections (on a tenth as many sessions)")
	fs.IntVar(&b.loops, "loops", 50, "throughput: closed-loop sessions")
	fs.IntVar(&b.reps, "reps", 3, "repetitions; the table shows medians")
	fs.IntVar(&b.scaleSessions, "scale-sessions", 2500, "scale: sessions")
	fs.IntVar(&b.courseSessions, "course-sessions", 2000, "course: sessions (2 tabs each, an op each about every second, an instructor watching; the lab's per-address limits are raised to fit)")
	fs.IntVar(&b.scaleTabs, "scale-tabs", 2, "scale: tabs per session")
	fs.DurationVar(&b.scaleInterval, "scale-interval", 2*time.Second, "scale: time between one session's ops, ±50%")
	fs.IntVar(&b.hostileSessions, "hostile-sessions", 10, "hostile: the hostile students' sessions from one address, each submitting within its session's allowance (10 at once, then one a second)")
	fs.IntVar(&b.burstSessions, "burst-sessions", 30, "check-burst: sessions that submit at once, from one address")
	fs.IntVar(&b.hallSize, "hall-size", 200, "hall: students behind one address")
	fs.DurationVar(&b.hallJoin, "hall-join", 30*time.Second, "hall: how long the students' joins are spread over")
	fs.IntVar(&b.typists, "typists", 30, "typing: students each compiling a different source once a second, from one address")
	burstModules := fs.String("burst-modules", strings.Join(defaultBurstModules, ","), "check-burst: comma-separated module files under the module's root; the extension names the language (.js JavaScript, .res ReScript)")
	fs.StringVar(&b.labBin, "lab-bin", getenv("LABBENCH_LAB_BIN"), "lab binary to measure (default: go build ./cmd/lab into a temp dir)")
	fs.StringVar(&b.pgURL, "pg", getenv("LAB_PG_URL"), "replicas: postgres:// URL of a scratch database both replicas use; the postgres lab makes a database of its own on its server (default $LAB_PG_URL)")
	labFlags := fs.String("lab-flags", "", `extra lab flags, space-separated, e.g. "-data /tmp/x.db"`)
	short := fs.Bool("short", false, "a smoke run of a few seconds (CI): one rep, small loads")
	err := fs.Parse(args[1:])
	if err != nil {
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
		if !set["class-duration"] {
			b.classDuration = b.duration
		}
		def("reps", &b.reps, 1)
		def("sessions", &b.sessions, 5)
		def("idle", &b.idle, 100)
		def("loops", &b.loops, 5)
		def("course-sessions", &b.courseSessions, 100) // a small course: 2,000 take a minute a server
		def("hostile-sessions", &b.hostileSessions, 1)
		def("burst-sessions", &b.burstSessions, 3)
		def("hall-size", &b.hallSize, 10)
		if !set["hall-join"] {
			b.hallJoin = time.Second
		}
		def("typists", &b.typists, 3)
	}
	// In -short the hostile students stop with the class, a check or two
	// in: a pass over every program takes seconds.
	b.hostileEvery = !*short
	if b.scenarios, err = list("-scenarios", *scen, allScenarios); err != nil {
		return nil, err
	}
	if b.labs, err = list("-labs", *labs, allLabs); err != nil {
		return nil, err
	}
	if b.pgURL == "" && slices.Contains(b.labs, postgresLab) {
		fmt.Fprintln(stderr, "labbench: the postgres lab is skipped: no PostgreSQL (-pg or LAB_PG_URL)")
		if b.labs = slices.DeleteFunc(b.labs, func(l string) bool { return l == postgresLab }); len(b.labs) == 0 {
			return nil, errors.New("-labs: postgres alone needs -pg or LAB_PG_URL")
		}
	}
	switch {
	case b.duration <= 0 || b.classDuration <= 0 || b.interval <= 0 || b.scaleInterval <= 0:
		return nil, errors.New("-duration, -class-duration and the intervals must be positive")
	case b.sessions < 1 || b.courseSessions < 1 || b.tabs < 2 || b.idle < 1 || b.loops < 1 || b.reps < 1 || b.scaleSessions < 1 || b.scaleTabs < 2 || b.hostileSessions < 1:
		return nil, errors.New("-sessions, -idle, -loops, -reps, -scale-sessions and -hostile-sessions must be at least 1, -tabs and -scale-tabs at least 2")
	}
	if slices.Contains(b.scenarios, "replicas") && b.pgURL == "" {
		return nil, errors.New("the replicas scenario needs a PostgreSQL database: -pg or LAB_PG_URL")
	}
	if b.burstSessions < 1 {
		return nil, errors.New("-burst-sessions must be at least 1")
	}
	for _, m := range strings.Split(*burstModules, ",") {
		if m = strings.TrimSpace(m); m != "" {
			b.burstModules = append(b.burstModules, m)
		}
	}
	if len(b.burstModules) == 0 {
		return nil, errors.New("-burst-modules: none given")
	}
	b.labFlags = strings.Fields(*labFlags)
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding labbench's own binary: %w", err)
	}
	b.self = self
	return b, nil
}

// list parses a comma-separated flag value whose items must be in known.
func list(flagName, value string, known []string) ([]string, error) {
	var out []string
	for _, s := range strings.Split(value, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !slices.Contains(known, s) {
			return nil, fmt.Errorf("%s: unknown value %q (want %s)", flagName, s, strings.Join(known, ", "))
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: none given", flagName)
	}
	return out, nil
}

// target is a server kind: how to start a fresh one.
type target struct {
	name string
	bin  string
	args []string
	env  []string
	// freshDir runs each server in a fresh temporary working directory,
	// removed after it: the default lab creates ./lab-data/lab.db there.
	freshDir bool
	// pg runs each server on a fresh database of its own on this cluster,
	// dropped after it, and samples the cluster's CPU on it.
	pg *pgCluster
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
	// The workload is closed loops far above a person's click rate, so
	// the per-connection frame limit is lifted (it still runs, and is
	// measured); -lab-flags win over these. Every other protection keeps
	// its default.
	labEnv := append(os.Environ(), "LAB_FRAME_RATE=1000000", "LAB_FRAME_BURST=1000000", "LAB_INSTRUCTOR_TOKEN="+instructorToken)
	var pg *pgCluster
	if slices.Contains(b.labs, postgresLab) {
		if pg, err = openCluster(ctx, b.pgURL); err != nil {
			return err
		}
		defer pg.close()
	}
	var targets []target
	for _, l := range b.labs {
		t := target{name: l, bin: b.labBin, args: []string{"-addr", "127.0.0.1:0"}, env: labEnv}
		switch l {
		case "default":
			// Exactly as the README starts it: no -data, so the log is
			// ./lab-data/lab.db under the working directory, on the disk.
			t.freshDir = true
		case "memory":
			t.args = append(t.args, "-data", ":memory:")
		case postgresLab:
			t.pg = pg
		}
		t.args = append(t.args, b.labFlags...)
		targets = append(targets, t)
	}
	targets = append(targets, target{name: "baseline", bin: b.self, args: []string{"-serve-baseline", "127.0.0.1:0"}, env: os.Environ()})
	if b.fixed {
		targets = append(targets, target{name: "fixed-baseline", bin: b.self, args: []string{"-serve-fixed-baseline", "127.0.0.1:0"}, env: os.Environ()})
	}

	fmt.Fprintf(stdout, "labbench %s: %d reps, %v per measurement (class %v), open-file limit %d (inherited by both servers), lab flags %q\n",
		time.Now().Format(time.RFC3339), b.reps, b.duration, b.classDuration, nofile, strings.Join(b.labFlags, " "))
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Fprintf(stdout, "load average at start: %s", load)
	}
	res := results{}
	for rep := range b.reps {
		for i, sc := range b.scenarios {
			// Interleaved: every scenario runs against every server in
			// turn, and who goes first rotates, so all share the noise.
			order := slices.Clone(targets)
			k := (rep + i) % len(order)
			order = append(order[k:], order[:k]...)
			if sc == "scale" {
				if rep > 0 {
					continue
				}
				order = slices.DeleteFunc(order, func(t target) bool { return !isLab(t.name) })
			}
			if sc == "replicas" || sc == "hostile" || sc == "check-burst" || sc == "hall" || sc == "typing" {
				// Replicas have their own store (PostgreSQL), and the code
				// check never touches one, so one lab configuration stands
				// for all; the baseline has neither.
				order = slices.DeleteFunc(order, func(t target) bool { return t.name != b.labs[0] })
			} else if !slices.Contains(pgLabScenarios, sc) {
				order = slices.DeleteFunc(order, func(t target) bool { return t.name == postgresLab })
			}
			if scenario := turnScenarios[sc]; scenario != nil {
				// All at once, in turns (bench.inTurns).
				names := make([]string, len(order))
				for i, t := range order {
					names[i] = t.name
				}
				fmt.Fprintf(b.stderr, "rep %d/%d: %s on %s, in turns\n", rep+1, b.reps, sc, strings.Join(names, ", "))
				ms, err := b.measureTogether(ctx, scenario, order)
				if err != nil {
					return fmt.Errorf("%s: %w", sc, err)
				}
				for i, m := range ms {
					fmt.Fprintf(b.stderr, "  %s: %s\n", names[i], m)
					res.add(sc, names[i], m)
				}
				continue
			}
			for _, t := range order {
				fmt.Fprintf(b.stderr, "rep %d/%d: %s on %s\n", rep+1, b.reps, sc, t.name)
				m, err := b.measure(ctx, sc, t)
				if err != nil {
					return fmt.Errorf("%s on %s: %w", sc, t.name, err)
				}
				// Each rep's figures, for judging the medians' spread.
				fmt.Fprintf(b.stderr, "  %s\n", m)
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

// launch starts a fresh server of kind t, in a fresh working dir if t
// wants one; stop stops it and removes the dir.
func launch(ctx context.Context, t target) (srv *server, stop func() error, err error) {
	dir := ""
	if t.freshDir {
		// Under the temp dir, which is on the disk here (not tmpfs).
		if dir, err = os.MkdirTemp("", "labbench-lab"); err != nil {
			return nil, nil, fmt.Errorf("making a working dir: %w", err)
		}
	}
	args, db := t.args, ""
	if t.pg != nil {
		var dbURL string
		if db, dbURL, err = t.pg.database(ctx); err != nil {
			return nil, nil, err
		}
		args = append(slices.Clone(args), "-data", dbURL)
	}
	drop := func() error {
		os.RemoveAll(dir) // RemoveAll("") does nothing: no dir, nothing to remove
		if db != "" {
			return t.pg.drop(db)
		}
		return nil
	}
	if srv, err = start(ctx, t.name, t.bin, dir, args, t.env); err != nil {
		return nil, nil, errors.Join(err, drop())
	}
	if db != "" {
		srv.dbCPU = func() (float64, error) { return t.pg.cpuSeconds(ctx, db) }
		srv.pg = t.pg
	}
	return srv, func() error {
		err := srv.stop()
		return errors.Join(err, drop())
	}, nil
}

// turnScenario runs a scenario against servers that are all up at once,
// taking turns (bench.inTurns); one metrics per server.
type turnScenario func(*bench, context.Context, []*server) ([]metrics, error)

// turnScenarios are the scenarios that take turns: the closed loops.
var turnScenarios = map[string]turnScenario{
	"rtt":        (*bench).rtt,
	"throughput": (*bench).throughput,
}

// measureTogether runs scenario, one of turnScenarios, against fresh
// servers of every kind in ts, all up at once; one metrics each.
func (b *bench) measureTogether(ctx context.Context, scenario turnScenario, ts []target) (ms []metrics, err error) {
	var srvs []*server
	for _, t := range ts {
		srv, stop, err := launch(ctx, t)
		if err != nil {
			return nil, err
		}
		defer func() { err = errors.Join(err, stop()) }()
		srvs = append(srvs, srv)
	}
	return scenario(b, ctx, srvs)
}

// measure runs one scenario against a fresh server of kind t, so that
// memory and CPU are that scenario's alone.
func (b *bench) measure(ctx context.Context, sc string, t target) (m metrics, err error) {
	switch sc {
	case "replicas":
		return b.replicas(ctx, t)
	case "course":
		return b.course(ctx, t)
	case "hostile":
		return b.hostile(ctx, t)
	case "check-burst":
		return b.checkBurst(ctx, t)
	case "hall":
		return b.hall(ctx, t)
	case "typing":
		return b.typing(ctx, t)
	}
	srv, stop, err := launch(ctx, t)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, stop()) }()
	switch sc {
	case "idle":
		return b.idleConns(ctx, srv)
	case "class":
		r, err := b.class(ctx, srv, classShape{sessions: b.sessions, tabs: b.tabs, interval: b.interval, duration: b.classDuration, watch: b.instructor})
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

// replicas runs the class on two replicas of the lab on one PostgreSQL
// database, each session's tabs spread over both: the cross-replica
// fan-out is the time from an op sent to a tab on the other replica
// receiving its state (decide, append, notify, catch up, fan out).
func (b *bench) replicas(ctx context.Context, t target) (m metrics, err error) {
	args := append(slices.Clone(t.args), "-data", b.pgURL)
	var srvs []*server
	defer func() {
		for _, s := range srvs {
			err = errors.Join(err, s.stop())
		}
	}()
	for _, name := range []string{"replica-a", "replica-b"} {
		srv, err := start(ctx, name, t.bin, "", args, t.env)
		if err != nil {
			return nil, err
		}
		srvs = append(srvs, srv)
	}
	r, err := b.class(ctx, srvs[0], classShape{sessions: b.sessions, tabs: b.tabs, interval: b.interval, duration: b.classDuration, replicas: srvs})
	if err != nil {
		return nil, err
	}
	return metrics{"sender p50 ms": r.sender.ms(50), "sender p99 ms": r.sender.ms(99),
		"cross-replica p50 ms": r.cross.ms(50), "cross-replica p99 ms": r.cross.ms(99),
		"last-tab p99 ms": r.last.ms(99)}, nil
}

func (m metrics) String() string {
	keys := slices.Sorted(maps.Keys(m))
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %.3g", k, m[k])
	}
	return b.String()
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

// goal is a ceiling on the ratio lab ÷ baseline (or, when onLab, on the
// lab's own value), per lab configuration: memory may have a tighter one.
type goal struct {
	def, memory float64
	onLab       bool
	// atLeast makes def a floor; vsDefault says the value is the lab's
	// ÷ the default lab's (the postgres lab's goals).
	atLeast, vsDefault bool
	// text, when set, is how the tables state the goal.
	text string
}

// met reports whether v meets the goal for lab.
func (g goal) met(lab string, v float64) bool {
	if g.atLeast {
		return v >= g.of(lab)
	}
	return v <= g.of(lab)
}

func (g goal) of(lab string) float64 {
	if lab == "memory" && g.memory > 0 {
		return g.memory
	}
	return g.def
}

func (g goal) String() string {
	if g.text != "" {
		return g.text
	}
	var s string
	switch {
	case g.vsDefault:
		s = "÷ default "
	case g.onLab:
		s = "lab "
	}
	op := "≤"
	if g.atLeast {
		op = "≥"
	}
	s += fmt.Sprintf("%s %g", op, g.def)
	if g.memory > 0 && g.memory != g.def {
		s += fmt.Sprintf("; ≤ %g in memory", g.memory)
	}
	return s
}

// row is one line of the tables.
type row struct {
	scenario, metric string
	headline         string // its name in the headline table; "" keeps it to the details
	goal             goal
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
	// vsDefault is the postgres lab's median ÷ the default lab's.
	vsDefault := func(sc, metric string) func(results, string) (float64, bool) {
		return func(r results, server string) (float64, bool) {
			if server != postgresLab {
				return 0, false
			}
			v, ok1 := r.median(sc, server, metric)
			d, ok2 := r.median(sc, "default", metric)
			if !ok1 || !ok2 || d == 0 {
				return 0, false
			}
			return v / d, true
		}
	}
	// pgOverInsert is what the postgres lab adds to the default's rtt
	// p99, in durable one-row INSERTs (p99) on its cluster.
	pgOverInsert := func(r results, server string) (float64, bool) {
		v, ok1 := r.median("rtt", server, "p99 ms")
		d, ok2 := r.median("rtt", "default", "p99 ms")
		ins, ok3 := r.median("rtt", server, insertP99Metric)
		if server != postgresLab || !ok1 || !ok2 || !ok3 || ins == 0 {
			return 0, false
		}
		return (v - d) / ins, true
	}
	pgCPU := func(r results, server string) (float64, bool) {
		lab, ok1 := r.median("throughput", server, "CPU s/1000 ops")
		db, ok2 := r.median("throughput", server, pgCPUMetric)
		return lab + db, ok1 && ok2
	}
	scaleName := fmt.Sprintf("last-tab p99 ms (%d conns)", b.scaleSessions*b.scaleTabs)
	return append([]row{
		{scenario: "rtt", metric: "p50 ms"},
		{scenario: "rtt", metric: "p99 ms", goal: goal{def: 2, memory: 1.5},
			headline: "rtt p99: 1 session, 1 tab, closed loop, a new session every 100 ops"},
		{scenario: "rtt", metric: "p99 ÷ default", derived: vsDefault("rtt", "p99 ms")},
		{scenario: "rtt", metric: insertP50Metric},
		{scenario: "rtt", metric: insertP99Metric},
		{scenario: "rtt", metric: pgOverInsertMetric, goal: goal{def: 1.5, onLab: true, text: "(p99 − default's) ÷ INSERT p99 ≤ 1.5"}, derived: pgOverInsert,
			headline: "postgres: (one replica's rtt p99 − the SQLite default's) ÷ its cluster's durable one-row INSERT p99, same run"},
		{scenario: "class", metric: "sender p50 ms"},
		{scenario: "class", metric: "sender p99 ms"},
		{scenario: "class", metric: "last-tab p50 ms"},
		{scenario: "class", metric: "last-tab p99 ms", goal: goal{def: 1.5},
			headline: fmt.Sprintf("class: %d sessions × %d tabs, an op per session every ~%v, last tab's p99", b.sessions, b.tabs, b.interval)},
		{scenario: "class", metric: "instructor lag p50 ms"},
		{scenario: "class", metric: "instructor lag p99 ms"},
		{scenario: "idle", metric: "RSS KiB/conn", goal: goal{def: 1.3},
			headline: fmt.Sprintf("RSS per idle connection, %d connections on %d sessions", b.idle, max(b.idle/10, 1))},
		{scenario: "throughput", metric: "ops/s"},
		{scenario: "throughput", metric: "CPU s/1000 ops", goal: goal{def: 2, memory: 1.7},
			headline: fmt.Sprintf("server CPU per op: %d closed loops on %d sessions, a new session every 100 ops", b.loops, b.loops)},
		{scenario: "throughput", metric: "ops/s ÷ default", goal: goal{def: 0.5, onLab: true, atLeast: true, vsDefault: true}, derived: vsDefault("throughput", "ops/s"),
			headline: fmt.Sprintf("postgres: one replica's changes a second ÷ the SQLite default's, %d closed loops", b.loops)},
		{scenario: "throughput", metric: pgCPUMetric},
		{scenario: "throughput", metric: "lab + PostgreSQL CPU s/1000 ops", derived: pgCPU},
		{scenario: "slow", metric: "others p99 ms, no slow"},
		{scenario: "slow", metric: "others p99 ms, slow"},
		{scenario: "slow", metric: "slow ÷ no slow", goal: goal{def: 1.2, onLab: true}, derived: slowRatio,
			headline: "a connection that never reads: the others' p99 with it ÷ without"},
		{scenario: "replicas", metric: "sender p50 ms"},
		{scenario: "replicas", metric: "sender p99 ms"},
		{scenario: "replicas", metric: "cross-replica p50 ms"},
		{scenario: "replicas", metric: "last-tab p99 ms"},
		{scenario: "replicas", metric: "cross-replica p99 ms", goal: goal{def: 100, onLab: true},
			headline: fmt.Sprintf("replicas: %d sessions × %d tabs on two replicas (PostgreSQL), a change reaching a tab on the other replica, p99 ms", b.sessions, b.tabs)},
		{scenario: "scale", metric: "ops"},
		{scenario: "scale", metric: "last-tab p50 ms"},
		{scenario: "scale", metric: scaleName, goal: goal{def: 100, onLab: true}, derived: func(r results, server string) (float64, bool) {
			return r.median("scale", server, "last-tab p99 ms")
		}, headline: fmt.Sprintf("scale: %d connections on %d sessions, last tab's p99 ms", b.scaleSessions*b.scaleTabs, b.scaleSessions)},
	}, slices.Concat(courseRows(b), hostileRows(b), checkBurstRows(b), hallRows(b), typingRows(b))...)
}

func (rw row) value(r results, server string) (float64, bool) {
	if rw.derived != nil {
		return rw.derived(r, server)
	}
	return r.median(rw.scenario, server, rw.metric)
}

// measured is what a row's goal is checked against for one lab: the ratio
// lab ÷ base (a baseline server), or the lab's own value for goals onLab.
func (rw row) measured(r results, lab, base string) (float64, bool) {
	v, ok := rw.value(r, lab)
	if !ok || rw.goal.onLab {
		return v, ok
	}
	bv, ok := rw.value(r, base)
	if !ok || bv == 0 {
		return 0, false
	}
	return v / bv, true
}

// print writes the headline table (lab ÷ baseline per lab configuration,
// against the goals, as issue 14 lays it out), the same against the fixed
// baseline when it ran, then every median.
func (r results) print(w io.Writer, b *bench) {
	fmt.Fprintln(w, "\nlab ÷ baseline, whose frame at each op is as big as the lab's state frame (medians of the reps):")
	r.printGoals(w, b, "baseline")
	if b.fixed {
		fmt.Fprintln(w, "\nlab ÷ fixed-baseline, whose frames are a fixed 2.6 KB, issue 14's \"about 3 KB\" (medians of the reps):")
		r.printGoals(w, b, "fixed-baseline")
	}

	fmt.Fprintln(w, "\nmedians (times in ms):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	servers := append(slices.Clone(b.labs), "baseline")
	if b.fixed {
		servers = append(servers, "fixed-baseline")
	}
	fmt.Fprintln(tw, "scenario\tmetric\t"+strings.Join(servers, "\t")+"\t")
	for _, rw := range rows(b) {
		if r[rw.scenario] == nil {
			continue
		}
		line, any := rw.scenario+"\t"+rw.metric, false
		for _, sv := range servers {
			if v, ok := rw.value(r, sv); ok {
				line += fmt.Sprintf("\t%.3g", v)
				any = true
			} else {
				line += "\t-"
			}
		}
		if any {
			fmt.Fprintln(tw, line+"\t")
		}
	}
	tw.Flush()
}

// printGoals writes the goals table: each lab configuration ÷ base.
func (r results) printGoals(w io.Writer, b *bench, base string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "measure\tgoal"
	for _, l := range b.labs {
		head += "\t" + l
	}
	fmt.Fprintln(tw, head+"\t")
	for _, rw := range rows(b) {
		if rw.headline == "" || r[rw.scenario] == nil || rw.goal.onLab && base != "baseline" {
			continue // a goal on the lab alone is in the first table
		}
		line := rw.headline + "\t" + rw.goal.String()
		for _, l := range b.labs {
			v, ok := rw.measured(r, l, base)
			switch {
			case !ok:
				line += "\t-"
			case rw.goal.met(l, v):
				line += fmt.Sprintf("\t%.3g met", v)
			default:
				line += fmt.Sprintf("\t%.3g MISSED", v)
			}
		}
		fmt.Fprintln(tw, line+"\t")
	}
	tw.Flush()
}
