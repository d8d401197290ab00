package server

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/toolcall-lab/lab/model"
)

// The student's routes (docs/protocol.md): a new session, its page and its
// WebSocket.

func (s *Server) newSession(c echo.Context) error {
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.Redirect(http.StatusSeeOther, "/lab/"+uuid.NewString())
}

// sessionID returns the path's id if it is a canonical UUID, as
// uuid.NewString prints it; any other id is answered 404.
func sessionID(c echo.Context) (string, error) {
	id := c.Param("id")
	if !canonicalID(id) {
		return "", errNotSessionID
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
// names no session yet makes it in memory; its first change stores it (see
// Server.reserve), so requests that change nothing leave nothing behind.
// What is not a handshake of an allowed origin, a server shutting down and
// an address with too many connections open are refused before the upgrade,
// as HTTP errors; the other refusals (the caps) accept the upgrade and close
// it with 1013 and a reason the page shows (refusalClose).
func (s *Server) studentSocket(c echo.Context) error {
	id, err := sessionID(c)
	if err != nil {
		return err
	}
	if err := s.checkUpgrade(c.Request()); err != nil {
		return err
	}
	if s.isClosing() {
		// Refused before the upgrade, so a reconnecting page simply retries.
		s.metrics.connectRefused.WithLabelValues("shutting_down").Inc()
		c.Response().Header().Set("Retry-After", "1")
		return errClosing
	}
	addr := c.RealIP()
	// A class's member counts in its class, sized by its members; anyone
	// else in their address (Server.payer).
	who := s.payer(id, addr)
	if !s.addrs.Enter(who.Key, s.cfg.MaxAddrConns*who.Scale) {
		s.metrics.connectRefused.WithLabelValues("address").Inc()
		c.Response().Header().Set("Retry-After", "10")
		return fmt.Errorf("%w (%d open, the most the lab takes from one address)", errAddrFull, s.cfg.MaxAddrConns)
	}
	// handedOver: the connection's goroutine leaves addr and ends the
	// hold instead (see the end).
	handedOver := false
	defer func() {
		if !handedOver {
			s.addrs.Leave(who.Key)
		}
	}()
	refused := s.allowNew(who)
	ws, err := s.accept(c)
	if err != nil {
		return nil // Accept has written the response
	}
	if !s.hold(ws) {
		return nil // closing: hold closed it the way the others were
	}
	defer func() {
		if !handedOver {
			s.handlers.Done()
		}
	}()
	var sess *session
	if refused == nil {
		_, held := s.find(id)
		if !held && s.shared() {
			// Another replica may have made it: read it from the store. A
			// log that cannot be read is not an empty session: the page
			// is told and tries again.
			_, refused = s.discover(c.Request().Context(), id)
		}
		if refused == nil {
			sess, refused = s.admit(id)
		}
		if refused == nil && held && s.shared() {
			// This replica's copy may be behind what the tab showed on
			// another one.
			if refused = sess.lookUp(); refused != nil {
				s.release(sess)
				sess = nil
			}
		}
	}
	if refused != nil {
		label := "full"
		switch {
		case errors.Is(refused, errAddrFull):
			label = "address"
		case errors.Is(refused, errCannotRead):
			label = "store"
		}
		s.metrics.connectRefused.WithLabelValues(label).Inc()
		why := refusalClose(refused)
		s.log.Info("websocket refused", "session", id, "remote", addr, "code", int(why.code), "err", refused)
		why.closeConn(ws)
		return nil
	}
	// The connection lives on a goroutine of its own, and this handler
	// returns (the socket is hijacked: net/http is done with it). A
	// handler's goroutine ends the upgrade with a stack grown by net/http,
	// Echo and its middleware to 16 KiB, which it would keep for the
	// connection's life; a new goroutine grows only to what the connection
	// needs (BENCHMARKS.md, idle connections). Server.handlers counts it
	// (it holds this handler's hold), so Shutdown waits for it.
	handedOver = true
	go func() {
		defer s.addrs.Leave(who.Key)
		defer s.handlers.Done()
		defer s.release(sess)
		s.serveStudent(ws, sess, addr)
	}()
	return nil
}

// serveStudent runs one admitted student connection to its end.
func (s *Server) serveStudent(ws *websocket.Conn, sess *session, remote string) {
	ws.SetReadLimit(s.cfg.MaxFrameBytes)
	log := s.log.With("session", sess.id, "role", model.Student.String(), "remote", remote)
	c := s.newConn(ws, model.Student, log)
	c.remote = remote
	c.live.svc = s.live
	defer s.live.drop(c)
	if !s.attach(c) {
		return
	}
	defer s.handlers.Done()
	opened := time.Now()
	gauge := s.metrics.connections.WithLabelValues(model.Student.String())
	gauge.Inc()
	log.Info("websocket open")
	c.deferFlush() // the first state is written by readLoop itself, before its first read: no goroutine for it
	sess.subscribe(c)
	err := c.readLoop(sess)
	sess.unsubscribe(c)
	c.stop()
	ws.CloseNow()
	s.detach(c)
	gauge.Dec()
	log.Info("websocket closed", "code", c.closeCode(err), "duration", time.Since(opened).Round(time.Millisecond))
}
