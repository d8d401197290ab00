// Package server serves the lab: the student page, its WebSocket protocol
// (docs/protocol.md), the instructor console and API (docs/instructor.md)
// and the per-session state behind them. It owns all concurrency; the rules
// themselves live in package model. docs/architecture.md maps the files.
package server

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/labstack/echo/v4"

	"github.com/toolcall-lab/lab/internal/limit"
	"github.com/toolcall-lab/lab/internal/sharedframe"
	"github.com/toolcall-lab/lab/model"
	"github.com/toolcall-lab/lab/static"
	"github.com/toolcall-lab/lab/store"
)

// Server is the lab's HTTP and WebSocket server. New builds it without I/O
// or goroutines; Start loads the stored sessions and starts the janitor;
// Shutdown or Restart closes the WebSockets and stops the janitor.
//
// Ownership: mu guards sessions, classOf, conns, closing, closeWith, started, janitor,
// listener, admitted, stored and each session's expiring, stored and creator fields
// and admitted count. addrs and outbox are safe for concurrent use (addrs
// has a leaf lock of its own, outbox is atomic). Each session
// guards its own state (see session); each conn its outbox (see conn); the
// overview and instructorAuth have their own locks; readBufs and frames are pools. Lock order is Server.mu,
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
	// addrs is what each client address holds and may still do (limits.go).
	addrs *limit.AddrTable
	// outbox counts the bytes waiting in every connection's outbox.
	outbox *limit.Budget
	// readBufs lends every connection's reader its frame buffers.
	readBufs *readBuffers
	// frames recycles every session's state frames (internal/sharedframe).
	frames *sharedframe.Pool
	// overview sends the class table to instructors; it has its own lock.
	overview *overview
	// projectorHTML is a class's projector page; joinTmpl the join pages.
	projectorHTML []byte
	joinTmpl      *template.Template
	// renderers is which renderer answers each route's errors (routes.go).
	renderers errorRenderers
	// checker runs the sessions' code checks (code.go); it has its own lock.
	checker *checker
	// live answers the students' compile and typeAt frames (live.go); it
	// has its own lock.
	live *liveCompiles

	mu        sync.Mutex
	sessions  map[string]*session
	classOf   memberships // which class each session joined; open-lab sessions are absent
	conns     map[*conn]struct{}
	closing   bool
	closeWith closeReason // how open and late connections are closed once closing
	started   bool
	janitor   *janitor  // nil until Start
	listener  *listener // nil until Start, and without a Listener store
	admitted  int       // connections admitted and not yet gone
	stored    int       // sessions with at least one change (counted against MaxSessions)

	handlers sync.WaitGroup // running WebSocket handlers

	// writes and listening log the store's outages and the listener's
	// (health.go); ready runs readiness probes one at a time. Each has its
	// own lock.
	writes, listening *outage
	ready             prober
}

// New builds a Server from cfg; zero fields take DefaultConfig's values. It
// does no I/O and starts nothing: call Start before serving Handler.
func New(cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	writes := &outage{what: "store writes", log: cfg.Logger}
	cfg.Store = bound(cfg.Store, cfg.StoreTimeout, writes)
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
		classOf:        newMemberships(),
		auth:           newInstructorAuth(cfg.InstructorToken),
		addrs:          newAddrTable(&cfg),
		outbox:         limit.NewBudget(cfg.MaxOutboxBytes),
		readBufs:       &readBuffers{},
		frames:         &sharedframe.Pool{},
		sessions:       make(map[string]*session),
		conns:          make(map[*conn]struct{}),
		writes:         writes,
		listening:      &outage{what: "listening to other replicas", log: cfg.Logger},
	}
	s.metrics = newMetrics(s.sessionCount)
	s.checker = newChecker(cfg.Logger, cfg.CodeWorkers, cfg.ReScript, s.metrics)
	s.live = newLiveCompiles(cfg.Logger, cfg.ReScript, s.metrics, &s.checker.class)
	s.overview = newOverview(s.tableIn, func(rows []sessionRow) classSummary {
		return summarize(rows, s.cfg.Now(), s.cfg.StuckAfter)
	})
	s.echo = s.routes()
	return s, nil
}

// Start replays every stored session, so that state frames are
// byte-identical to those before a restart and seq continues, then starts
// the janitor that deletes idle sessions. With a store other replicas share
// (a Listener), it first starts listening to their changes, so that none
// stored while it loads goes unheard. Call it once, before Handler serves;
// Shutdown or Restart stops what it started.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	switch {
	case s.closing:
		s.mu.Unlock()
		return fmt.Errorf("starting the lab: %w", errShuttingDown)
	case s.started:
		s.mu.Unlock()
		return errors.New("starting the lab: already started")
	}
	s.started = true
	s.mu.Unlock()

	// ln is stopped on the way out unless it was handed to the Server
	// (for Shutdown to stop): on any error, or when Shutdown came first.
	var ln *listener
	defer func() {
		if ln != nil {
			ln.stop()
		}
	}()
	if l, ok := s.cfg.Store.(store.Listener); ok {
		var err error
		if ln, err = s.startListener(l); err != nil {
			return fmt.Errorf("starting the lab: %w", err)
		}
	}
	loaded, err := s.load(ctx)
	if err != nil {
		return err
	}
	classOf, err := s.loadMembers(ctx, loaded)
	if err != nil {
		return err
	}
	if err := s.loadSettings(ctx, loaded, classOf); err != nil {
		return err
	}
	s.mu.Lock()
	for _, sess := range loaded {
		// A session already held was heard of while loading: it is newer.
		if _, ok := s.sessions[sess.id]; !ok {
			s.holdStored(sess)
		}
	}
	for id, class := range classOf {
		s.classOf.join(id, class)
	}
	if !s.closing {
		s.janitor = s.startJanitor()
		s.listener, ln = ln, nil
	}
	s.mu.Unlock()
	return nil
}

// Handler returns the HTTP handler of the lab.
func (s *Server) Handler() http.Handler { return s.echo }

// Shutdown closes every WebSocket with 1001 (going away), waits for their
// handlers to finish and stops the janitor. http.Server.Shutdown does not do
// this: it neither closes nor waits for hijacked connections. When ctx ends
// first, the rest are dropped without a close handshake.
func (s *Server) Shutdown(ctx context.Context) error {
	return s.closeSockets(ctx, closeShutdown)
}

// Restart is Shutdown for a server that is coming back (a container
// restart): it closes with 1012 (service restart), so pages reconnect.
func (s *Server) Restart(ctx context.Context) error {
	return s.closeSockets(ctx, closeRestart)
}

// closeSockets refuses new WebSockets and closes the open ones with why.
func (s *Server) closeSockets(ctx context.Context, why closeReason) error {
	s.mu.Lock()
	if !s.closing {
		s.closing, s.closeWith = true, why
	}
	j, ln := s.janitor, s.listener
	s.janitor, s.listener = nil, nil
	open := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		open = append(open, c)
	}
	s.mu.Unlock()
	if j != nil {
		j.stop()
	}
	if ln != nil {
		ln.stop()
	}
	s.overview.stop()
	s.checker.stop()
	s.live.stop()

	var closers sync.WaitGroup
	for _, c := range open {
		closers.Add(1)
		go func() {
			defer closers.Done()
			c.close(why)
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

// Ready reports whether the server can take changes: it is not shutting
// down, its store takes writes and, with other replicas, it hears their
// changes. For a readiness probe: it answers within readyTimeout whatever
// the database does, and ctx only bounds the wait (the probe has its own).
func (s *Server) Ready(ctx context.Context) error {
	s.mu.Lock()
	closing, ln := s.closing, s.listener
	s.mu.Unlock()
	if closing {
		return errShuttingDown
	}
	if ln != nil && !ln.connected.Load() {
		return errNotListening
	}
	if err := s.ready.probe(ctx, s.cfg.Store, min(readyTimeout, s.cfg.StoreTimeout), s.writes); err != nil {
		return fmt.Errorf("the store does not take writes: %w", err)
	}
	return nil
}

// SessionIDs lists the sessions the server holds, sorted.
func (s *Server) SessionIDs() []string {
	s.mu.Lock()
	ids := make([]string, 0, len(s.sessions))
	for id := range s.sessions {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	slices.Sort(ids)
	return ids
}

func (s *Server) sessionCount() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return float64(len(s.sessions))
}

// getOrCreate returns session id, making it in memory on first use
// (students' connections make sessions; their first change stores them,
// see reserve). A new one is refused while the stored sessions are at the
// cap, since its first change could not be stored. Called with mu held.
func (s *Server) getOrCreate(id string) (*session, error) {
	sess, ok := s.lookup(id)
	switch {
	case ok:
		return sess, nil
	case s.sessions[id] != nil:
		return nil, errSessionExpiring
	case s.stored >= s.cfg.MaxSessions:
		return nil, errTooManySessions
	}
	sess = newSession(id, &s.cfg, s.metrics, s.frames, s.overview.mark)
	s.hook(sess)
	s.sessions[id] = sess
	return sess, nil
}

// hook connects a session to the Server (its addresses' allowances, class
// memberships, stale marks and code checker), in place of newSession's
// stand-alone defaults.
func (s *Server) hook(sess *session) {
	sess.reserve, sess.unreserve = s.reserve, s.unreserve
	sess.renameMember = s.renameMember
	sess.stale = s.markStale
	sess.check, sess.earlier = s.checker.enqueue, s.checker.remember
	sess.group = func(id, addr string) string { return s.payer(id, addr).Key }
	sess.changing = s.checker.class.mark
}

// holdStored adds a session read from the store (at Start, or made by
// another replica). Stored sessions are counted; whose address made them is
// not stored, so none is charged for them. Called with mu held.
func (s *Server) holdStored(sess *session) {
	sess.stored = true
	s.hook(sess)
	s.stored++
	s.sessions[sess.id] = sess
	if sess.code.in.Submissions > 0 && sess.code.result == nil {
		// Read from the log, not yet shared: its result is computed again.
		s.checker.remember(sess, sess.code.unseen)
		sess.code.unseen = nil
		s.checker.enqueue(sess, "", sess.code.in) // no address: a group of its own
	}
}

// lookup is the one session lookup: a session the janitor is deleting is
// not found. Called with mu held.
func (s *Server) lookup(id string) (*session, bool) {
	sess, ok := s.sessions[id]
	if !ok || sess.expiring {
		return nil, false
	}
	return sess, true
}

// find returns an existing session and never creates one: instructors
// only see and change the sessions students made.
func (s *Server) find(id string) (*session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lookup(id)
}

// allSessions returns the sessions ordered by id.
func (s *Server) allSessions() []*session {
	s.mu.Lock()
	all := make([]*session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		all = append(all, sess)
	}
	s.mu.Unlock()
	slices.SortFunc(all, func(a, b *session) int { return strings.Compare(a.id, b.id) })
	return all
}

// attach registers c, unless the server is closing, so that shutdown
// closes it and waits for its handler. When it is closing, attach closes
// the connection the way the others were.
func (s *Server) attach(c *conn) bool {
	s.mu.Lock()
	if s.closing {
		why := s.closeWith
		s.mu.Unlock()
		why.closeConn(c.ws)
		return false
	}
	defer s.mu.Unlock()
	s.conns[c] = struct{}{}
	s.handlers.Add(1)
	return true
}

// hold counts a handler that has upgraded ws but has no conn (yet), so
// that Shutdown waits for it. When the server is closing it closes ws the
// way the others were and returns false. The caller calls handlers.Done.
func (s *Server) hold(ws *websocket.Conn) bool {
	s.mu.Lock()
	if s.closing {
		why := s.closeWith
		s.mu.Unlock()
		why.closeConn(ws)
		return false
	}
	defer s.mu.Unlock()
	s.handlers.Add(1)
	return true
}

// isClosing reports whether Shutdown or Restart has begun.
func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

func (s *Server) detach(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
}

// newConn wraps an accepted WebSocket.
func (s *Server) newConn(ws *websocket.Conn, role model.Actor, log *slog.Logger) *conn {
	return &conn{ws: ws, role: role, log: log, metrics: s.metrics, writeTimeout: s.cfg.WriteTimeout, born: time.Now(),
		limit: newFrameLimit(s.cfg.FrameRate, s.cfg.FrameBurst), out: newOutbox(s.cfg.MaxConnOutboxBytes, s.outbox), bufs: s.readBufs}
}
