// Package server serves the lab: the student page, its WebSocket protocol
// (docs/protocol.md) and the per-session state behind them. It owns all
// concurrency; the rules themselves live in package model.
package server

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"golang.org/x/time/rate"

	"github.com/toolcall-lab/lab/model"
	"github.com/toolcall-lab/lab/static"
	"github.com/toolcall-lab/lab/store"
)

// Config configures a Server. The zero value is ready to use.
type Config struct {
	// Origins are extra Origin host patterns allowed to open WebSockets
	// (for a reverse proxy on another host); same-origin is always allowed.
	Origins []string
	// Limits bound each session; zero fields take model.DefaultLimits.
	Limits model.Limits
	// MaxFrameBytes is the hard cap on one client frame; a larger frame
	// closes the connection with 1009. Default 1 MiB.
	MaxFrameBytes int64
	// WriteTimeout bounds one frame write to a client. Default 10 s.
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
	// Store keeps every session's events; the Server loads its sessions
	// from it in New. Default: a fresh in-memory store (store.NewMemory).
	// The Server never closes it: whoever opened it does, after Shutdown.
	Store Store
	// SessionTTL is how long a session may stay idle (no change and no
	// open connection) before the janitor deletes it. Default 168 h.
	SessionTTL time.Duration
	// Now is the clock that stamps events and measures idleness.
	// Default time.Now.
	Now func() time.Time
	// FrameRate is how many frames a second one connection may send, on
	// average; FrameBurst how many at once. A frame over the limit gets an
	// error frame; a connection that keeps going over is closed with 1008.
	// Defaults 20 and 40.
	FrameRate  float64
	FrameBurst int
	// MaxConns caps open WebSockets, MaxSessionConns those of one session,
	// and MaxSessions the sessions held. Past a cap the upgrade is answered
	// 503. Defaults 10,000, 32 and 10,000.
	MaxConns        int
	MaxSessionConns int
	MaxSessions     int
	// PublicURL is the address students reach the lab at, such as
	// http://192.168.1.20:8080: join URLs and QR codes point under it.
	// Empty: the address each request reached the lab at.
	PublicURL string
}

// Server is the lab's HTTP and WebSocket server.
//
// Ownership: mu guards sessions, conns, closing, admitted and each
// session's expiring flag and admitted count. The janitor goroutine is
// started by New and stopped by CloseSockets (stopJanitor closes quit;
// janitorDone closes when it has exited). Each session guards its own state
// (see session); each conn its outbox (see conn). Lock order is Server.mu,
// then session.mu, then conn.mu; no I/O happens under any of them.
type Server struct {
	cfg  Config
	log  *slog.Logger
	echo *echo.Echo
	page []byte // lab.html
	// instructorHTML and loginHTML are the console and its login form.
	instructorHTML, loginHTML []byte
	metrics                   *metrics
	auth                      *instructorAuth
	loginLimiter              *rate.Limiter // safe for concurrent use
	// overview sends the class table to instructors; it has its own lock.
	overview *overview
	// projectorHTML is the projector page; joinTmpl the join pages.
	projectorHTML []byte
	joinTmpl      *template.Template
	joinLimiter   *addrLimiter // has its own lock

	mu       sync.Mutex
	sessions map[string]*session
	classOf  map[string]string // session -> the class it joined; open-lab sessions are absent
	conns    map[*conn]struct{}
	closing  bool
	admitted int // connections admitted and not yet gone, upgraded or not

	handlers    sync.WaitGroup // running WebSocket handlers
	quit        chan struct{}  // closed by stopJanitor
	stopJanitor func()
	janitorDone chan struct{}
}

// New builds a Server from cfg.
func New(cfg Config) (*Server, error) {
	cfg.Limits = cfg.Limits.WithDefaults()
	if cfg.MaxFrameBytes <= 0 {
		cfg.MaxFrameBytes = 1 << 20
	}
	if min := int64(cfg.Limits.MaxReplyBytes)*6 + 1024; cfg.MaxFrameBytes < min {
		// A reply at the limit, written with JSON escapes, must still fit.
		return nil, fmt.Errorf("max frame bytes %d is below %d, what a reply of %d bytes may need", cfg.MaxFrameBytes, min, cfg.Limits.MaxReplyBytes)
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Store == nil {
		cfg.Store = store.NewMemory()
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 168 * time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.FrameRate <= 0 {
		cfg.FrameRate = 20
	}
	if cfg.FrameBurst <= 0 {
		cfg.FrameBurst = 40
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 10_000
	}
	if cfg.MaxSessionConns <= 0 {
		cfg.MaxSessionConns = 32
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = 10_000
	}
	page, err := fs.ReadFile(static.Files, "lab.html")
	if err != nil {
		return nil, fmt.Errorf("reading the student page: %w", err)
	}
	instructorHTML, err := fs.ReadFile(static.Files, "instructor.html")
	if err != nil {
		return nil, fmt.Errorf("reading the instructor page: %w", err)
	}
	loginHTML, err := fs.ReadFile(static.Files, "instructor-login.html")
	if err != nil {
		return nil, fmt.Errorf("reading the login page: %w", err)
	}
	projectorHTML, err := fs.ReadFile(static.Files, "projector.html")
	if err != nil {
		return nil, fmt.Errorf("reading the projector page: %w", err)
	}
	joinSrc, err := fs.ReadFile(static.Files, "join.html")
	if err != nil {
		return nil, fmt.Errorf("reading the join page: %w", err)
	}
	joinTmpl, err := parseJoinTemplate(joinSrc)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:            cfg,
		log:            cfg.Logger,
		page:           page,
		instructorHTML: instructorHTML,
		loginHTML:      loginHTML,
		projectorHTML:  projectorHTML,
		joinTmpl:       joinTmpl,
		joinLimiter:    newAddrLimiter(cfg.Now),
		classOf:        make(map[string]string),
		auth:           newInstructorAuth(cfg.InstructorToken),
		loginLimiter:   rate.NewLimiter(rate.Every(time.Second), 5),
		sessions:       make(map[string]*session),
		conns:          make(map[*conn]struct{}),
	}
	s.metrics = newMetrics(s.sessionCount)
	s.overview = newOverview(s.rowsIn)
	if err := s.load(context.Background()); err != nil {
		return nil, err
	}
	if err := s.loadMembers(context.Background()); err != nil {
		return nil, err
	}
	s.echo = s.routes()
	s.startJanitor()
	return s, nil
}

// Handler returns the HTTP handler of the lab.
func (s *Server) Handler() http.Handler { return s.echo }

func (s *Server) routes() *echo.Echo {
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.IPExtractor = echo.ExtractIPDirect()
	if len(s.cfg.TrustedProxies) > 0 {
		opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
		for _, n := range s.cfg.TrustedProxies {
			opts = append(opts, echo.TrustIPRange(n))
		}
		e.IPExtractor = echo.ExtractIPFromXFFHeader(opts...)
	}
	// No Gzip or Timeout middleware: they break WebSocket upgrades.
	e.Use(middleware.Recover(), s.requestLog(), securityHeaders)
	e.GET("/", s.newSession)
	e.GET("/lab/:id", s.studentPage)
	e.GET("/lab/:id/ws", s.studentSocket)
	e.StaticFS("/static", static.Files)
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	e.GET("/metrics", echo.WrapHandler(s.metrics.handler()), s.bearer(s.cfg.MetricsToken, "metrics"))
	e.GET("/instructor/login", s.loginPage)
	e.POST("/instructor/login", s.login)
	e.POST("/instructor/logout", s.logout)
	e.GET("/instructor", s.openLabPage, s.requireInstructor)
	e.GET("/instructor/classes/:id", s.classPage(func(s *Server) []byte { return s.instructorHTML }), s.requireInstructor)
	e.GET("/instructor/classes/:id/projector", s.classPage(func(s *Server) []byte { return s.projectorHTML }), s.requireInstructor)
	e.GET("/instructor/ws", s.instructorSocket, s.requireInstructor)
	e.GET("/lab/:id/class", s.sessionClass)
	e.GET("/join", s.joinCodeForm)
	e.GET("/j/:code", s.joinNameForm)
	e.POST("/j/:code", s.join)
	api := e.Group("/api", s.requireInstructor)
	api.GET("/sessions", s.listSessions, serverWide)
	api.GET("/sessions/:id", s.getSession)
	api.DELETE("/sessions/:id", s.deleteOne)
	api.POST("/sessions/delete", s.deleteMany)
	api.POST("/inject", s.inject)
	api.GET("/sessions/:id/export", s.exportSession)
	api.GET("/export.csv", s.exportCSV, serverWide)
	api.POST("/classes", s.createClass, serverWide)
	api.GET("/classes", s.listClasses, serverWide)
	api.GET("/classes/:id", s.getClass)
	api.POST("/classes/:id/close", s.setClassOpen(false))
	api.POST("/classes/:id/reopen", s.setClassOpen(true))
	api.POST("/classes/:id/key", s.rotateKey, serverWide)
	api.DELETE("/classes/:id", s.deleteClass, serverWide)
	api.GET("/classes/:id/qr.png", s.classQR)
	api.GET("/classes/:id/export.csv", s.exportClass)
	return e
}

// requestLog writes one line per HTTP request: never bodies, query strings
// or headers, which may carry tokens.
func (s *Server) requestLog() echo.MiddlewareFunc {
	return middleware.RequestLoggerWithConfig(middleware.RequestLoggerConfig{
		LogMethod: true, LogURIPath: true, LogStatus: true, LogLatency: true, LogRemoteIP: true,
		HandleError: true,
		LogValuesFunc: func(c echo.Context, v middleware.RequestLoggerValues) error {
			s.log.LogAttrs(c.Request().Context(), slog.LevelInfo, "http request",
				slog.String("method", v.Method), slog.String("path", v.URIPath),
				slog.Int("status", v.Status), slog.Duration("latency", v.Latency),
				slog.String("remote", v.RemoteIP))
			return nil
		},
	})
}

// bearer requires "Authorization: Bearer token" when token is set.
func (s *Server) bearer(token, what string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		if token == "" {
			return next
		}
		return func(c echo.Context) error {
			got, ok := strings.CutPrefix(c.Request().Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
				c.Response().Header().Set("WWW-Authenticate", `Bearer realm="`+what+`"`)
				return echo.NewHTTPError(http.StatusUnauthorized, what+" needs a bearer token")
			}
			return next(c)
		}
	}
}

// healthz says the process is alive and serving HTTP.
func (s *Server) healthz(c echo.Context) error {
	return c.String(http.StatusOK, "ok\n")
}

// readyz says whether the server should get traffic.
func (s *Server) readyz(c echo.Context) error {
	if err := s.Ready(c.Request().Context()); err != nil {
		return c.String(http.StatusServiceUnavailable, "not ready: "+err.Error()+"\n")
	}
	return c.String(http.StatusOK, "ready\n")
}

func (s *Server) sessionCount() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return float64(len(s.sessions))
}

// securityHeaders forbids inline script and framing; the page needs nothing else.
func securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		return next(c)
	}
}

func (s *Server) newSession(c echo.Context) error {
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.Redirect(http.StatusSeeOther, "/lab/"+uuid.NewString())
}

// sessionID returns the path's id if it is a canonical UUID, as
// uuid.NewString prints it.
func sessionID(c echo.Context) (string, error) {
	id := c.Param("id")
	if !canonicalID(id) {
		return "", echo.NewHTTPError(http.StatusNotFound, "no lab session here: the address must end in a session UUID")
	}
	return id, nil
}

// canonicalID reports whether id is a UUID as uuid.NewString prints it.
func canonicalID(id string) bool {
	u, err := uuid.Parse(id)
	return err == nil && u.String() == id
}

func (s *Server) studentPage(c echo.Context) error {
	if _, err := sessionID(c); err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-cache")
	return c.HTMLBlob(http.StatusOK, s.page)
}

// studentSocket upgrades to the student WebSocket. A canonical UUID that
// names no session yet creates it, so a bookmarked lab URL always works.
func (s *Server) studentSocket(c echo.Context) error {
	id, err := sessionID(c)
	if err != nil {
		return err
	}
	if err := s.Ready(c.Request().Context()); errors.Is(err, errShuttingDown) {
		// Refused before the upgrade, so a reconnecting page simply retries.
		s.metrics.connectRefused.WithLabelValues("shutting_down").Inc()
		c.Response().Header().Set("Retry-After", "1")
		return c.String(http.StatusServiceUnavailable, "the lab server is shutting down; try again in a moment\n")
	}
	sess, err := s.admit(id)
	if err != nil {
		s.metrics.connectRefused.WithLabelValues("full").Inc()
		c.Response().Header().Set("Retry-After", "5")
		return c.String(http.StatusServiceUnavailable, err.Error()+"\n")
	}
	defer s.release(sess)
	ws, err := websocket.Accept(c.Response(), c.Request(), &websocket.AcceptOptions{OriginPatterns: s.cfg.Origins})
	if err != nil {
		return nil // Accept has written the response
	}
	s.serveConn(ws, sess, model.Student, c.RealIP())
	return nil
}

// serveConn runs one admitted connection to its end.
func (s *Server) serveConn(ws *websocket.Conn, sess *session, role model.Actor, remote string) {
	ws.SetReadLimit(s.cfg.MaxFrameBytes)
	log := s.log.With("session", sess.id, "role", role.String(), "remote", remote)
	c := s.newConn(ws, role, log)
	if !s.attach(c) {
		ws.Close(websocket.StatusGoingAway, "the lab is shutting down")
		return
	}
	defer s.handlers.Done()
	opened := time.Now()
	gauge := s.metrics.connections.WithLabelValues(role.String())
	gauge.Inc()
	log.Info("websocket open")
	sess.subscribe(c)
	err := c.readLoop(sess)
	sess.unsubscribe(c)
	c.stop()
	ws.CloseNow()
	s.detach(c)
	gauge.Dec()
	log.Info("websocket closed", "code", int(websocket.CloseStatus(err)), "duration", time.Since(opened).Round(time.Millisecond))
}

// errShuttingDown refuses new connections once the server is closing.
var errShuttingDown = errors.New("the lab is shutting down")

// admit reserves a place for one more connection to session id, creating
// the session on first use, or says which cap is full. It runs before the
// upgrade, so a refusal is a plain HTTP answer; release gives the place back.
func (s *Server) admit(id string) (*session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.admitted >= s.cfg.MaxConns {
		return nil, fmt.Errorf("the lab is full: %d connections are open (the most it takes); try again later", s.cfg.MaxConns)
	}
	sess, err := s.lookup(id)
	if err != nil {
		return nil, err
	}
	if sess.admitted >= s.cfg.MaxSessionConns {
		return nil, fmt.Errorf("this session has %d connections open (the most it takes); close a tab and try again", s.cfg.MaxSessionConns)
	}
	s.admitted++
	sess.admitted++
	return sess, nil
}

// release gives back the place admit reserved, and notes the session's
// activity for the janitor.
func (s *Server) release(sess *session) {
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.admitted--
	sess.admitted--
	sess.mu.Lock()
	sess.lastActive = now
	sess.mu.Unlock()
}

// lookup returns session id, creating it on first use. Called with mu held.
func (s *Server) lookup(id string) (*session, error) {
	sess, ok := s.sessions[id]
	switch {
	case ok && sess.expiring:
		return nil, errSessionExpiring
	case ok:
		return sess, nil
	case len(s.sessions) >= s.cfg.MaxSessions:
		return nil, errTooManySessions
	}
	sess = newSession(id, &s.cfg, s.metrics, s.overview.mark)
	s.sessions[id] = sess
	return sess, nil
}

// attach registers c, unless the server is closing, so that shutdown
// closes it and waits for its handler.
func (s *Server) attach(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.conns[c] = struct{}{}
	s.handlers.Add(1)
	return true
}

func (s *Server) detach(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
}

// newConn wraps an accepted WebSocket.
func (s *Server) newConn(ws *websocket.Conn, role model.Actor, log *slog.Logger) *conn {
	return &conn{ws: ws, role: role, log: log, metrics: s.metrics, writeTimeout: s.cfg.WriteTimeout,
		limit: newFrameLimit(s.cfg.FrameRate, s.cfg.FrameBurst)}
}

// Shutdown closes every WebSocket with 1001 (going away) and waits for their
// handlers to finish. http.Server.Shutdown does not do this: it neither
// closes nor waits for hijacked connections.
func (s *Server) Shutdown(ctx context.Context) error {
	return s.CloseSockets(ctx, websocket.StatusGoingAway, "the lab server is shutting down")
}

// CloseSockets refuses new WebSockets and closes the open ones with code and
// reason; when ctx ends first, it drops the rest without a close handshake.
func (s *Server) CloseSockets(ctx context.Context, code websocket.StatusCode, reason string) error {
	s.stopJanitor()
	<-s.janitorDone
	s.overview.stop()
	s.mu.Lock()
	s.closing = true
	open := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		open = append(open, c)
	}
	s.mu.Unlock()

	var closers sync.WaitGroup
	for _, c := range open {
		closers.Add(1)
		go func() {
			defer closers.Done()
			c.ws.Close(code, reason)
		}()
	}
	done := make(chan struct{})
	go func() {
		closers.Wait()
		s.handlers.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		for _, c := range open {
			c.ws.CloseNow()
		}
		<-done
		return fmt.Errorf("closing websockets: %w", ctx.Err())
	}
}
