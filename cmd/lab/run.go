package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/toolcall-lab/lab/model"
	"github.com/toolcall-lab/lab/server"
)

// config is everything the command can be told, by flag or LAB_* variable.
type config struct {
	addr            string
	origins         string
	limits          model.Limits
	shutdownTimeout time.Duration
	frameRate       float64
	frameBurst      int
	maxConns        int
	maxSessionConns int
	maxSessions     int
}

// setting is one flag with its environment variable.
type setting struct {
	flag, env, usage string
	value            flag.Value
}

func settings(c *config) []setting {
	c.limits = model.DefaultLimits()
	c.addr = ":8080"
	c.shutdownTimeout = 10 * time.Second
	c.frameRate, c.frameBurst = 20, 40
	c.maxConns, c.maxSessionConns, c.maxSessions = 10_000, 32, 10_000
	return []setting{
		{"addr", "LAB_ADDR", "address to listen on", stringValue{&c.addr}},
		{"origins", "LAB_ORIGINS", "extra Origin host patterns allowed to open WebSockets, comma-separated (for a reverse proxy)", stringValue{&c.origins}},
		{"max-reply-bytes", "LAB_MAX_REPLY_BYTES", "largest queued reply in bytes", intValue{&c.limits.MaxReplyBytes}},
		{"max-held", "LAB_MAX_HELD", "held messages per session", intValue{&c.limits.MaxHeld}},
		{"max-held-bytes", "LAB_MAX_HELD_BYTES", "held reply text per session in bytes", intValue{&c.limits.MaxHeldBytes}},
		{"max-receipts", "LAB_MAX_RECEIPTS", "deliveries recorded per session", intValue{&c.limits.MaxReceipts}},
		{"shutdown-timeout", "LAB_SHUTDOWN_TIMEOUT", "how long shutdown waits for connections to close", durationValue{&c.shutdownTimeout}},
		{"frame-rate", "LAB_FRAME_RATE", "frames a second one connection may send on average; over it frames are refused, and sustained abuse closes with 1008", floatValue{&c.frameRate}},
		{"frame-burst", "LAB_FRAME_BURST", "frames one connection may send at once", intValue{&c.frameBurst}},
		{"max-conns", "LAB_MAX_CONNS", "open WebSockets in all; more are answered 503", intValue{&c.maxConns}},
		{"max-session-conns", "LAB_MAX_SESSION_CONNS", "open WebSockets per session; more are answered 503", intValue{&c.maxSessionConns}},
		{"max-sessions", "LAB_MAX_SESSIONS", "sessions held in memory; a new one past it is answered 503", intValue{&c.maxSessions}},
	}
}

// parseConfig reads LAB_* variables first and lets flags override them.
// Errors name the setting; they mean exit status 2.
func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	for _, s := range settings(&c) {
		if v := getenv(s.env); v != "" {
			if err := s.value.Set(v); err != nil {
				return c, fmt.Errorf("invalid %s=%q: %w", s.env, v, err)
			}
		}
		fs.Var(s.value, s.flag, s.usage+" (env "+s.env+")")
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

func (v durationValue) String() string {
	if v.p == nil {
		return "0s"
	}
	return v.p.String()
}

func (v durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return errors.New("want a positive duration such as 10s")
	}
	*v.p = d
	return nil
}

// run is the whole program; it returns the exit status. It stops on
// SIGINT, SIGTERM or when ctx ends.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg, err := parseConfig(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "lab: %v\n", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if err := serve(ctx, cfg, log, stdout); err != nil {
		log.Error("lab stopped", "err", err)
		return 1
	}
	return 0
}

func serve(ctx context.Context, cfg config, log *slog.Logger, stdout io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	var origins []string
	for _, o := range strings.Split(cfg.origins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			origins = append(origins, o)
		}
	}
	lab, err := server.New(server.Config{
		Origins: origins, Limits: cfg.limits, Logger: log,
		FrameRate: cfg.frameRate, FrameBurst: cfg.frameBurst,
		MaxConns: cfg.maxConns, MaxSessionConns: cfg.maxSessionConns, MaxSessions: cfg.maxSessions,
	})
	if err != nil {
		return fmt.Errorf("configuring the server: %w", err)
	}
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.addr, err)
	}
	httpServer := &http.Server{
		Handler:           lab.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- httpServer.Serve(ln) }()
	fmt.Fprintf(stdout, "Tool-call Outcomes Lab: students open %s\n", publicURL(ln.Addr()))
	log.Info("lab listening", "addr", ln.Addr().String())

	select {
	case err := <-served:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
	defer cancel()
	// http.Server.Shutdown stops accepting but neither closes nor waits for
	// hijacked WebSockets, so the lab closes those itself.
	httpDone := make(chan error, 1)
	go func() { httpDone <- httpServer.Shutdown(shutdownCtx) }()
	sockErr := lab.Shutdown(shutdownCtx)
	if err := errors.Join(<-httpDone, sockErr); err != nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	<-served // Serve has returned ErrServerClosed
	return nil
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
