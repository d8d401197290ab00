package server

import (
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"strings"

	"github.com/coder/websocket"
	"github.com/labstack/echo/v4"

	"github.com/toolcall-lab/lab/model"
)

// The one vocabulary of what clients are told when something is refused:
// errors of changes (classify, the WebSocket error frame's reason word and
// the injection results), HTTP errors (httpErrorHandler: JSON or an HTML
// page, by route), and WebSocket closes (the closeReason table).

// errSessionBusy refuses a command when a session already has too many
// changes waiting to be applied.
var errSessionBusy = errors.New("too many changes are waiting in this session; try again in a moment")

// errUnknownSession refuses an instructor's request for a session the server
// does not hold (instructors never create sessions).
var errUnknownSession = errors.New("unknown session")

// errCannotSave refuses a change the store could not commit. Its text is
// all the client reads; the cause is logged.
var errCannotSave = errors.New("the lab cannot save right now; try again shortly")

// errCannotRead refuses to show a session's timeline when the store could
// not be read. Its text is all the client reads; the cause is logged.
var errCannotRead = errors.New("the lab cannot read this session's history right now; try again shortly")

// errTooManySessions refuses a new session past Config.MaxSessions or
// Config.MaxAddrSessions.
var errTooManySessions = errors.New("the lab has reached its limit of stored sessions; ask your instructor")

// errLabFull refuses a connection past a connection cap (all, per session,
// per client address, or the address's rate of new ones).
var errLabFull = errors.New("the lab is full right now")

// errAddrFull and errTabsFull are errLabFull for one client address (too
// many connections open, or opened lately) and for one session's tabs.
var (
	errAddrFull = fmt.Errorf("%w: too many connections from your network", errLabFull)
	errTabsFull = fmt.Errorf("%w: this session has too many tabs open", errLabFull)
)

// errNotUTF8 ends a connection that sent a text frame that is not UTF-8.
var errNotUTF8 = errors.New("closed: a text frame was not valid UTF-8")

// errSessionExpiring refuses a connection to a session the janitor is
// deleting at this very moment; a retry gets a fresh session.
var errSessionExpiring = errors.New("this session expired and is being removed; try again shortly")

// errPredictionRequired refuses a student's delivery without a prediction
// in a session whose class requires predictions (Server.RequirePredictions).
var errPredictionRequired = errors.New(`say what you expect before delivering: add "predict" (accepted, ignored, unresolved or diagnostic)`)

// errNameTaken refuses a class member's rename to a name another member of
// the class has (compared as at the door: store.NameKey).
var errNameTaken = errors.New("someone in this class already has that name; add an initial or a number to yours")

// errNameRequired refuses a class member's rename to a blank name: a class
// needs names (the door asks for one). Its reason is invalid_name.
var errNameRequired = errors.New("in a class your name cannot be empty: type your name")

// errShuttingDown refuses new connections once the server is closing.
var errShuttingDown = errors.New("the lab is shutting down")

// errNotListening makes /readyz fail while a replica cannot hear the
// changes other replicas store (its listening connection is down).
var errNotListening = errors.New("not listening to the database's changes from other replicas")

// refusal is how a refused change is reported: a stable reason word (for
// programs and metrics) and the text people read.
type refusal struct {
	reason string
	text   string
}

// classify is the one place that turns an error into what a client reads.
// Errors that are not the client's to see are logged and hidden. The reason
// words are listed in docs/protocol.md and docs/instructor.md.
func classify(log *slog.Logger, err error) refusal {
	var fe *frameError
	var le *model.LimitError
	switch {
	case errors.As(err, &fe):
		return refusal{"invalid_frame", err.Error()}
	case errors.As(err, &le):
		return refusal{"limit", err.Error()}
	case errors.Is(err, model.ErrUnknownMessage):
		return refusal{"unknown_message", err.Error()}
	case errors.Is(err, errSessionBusy):
		return refusal{"busy", err.Error()}
	case errors.Is(err, errTooManyFrames):
		return refusal{"rate_limit", err.Error()}
	case errors.Is(err, errCannotSave):
		log.Warn("refusing a change: the store failed", "err", err)
		return refusal{"store", errCannotSave.Error()}
	case errors.Is(err, errCannotRead):
		log.Warn("refusing a timeline: the store failed", "err", err)
		return refusal{"store", errCannotRead.Error()}
	case errors.Is(err, errNameRequired):
		return refusal{"invalid_name", err.Error()}
	case errors.Is(err, model.ErrInvalidName):
		return refusal{"invalid_name", err.Error()}
	case errors.Is(err, errNameTaken):
		return refusal{"name_taken", err.Error()}
	case errors.Is(err, model.ErrPresetNotApplicable):
		return refusal{"not_applicable", err.Error()}
	case errors.Is(err, errUnknownSession):
		return refusal{"unknown_session", err.Error()}
	case errors.Is(err, errTooManySessions):
		return refusal{"full", err.Error()}
	case errors.Is(err, errSessionExpiring):
		return refusal{"expiring", err.Error()}
	case errors.Is(err, errPredictionRequired):
		return refusal{"prediction_required", err.Error()}
	}
	log.Error("refusing a change", "err", err)
	return refusal{"internal", "internal error: the change was not applied"}
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

// requestError refuses an HTTP request with a status and the sentence the
// client reads. Handlers return it (or echo's *HTTPError, which the router
// and middleware return); httpErrorHandler shapes it for the route.
type requestError struct {
	status int
	msg    string
}

func (e *requestError) Error() string { return e.msg }

func requestErrorf(status int, format string, args ...any) error {
	return &requestError{status: status, msg: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) error {
	return requestErrorf(http.StatusBadRequest, format, args...)
}

// apiErrorBody is every JSON error: {"error": "…"}.
type apiErrorBody struct {
	Error string `json:"error"`
}

// answersJSON reports whether a request's errors are JSON rather than an
// HTML page: the API, /metrics, the probes, /exercise.json and the WebSocket endpoints
// (whose callers are programs, or browsers that never show the body).
// Everything else is a page for people.
func answersJSON(r *http.Request) bool {
	p := r.URL.Path
	return p == "/api" || strings.HasPrefix(p, "/api/") || p == "/metrics" || p == "/healthz" || p == "/readyz" || p == "/exercise.json" ||
		p == "/instructor/ws" || (strings.HasPrefix(p, "/lab/") && (strings.HasSuffix(p, "/ws") || strings.HasSuffix(p, "/class"))) ||
		isUpgrade(r)
}

// isUpgrade reports whether r asks for a WebSocket.
func isUpgrade(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// httpErrorHandler is the one place an HTTP error becomes a response:
// {"error": "…"} for JSON routes, a small HTML page for the others, with the
// status the handler chose. Errors that are not the client's to see are
// logged and answered 500.
func (s *Server) httpErrorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	status, msg := http.StatusInternalServerError, "internal error"
	var re *requestError
	var he *echo.HTTPError
	switch {
	case errors.As(err, &re):
		status, msg = re.status, re.msg
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
	switch {
	case c.Request().Method == http.MethodHead:
		werr = c.NoContent(status)
	case answersJSON(c.Request()):
		werr = c.JSON(status, apiErrorBody{msg})
	default:
		c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
		c.Response().WriteHeader(status)
		werr = errorPage.Execute(c.Response(), struct {
			Status int
			Title  string
			Text   string
		}{status, http.StatusText(status), msg})
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
