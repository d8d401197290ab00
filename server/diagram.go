package server

import (
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/toolcall-lab/lab/internal/diagramsvg"
	"github.com/toolcall-lab/lab/model"
)

// The session diagram (docs/instructor.md, "Diagrams"): a session's log
// drawn as a space-time diagram (internal/diagramsvg), for the console and
// the projector (the instructor's token, or the class key of the session's
// class), for the student's own page (the session's address grants it, as
// it grants the WebSocket), and as a ShiViz log (docs/export.md). Each is
// drawn from the whole log, read as the export reads it: the log is the
// truth, and a diagram kept in memory would cost every change for a page
// few open. A session's log is bounded by its event caps (Config.MaxEvents,
// Limits.MaxHeldBytes), so the drawing is too (docs/limits.md).

// diagramSVG answers GET /api/sessions/:id/diagram.svg: ?size=large for a
// projector, ?name=1 to put the student's name in the title.
func (s *Server) diagramSVG(c echo.Context) error {
	id, err := s.grantedSession(c)
	if err != nil {
		return err
	}
	o := diagramsvg.Options{}
	switch c.QueryParam("size") {
	case "", "normal":
	case "large":
		o.Size = diagramsvg.Large
	default:
		return badRequest(`size must be "normal" or "large"`)
	}
	switch c.QueryParam("name") {
	case "", "0":
	case "1":
		o.ShowName = true
	default:
		return badRequest(`name must be "0" or "1"`)
	}
	d, err := s.diagramOf(c, id)
	if err != nil {
		return err
	}
	return answerSVG(c, diagramsvg.Render(d, o))
}

// shivizLog answers GET /api/sessions/:id/shiviz.log.
func (s *Server) shivizLog(c echo.Context) error {
	id, err := s.grantedSession(c)
	if err != nil {
		return err
	}
	d, err := s.diagramOf(c, id)
	if err != nil {
		return err
	}
	h := c.Response().Header()
	h.Set("Content-Disposition", `attachment; filename="lab-`+id+`.shiviz.log"`)
	h.Set("Cache-Control", "no-store")
	return c.Blob(http.StatusOK, echo.MIMETextPlainCharsetUTF8, model.ShiVizLog(d))
}

// studentDiagram answers GET /lab/:id/diagram.svg, the student page's
// diagram of its own session: no name (the page is the student's own).
func (s *Server) studentDiagram(c echo.Context) error {
	id, err := sessionID(c)
	if err != nil {
		return err
	}
	d, err := s.diagramOf(c, id)
	if err != nil {
		return err
	}
	return answerSVG(c, diagramsvg.Render(d, diagramsvg.Options{}))
}

// grantedSession is the :id session, which the request's grant must reach
// (as the export's: 403 for another class's session).
func (s *Server) grantedSession(c echo.Context) (string, error) {
	id, err := sessionID(c)
	if err != nil {
		return "", err
	}
	if !grantFrom(c).allows(s.classOfSession(id)) {
		return "", errForbidden
	}
	return id, nil
}

// diagramOf reads session id's log and draws it. A session the server does
// not hold and the store has no event of is unknown (404); one held but
// not changed yet is the empty diagram.
func (s *Server) diagramOf(c echo.Context, id string) (model.Diagram, error) {
	ctx := c.Request().Context()
	select {
	case drawing <- struct{}{}:
		defer func() { <-drawing }()
	case <-ctx.Done():
		return model.Diagram{}, errDrawingBusy
	}
	recs, err := s.cfg.Store.Events(ctx, id)
	if err != nil {
		return model.Diagram{}, failed(errDataUnreadable, "reading session "+id+" for its diagram", err)
	}
	if _, held := s.find(id); len(recs) == 0 && !held {
		return model.Diagram{}, fmt.Errorf("%w %s", errUnknownSession, id)
	}
	b := model.NewDiagramBuilder()
	for _, r := range recs {
		if err := b.Add(model.DiagramEvent{Seq: r.Seq, At: r.Time, Event: r.Event}); err != nil {
			// The log replays on restart, so this is a damaged log: logged,
			// and answered 500 by httpErrorHandler.
			return model.Diagram{}, err
		}
	}
	return b.Diagram(), nil
}

// drawing bounds the diagrams read and drawn at once, in every server of
// the process: each holds a session's whole log and its drawing (at most a
// few MiB, docs/limits.md), so a page refreshing often, or many, wait
// their turn instead of adding up.
var drawing = make(chan struct{}, 4)

// answerSVG writes a drawing. It is the server's own markup with every
// text escaped; nosniff (securityHeaders) keeps it an image.
func answerSVG(c echo.Context, svg []byte) error {
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.Blob(http.StatusOK, "image/svg+xml; charset=utf-8", svg)
}
