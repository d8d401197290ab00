// Package server serves the lab: the student page, its WebSocket protocol
// (docs/protocol.md) and the per-session state behind them. It owns all
// concurrency; the rules themselves live in package model.
package server

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/toolcall-lab/lab/model"
	"github.com/toolcall-lab/lab/static"
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

	// FrameRate is how many frames a second one connection may send, on
	// average; FrameBurst how many at once. A frame over the limit gets an
	// error frame; a connection that keeps going over is closed with 1008.
	// Defaults 20 and 40.
	FrameRate  float64
	FrameBurst int
	// MaxConns caps open WebSockets, MaxSessionConns those of one session,
	// and MaxSessions the sessions held in memory (a session lives as long
	// as the server). Past a cap the upgrade is answered 503. Defaults
	// 10,000, 32 and 10,000.
	MaxConns        int
	MaxSessionConns int
	MaxSessions     int
}

// Server is the lab's HTTP and WebSocket server.
//
// Ownership: mu guards sessions, conns, closing, admitted and each
// session's admitted count. Each session guards its
// own state (see session); each conn its outbox (see conn). Lock order is
// Server.mu, then session.mu, then conn.mu; no I/O happens under any of them.
type Server struct {
	cfg  Config
	echo *echo.Echo
	page []byte // lab.html

	mu       sync.Mutex
	sessions map[string]*session
	conns    map[*conn]struct{}
	closing  bool
	admitted int // connections admitted and not yet gone, upgraded or not

	handlers sync.WaitGroup // running WebSocket handlers
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
	s := &Server{
		cfg:      cfg,
		page:     page,
		sessions: make(map[string]*session),
		conns:    make(map[*conn]struct{}),
	}
	s.echo = s.routes()
	return s, nil
}

// Handler returns the HTTP handler of the lab.
func (s *Server) Handler() http.Handler { return s.echo }

func (s *Server) routes() *echo.Echo {
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.Use(middleware.Recover(), securityHeaders)
	e.GET("/", s.newSession)
	e.GET("/lab/:id", s.studentPage)
	e.GET("/lab/:id/ws", s.studentSocket)
	e.StaticFS("/static", static.Files)
	return e
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
	if u, err := uuid.Parse(id); err != nil || u.String() != id {
		return "", echo.NewHTTPError(http.StatusNotFound, "no lab session here: the address must end in a session UUID")
	}
	return id, nil
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
	sess, err := s.admit(id)
	if err != nil {
		return c.String(http.StatusServiceUnavailable, err.Error())
	}
	defer s.release(sess)
	ws, err := websocket.Accept(bigWriteBuffer{c.Response()}, c.Request(), &websocket.AcceptOptions{OriginPatterns: s.cfg.Origins})
	if err != nil {
		return nil // Accept has written the response
	}
	s.serveConn(ws, sess, model.Student)
	return nil
}

// admit reserves a place for one more connection to session id, creating
// the session on first use, or says which cap is full. It runs before the
// upgrade, so a refusal is a plain HTTP answer.
func (s *Server) admit(id string) (*session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.sessions[id]
	// A closing server still upgrades, to answer 1001 as to open pages (see attach).
	switch {
	case s.admitted >= s.cfg.MaxConns:
		return nil, fmt.Errorf("the lab is full: %d connections are open (the most it takes); try again later", s.cfg.MaxConns)
	case ok && sess.admitted >= s.cfg.MaxSessionConns:
		return nil, fmt.Errorf("this session has %d connections open (the most it takes); close a tab and try again", s.cfg.MaxSessionConns)
	case !ok && len(s.sessions) >= s.cfg.MaxSessions:
		return nil, fmt.Errorf("the lab has no room for a new session (at most %d are held); reuse an existing session's address", s.cfg.MaxSessions)
	}
	if !ok {
		sess = newSession(id, s.cfg.Limits)
		s.sessions[id] = sess
	}
	s.admitted++
	sess.admitted++
	return sess, nil
}

func (s *Server) release(sess *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.admitted--
	sess.admitted--
}

// serveConn runs one admitted connection to its end.
func (s *Server) serveConn(ws *websocket.Conn, sess *session, by model.Actor) {
	ws.SetReadLimit(s.cfg.MaxFrameBytes)
	c := &conn{ws: ws, log: s.cfg.Logger, writeTimeout: s.cfg.WriteTimeout}
	if !s.attach(c) {
		ws.Close(websocket.StatusGoingAway, "the lab is shutting down")
		return
	}
	defer s.handlers.Done()
	sess.subscribe(c)
	c.readLoop(sess, by, s.newFrameLimit())
	sess.unsubscribe(c)
	c.stop()
	ws.CloseNow()
	s.detach(c)
}

// attach registers c, unless the server is closing.
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

// Shutdown closes every WebSocket with 1001 (going away) and waits for their
// handlers to finish. http.Server.Shutdown does not do this: it neither
// closes nor waits for hijacked connections.
func (s *Server) Shutdown(ctx context.Context) error {
	return s.CloseSockets(ctx, websocket.StatusGoingAway, "the lab server is shutting down")
}

// CloseSockets refuses new WebSockets and closes the open ones with code and
// reason; when ctx ends first, it drops the rest without a close handshake.
func (s *Server) CloseSockets(ctx context.Context, code websocket.StatusCode, reason string) error {
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
