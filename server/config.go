package server

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/toolcall-lab/lab/model"
	"github.com/toolcall-lab/lab/store"
)

// Config configures a Server. Its zero fields take DefaultConfig's values,
// so the zero value is ready to use.
type Config struct {
	// Origins are extra Origin host patterns allowed to open WebSockets
	// (for a reverse proxy on another host); same-origin is always allowed.
	Origins []string
	// Limits bound each session; zero fields take model.DefaultLimits.
	Limits model.Limits
	// MaxFrameBytes is the hard cap on one client frame; a larger frame
	// closes the connection with 1009.
	MaxFrameBytes int64
	// WriteTimeout bounds one frame write to a client.
	WriteTimeout time.Duration
	// Logger receives the server's logs. Default: discard.
	Logger *slog.Logger
	// MetricsToken, when set, is the bearer token /metrics requires.
	MetricsToken string
	// InstructorToken is the secret of the instructor console and API
	// (server/auth.go). Empty refuses every instructor request.
	InstructorToken string
	// TrustedProxies are the networks of reverse proxies whose
	// X-Forwarded-For is believed for the client address in logs; empty
	// means the direct peer address is used and the header ignored.
	TrustedProxies []*net.IPNet
	// Store keeps every session's events; Start loads the sessions from it.
	// Default (nil): a fresh in-memory store (store.NewMemory). The Server
	// never closes it: whoever opened it does, after Shutdown.
	Store Store
	// SessionTTL is how long a session may stay idle (no change and no
	// open connection) before the janitor deletes it.
	SessionTTL time.Duration
	// Now is the clock that stamps events and measures idleness.
	Now func() time.Time
	// FrameRate is how many frames a second one connection may send, on
	// average; FrameBurst how many at once. A frame over the limit gets an
	// error frame; a connection that keeps going over is closed with 1008.
	FrameRate  float64
	FrameBurst int
	// MaxConns caps open WebSockets, MaxSessionConns those of one session,
	// and MaxSessions the sessions held. Past a cap the upgrade is answered
	// 503.
	MaxConns        int
	MaxSessionConns int
	MaxSessions     int
	// StuckAfter flags a student stuck on the progress board when no new
	// step of the exercise was ticked for this long.
	StuckAfter time.Duration
}

// DefaultConfig is the one place the server's defaults are written; cmd/lab
// builds its flags' defaults from it, and the README's Configuration table
// lists the same values (a test in cmd/lab checks that).
func DefaultConfig() Config {
	return Config{
		Limits:          model.DefaultLimits(),
		MaxFrameBytes:   1 << 20,
		WriteTimeout:    10 * time.Second,
		Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)),
		SessionTTL:      168 * time.Hour,
		Now:             time.Now,
		FrameRate:       20,
		FrameBurst:      40,
		MaxConns:        10_000,
		MaxSessionConns: 32,
		MaxSessions:     10_000,
		StuckAfter:      5 * time.Minute,
	}
}

// withDefaults fills c's zero fields from DefaultConfig and checks that the
// frame cap leaves room for a reply at the limit.
func (c Config) withDefaults() (Config, error) {
	d := DefaultConfig()
	c.Limits = c.Limits.WithDefaults()
	c.MaxFrameBytes = orDefault(c.MaxFrameBytes, d.MaxFrameBytes)
	c.WriteTimeout = orDefault(c.WriteTimeout, d.WriteTimeout)
	c.SessionTTL = orDefault(c.SessionTTL, d.SessionTTL)
	c.FrameRate = orDefault(c.FrameRate, d.FrameRate)
	c.FrameBurst = orDefault(c.FrameBurst, d.FrameBurst)
	c.MaxConns = orDefault(c.MaxConns, d.MaxConns)
	c.MaxSessionConns = orDefault(c.MaxSessionConns, d.MaxSessionConns)
	c.MaxSessions = orDefault(c.MaxSessions, d.MaxSessions)
	c.StuckAfter = orDefault(c.StuckAfter, d.StuckAfter)
	if c.Logger == nil {
		c.Logger = d.Logger
	}
	if c.Now == nil {
		c.Now = d.Now
	}
	if c.Store == nil {
		c.Store = store.NewMemory()
	}
	if min := minFrameBytes(c.Limits); c.MaxFrameBytes < min {
		return c, fmt.Errorf("max frame bytes %d is below %d, what a reply of %d bytes may need", c.MaxFrameBytes, min, c.Limits.MaxReplyBytes)
	}
	return c, nil
}

// orDefault is v, or d when v is not above zero.
func orDefault[T int | int64 | float64 | time.Duration](v, d T) T {
	if v <= 0 {
		return d
	}
	return v
}
