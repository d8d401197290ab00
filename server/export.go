package server

import (
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/toolcall-lab/lab/store"
)

// The event log for review and grading (docs/export.md): instructor routes
// under /api.

// exportSession writes one session's events as JSON lines.
func (s *Server) exportSession(c echo.Context) error {
	id, err := sessionID(c)
	if err != nil {
		return err
	}
	if !grantFrom(c).allows(s.classOfSession(id)) {
		return errForbidden
	}
	ctx := c.Request().Context()
	recs, err := s.cfg.Store.Events(ctx, id)
	if err != nil {
		return failed(errDataUnreadable, "exporting session "+id, err)
	}
	_, held := s.find(id)
	if len(recs) == 0 && !held {
		return fmt.Errorf("%w %s", errUnknownSession, id)
	}
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, "application/x-ndjson")
	h.Set("Content-Disposition", `attachment; filename="lab-`+id+`.jsonl"`)
	h.Set("Cache-Control", "no-store")
	c.Response().WriteHeader(http.StatusOK)
	if err := store.WriteJSONLines(c.Response(), recs); err != nil {
		s.cfg.Logger.Warn("exporting a session", "session", id, "err", err)
	}
	return nil
}

// exportCSV writes every stored session's events as CSV, one row per event.
func (s *Server) exportCSV(c echo.Context) error {
	sessions, err := s.cfg.Store.Sessions(c.Request().Context())
	if err != nil {
		return failed(errDataUnavailable, "exporting sessions", err)
	}
	return s.writeCSV(c, "lab-events.csv", sessions)
}

// writeCSV answers with the events of sessions as CSV (docs/export.md).
// Sessions are read one at a time; a read failure after the header has gone
// out can only cut the body short, and is logged.
func (s *Server) writeCSV(c echo.Context, filename string, sessions []store.Session) error {
	ctx := c.Request().Context()
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, "text/csv; charset=utf-8")
	h.Set("Content-Disposition", `attachment; filename="`+filename+`"`)
	h.Set("Cache-Control", "no-store")
	c.Response().WriteHeader(http.StatusOK)
	w, err := store.NewCSV(c.Response())
	for i := 0; err == nil && i < len(sessions); i++ {
		var recs []store.Record
		if recs, err = s.cfg.Store.Events(ctx, sessions[i].ID); err == nil {
			err = w.Write(sessions[i], recs)
		}
	}
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		s.log.Warn("exporting sessions as CSV", "file", filename, "err", err)
	}
	return nil
}
