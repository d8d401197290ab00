package server

import (
	"github.com/labstack/echo/v4"
	echomw "github.com/labstack/echo/v4/middleware"

	"github.com/toolcall-lab/lab/internal/middleware"
	"github.com/toolcall-lab/lab/static"
)

// routes registers every route of the lab, here and nowhere else. Errors of
// every route go through httpErrorHandler (errors.go): JSON for /api/*,
// /metrics, the probes and the WebSocket endpoints; an HTML page for the
// rest. A test walks each route with bad input (routes_test.go), so a new
// route needs a case there.
func (s *Server) routes() *echo.Echo {
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.httpErrorHandler
	e.IPExtractor = echo.ExtractIPDirect()
	if len(s.cfg.TrustedProxies) > 0 {
		opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
		for _, n := range s.cfg.TrustedProxies {
			opts = append(opts, echo.TrustIPRange(n))
		}
		e.IPExtractor = echo.ExtractIPFromXFFHeader(opts...)
	}
	// No Gzip or Timeout middleware: they break WebSocket upgrades.
	e.Use(echomw.Recover(), middleware.RequestLog(s.log), middleware.SecurityHeaders)

	// Students (student.go; docs/protocol.md).
	e.GET("/", s.newSession)
	e.GET("/lab/:id", s.studentPage)
	e.GET("/lab/:id/ws", s.studentSocket)
	e.GET("/lab/:id/diagram.svg", s.studentDiagram) // the student's own session drawn (diagram.go)
	e.StaticFS("/static", static.Files)
	e.GET("/exercise.json", s.exerciseSteps) // the nine steps' texts (exercise.go)

	// Operations (ops.go; README "Operations", docs/metrics.md).
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	e.GET("/metrics", echo.WrapHandler(s.metrics.handler()), s.bearer(s.cfg.MetricsToken, "metrics"))

	// Instructors (auth.go, instructor.go; docs/instructor.md).
	e.GET("/instructor/login", s.loginPage)
	e.POST("/instructor/login", s.login)
	e.POST("/instructor/logout", s.logout)
	e.GET("/instructor", s.openLabPage, s.requireInstructor)
	e.GET("/instructor/ws", s.instructorSocket, s.requireInstructor)

	// Classes (classes.go, join.go, grants.go; docs/classes.md).
	e.GET("/join", s.joinCodeForm)
	e.GET("/j/:code", s.joinNameForm)
	e.POST("/j/:code", s.join)
	e.GET("/lab/:id/class", s.sessionClass)
	e.GET("/instructor/classes/:id", s.classPage(func(s *Server) []byte { return s.instructorHTML }), s.requireInstructor)
	e.GET("/instructor/classes/:id/projector", s.classPage(func(s *Server) []byte { return s.projectorHTML }), s.requireInstructor)
	e.POST("/api/classes", s.createClass, s.requireInstructor, serverWide)
	e.GET("/api/classes", s.listClasses, s.requireInstructor, serverWide)
	e.GET("/api/classes/:id", s.getClass, s.requireInstructor)
	e.POST("/api/classes/:id/close", s.setClassOpen(false), s.requireInstructor)
	e.POST("/api/classes/:id/reopen", s.setClassOpen(true), s.requireInstructor)
	e.POST("/api/classes/:id/settings", s.classSettings, s.requireInstructor)
	e.POST("/api/classes/:id/key", s.rotateKey, s.requireInstructor, serverWide)
	e.DELETE("/api/classes/:id", s.deleteClass, s.requireInstructor, serverWide)
	e.GET("/api/classes/:id/qr.png", s.classQR, s.requireInstructor)
	e.GET("/api/classes/:id/export.csv", s.exportClass, s.requireInstructor)
	e.GET("/api/classes/:id/grades.csv", s.classGrades, s.requireInstructor) // grades.go
	e.DELETE("/api/sessions/:id", s.deleteOne, s.requireInstructor)
	e.POST("/api/sessions/delete", s.deleteMany, s.requireInstructor)

	// The instructor's JSON API (api.go, export.go; docs/instructor.md,
	// docs/export.md). Not an echo.Group: a group's catch-all would answer
	// a wrong method 404 rather than 405.
	e.GET("/api/sessions", s.listSessions, s.requireInstructor, serverWide)
	e.GET("/api/sessions/:id", s.getSession, s.requireInstructor)
	e.POST("/api/inject", s.inject, s.requireInstructor)
	e.GET("/api/sessions/:id/export", s.exportSession, s.requireInstructor)
	e.GET("/api/sessions/:id/diagram.svg", s.diagramSVG, s.requireInstructor) // diagram.go
	e.GET("/api/sessions/:id/shiviz.log", s.shivizLog, s.requireInstructor)
	e.GET("/api/export.csv", s.exportCSV, s.requireInstructor, serverWide)
	e.GET("/api/grades.csv", s.exportGrades, s.requireInstructor, serverWide) // grades.go
	return e
}
