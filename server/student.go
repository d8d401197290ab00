package server

import (
	"errors"
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
		return "", requestErrorf(http.StatusNotFound, "no lab session here: the address must end in a session UUID")
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
// Every refusal comes before the upgrade, as an HTTP error.
func (s *Server) studentSocket(c echo.Context) error {
	id, err := sessionID(c)
	if err != nil {
		return err
	}
	if err := s.checkUpgrade(c.Request()); err != nil {
		return err
	}
	if err := s.Ready(c.Request().Context()); errors.Is(err, errShuttingDown) {
		// Refused before the upgrade, so a reconnecting page simply retries.
		s.metrics.connectRefused.WithLabelValues("shutting_down").Inc()
		c.Response().Header().Set("Retry-After", "1")
		return requestErrorf(http.StatusServiceUnavailable, "the lab server is shutting down; try again in a moment")
	}
	sess, err := s.admit(id)
	if err != nil {
		s.metrics.connectRefused.WithLabelValues("full").Inc()
		c.Response().Header().Set("Retry-After", "5")
		return requestErrorf(http.StatusServiceUnavailable, "%s", err.Error())
	}
	defer s.release(sess)
	ws, err := websocket.Accept(c.Response(), c.Request(), &websocket.AcceptOptions{OriginPatterns: s.cfg.Origins})
	if err != nil {
		return nil // Accept has written the response
	}
	s.serveStudent(ws, sess, c.RealIP())
	return nil
}

// serveStudent runs one admitted student connection to its end.
func (s *Server) serveStudent(ws *websocket.Conn, sess *session, remote string) {
	ws.SetReadLimit(s.cfg.MaxFrameBytes)
	log := s.log.With("session", sess.id, "role", model.Student.String(), "remote", remote)
	c := s.newConn(ws, model.Student, log)
	if !s.attach(c) {
		return
	}
	defer s.handlers.Done()
	opened := time.Now()
	gauge := s.metrics.connections.WithLabelValues(model.Student.String())
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
