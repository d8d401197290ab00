package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/toolcall-lab/lab/internal/rescript"
	"github.com/toolcall-lab/lab/server"
	"github.com/toolcall-lab/lab/store/postgres"
	"github.com/toolcall-lab/lab/store/sqlite"
)

// version is stamped at link time (-ldflags "-X main.version=…") and never
// written at run time.
var version = "dev"

// config is everything the command can be told, by flag or LAB_* variable.
// The server's settings and their defaults come from server.DefaultConfig;
// the command's own are written in defaultConfig.
type config struct {
	server          server.Config
	addr            string
	shutdownTimeout time.Duration
	logFormat       string
	logLevel        slog.Level
	showVersion     bool
	data            string // SQLite file, memoryData, or a postgres:// URL
	dataSync        string
	gcPercent       int    // the Go collector's GOGC while serving
	debugAddr       string // net/http/pprof's own listener; "" for none
	rescript        string // the ReScript compiler (bsc.exe); "" to look for one
}

// memoryData as -data keeps sessions in memory only: for demos and tests.
const memoryData = ":memory:"

// defaultConfig is the configuration when nothing is set.
func defaultConfig() config {
	return config{
		server:          server.DefaultConfig(),
		addr:            ":8080",
		shutdownTimeout: 10 * time.Second,
		logFormat:       "text",
		logLevel:        slog.LevelInfo,
		data:            "./lab-data/lab.db",
		dataSync:        "normal",
		// Each change allocates its state frame (a few KiB) and little else
		// lives long, so collecting at twice the live heap rather than Go's
		// 100% costs a class some MiB and saves the collector's CPU: about
		// 6% of a change in BENCHMARKS.md's throughput scenario.
		gcPercent: 200,
	}
}

// setting is one flag with its environment variable.
type setting struct {
	flag, env, usage string
	value            flag.Value
}

// settings binds every flag to c; a flag's default is what c holds now.
func settings(c *config) []setting {
	sc := &c.server
	return []setting{
		{"addr", "LAB_ADDR", "address to listen on", stringValue{&c.addr}},
		{"origins", "LAB_ORIGINS", "extra Origin host patterns allowed to open WebSockets, comma-separated (for a reverse proxy)", listValue{&sc.Origins}},
		{"max-reply-bytes", "LAB_MAX_REPLY_BYTES", "largest queued reply in bytes", intValue{&sc.Limits.MaxReplyBytes}},
		{"max-held", "LAB_MAX_HELD", "held messages per session", intValue{&sc.Limits.MaxHeld}},
		{"max-held-bytes", "LAB_MAX_HELD_BYTES", "held reply text per session in bytes", intValue{&sc.Limits.MaxHeldBytes}},
		{"max-receipts", "LAB_MAX_RECEIPTS", "deliveries recorded per session", intValue{&sc.Limits.MaxReceipts}},
		{"shutdown-timeout", "LAB_SHUTDOWN_TIMEOUT", "how long shutdown waits for connections to close", durationValue{&c.shutdownTimeout}},
		{"data", "LAB_DATA", "SQLite file holding the sessions (created with its directory on first run); " + memoryData + " keeps them in memory only; postgres://… shares them with other replicas", stringValue{&c.data}},
		{"data-sync", "LAB_DATA_SYNC", "normal: a change survives kill -9 and restarts; full: also a power cut, for an fsync per commit", choiceValue{&c.dataSync, []string{"normal", "full"}}},
		{"store-timeout", "LAB_STORE_TIMEOUT", "deadline of every database call (an append, a read, a probe); a change not stored within it is refused with the store error, and a frozen listener is replaced within it", durationValue{&sc.StoreTimeout}},
		{"session-ttl", "LAB_SESSION_TTL", "idle time (no change, no open page) after which a session is deleted", durationValue{&sc.SessionTTL}},
		{"log-format", "LAB_LOG_FORMAT", "log format: text or json", choiceValue{&c.logFormat, []string{"text", "json"}}},
		{"log-level", "LAB_LOG_LEVEL", "least log level: debug, info, warn or error", levelValue{&c.logLevel}},
		{"gc-percent", "LAB_GC_PERCENT", "Go's GOGC while serving: the heap grows by this percent of what survived the last collection before the next one (more memory, less CPU)", intValue{&c.gcPercent}},
		{"rescript", "LAB_RESCRIPT", "the ReScript compiler students' ToolCall.res is compiled with: the path of rescript 12's bsc.exe (default: ./node_modules/@rescript/linux-x64/bin/bsc.exe, then bsc.exe on PATH; none found: JavaScript only)", stringValue{&c.rescript}},
		{"debug-addr", "LAB_DEBUG_ADDR", "address of a second listener serving Go's profiles (/debug/pprof/) for measuring the lab; keep it on loopback, it has no token (default: none)", stringValue{&c.debugAddr}},
		{"metrics-token", "LAB_METRICS_TOKEN", "bearer token that /metrics requires (default: none)", stringValue{&sc.MetricsToken}},
		{"instructor-token", "LAB_INSTRUCTOR_TOKEN", "secret of the instructor console and API (default: a random one, printed at start)", secretValue{&sc.InstructorToken}},
		{"trusted-proxies", "LAB_TRUSTED_PROXIES", "comma-separated CIDRs of reverse proxies whose X-Forwarded-For is believed", cidrsValue{&sc.TrustedProxies}},
		{"frame-rate", "LAB_FRAME_RATE", "frames a second one connection may send on average; over it frames are refused, and sustained abuse closes with 1008", floatValue{&sc.FrameRate}},
		{"frame-burst", "LAB_FRAME_BURST", "frames one connection may send at once", intValue{&sc.FrameBurst}},
		{"max-conns", "LAB_MAX_CONNS", "open WebSockets in all; more are answered 503", intValue{&sc.MaxConns}},
		{"max-session-conns", "LAB_MAX_SESSION_CONNS", "open WebSockets per session; more are answered 503", intValue{&sc.MaxSessionConns}},
		{"max-sessions", "LAB_MAX_SESSIONS", "sessions stored at most (a session is stored by its first change; idle ones expire after -session-ttl); past it a new one is refused", intValue{&sc.MaxSessions}},
		{"public-url", "LAB_PUBLIC_URL", "address students reach the lab at, such as http://192.168.1.20:8080, for join links and QR codes (default: this machine's LAN address when listening on all interfaces)", urlValue{&sc.PublicURL}},
		{"max-addr-conns", "LAB_MAX_ADDR_CONNS", "open WebSockets from one client address (see -trusted-proxies); more are answered 429", intValue{&sc.MaxAddrConns}},
		{"addr-conn-rate", "LAB_ADDR_CONN_RATE", "new WebSockets a second from one client address on average, in bursts of up to -max-addr-conns; past it the page is told the lab is full", floatValue{&sc.AddrConnRate}},
		{"max-addr-sessions", "LAB_MAX_ADDR_SESSIONS", "sessions created from one client address that the lab keeps; past it a new one is refused", intValue{&sc.MaxAddrSessions}},
		{"max-conn-outbox-bytes", "LAB_MAX_CONN_OUTBOX_BYTES", "bytes waiting to be written to one WebSocket; a connection past it is closed with 1008 and resyncs", int64Value{&sc.MaxConnOutboxBytes}},
		{"max-outbox-bytes", "LAB_MAX_OUTBOX_BYTES", "bytes waiting to be written to all WebSockets together; a connection whose frame would pass it is closed with 1008", int64Value{&sc.MaxOutboxBytes}},
		{"max-runs", "LAB_MAX_RUNS", "runs one session may start", intValue{&sc.MaxRuns}},
		{"max-renames", "LAB_MAX_RENAMES", "renames of one session", intValue{&sc.MaxRenames}},
		{"max-events", "LAB_MAX_EVENTS", "changes of any kind one session may store", intValue{&sc.MaxEvents}},
		{"stuck-after", "LAB_STUCK_AFTER", "a student with no new exercise step for this long is flagged stuck on the progress board", durationValue{&sc.StuckAfter}},
	}
}

// newFlags registers every flag on a new FlagSet, bound to c, whose current
// values are the flags' defaults (what -help shows).
func newFlags(name string, c *config, stderr io.Writer) (*flag.FlagSet, []setting) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	all := settings(c)
	for _, s := range all {
		fs.Var(s.value, s.flag, s.usage+" (env "+s.env+")")
	}
	fs.BoolVar(&c.showVersion, "version", false, "print the version and exit")
	return fs, all
}

// parseConfig reads LAB_* variables first and lets flags override them.
// Errors name the setting; they mean exit status 2.
func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	c := defaultConfig()
	fs, all := newFlags(args[0], &c, stderr)
	for _, s := range all {
		if v := getenv(s.env); v != "" {
			if err := s.value.Set(v); err != nil {
				return c, fmt.Errorf("invalid %s=%q: %w", s.env, v, err)
			}
		}
	}
	if err := fs.Parse(args[1:]); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return c, nil
}

type stringValue struct{ p *string }

func (v stringValue) String() string {
	if v.p == nil {
		return ""
	}
	return *v.p
}
func (v stringValue) Set(s string) error { *v.p = s; return nil }

// secretValue is a string flag whose value -help never prints.
type secretValue struct{ p *string }

func (v secretValue) String() string     { return "" }
func (v secretValue) Set(s string) error { *v.p = s; return nil }

type choiceValue struct {
	p       *string
	choices []string
}

func (v choiceValue) String() string {
	if v.p == nil {
		return ""
	}
	return *v.p
}

func (v choiceValue) Set(s string) error {
	if !slices.Contains(v.choices, s) {
		return fmt.Errorf("want one of %s", strings.Join(v.choices, ", "))
	}
	*v.p = s
	return nil
}

type levelValue struct{ p *slog.Level }

func (v levelValue) String() string {
	if v.p == nil {
		return "info"
	}
	return strings.ToLower(v.p.String())
}

func (v levelValue) Set(s string) error {
	if err := v.p.UnmarshalText([]byte(s)); err != nil {
		return errors.New("want debug, info, warn or error")
	}
	return nil
}

// listValue is a comma-separated list; blank items are dropped.
type listValue struct{ p *[]string }

func (v listValue) String() string {
	if v.p == nil {
		return ""
	}
	return strings.Join(*v.p, ",")
}

func (v listValue) Set(s string) error {
	var items []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	*v.p = items
	return nil
}

type cidrsValue struct{ p *[]*net.IPNet }

func (v cidrsValue) String() string {
	if v.p == nil {
		return ""
	}
	var s []string
	for _, n := range *v.p {
		s = append(s, n.String())
	}
	return strings.Join(s, ",")
}

func (v cidrsValue) Set(s string) error {
	var nets []*net.IPNet
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		_, n, err := net.ParseCIDR(part)
		if err != nil {
			return fmt.Errorf("%q is not a CIDR such as 10.0.0.0/8", part)
		}
		nets = append(nets, n)
	}
	*v.p = nets
	return nil
}

// urlValue is an absolute http or https URL with a host and nothing after
// the path; a trailing slash is dropped.
type urlValue struct{ p *string }

func (v urlValue) String() string {
	if v.p == nil {
		return ""
	}
	return *v.p
}

func (v urlValue) Set(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return errors.New("want an address such as http://192.168.1.20:8080 or https://lab.example.org")
	}
	*v.p = strings.TrimSuffix(s, "/")
	return nil
}

type intValue struct{ p *int }

func (v intValue) String() string {
	if v.p == nil {
		return "0"
	}
	return strconv.Itoa(*v.p)
}

func (v intValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return errors.New("want a whole number above 0")
	}
	*v.p = n
	return nil
}

type int64Value struct{ p *int64 }

func (v int64Value) String() string {
	if v.p == nil {
		return "0"
	}
	return strconv.FormatInt(*v.p, 10)
}

func (v int64Value) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return errors.New("want a whole number above 0")
	}
	*v.p = n
	return nil
}

type floatValue struct{ p *float64 }

func (v floatValue) String() string {
	if v.p == nil {
		return "0"
	}
	return strconv.FormatFloat(*v.p, 'g', -1, 64)
}

func (v floatValue) Set(s string) error {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(f > 0) || math.IsInf(f, 0) {
		return errors.New("want a number above 0")
	}
	*v.p = f
	return nil
}

type durationValue struct{ p *time.Duration }

// String writes the duration as people do: 168h, not 168h0m0s.
func (v durationValue) String() string {
	if v.p == nil {
		return "0s"
	}
	s := v.p.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

func (v durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return errors.New("want a positive duration such as 10s")
	}
	*v.p = d
	return nil
}

// validate checks what parsing alone cannot: the listen address, the data
// setting, and the server's settings together (server.Config.Validate:
// limits that contradict each other, a wildcard origin, short tokens).
// Errors name the setting, with its variable; they mean exit status 2, and
// come before anything touches the disk.
func validate(c config) error {
	named := func(flagName string, err error) error {
		for _, s := range settings(&c) {
			if s.flag == flagName {
				return fmt.Errorf("invalid -%s (%s): %w", s.flag, s.env, err)
			}
		}
		return fmt.Errorf("invalid -%s: %w", flagName, err)
	}
	if err := checkListenAddr(c.addr); err != nil {
		return named("addr", err)
	}
	if c.debugAddr != "" {
		if err := checkListenAddr(c.debugAddr); err != nil {
			return named("debug-addr", err)
		}
	}
	if c.data == "" {
		return named("data", fmt.Errorf("empty: give a file, or %q for memory only", memoryData))
	}
	if c.gcPercent < 10 {
		return named("gc-percent", fmt.Errorf("%d: give a percent of at least 10 (below it the collector runs all but always)", c.gcPercent))
	}
	if err := c.server.Validate(); err != nil {
		var se *server.SettingError
		if errors.As(err, &se) {
			return named(se.Setting, se.Err)
		}
		return err
	}
	return nil
}

// checkListenAddr accepts what net.Listen("tcp", addr) takes without a
// lookup: [host]:port, with a port number.
func checkListenAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port (such as :8080 or 127.0.0.1:8080)", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%q: the port must be a number from 0 to 65535", addr)
	}
	if strings.ContainsAny(host, " /\\") {
		return fmt.Errorf("%q: %q is not a host name or address", addr, host)
	}
	return nil
}

// run is the whole program; it returns the exit status. The server stops on
// SIGINT, SIGTERM or when ctx ends. "lab healthcheck" asks a running server
// whether it is alive (the container's HEALTHCHECK; the image has no curl).
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	healthcheck := len(args) > 1 && args[1] == "healthcheck"
	if healthcheck {
		args = append([]string{args[0] + " healthcheck"}, args[2:]...)
	}
	cfg, err := parseConfig(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "lab: %v\n", err)
		return 2
	}
	switch {
	case cfg.showVersion:
		fmt.Fprintf(stdout, "lab %s\n", version)
		return 0
	case healthcheck:
		if err := checkHealth(ctx, cfg.addr); err != nil {
			fmt.Fprintf(stderr, "lab healthcheck: %v\n", err)
			return 1
		}
		return 0
	}
	if err := validate(cfg); err != nil {
		fmt.Fprintf(stderr, "lab: %v\n", err)
		return 2
	}
	opts := &slog.HandlerOptions{Level: cfg.logLevel}
	var handler slog.Handler = slog.NewTextHandler(stderr, opts)
	if cfg.logFormat == "json" {
		handler = slog.NewJSONHandler(stderr, opts)
	}
	log := slog.New(handler)
	// The image sets TMPDIR under the data volume (its root file system
	// may be read-only); a new volume, or a host directory mounted there,
	// has no such directory yet, and a ReScript compile's temporary
	// directory is made in it.
	if dir := getenv("TMPDIR"); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			log.Warn("cannot make the temporary directory", "TMPDIR", dir, "err", err)
		}
	}
	if err := serve(ctx, cfg, log, stdout); err != nil {
		log.Error("lab stopped", "err", err)
		return 1
	}
	return 0
}

// checkHealth asks the server listening on addr for /healthz.
func checkHealth(ctx context.Context, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("reading -addr %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	url := "http://" + net.JoinHostPort(host, port) + "/healthz"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("building the request: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("asking %s: %w", url, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s", url, resp.Status)
	}
	return nil
}

// findReScript finds the ReScript compiler students' modules are compiled
// with (docs/code.md, "Where the compiler comes from"): none found leaves
// the lab to JavaScript; a wrong one named by -rescript stops it, and one
// found by looking is passed over with a warning.
func findReScript(setting string, log *slog.Logger) (*rescript.Compiler, error) {
	c, err := rescript.Find(setting, exec.LookPath)
	switch {
	case err == nil:
		log.Info("students may write ReScript", "compiler", c.Version())
		return c, nil
	case errors.Is(err, rescript.ErrNotFound) && setting == "":
		log.Info("students write JavaScript only: no ReScript compiler found; npm install rescript@12.2.0 in this folder enables ReScript")
		return nil, nil
	case setting != "":
		return nil, fmt.Errorf("-rescript: %w", err)
	}
	log.Warn("students write JavaScript only: the ReScript compiler found cannot be used", "err", err)
	return nil, nil
}

func serve(ctx context.Context, cfg config, log *slog.Logger, stdout io.Writer) error {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signals)

	// Restored on return: tests run the command in their own process.
	defer debug.SetGCPercent(debug.SetGCPercent(cfg.gcPercent))

	scfg := cfg.server
	scfg.Logger = log
	compiler, err := findReScript(cfg.rescript, log)
	if err != nil {
		return err
	}
	if compiler != nil {
		scfg.ReScript = compiler
	}
	// A generated token is kept beside the SQLite file (tokenFile); the
	// memory store and PostgreSQL get a fresh one each start.
	generated, keptAt, madeNow := scfg.InstructorToken == "", "", false
	dataName := "the sessions"
	waitForDB := postgres.IsURL(cfg.data)
	switch {
	case waitForDB:
		// Opened once HTTP listens: a replica that starts while the
		// database refuses waits for it, answering /readyz 503.
	case cfg.data != memoryData:
		st, err := sqlite.Open(cfg.data, sqlite.Options{FullSync: cfg.dataSync == "full"})
		if err != nil {
			return err // names the file
		}
		// Closed after the server has shut down: the last changes commit first.
		defer st.Close()
		scfg.Store = st
		dataName = cfg.data
		log.Info("sessions are stored", "file", cfg.data)
		if generated {
			keptAt = tokenFile(cfg.data)
			if scfg.InstructorToken, madeNow, err = keptToken(keptAt, minTokenLength); err != nil {
				return err
			}
		}
	default:
		log.Warn("sessions are kept in memory only and are lost when the lab stops")
	}
	if generated && keptAt == "" {
		scfg.InstructorToken, madeNow = rand.Text(), true
	}
	// The lab starts (loads the sessions, starts its janitor) only once it
	// can listen, so a failed listen leaves nothing running; it is built
	// after listening because join URLs need the port when -addr asks for
	// any.
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.addr, err)
	}
	if scfg.PublicURL == "" {
		scfg.PublicURL = lanURL(ln.Addr(), interfaceAddrs())
	}
	if cfg.debugAddr != "" {
		stopDebug, err := serveDebug(cfg.debugAddr, log)
		if err != nil {
			ln.Close()
			return err
		}
		defer stopDebug()
	}
	handler := &startingHandler{}
	httpServer := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- httpServer.Serve(ln) }()
	// abandon stops serving when the lab never started.
	abandon := func(err error) error {
		closeCtx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
		defer cancel()
		_ = httpServer.Shutdown(closeCtx)
		<-served
		return err
	}
	var lab *server.Server
	if waitForDB {
		st, lb, err := startShared(ctx, cfg.data, scfg, log, signals)
		if err != nil {
			return abandon(err)
		}
		if st == nil {
			return abandon(nil) // stopped while waiting
		}
		defer st.Close()
		lab = lb
	} else {
		if lab, err = server.New(scfg); err != nil {
			return abandon(fmt.Errorf("configuring the server: %w", err))
		}
		if err := lab.Start(ctx); err != nil {
			return abandon(fmt.Errorf("loading %s: %w", dataName, err))
		}
	}
	handler.serve(lab.Handler())
	// Students need an address they can reach (the LAN address or
	// -public-url), never localhost; the console is opened on this machine.
	fmt.Fprintf(stdout, "Tool-call Outcomes Lab: students open %s/\n", strings.TrimSuffix(scfg.PublicURL, "/"))
	fmt.Fprintf(stdout, "Classes: students join at %s/join (set -public-url if they cannot reach it)\n", strings.TrimSuffix(scfg.PublicURL, "/"))
	fmt.Fprintf(stdout, "Instructor console: %sinstructor (on this machine)\n", publicURL(ln.Addr()))
	if generated {
		fmt.Fprintf(stdout, "Instructor token (%s; set -instructor-token or LAB_INSTRUCTOR_TOKEN to choose one): %s\n", tokenOrigin(cfg.data, keptAt, madeNow), scfg.InstructorToken)
	}
	log.Info("lab listening", "addr", ln.Addr().String(), "version", version)

	// SIGTERM is how containers are restarted: the lab tells pages to
	// reconnect; anything else is a shutdown.
	stop, how := lab.Shutdown, "shutdown"
	var serveErr error
	select {
	case serveErr = <-served:
	case <-ctx.Done():
	case sig := <-signals:
		if sig == syscall.SIGTERM {
			stop, how = lab.Restart, "restart"
		}
	}
	log.Info("shutting down", "as", how)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
	defer cancel()
	// http.Server.Shutdown stops accepting but neither closes nor waits for
	// hijacked WebSockets, so the lab closes those itself (and stops its
	// janitor, also when serving failed).
	httpDone := make(chan error, 1)
	go func() { httpDone <- httpServer.Shutdown(shutdownCtx) }()
	sockErr := stop(shutdownCtx)
	httpErr := <-httpDone
	if serveErr != nil {
		return fmt.Errorf("serving: %w", serveErr)
	}
	if err := errors.Join(httpErr, sockErr); err != nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	<-served // Serve has returned ErrServerClosed
	return nil
}

// startingHandler answers while the lab is not started yet: /healthz 200
// (the process is alive), everything else 503 (/readyz included), until
// serve hands it the lab's handler.
type startingHandler struct {
	h atomic.Pointer[http.Handler]
}

func (s *startingHandler) serve(h http.Handler) { s.h.Store(&h) }

func (s *startingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := s.h.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if r.URL.Path == "/healthz" {
		fmt.Fprint(w, "ok\n")
		return
	}
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(http.StatusServiceUnavailable)
	fmt.Fprint(w, "not ready: waiting for the database\n")
}

// startShared opens the PostgreSQL store at url and starts a lab on it,
// waiting while the database cannot be reached (postgres.Unreachable):
// attempts back off from 100 ms to dbRetryMax, and the log says when the
// wait begins, when its reason changes and when it ends. It returns a nil
// store when ctx ends or a signal comes first: the lab never started, so
// it just stops.
func startShared(ctx context.Context, url string, scfg server.Config, log *slog.Logger, signals <-chan os.Signal) (*postgres.Store, *server.Server, error) {
	began := time.Now()
	lastErr := ""
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, dbRetryMax) {
		st, lab, err := openShared(ctx, url, scfg)
		if err == nil {
			if lastErr != "" {
				log.Info("the database answers; starting", "database", st.Name(), "waited", time.Since(began).Round(time.Millisecond))
			}
			log.Info("sessions are stored", "database", st.Name())
			return st, lab, nil
		}
		if !postgres.Unreachable(err) {
			return nil, nil, err
		}
		if msg := err.Error(); msg != lastErr {
			log.Warn("waiting for the database; /readyz answers 503 meanwhile", "err", err, "retry", wait)
			lastErr = msg
		}
		select {
		case <-ctx.Done():
			return nil, nil, nil
		case <-signals:
			return nil, nil, nil
		case <-time.After(wait):
		}
	}
}

// dbRetryMax bounds the wait between two attempts to reach the database
// at start.
const dbRetryMax = 2 * time.Second

// openShared is one attempt of startShared, under a deadline: open the
// store, build the lab and start it; on an error nothing is left open.
func openShared(ctx context.Context, url string, scfg server.Config) (*postgres.Store, *server.Server, error) {
	openCtx, cancel := context.WithTimeout(ctx, max(scfg.StoreTimeout, server.DefaultConfig().StoreTimeout)*4)
	defer cancel()
	st, err := postgres.Open(openCtx, url)
	if err != nil {
		return nil, nil, err // names the database, without its password
	}
	scfg.Store = st
	lab, err := server.New(scfg)
	if err != nil {
		st.Close()
		return nil, nil, fmt.Errorf("configuring the server: %w", err)
	}
	if err := lab.Start(openCtx); err != nil {
		st.Close()
		return nil, nil, fmt.Errorf("loading the sessions from %s: %w", st.Name(), err)
	}
	return st, lab, nil
}

// interfaceAddrs lists this machine's addresses; none if they cannot be read.
func interfaceAddrs() []net.Addr {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	return addrs
}

// lanURL is where students on the same network reach a lab listening on
// addr: a wildcard listen address becomes this machine's LAN address (a
// private IPv4 address first, then any other global one), since loopback
// is no address a student's phone can open; a specific host stays.
func lanURL(addr net.Addr, ifaces []net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String()
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
		var global string
		for _, a := range ifaces {
			n, ok := a.(*net.IPNet)
			if !ok || n.IP.To4() == nil || !n.IP.IsGlobalUnicast() {
				continue
			}
			if n.IP.IsPrivate() {
				global = n.IP.String()
				break
			}
			if global == "" {
				global = n.IP.String()
			}
		}
		if global != "" {
			host = global
		}
	}
	return "http://" + net.JoinHostPort(host, port)
}

// publicURL is the address to print for people: a wildcard host becomes localhost.
func publicURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String() + "/"
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port) + "/"
}
