package server

import (
	"fmt"
	"net/http"
	"time"

	"github.com/coder/websocket"
	"github.com/labstack/echo/v4"

	"github.com/toolcall-lab/lab/model"
)

// The instructor's console page and WebSocket (docs/instructor.md), both
// behind requireInstructor (auth.go).

// instructorPage serves the console.
func (s *Server) instructorPage(c echo.Context) error {
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.HTMLBlob(http.StatusOK, s.instructorHTML)
}

// instructorSocket upgrades to the instructor WebSocket, with the same
// checks as the student one. ?class=<id> scopes it to that class (its
// overview, and the sessions it may watch); without, it is the open lab's,
// which only the server's token reaches.
func (s *Server) instructorSocket(c echo.Context) error {
	if err := s.checkUpgrade(c.Request()); err != nil {
		return err
	}
	scope := c.QueryParam("class")
	if scope != "" {
		if _, err := s.grantedClass(c, scope); err != nil {
			return err
		}
	} else if !grantFrom(c).all {
		return errForbidden
	}
	if s.isClosing() {
		c.Response().Header().Set("Retry-After", "1")
		return errClosing
	}
	ws, err := s.accept(c)
	if err != nil {
		return nil // Accept has written the response
	}
	s.serveInstructor(ws, c.RealIP(), scope)
	return nil
}

// serveInstructor runs one instructor connection to its end: the overview
// from the start, and the one session it watches.
func (s *Server) serveInstructor(ws *websocket.Conn, remote, scope string) {
	ws.SetReadLimit(maxInstructorFrame)
	log := s.log.With("role", "instructor", "remote", remote)
	c := s.newConn(ws, model.Instructor, log)
	if !s.attach(c) {
		return
	}
	defer s.handlers.Done()
	opened := time.Now()
	gauge := s.metrics.connections.WithLabelValues(model.Instructor.String())
	gauge.Inc()
	log.Info("websocket open")
	s.overview.subscribe(c, scope)
	var watched *session // owned by this goroutine
	err := c.instructorLoop(s, scope, &watched)
	if watched != nil {
		watched.unwatch(c)
	}
	s.overview.unsubscribe(c)
	c.stop()
	ws.CloseNow()
	s.detach(c)
	gauge.Dec()
	log.Info("websocket closed", "code", c.closeCode(err), "duration", time.Since(opened).Round(time.Millisecond))
}

// instructorLoop reads an instructor's frames until the connection closes:
// watch one session (replacing the one watched before) or stop watching.
// *watched is the session watched now; the caller unwatches it at the end.
// Only sessions of the connection's scope (a class, or "" for the open lab)
// can be watched.
func (c *conn) instructorLoop(s *Server, scope string, watched **session) error {
	for {
		data, err := c.nextText()
		if err != nil {
			return err
		}
		cmd, err := decodeInstructorFrame(*data) // keeps no byte of data
		c.bufs.put(data)
		if err != nil {
			c.metrics.frameIn("invalid")
			c.sendError(err)
			continue
		}
		c.metrics.frameIn(cmd.typ)
		if *watched != nil {
			(*watched).unwatch(c)
			*watched = nil
		}
		if cmd.typ != "watch" {
			continue
		}
		sess, ok := s.find(cmd.session)
		if !ok || s.classOfSession(cmd.session) != scope {
			c.sendError(fmt.Errorf("%w %s", errUnknownSession, cmd.session))
			continue
		}
		sess.watch(c)
		*watched = sess
	}
}
