package server

import (
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
)

// requireInstructor lets through requests that carry
// "Authorization: Bearer <Config.InstructorToken>". With no token configured
// every request is refused: instructor data is never open by default.
func (s *Server) requireInstructor(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		want := s.cfg.InstructorToken
		got, ok := strings.CutPrefix(c.Request().Header.Get("Authorization"), "Bearer ")
		if want == "" || !ok || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
			c.Response().Header().Set("WWW-Authenticate", `Bearer realm="lab instructor"`)
			return echo.NewHTTPError(http.StatusUnauthorized, "instructor token required")
		}
		return next(c)
	}
}
