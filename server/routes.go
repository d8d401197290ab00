package server

import (
	"github.com/labstack/echo/v4"
	echomw "github.com/labstack/echo/v4/middleware"

	"github.com/toolcall-lab/lab/internal/middleware"
	"github.com/toolcall-lab/lab/static"
)

// routes registers every route of the lab, here and nowhere else, each in
// a group that chooses how its errors are answered (httpErrorHandler,
// errors.go): pages for people get an HTML page; the API (and any path
// under /api), the probes, /metrics, /exercise.json and the endpoints the
// student page and console fetch or upgrade get {"error": …} JSON. A test
// walks each route with bad input (routes_test.go), so a new route needs a
// case there.
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

	// Which routes' errors are pages and which JSON. Not echo.Groups: a
	// group's catch-all would answer a wrong method 404 rather than 405.
	pages := s.routeGroup(e, "", pageErrors)
	programs := s.routeGroup(e, "", jsonErrors)
	api := s.routeGroup(e, "/api", jsonErrors)
	// Files the console links to, which a person opens by following the
	// link: their errors are a page for a browser's navigation, JSON for
	// a program (downloadErrors).
	downloads := api.rendering(downloadErrors)

	// Students (student.go; docs/protocol.md).
	pages.GET("/", s.newSession)
	pages.GET("/lab/:id", s.studentPage)
	programs.GET("/lab/:id/ws", s.studentSocket)
	programs.GET("/lab/:id/diagram.svg", s.studentDiagram)         // the student's own session drawn (diagram.go)
	programs.GET("/lab/:id/code/failure.svg", s.studentFailureSVG) // the student's failing case drawn (code.go)
	programs.POST("/lab/:id/code/play", s.playSides)               // a trace played on the model and the student's program (cases.go)
	programs.POST("/lab/:id/code/cases", s.keepOwnCase)            // a case of the student's own (cases.go)
	pages.StaticFS("/static", static.Files)
	programs.GET("/exercise.json", s.exerciseSteps) // the nine steps' texts (exercise.go)
	programs.GET("/code.json", s.codeLanguages)     // the languages a module may be written in (code.go)

	// Operations (ops.go; README "Operations", docs/metrics.md).
	programs.GET("/healthz", s.healthz)
	programs.GET("/readyz", s.readyz)
	programs.GET("/metrics", echo.WrapHandler(s.metrics.handler()), s.bearer(s.cfg.MetricsToken, "metrics"))

	// Instructors (auth.go, instructor.go; docs/instructor.md).
	pages.GET("/instructor/login", s.loginPage)
	pages.POST("/instructor/login", s.login)
	pages.POST("/instructor/logout", s.logout)
	pages.GET("/instructor", s.openLabPage, s.requireInstructor)
	programs.GET("/instructor/ws", s.instructorSocket, s.requireInstructor)

	// Classes (classes.go, join.go, grants.go; docs/classes.md).
	pages.GET("/join", s.joinCodeForm)
	pages.GET("/j/:code", s.joinNameForm)
	pages.POST("/j/:code", s.join)
	programs.GET("/lab/:id/class", s.sessionClass)
	pages.GET("/instructor/classes/:id", s.classPage(func(s *Server) []byte { return s.instructorHTML }), s.requireInstructor)
	pages.GET("/instructor/classes/:id/projector", s.classPage(func(s *Server) []byte { return s.projectorHTML }), s.requireInstructor)
	api.POST("/classes", s.createClass, s.requireInstructor, serverWide)
	api.GET("/classes", s.listClasses, s.requireInstructor, serverWide)
	api.GET("/classes/:id", s.getClass, s.requireInstructor)
	api.POST("/classes/:id/close", s.setClassOpen(false), s.requireInstructor)
	api.POST("/classes/:id/reopen", s.setClassOpen(true), s.requireInstructor)
	api.POST("/classes/:id/settings", s.classSettings, s.requireInstructor)
	api.POST("/classes/:id/key", s.rotateKey, s.requireInstructor, serverWide)
	api.DELETE("/classes/:id", s.deleteClass, s.requireInstructor, serverWide)
	api.GET("/classes/:id/qr.png", s.classQR, s.requireInstructor)
	downloads.GET("/classes/:id/export.csv", s.exportClass, s.requireInstructor)
	downloads.GET("/classes/:id/grades.csv", s.classGrades, s.requireInstructor) // grades.go
	api.DELETE("/sessions/:id", s.deleteOne, s.requireInstructor)
	api.POST("/sessions/delete", s.deleteMany, s.requireInstructor)

	// The instructor's JSON API (api.go, export.go; docs/instructor.md,
	// docs/export.md).
	api.GET("/sessions", s.listSessions, s.requireInstructor, serverWide)
	api.GET("/sessions/:id", s.getSession, s.requireInstructor)
	api.POST("/inject", s.inject, s.requireInstructor)
	downloads.GET("/sessions/:id/export", s.exportSession, s.requireInstructor)
	api.GET("/sessions/:id/diagram.svg", s.diagramSVG, s.requireInstructor) // diagram.go
	downloads.GET("/sessions/:id/shiviz.log", s.shivizLog, s.requireInstructor)
	api.GET("/sessions/:id/code/failure.svg", s.sessionFailureSVG, s.requireInstructor) // code.go
	api.POST("/code/cases", s.addCases, s.requireInstructor)                            // cases.go
	api.GET("/code/cases", s.listCases, s.requireInstructor)                            // cases.go
	api.DELETE("/code/cases/:name", s.removeCases, s.requireInstructor)                 // cases.go
	downloads.GET("/export.csv", s.exportCSV, s.requireInstructor, serverWide)
	downloads.GET("/grades.csv", s.exportGrades, s.requireInstructor, serverWide) // grades.go
	return e
}
