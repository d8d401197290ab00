package server

import (
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/coder/websocket"
	"github.com/labstack/echo/v4"

	"github.com/toolcall-lab/lab/model"
)

// The one vocabulary of what clients are told when something is refused:
// refusals are Errors (their reason word, HTTP status and sentence), all
// declared here; classify turns one into the WebSocket error frame's and
// the injection results' reason and text, httpErrorHandler into an HTTP
// answer (JSON or an HTML page, as the route's group chose in routes.go),
// and the closeReason table lists the WebSocket closes.

// Error is a refusal a client reads: a stable reason word (for programs
// and metrics: what a refused change's error frame and injection result
// say, which docs/protocol.md and docs/instructor.md list; the words of
// refusals only requests get, such as forbidden, no answer shows), the
// HTTP status a request refused with it gets, and the sentence people read.
// A sentinel wrapped with more words (fmt.Errorf("%w: …", errX)) keeps its
// reason and status, and the client reads the longer sentence. One built by
// failed carries the store failure behind it: that cause is logged, never
// shown.
type Error struct {
	Reason string
	Status int
	Text   string
	of     *Error // the sentinel this one is a case of (errors.Is finds it)
	cause  error  // what went wrong underneath: logged, never shown
}

func (e *Error) Error() string { return e.Text }

func (e *Error) Unwrap() []error {
	var out []error
	if e.of != nil {
		out = append(out, e.of)
	}
	if e.cause != nil {
		out = append(out, e.cause)
	}
	return out
}

// sentinel is a refusal declared below.
func sentinel(reason string, status int, text string) *Error {
	return &Error{Reason: reason, Status: status, Text: text}
}

// narrower is a case of e with a status of its own and more words.
func (e *Error) narrower(status int, more string) *Error {
	return &Error{Reason: e.Reason, Status: status, Text: e.Text + more, of: e}
}

// failed is the one way a store failure becomes a refusal: the client
// reads e (a "store" Error, 503); what and cause are logged where the
// refusal is answered (classify, httpErrorHandler).
func failed(e *Error, what string, cause error) error {
	return &Error{Reason: e.Reason, Status: e.Status, Text: e.Text, of: e, cause: fmt.Errorf("%s: %w", what, cause)}
}

// requestErrorf refuses one HTTP request with a status and a sentence of
// its own (a bad body, a missing field). It has no reason word: only
// requests are refused with it, never changes.
func requestErrorf(status int, format string, args ...any) error {
	return &Error{Status: status, Text: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) error {
	return requestErrorf(http.StatusBadRequest, format, args...)
}

// badFrame refuses a client frame that does not fit the protocol; its text
// goes to the client as is (conn.sendError, session.refuse).
func badFrame(format string, args ...any) error {
	return &Error{Reason: "invalid_frame", Status: http.StatusBadRequest, Text: fmt.Sprintf(format, args...)}
}

// ---- refusals of changes (and of the requests that carry them) --------------

// errSessionBusy refuses a command when a session already has too many
// changes waiting to be applied.
var errSessionBusy = sentinel("busy", http.StatusServiceUnavailable, "too many changes are waiting in this session; try again in a moment")

// errTooManyFrames refuses a frame over the connection's rate limit.
var errTooManyFrames = sentinel("rate_limit", http.StatusTooManyRequests, "too many frames")

// errDrawingBusy refuses a diagram while as many are being drawn as the
// server draws at once (diagram.go).
var errDrawingBusy = sentinel("busy", http.StatusServiceUnavailable, "the lab is busy drawing diagrams; try again shortly")

// errCodeRate refuses a submitCode frame past the session's allowance, or
// a play past its payer's (limits.go); the error says when to try again
// (retryIn).
var errCodeRate = sentinel("rate_limit", http.StatusTooManyRequests, "too many programs checked lately")

// errLiveRate refuses a compile or typeAt frame past the connection's
// allowance of them (limits.go), which is apart from the checks'.
var errLiveRate = sentinel("rate_limit", http.StatusTooManyRequests, "the compiler is asked too often from this page: it answers again in a moment")

// errLiveBusy: the lab could not run a live compile (its sandbox would
// not start, or the lab is stopping).
var errLiveBusy = sentinel("busy", http.StatusServiceUnavailable, "the lab could not compile the program just now; it tries again at the next pause")

// errNoCompiler refuses a ReScript submission on a lab started without
// the ReScript compiler (docs/code.md, "Where the compiler comes from").
var errNoCompiler = sentinel("unavailable", http.StatusServiceUnavailable, "this lab has no ReScript compiler: write the module in JavaScript, or ask your teacher to install ReScript (npm install rescript@12.2.0 in the lab's folder) and restart the lab")

// errNoProgram refuses to play a trace on a session that has submitted
// no program, and errCannotPlay one the lab could not start a sandbox for.
var (
	errNoProgram  = sentinel("no_program", http.StatusConflict, "this session has no program to play: write one and press Check first")
	errCannotPlay = sentinel("busy", http.StatusServiceUnavailable, "the lab could not run the program just now; try again")
)

// errNoFailure answers a failing trace's drawing for a session whose
// program has no failure (none submitted, being checked, or passing).
var errNoFailure = sentinel("no_failure", http.StatusNotFound, "this session's program has no failing case to draw")

// errUnknownSession refuses an instructor's request for a session the server
// does not hold (instructors never create sessions).
var errUnknownSession = sentinel("unknown_session", http.StatusNotFound, "unknown session")

// errTooManySessions refuses a new session past Config.MaxSessions or
// Config.MaxAddrSessions.
var errTooManySessions = sentinel("full", http.StatusServiceUnavailable, "the lab has reached its limit of stored sessions; ask your instructor")

// errSessionExpiring refuses a connection to a session the janitor is
// deleting at this very moment; a retry gets a fresh session.
var errSessionExpiring = sentinel("expiring", http.StatusServiceUnavailable, "this session expired and is being removed; try again shortly")

// errPredictionRequired refuses a student's delivery without a prediction
// in a session whose class requires predictions (Server.RequirePredictions).
var errPredictionRequired = sentinel("prediction_required", http.StatusBadRequest, `say what you expect before delivering: add "predict" (accepted, ignored, unresolved or diagnostic)`)

// errNameTaken refuses a class member's rename to a name another member of
// the class has (compared as at the door: store.NameKey).
var errNameTaken = sentinel("name_taken", http.StatusConflict, "someone in this class already has that name; add an initial or a number to yours")

// errNameRequired refuses a class member's rename to a blank name: a class
// needs names (the door asks for one).
var errNameRequired = sentinel("invalid_name", http.StatusBadRequest, "in a class your name cannot be empty: type your name")

// The refusals of package model, which knows no HTTP: their reason words
// and statuses (modelRefusal); their sentences are the model's errors'.
var (
	errLimit         = sentinel("limit", http.StatusRequestEntityTooLarge, "")
	errUnknownMsg    = sentinel("unknown_message", http.StatusNotFound, "")
	errInvalidName   = sentinel("invalid_name", http.StatusBadRequest, "")
	errNotApplicable = sentinel("not_applicable", http.StatusConflict, "")
	errInvalidCase   = sentinel("invalid_case", http.StatusBadRequest, "")
	errUnknownCase   = sentinel("unknown_case", http.StatusNotFound, "")
)

// ---- the store failed ---------------------------------------------------------
// Built with failed, which keeps the cause for the log.

// errCannotSave refuses a change the store could not commit.
var errCannotSave = sentinel("store", http.StatusServiceUnavailable, "the lab cannot save right now; try again shortly")

// errCannotRead refuses to show a session's timeline when the store could
// not be read.
var errCannotRead = sentinel("store", http.StatusServiceUnavailable, "the lab cannot read this session's history right now; try again shortly")

// errDataUnavailable refuses a class request whose data the store failed
// to read or write; errDataUnreadable an export or grades the store
// failed to read.
var (
	errDataUnavailable = sentinel("store", http.StatusServiceUnavailable, "the lab cannot read or save its data right now; try again shortly")
	errDataUnreadable  = sentinel("store", http.StatusServiceUnavailable, "the lab cannot read its data right now; try again shortly")
)

// errCredentialsUnchecked: the store could not be read to check the
// request's credentials. Answered 503, not 401: a store outage must not
// send the console to the login form.
var errCredentialsUnchecked = sentinel("store", http.StatusServiceUnavailable, "the lab cannot check credentials right now; try again shortly")

// errLoginUnsaved: the store could not save a console login.
var errLoginUnsaved = sentinel("store", http.StatusServiceUnavailable, "the lab cannot save the login right now; try again shortly")

// ---- refusals of requests -------------------------------------------------------

// errForbidden refuses a request whose credentials do not reach its target.
var errForbidden = sentinel("forbidden", http.StatusForbidden, "these credentials do not give access to this: a class key opens its own class only")

// errForeignOrigin refuses a WebSocket handshake from a page of an origin
// that may not open one (the origin is added).
var errForeignOrigin = sentinel("forbidden", http.StatusForbidden, "this page's origin may not open the lab's WebSockets")

// errCredentialsRequired refuses a request for an instructor's route
// without instructor credentials (or with wrong ones); errTooManyFailures
// an address past its allowance of wrong ones.
var (
	errCredentialsRequired = sentinel("unauthorized", http.StatusUnauthorized, "instructor credentials required: log in at /instructor/login or send Authorization: Bearer <token>")
	errTooManyFailures     = sentinel("rate_limit", http.StatusTooManyRequests, "too many wrong instructor credentials from your address: wait a moment and try again")
)

// errNotUpgrade refuses a request for a WebSocket endpoint that is not a
// WebSocket handshake.
var errNotUpgrade = sentinel("invalid_request", http.StatusUpgradeRequired, "this address takes a WebSocket upgrade")

// errNotSessionID answers a session address whose id is not a session UUID.
var errNotSessionID = sentinel("unknown_session", http.StatusNotFound, "no lab session here: the address must end in a session UUID")

// errNoSuchClass answers a class id the store does not hold (or that is
// no class id at all).
var errNoSuchClass = sentinel("unknown_class", http.StatusNotFound, "no such class")

// errNotJSON refuses a request body not sent as application/json (which
// other sites' forms cannot send).
var errNotJSON = sentinel("invalid_request", http.StatusUnsupportedMediaType, "the body must be JSON, sent with Content-Type: application/json")

// errClosing refuses a new WebSocket before the upgrade while the server
// shuts down, so that a reconnecting page simply retries.
var errClosing = sentinel("shutting_down", http.StatusServiceUnavailable, "the lab server is shutting down; try again in a moment")

// ---- refusals of connections ----------------------------------------------------
// Answered with a close (refusalClose), or before the upgrade (errAddrFull).

// errLabFull refuses a connection past a connection cap (all, per session,
// per client address, or the address's rate of new ones).
var errLabFull = sentinel("full", http.StatusServiceUnavailable, "the lab is full right now")

// errAddrFull and errTabsFull are errLabFull for one client address (too
// many connections open, or opened lately) and for one session's tabs.
var (
	errAddrFull = errLabFull.narrower(http.StatusTooManyRequests, ": too many connections from your network")
	errTabsFull = errLabFull.narrower(http.StatusServiceUnavailable, ": this session has too many tabs open")
)

// ---- what ends a connection or the server's readiness ---------------------------

// errNotUTF8 ends a connection that sent a text frame that is not UTF-8.
var errNotUTF8 = sentinel("invalid_frame", http.StatusBadRequest, "closed: a text frame was not valid UTF-8")

// errRateAbuse ends a connection that kept sending over its rate limit.
var errRateAbuse = sentinel("rate_limit", http.StatusTooManyRequests, "closed: kept sending over the frame rate limit")

// Two errors are no refusals, and no client reads them: errWriteTimeout
// is a write that did not finish within the write timeout (the connection
// is dropped), errAnswered says a join handler has already written its page
// (join.go).
var (
	errWriteTimeout = errors.New("the write timed out")
	errAnswered     = errors.New("answered")
)

// errShuttingDown refuses new connections once the server is closing.
var errShuttingDown = sentinel("shutting_down", http.StatusServiceUnavailable, "the lab is shutting down")

// errNotListening makes /readyz fail while a replica cannot hear the
// changes other replicas store (its listening connection is down).
var errNotListening = sentinel("not_listening", http.StatusServiceUnavailable, "not listening to the database's changes from other replicas")

// refusal is how a refused change is reported: a stable reason word (for
// programs and metrics) and the text people read.
type refusal struct {
	reason string
	text   string
}

// classify is the one place that turns an error into what a client reads:
// an Error's reason and sentence (the sentinel's alone when the store
// failed underneath, whose cause is logged). Errors that are not the
// client's to see are logged and hidden. The reason words are listed in
// docs/protocol.md and docs/instructor.md.
func classify(log *slog.Logger, err error) refusal {
	e := refusalOf(err)
	switch {
	case e == nil || e.Reason == "":
		log.Error("refusing a change", "err", err)
		return refusal{"internal", "internal error: the change was not applied"}
	case e.cause != nil:
		log.Warn("refusing a change: the store failed", "err", e.cause)
		return refusal{e.Reason, e.Text}
	}
	return refusal{e.Reason, err.Error()}
}

// refusalOf is the Error err is a case of, or nil.
func refusalOf(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return modelRefusal(err)
}

// modelRefusal is the Error of one of package model's refusals, or nil.
func modelRefusal(err error) *Error {
	var le *model.LimitError
	switch {
	case errors.As(err, &le):
		return errLimit
	case errors.Is(err, model.ErrUnknownMessage):
		return errUnknownMsg
	case errors.Is(err, model.ErrInvalidName):
		return errInvalidName
	case errors.Is(err, model.ErrPresetNotApplicable):
		return errNotApplicable
	case errors.Is(err, model.ErrPredictionRequired):
		return errPredictionRequired
	case errors.Is(err, model.ErrInvalidCase):
		return errInvalidCase
	case errors.Is(err, model.ErrUnknownCase):
		return errUnknownCase
	}
	return nil
}

// closeReason is a WebSocket close the server sends: the code and the
// reason text the client reads (at most 123 bytes, the protocol's limit).
// Every close the server sends is one of these; docs/protocol.md lists them.
// Two closes are not the server's own: a frame over the hard cap is closed
// with 1009 by the WebSocket library (closeTooBig names it for the logs),
// and a connection whose write times out is dropped without a close frame
// (the client sees 1006).
type closeReason struct {
	code websocket.StatusCode
	text string
}

var (
	// closeShutdown: the server is stopping (SIGINT, Server.Shutdown).
	closeShutdown = closeReason{websocket.StatusGoingAway, "the lab server is shutting down"}
	// closeRestart: the server is restarting (SIGTERM, Server.Restart).
	closeRestart = closeReason{websocket.StatusServiceRestart, "the lab server is restarting"}
	// closeRateAbuse: the connection kept sending over its frame rate limit.
	closeRateAbuse = closeReason{websocket.StatusPolicyViolation, "too many frames: kept sending over the frame rate limit"}
	// closeTooManyRefusals: more error frames waited than the connection read.
	closeTooManyRefusals = closeReason{websocket.StatusPolicyViolation, "too many refused frames; reconnect to resync"}
	// closeDeleted: an instructor deleted the session (docs/classes.md).
	closeDeleted = closeReason{4001, "an instructor deleted this session"}
	// closeTooSlow: the frames waiting for the connection passed its byte
	// budget, or all connections' together did (Config.MaxConnOutboxBytes,
	// MaxOutboxBytes).
	closeTooSlow = closeReason{websocket.StatusPolicyViolation, "too slow: more frames waited than the lab keeps for one connection; reconnect to resync"}
	// closeInvalidUTF8: a text frame was not UTF-8 (RFC 6455 §8.1).
	closeInvalidUTF8 = closeReason{websocket.StatusInvalidFramePayloadData, "a text frame was not valid UTF-8"}
	// closeTooBig: a frame over the hard cap; the library sends it.
	closeTooBig = closeReason{websocket.StatusMessageTooBig, "read limited at … bytes"}

	// The refusals of a connection the lab cannot take: the upgrade is
	// accepted and closed at once with 1013 (try again later) and one of
	// these, so that the page can say why (a browser cannot read a failed
	// upgrade's answer). The page shows the reason and retries later.
	closeFull        = closeReason{websocket.StatusTryAgainLater, "the lab is full right now; the page tries again by itself"}
	closeAddrFull    = closeReason{websocket.StatusTryAgainLater, "the lab is full right now: too many connections from your network; the page tries again"}
	closeSessionFull = closeReason{websocket.StatusTryAgainLater, "this session has too many tabs open; close one and the page tries again"}
	closeExpiring    = closeReason{websocket.StatusTryAgainLater, "this session expired and is being removed; the page tries again"}
	// closeStore: the session's log could not be read (another replica's
	// session, or this replica's copy to bring up to date), so the tab is
	// not shown a state that may be older than it had.
	closeStore = closeReason{websocket.StatusTryAgainLater, "the lab cannot read this session right now; the page tries again"}
)

// closeConn closes ws with r.
func (r closeReason) closeConn(ws *websocket.Conn) {
	ws.Close(r.code, r.text)
}

// refusalClose is the close that refuses a connection admit or openConn
// refused with err.
func refusalClose(err error) closeReason {
	switch {
	case errors.Is(err, errSessionExpiring):
		return closeExpiring
	case errors.Is(err, errAddrFull):
		return closeAddrFull
	case errors.Is(err, errTabsFull):
		return closeSessionFull
	case errors.Is(err, errCannotRead):
		return closeStore
	}
	return closeFull
}

// apiErrorBody is every JSON error: {"error": "…"}.
type apiErrorBody struct {
	Error string `json:"error"`
}

// isUpgrade reports whether r asks for a WebSocket.
func isUpgrade(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// errorRenderer is how a group of routes answers its errors. routes.go
// chooses one for each group it registers (routeGroup), so that a route's
// errors are JSON or a page because of the group it is in.
type errorRenderer int

const (
	pageErrors errorRenderer = iota // a small HTML page (errorPage), for people
	jsonErrors                      // {"error": "…"}, for programs (and WebSockets, whose body no browser shows)
	// downloadErrors is for a file a person may open by following a link
	// (a CSV export): a page when the request prefers HTML, as a browser's
	// navigation does, else JSON. of resolves it for each request.
	downloadErrors
)

// prefersHTML reports whether r's Accept header ranks text/html above
// application/json and above */*: a browser navigating (text/html first,
// */* at a lower q) does; fetch and curl (*/* alone) do not.
func prefersHTML(r *http.Request) bool {
	html, json, any := -1.0, -1.0, -1.0
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		media, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		q := 1.0
		for _, p := range strings.Split(params, ";") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(p), "q="); ok {
				if f, err := strconv.ParseFloat(v, 64); err == nil {
					q = f
				}
			}
		}
		switch strings.ToLower(strings.TrimSpace(media)) {
		case "text/html", "application/xhtml+xml":
			html = max(html, q)
		case "application/json":
			json = max(json, q)
		case "*/*":
			any = max(any, q)
		}
	}
	return html > 0 && html > json && html > any
}

// write answers status with msg.
func (r errorRenderer) write(c echo.Context, status int, msg string) error {
	if r == jsonErrors {
		return c.JSON(status, apiErrorBody{msg})
	}
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().WriteHeader(status)
	return errorPage.Execute(c.Response(), struct {
		Status int
		Title  string
		Text   string
	}{status, http.StatusText(status), msg})
}

// errorRenderers is which renderer answers each route's errors, as the
// groups registered them. Filled by routes before serving, then only read.
type errorRenderers struct {
	byRoute  map[string]errorRenderer // by echo's route path
	byPrefix map[string]errorRenderer // a group's prefix: for paths under it that nothing serves
}

// of is the renderer of c's route, downloadErrors resolved for c's
// request. Echo names the route for a wrong method
// too (it answers 405 with the route's path). A path nothing serves is
// answered by the group whose prefix holds it; else a WebSocket handshake
// gets JSON (its caller is a program, or a browser that never shows the
// body), anything else a page.
func (t *errorRenderers) of(c echo.Context) errorRenderer {
	if r, ok := t.byRoute[c.Path()]; ok {
		if r == downloadErrors {
			r = jsonErrors
			if prefersHTML(c.Request()) {
				r = pageErrors
			}
		}
		return r
	}
	p := c.Request().URL.Path
	for prefix, r := range t.byPrefix {
		if p == prefix || strings.HasPrefix(p, prefix+"/") {
			return r
		}
	}
	if isUpgrade(c.Request()) {
		return jsonErrors
	}
	return pageErrors
}

// routeGroup registers routes whose errors one renderer answers: the
// group a route is registered in, not its path, decides whether its
// errors are JSON or a page (routes.go).
type routeGroup struct {
	e      *echo.Echo
	prefix string
	render errorRenderer
	table  *errorRenderers
}

// routeGroup starts a group of routes under prefix ("" for none) whose
// errors render answers, unknown paths under a non-empty prefix included.
func (s *Server) routeGroup(e *echo.Echo, prefix string, render errorRenderer) routeGroup {
	t := &s.renderers
	if t.byRoute == nil {
		t.byRoute, t.byPrefix = map[string]errorRenderer{}, map[string]errorRenderer{}
	}
	if prefix != "" {
		t.byPrefix[prefix] = render
	}
	return routeGroup{e: e, prefix: prefix, render: render, table: t}
}

// rendering is g's routes with another renderer, under the same prefix
// (whose unknown paths g's renderer still answers).
func (g routeGroup) rendering(render errorRenderer) routeGroup {
	g.render = render
	return g
}

func (g routeGroup) GET(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	g.add(g.e.GET(g.prefix+path, h, m...))
}

func (g routeGroup) POST(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	g.add(g.e.POST(g.prefix+path, h, m...))
}

func (g routeGroup) DELETE(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	g.add(g.e.DELETE(g.prefix+path, h, m...))
}

// StaticFS serves fsys under path.
func (g routeGroup) StaticFS(path string, fsys fs.FS) {
	g.add(g.e.StaticFS(g.prefix+path, fsys))
}

func (g routeGroup) add(r *echo.Route) {
	if old, ok := g.table.byRoute[r.Path]; ok && old != g.render {
		panic("route " + r.Path + " registered in two groups with different error renderers")
	}
	g.table.byRoute[r.Path] = g.render
}

// httpErrorHandler is the one place an HTTP error becomes a response: the
// status and sentence of an Error (the sentinel's alone when the store
// failed underneath, whose cause is logged) or of echo's *HTTPError (which
// the router and middleware return), written by the route group's
// renderer. Errors that are not the client's to see are logged and
// answered 500.
func (s *Server) httpErrorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	status, msg := http.StatusInternalServerError, "internal error"
	var he *echo.HTTPError
	switch e := refusalOf(err); {
	case e != nil && e.cause != nil:
		s.log.Error("answering a request: the store failed", "path", c.Request().URL.Path, "err", e.cause)
		status, msg = e.Status, e.Text
	case e != nil:
		status, msg = e.Status, err.Error()
	case errors.As(err, &he):
		status = he.Code
		if m, ok := he.Message.(string); ok && he.Internal == nil {
			msg = m
		} else {
			msg = strings.ToLower(http.StatusText(status))
		}
		switch status {
		case http.StatusNotFound:
			if m, ok := he.Message.(string); !ok || m == http.StatusText(status) {
				msg = "nothing here: " + c.Request().URL.Path
			}
		case http.StatusMethodNotAllowed:
			msg = c.Request().Method + " is not allowed here"
		}
	default:
		s.log.Error("answering a request", "path", c.Request().URL.Path, "err", err)
	}
	var werr error
	if c.Request().Method == http.MethodHead {
		werr = c.NoContent(status)
	} else {
		werr = s.renderers.of(c).write(c, status, msg)
	}
	if werr != nil {
		s.log.Warn("writing an error response", "path", c.Request().URL.Path, "err", werr)
	}
}

// errorPage is the page people see for an error: no script, the site's
// stylesheet, and a way back.
var errorPage = template.Must(template.New("error").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Status}} {{.Title}} · Tool-call Outcomes Lab</title>
<link rel="stylesheet" href="/static/lab.css">
</head>
<body>
<main>
<h1>{{.Status}} {{.Title}}</h1>
<p id="error">{{.Text}}</p>
<p><a href="/">Start a new lab session</a></p>
</main>
</body>
</html>
`))
