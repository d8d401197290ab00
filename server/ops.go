package server

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// The probes. Their own answers are plain text (probes read the status;
// the text is for people); /readyz says why it is not ready.

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
