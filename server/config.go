package server

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"path"
	"runtime"
	"strings"
	"time"
	"unicode/utf8"

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
	// ReScript compiles students' ReScript submissions (internal/rescript);
	// nil: the lab has no compiler, and such a submission is refused.
	ReScript Compiler
	// Store keeps every session's events; Start loads the sessions from it.
	// Default (nil): a fresh in-memory store (store.NewMemory). The Server
	// never closes it: whoever opened it does, after Shutdown.
	Store store.Store
	// StoreTimeout bounds every call to the store (an append, a catch-up,
	// a session's read, an export's, a class's, a login's, a readiness
	// probe's): a change not stored within it is refused with the store
	// error frame and applied nowhere. With a shared store it is also how
	// long a dead or frozen listener goes unnoticed.
	StoreTimeout time.Duration
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
	// PublicURL is the address students reach the lab at, such as
	// http://192.168.1.20:8080: join URLs and QR codes point under it
	// (docs/classes.md). Empty: the address each request reached the lab
	// at. cmd/lab fills it from -public-url or the machine's LAN address.
	PublicURL string
	// MaxAddrConns caps the WebSockets open from one client address (the
	// address TrustedProxies decides), and AddrConnRate how many new ones
	// it may open a second on average (bursts up to MaxAddrConns). Past
	// either, the connection is accepted and closed with 1013 and a reason
	// the page shows. The defaults let a class of 500 behind one NAT open
	// every tab at once.
	MaxAddrConns int
	AddrConnRate float64
	// MaxAddrSessions caps the sessions created from one client address
	// that the server holds (a session is created by its first change).
	MaxAddrSessions int
	// MaxConnOutboxBytes bounds the bytes waiting to be written to one
	// connection, MaxOutboxBytes those of all connections together. A
	// connection whose frame would pass either is closed with 1008
	// (closeTooSlow) and resyncs when it reconnects.
	MaxConnOutboxBytes int64
	MaxOutboxBytes     int64
	// MaxRuns, MaxRenames and MaxEvents bound one session's runs, renames
	// and changes of any kind; past them a change gets an error frame.
	MaxRuns    int
	MaxRenames int
	MaxEvents  int
	// AuthFailureBurst is how many wrong instructor or metrics credentials
	// one client address may present at once; then one every 2 s. Not a
	// flag: tests that present many on purpose raise it.
	AuthFailureBurst int
	// CodeWorkers is how many code checks run at once, each in a sandbox
	// process on a core of its own (at the lowest priority); default: the
	// cores (runtime.NumCPU). Not a flag: tests set it.
	CodeWorkers int
	// StuckAfter flags a student stuck on the progress board when no new
	// step of the exercise was ticked for this long.
	StuckAfter time.Duration
}

// defaultStoreTimeout is Config.StoreTimeout's default (DefaultConfig).
const defaultStoreTimeout = 3 * time.Second

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
		StoreTimeout:    defaultStoreTimeout,
		Now:             time.Now,
		FrameRate:       20,
		FrameBurst:      40,
		MaxConns:        10_000,
		MaxSessionConns: 32,
		MaxSessions:     10_000,

		MaxAddrConns:       2_000,
		AddrConnRate:       50,
		MaxAddrSessions:    2_000,
		MaxConnOutboxBytes: 16 << 20,
		MaxOutboxBytes:     256 << 20,
		MaxRuns:            1_000,
		MaxRenames:         200,
		MaxEvents:          5_000,
		AuthFailureBurst:   10,
		StuckAfter:         5 * time.Minute,
		CodeWorkers:        runtime.NumCPU(),
	}
}

// withDefaults fills c's zero fields from DefaultConfig and checks that the
// frame cap leaves room for a reply at the limit and the outboxes for a
// state frame. The frame cap's default grows with the reply limit.
func (c Config) withDefaults() (Config, error) {
	d := DefaultConfig()
	c.Limits = c.Limits.WithDefaults()
	c.MaxFrameBytes = orDefault(c.MaxFrameBytes, max(d.MaxFrameBytes, minFrameBytes(c.Limits)))
	c.WriteTimeout = orDefault(c.WriteTimeout, d.WriteTimeout)
	c.SessionTTL = orDefault(c.SessionTTL, d.SessionTTL)
	c.StoreTimeout = orDefault(c.StoreTimeout, d.StoreTimeout)
	c.FrameRate = orDefault(c.FrameRate, d.FrameRate)
	c.FrameBurst = orDefault(c.FrameBurst, d.FrameBurst)
	c.MaxConns = orDefault(c.MaxConns, d.MaxConns)
	c.MaxSessionConns = orDefault(c.MaxSessionConns, d.MaxSessionConns)
	c.MaxSessions = orDefault(c.MaxSessions, d.MaxSessions)
	c.MaxAddrConns = orDefault(c.MaxAddrConns, d.MaxAddrConns)
	c.AddrConnRate = orDefault(c.AddrConnRate, d.AddrConnRate)
	c.MaxAddrSessions = orDefault(c.MaxAddrSessions, d.MaxAddrSessions)
	c.MaxConnOutboxBytes = orDefault(c.MaxConnOutboxBytes, max(d.MaxConnOutboxBytes, 2*maxStateFrameBytes(c.Limits)))
	c.MaxOutboxBytes = orDefault(c.MaxOutboxBytes, max(d.MaxOutboxBytes, c.MaxConnOutboxBytes))
	c.MaxRuns = orDefault(c.MaxRuns, d.MaxRuns)
	c.MaxRenames = orDefault(c.MaxRenames, d.MaxRenames)
	c.MaxEvents = orDefault(c.MaxEvents, d.MaxEvents)
	c.AuthFailureBurst = orDefault(c.AuthFailureBurst, d.AuthFailureBurst)
	c.CodeWorkers = orDefault(c.CodeWorkers, d.CodeWorkers)
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
		return c, &SettingError{"max-reply-bytes", fmt.Errorf("a reply of %d bytes needs frames of up to %d bytes, above the frame cap of %d", c.Limits.MaxReplyBytes, min, c.MaxFrameBytes)}
	}
	if min := maxStateFrameBytes(c.Limits); c.MaxConnOutboxBytes < min {
		return c, &SettingError{"max-conn-outbox-bytes", fmt.Errorf("%d is below %d, the largest state frame -max-held-bytes, -max-reply-bytes, -max-held and -max-receipts allow", c.MaxConnOutboxBytes, min)}
	}
	if c.MaxOutboxBytes < c.MaxConnOutboxBytes {
		return c, &SettingError{"max-outbox-bytes", fmt.Errorf("%d is below -max-conn-outbox-bytes (%d)", c.MaxOutboxBytes, c.MaxConnOutboxBytes)}
	}
	return c, nil
}

// SettingError is a setting that cannot work, named as cmd/lab's flag and
// the README's Configuration table name it (without the dash).
type SettingError struct {
	Setting string
	Err     error
}

func (e *SettingError) Error() string { return "-" + e.Setting + ": " + e.Err.Error() }
func (e *SettingError) Unwrap() error { return e.Err }

// minTokenLength is the shortest instructor or metrics token accepted: 16
// characters (OWASP's floor for secrets people choose).
const minTokenLength = 16

// Validate checks the settings a deployment chooses, after defaults, beyond
// what New needs to run: values that make no sense or contradict each other.
// cmd/lab calls it before it touches the disk; errors are *SettingError.
// Tests may build servers with extreme values (a frame rate of 0.001); New
// therefore does not call it.
func (c Config) Validate() error {
	c, err := c.withDefaults()
	if err != nil {
		return err
	}
	l := c.Limits
	switch {
	case l.MaxReplyBytes > l.MaxHeldBytes:
		return &SettingError{"max-reply-bytes", fmt.Errorf("%d is above -max-held-bytes (%d): a reply at the limit could never be held", l.MaxReplyBytes, l.MaxHeldBytes)}
	case c.SessionTTL < time.Minute:
		return &SettingError{"session-ttl", fmt.Errorf("%v is below a minute: sessions would vanish between two clicks", c.SessionTTL)}
	// The upper bounds are far above any class (labbench raises both so
	// that the limiter is not what it measures); they catch typos.
	case c.StoreTimeout < 100*time.Millisecond || c.StoreTimeout > 10*time.Minute:
		return &SettingError{"store-timeout", fmt.Errorf("%v is not between 100ms and 10m", c.StoreTimeout)}
	case c.FrameRate < 1 || c.FrameRate > 1e6:
		return &SettingError{"frame-rate", fmt.Errorf("%g is not between 1 and 1000000 frames a second", c.FrameRate)}
	case c.FrameBurst > 1_000_000:
		return &SettingError{"frame-burst", fmt.Errorf("%d is above 1000000", c.FrameBurst)}
	case c.AddrConnRate < 0.01 || c.AddrConnRate > 1e6:
		return &SettingError{"addr-conn-rate", fmt.Errorf("%g is not between 0.01 and 1000000 connections a second", c.AddrConnRate)}
	case c.MaxSessionConns > c.MaxConns:
		return &SettingError{"max-session-conns", fmt.Errorf("%d is above -max-conns (%d)", c.MaxSessionConns, c.MaxConns)}
	case c.MaxAddrConns > c.MaxConns:
		return &SettingError{"max-addr-conns", fmt.Errorf("%d is above -max-conns (%d)", c.MaxAddrConns, c.MaxConns)}
	case c.MaxAddrSessions > c.MaxSessions:
		return &SettingError{"max-addr-sessions", fmt.Errorf("%d is above -max-sessions (%d)", c.MaxAddrSessions, c.MaxSessions)}
	case c.MaxRuns > c.MaxEvents:
		return &SettingError{"max-runs", fmt.Errorf("%d is above -max-events (%d)", c.MaxRuns, c.MaxEvents)}
	case c.MaxRenames > c.MaxEvents:
		return &SettingError{"max-renames", fmt.Errorf("%d is above -max-events (%d)", c.MaxRenames, c.MaxEvents)}
	case c.InstructorToken != "" && utf8.RuneCountInString(c.InstructorToken) < minTokenLength:
		return &SettingError{"instructor-token", fmt.Errorf("shorter than %d characters: too easy to guess", minTokenLength)}
	case c.MetricsToken != "" && utf8.RuneCountInString(c.MetricsToken) < minTokenLength:
		return &SettingError{"metrics-token", fmt.Errorf("shorter than %d characters: too easy to guess", minTokenLength)}
	}
	for _, p := range c.Origins {
		if err := checkOriginPattern(p); err != nil {
			return &SettingError{"origins", err}
		}
	}
	return nil
}

// checkOriginPattern refuses a pattern that is not one, and a wildcard that
// matches every host: it would let any web page open the lab's WebSockets,
// the instructor's included. Patterns such as *.school.example are fine.
func checkOriginPattern(p string) error {
	if _, err := path.Match(p, ""); err != nil {
		return fmt.Errorf("%q is not a pattern: %w", p, err)
	}
	host := p
	if _, after, ok := strings.Cut(p, "://"); ok {
		host = after
	}
	if strings.Trim(host, "*?:.") == "" {
		return fmt.Errorf("%q allows every origin, so any web page could use the lab's WebSockets; list the host names", p)
	}
	return nil
}

// orDefault is v, or d when v is not above zero.
func orDefault[T int | int64 | float64 | time.Duration](v, d T) T {
	if v <= 0 {
		return d
	}
	return v
}
