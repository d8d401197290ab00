package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/toolcall-lab/lab/server"
	"github.com/toolcall-lab/lab/store"
)

// answer is the shape a refused request must have, as the docs say:
// docs/instructor.md ("HTTP API": API errors), docs/protocol.md ("Refused
// upgrades"), docs/export.md.
type answer int

const (
	jsonError answer = iota // {"error": "<non-empty>"}, Content-Type application/json
	htmlPage                // an HTML error page with the status in its heading, no script
	redirect                // 303 See Other to location
	noBody                  // HEAD: the status only
	joinForm                // the join page again, with the reason and a form (docs/classes.md)
)

// badRequest is one request with bad input and what it must get.
type badRequest struct {
	name     string
	method   string
	path     string
	header   map[string]string
	body     string
	status   int
	answer   answer
	contains string // the error's text must contain this (if set)
	location string // for redirect
}

// Requests a route's cases may carry.
var (
	bearer      = map[string]string{"Authorization": "Bearer " + testToken}
	wrongBearer = map[string]string{"Authorization": "Bearer " + testToken + "x"}
	wrongCookie = map[string]string{"Cookie": "lab_instructor=not-a-login"}
)

// upgrade is a valid WebSocket handshake's headers, plus extra.
func upgrade(extra map[string]string) map[string]string {
	h := map[string]string{
		"Connection": "Upgrade", "Upgrade": "websocket",
		"Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
	}
	for k, v := range extra {
		h[k] = v
	}
	return h
}

func withBearer(extra map[string]string) map[string]string {
	h := map[string]string{"Authorization": "Bearer " + testToken}
	for k, v := range extra {
		h[k] = v
	}
	return h
}

// TestEveryRouteRefusesBadInput walks every registered route (the list
// comes from the server's router, so a new route without cases here fails)
// with bad input: unknown and non-UUID ids, bad bodies, wrong methods,
// missing and wrong credentials. Each answer's status and shape must be
// what the docs say: {"error": …} JSON for the API, the probes, /metrics
// and the WebSockets; an HTML page (or the login redirect) for pages.
func TestEveryRouteRefusesBadInput(t *testing.T) {
	t.Parallel()
	// Many wrong credentials on purpose, all from one address.
	lab, ts := runLab(t, server.Config{InstructorToken: testToken, MetricsToken: "metrics-token", AuthFailureBurst: 1000})
	unknown := newID()
	evilOrigin := map[string]string{"Origin": "https://evil.example"}
	// A class, whose key stands for credentials that do not reach the
	// server-wide routes or another class.
	class := createClass(t, ts, "Routes")
	classKey := map[string]string{"Authorization": "Bearer " + class.Key}
	keyJSON := map[string]string{"Authorization": "Bearer " + class.Key, "Content-Type": "application/json"}
	asJSON := withBearer(map[string]string{"Content-Type": "application/json"})
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	other := createClass(t, ts, "Other")
	unknownCode := "000000"
	for unknownCode == class.Code || unknownCode == other.Code {
		unknownCode = store.NewCode()
	}
	if status, _ := callJSON(t, ts, "POST", "/api/classes/"+other.ID+"/close", testToken, ""); status != 200 {
		t.Fatalf("closing a class: %d", status)
	}

	cases := map[string][]badRequest{
		"GET /": {
			{name: "wrong method", method: "POST", path: "/", status: 405, answer: htmlPage},
		},
		"GET /lab/:id": {
			{name: "not a UUID", method: "GET", path: "/lab/nope", status: 404, answer: htmlPage, contains: "session UUID"},
			{name: "upper-case UUID", method: "GET", path: "/lab/" + strings.ToUpper(unknown), status: 404, answer: htmlPage},
			{name: "wrong method", method: "DELETE", path: "/lab/" + unknown, status: 405, answer: htmlPage},
			{name: "HEAD (not served)", method: "HEAD", path: "/lab/nope", status: 405, answer: noBody},
		},
		"GET /lab/:id/ws": {
			{name: "not a UUID", method: "GET", path: "/lab/nope/ws", header: upgrade(nil), status: 404, answer: jsonError},
			{name: "not an upgrade", method: "GET", path: "/lab/" + unknown + "/ws", status: 426, answer: jsonError, contains: "WebSocket"},
			{name: "foreign origin", method: "GET", path: "/lab/" + unknown + "/ws", header: upgrade(evilOrigin), status: 403, answer: jsonError, contains: "origin"},
			{name: "wrong method", method: "POST", path: "/lab/" + unknown + "/ws", status: 405, answer: jsonError},
		},
		"GET /static*": {
			{name: "no such file", method: "GET", path: "/static/nope.js", status: 404, answer: htmlPage},
			{name: "wrong method", method: "POST", path: "/static/lab.js", status: 405, answer: htmlPage},
		},
		"GET /healthz": {
			{name: "wrong method", method: "POST", path: "/healthz", status: 405, answer: jsonError},
		},
		"GET /readyz": {
			{name: "wrong method", method: "PUT", path: "/readyz", status: 405, answer: jsonError},
		},
		"GET /metrics": {
			{name: "no token", method: "GET", path: "/metrics", status: 401, answer: jsonError, contains: "bearer token"},
			{name: "wrong token", method: "GET", path: "/metrics", header: map[string]string{"Authorization": "Bearer nope"}, status: 401, answer: jsonError},
			{name: "wrong method", method: "POST", path: "/metrics", status: 405, answer: jsonError},
		},
		"GET /instructor/login": {
			{name: "wrong method", method: "DELETE", path: "/instructor/login", status: 405, answer: htmlPage},
		},
		"POST /instructor/login": {
			{name: "wrong token", method: "POST", path: "/instructor/login", header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, body: "token=nope", status: 303, answer: redirect, location: "/instructor/login?failed=1"},
			{name: "no token", method: "POST", path: "/instructor/login", status: 303, answer: redirect, location: "/instructor/login?failed=1"},
		},
		"POST /instructor/logout": {
			{name: "wrong method", method: "GET", path: "/instructor/logout", status: 405, answer: htmlPage},
			{name: "not logged in", method: "POST", path: "/instructor/logout", header: wrongCookie, status: 303, answer: redirect, location: "/instructor/login"},
		},
		"GET /instructor": {
			{name: "no login", method: "GET", path: "/instructor", status: 303, answer: redirect, location: "/instructor/login"},
			{name: "wrong login", method: "GET", path: "/instructor", header: wrongCookie, status: 303, answer: redirect, location: "/instructor/login"},
			{name: "wrong method", method: "POST", path: "/instructor", header: bearer, status: 405, answer: htmlPage},
		},
		"GET /instructor/ws": {
			{name: "no credentials", method: "GET", path: "/instructor/ws", header: upgrade(nil), status: 401, answer: jsonError, contains: "instructor credentials"},
			{name: "wrong bearer", method: "GET", path: "/instructor/ws", header: upgrade(wrongBearer), status: 401, answer: jsonError},
			{name: "wrong cookie", method: "GET", path: "/instructor/ws", header: upgrade(wrongCookie), status: 401, answer: jsonError},
			{name: "not an upgrade", method: "GET", path: "/instructor/ws", header: bearer, status: 426, answer: jsonError},
			{name: "foreign origin", method: "GET", path: "/instructor/ws", header: upgrade(withBearer(evilOrigin)), status: 403, answer: jsonError},
			{name: "wrong method", method: "POST", path: "/instructor/ws", header: bearer, status: 405, answer: jsonError},
		},
		"GET /api/sessions": {
			{name: "no credentials", method: "GET", path: "/api/sessions", status: 401, answer: jsonError},
			{name: "wrong bearer", method: "GET", path: "/api/sessions", header: wrongBearer, status: 401, answer: jsonError},
			{name: "wrong cookie", method: "GET", path: "/api/sessions", header: wrongCookie, status: 401, answer: jsonError},
			{name: "wrong method", method: "DELETE", path: "/api/sessions", header: bearer, status: 405, answer: jsonError},
		},
		"GET /api/sessions/:id": {
			{name: "no credentials", method: "GET", path: "/api/sessions/" + unknown, status: 401, answer: jsonError},
			{name: "unknown id", method: "GET", path: "/api/sessions/" + unknown, header: bearer, status: 404, answer: jsonError, contains: "unknown session"},
			{name: "not a UUID", method: "GET", path: "/api/sessions/nope", header: bearer, status: 404, answer: jsonError},
			{name: "upper-case UUID", method: "GET", path: "/api/sessions/" + strings.ToUpper(unknown), header: bearer, status: 404, answer: jsonError},
			{name: "wrong method", method: "POST", path: "/api/sessions/" + unknown, header: bearer, status: 405, answer: jsonError},
		},
		"GET /api/sessions/:id/export": {
			{name: "no credentials", method: "GET", path: "/api/sessions/" + unknown + "/export", status: 401, answer: jsonError},
			{name: "wrong bearer", method: "GET", path: "/api/sessions/" + unknown + "/export", header: wrongBearer, status: 401, answer: jsonError},
			{name: "unknown id", method: "GET", path: "/api/sessions/" + unknown + "/export", header: bearer, status: 404, answer: jsonError, contains: "unknown session"},
			{name: "not a UUID", method: "GET", path: "/api/sessions/nope/export", header: bearer, status: 404, answer: jsonError},
			{name: "wrong method", method: "POST", path: "/api/sessions/" + unknown + "/export", header: bearer, status: 405, answer: jsonError},
		},
		"POST /api/inject": {
			{name: "no credentials", method: "POST", path: "/api/inject", header: map[string]string{"Content-Type": "application/json"}, body: `{"all":true,"preset":"deadline"}`, status: 401, answer: jsonError},
			{name: "wrong bearer", method: "POST", path: "/api/inject", header: map[string]string{"Authorization": "Bearer x", "Content-Type": "application/json"}, body: `{"all":true,"preset":"deadline"}`, status: 401, answer: jsonError},
			{name: "not JSON content", method: "POST", path: "/api/inject", header: withBearer(map[string]string{"Content-Type": "text/plain"}), body: `{"all":true,"preset":"deadline"}`, status: 415, answer: jsonError, contains: "application/json"},
			{name: "bad JSON", method: "POST", path: "/api/inject", header: withBearer(map[string]string{"Content-Type": "application/json"}), body: `{"all":`, status: 400, answer: jsonError},
			{name: "unknown field", method: "POST", path: "/api/inject", header: withBearer(map[string]string{"Content-Type": "application/json"}), body: `{"all":true,"preset":"deadline","x":1}`, status: 400, answer: jsonError},
			{name: "no target", method: "POST", path: "/api/inject", header: withBearer(map[string]string{"Content-Type": "application/json"}), body: `{"preset":"deadline"}`, status: 400, answer: jsonError},
			{name: "unknown preset", method: "POST", path: "/api/inject", header: withBearer(map[string]string{"Content-Type": "application/json"}), body: `{"all":true,"preset":"nope"}`, status: 400, answer: jsonError, contains: "unknown preset"},
			{name: "unknown session", method: "POST", path: "/api/inject", header: withBearer(map[string]string{"Content-Type": "application/json"}), body: `{"sessions":["` + unknown + `"],"preset":"deadline"}`, status: 404, answer: jsonError, contains: "unknown session"},
			{name: "non-UUID session", method: "POST", path: "/api/inject", header: withBearer(map[string]string{"Content-Type": "application/json"}), body: `{"sessions":["nope"],"preset":"deadline"}`, status: 404, answer: jsonError, contains: "unknown session"},
			{name: "raw too big", method: "POST", path: "/api/inject", header: withBearer(map[string]string{"Content-Type": "application/json"}), body: `{"all":true,"raw":"` + strings.Repeat("x", 65537) + `"}`, status: 413, answer: jsonError},
			{name: "body too big", method: "POST", path: "/api/inject", header: withBearer(map[string]string{"Content-Type": "application/json"}), body: strings.Repeat(" ", 1<<20+1), status: 413, answer: jsonError},
			{name: "wrong method", method: "GET", path: "/api/inject", header: bearer, status: 405, answer: jsonError},
		},
		"GET /api/export.csv": {
			{name: "no credentials", method: "GET", path: "/api/export.csv", status: 401, answer: jsonError},
			{name: "wrong cookie", method: "GET", path: "/api/export.csv", header: wrongCookie, status: 401, answer: jsonError},
			{name: "wrong method", method: "POST", path: "/api/export.csv", header: bearer, status: 405, answer: jsonError},
		},
		"GET /join": {
			{name: "not six digits", method: "GET", path: "/join?code=12a", status: 400, answer: joinForm, contains: "six digits"},
			{name: "wrong method", method: "PUT", path: "/join", status: 405, answer: htmlPage},
		},
		"GET /j/:code": {
			{name: "unknown code", method: "GET", path: "/j/" + unknownCode, status: 404, answer: joinForm, contains: "No class has the code"},
			{name: "not a code", method: "GET", path: "/j/%3Cb%3E", status: 404, answer: joinForm, contains: "&lt;b&gt;"},
			{name: "closed class", method: "GET", path: "/j/" + other.Code, status: 410, answer: joinForm, contains: "closed"},
			{name: "wrong method", method: "DELETE", path: "/j/" + class.Code, status: 405, answer: htmlPage},
		},
		"POST /j/:code": {
			{name: "no name", method: "POST", path: "/j/" + class.Code, header: form, body: "name=", status: 400, answer: joinForm, contains: "Type your name"},
			{name: "bidi override", method: "POST", path: "/j/" + class.Code, header: form, body: "name=a%E2%80%AEb", status: 400, answer: joinForm, contains: "formatting"},
			{name: "too long", method: "POST", path: "/j/" + class.Code, header: form, body: "name=" + strings.Repeat("n", 41), status: 400, answer: joinForm, contains: "at most 40"},
			{name: "unknown code", method: "POST", path: "/j/" + unknownCode, header: form, body: "name=Ada", status: 404, answer: joinForm},
			{name: "closed class", method: "POST", path: "/j/" + other.Code, header: form, body: "name=Ada", status: 410, answer: joinForm},
		},
		"GET /lab/:id/diagram.svg": {
			{name: "not a UUID", method: "GET", path: "/lab/nope/diagram.svg", status: 404, answer: jsonError},
			{name: "unknown session", method: "GET", path: "/lab/" + unknown + "/diagram.svg", status: 404, answer: jsonError, contains: "unknown session"},
			{name: "wrong method", method: "POST", path: "/lab/" + unknown + "/diagram.svg", status: 405, answer: jsonError},
		},
		"GET /lab/:id/code/failure.svg": {
			{name: "not a UUID", method: "GET", path: "/lab/nope/code/failure.svg", status: 404, answer: jsonError},
			{name: "unknown session", method: "GET", path: "/lab/" + unknown + "/code/failure.svg", status: 404, answer: jsonError, contains: "unknown session"},
			{name: "wrong method", method: "POST", path: "/lab/" + unknown + "/code/failure.svg", status: 405, answer: jsonError},
		},
		"POST /lab/:id/code/play": {
			{name: "not JSON content", method: "POST", path: "/lab/" + unknown + "/code/play", header: map[string]string{"Content-Type": "text/plain"}, body: `{}`, status: 415, answer: jsonError},
			{name: "not a trace", method: "POST", path: "/lab/" + unknown + "/code/play", header: map[string]string{"Content-Type": "application/json"}, body: `{"frames":3}`, status: 400, answer: jsonError, contains: "frames"},
			{name: "a trace that cannot be played", method: "POST", path: "/lab/" + unknown + "/code/play", header: map[string]string{"Content-Type": "application/json"}, body: `{"frames":[{"type":"deliver","message":1}]}`, status: 400, answer: jsonError, contains: "unknown message id"},
			{name: "unknown session", method: "POST", path: "/lab/" + unknown + "/code/play", header: map[string]string{"Content-Type": "application/json"}, body: `{"frames":[{"type":"start"}]}`, status: 404, answer: jsonError, contains: "unknown session"},
			{name: "not a UUID", method: "POST", path: "/lab/nope/code/play", header: map[string]string{"Content-Type": "application/json"}, body: `{"frames":[{"type":"start"}]}`, status: 404, answer: jsonError},
			{name: "wrong method", method: "GET", path: "/lab/" + unknown + "/code/play", status: 405, answer: jsonError},
		},
		"POST /lab/:id/code/cases": {
			{name: "not JSON content", method: "POST", path: "/lab/" + unknown + "/code/cases", header: map[string]string{"Content-Type": "text/plain"}, body: `{}`, status: 415, answer: jsonError},
			{name: "no name", method: "POST", path: "/lab/" + unknown + "/code/cases", header: map[string]string{"Content-Type": "application/json"}, body: `{"frames":[{"type":"start"}]}`, status: 400, answer: jsonError, contains: "name"},
			{name: "an unknown field", method: "POST", path: "/lab/" + unknown + "/code/cases", header: map[string]string{"Content-Type": "application/json"}, body: `{"name":"x","frames":[{"type":"start"}],"all":true}`, status: 400, answer: jsonError},
			{name: "unknown session", method: "POST", path: "/lab/" + unknown + "/code/cases", header: map[string]string{"Content-Type": "application/json"}, body: `{"name":"x","frames":[{"type":"start"}]}`, status: 404, answer: jsonError, contains: "unknown session"},
		},
		"GET /api/sessions/:id/code/failure.svg": {
			{name: "no credentials", method: "GET", path: "/api/sessions/" + unknown + "/code/failure.svg", status: 401, answer: jsonError},
			{name: "unknown id", method: "GET", path: "/api/sessions/" + unknown + "/code/failure.svg", header: bearer, status: 404, answer: jsonError, contains: "unknown session"},
			{name: "not a UUID", method: "GET", path: "/api/sessions/nope/code/failure.svg", header: bearer, status: 404, answer: jsonError},
		},
		"POST /api/code/cases": {
			{name: "no credentials", method: "POST", path: "/api/code/cases", header: map[string]string{"Content-Type": "application/json"}, body: `{"all":true,"name":"x","frames":[{"type":"start"}]}`, status: 401, answer: jsonError},
			{name: "not JSON content", method: "POST", path: "/api/code/cases", header: withBearer(map[string]string{"Content-Type": "text/plain"}), body: `{}`, status: 415, answer: jsonError, contains: "application/json"},
			{name: "bad JSON", method: "POST", path: "/api/code/cases", header: withBearer(map[string]string{"Content-Type": "application/json"}), body: `{"all":`, status: 400, answer: jsonError},
			{name: "no target", method: "POST", path: "/api/code/cases", header: withBearer(map[string]string{"Content-Type": "application/json"}), body: `{"name":"x","frames":[{"type":"start"}]}`, status: 400, answer: jsonError},
			{name: "a trace that cannot be played", method: "POST", path: "/api/code/cases", header: withBearer(map[string]string{"Content-Type": "application/json"}), body: `{"all":true,"name":"x","frames":[{"type":"deliver","message":1}]}`, status: 400, answer: jsonError, contains: "unknown message id"},
			{name: "unknown session", method: "POST", path: "/api/code/cases", header: withBearer(map[string]string{"Content-Type": "application/json"}), body: `{"sessions":["` + unknown + `"],"name":"x","frames":[{"type":"start"}]}`, status: 404, answer: jsonError, contains: "unknown session"},
		},
		"GET /api/code/cases": {
			{name: "no credentials", method: "GET", path: "/api/code/cases?all=true", status: 401, answer: jsonError},
			{name: "no target", method: "GET", path: "/api/code/cases", header: bearer, status: 400, answer: jsonError, contains: "class"},
			{name: "two targets", method: "GET", path: "/api/code/cases?all=true&session=" + unknown, header: bearer, status: 400, answer: jsonError},
			{name: "all=yes", method: "GET", path: "/api/code/cases?all=yes", header: bearer, status: 400, answer: jsonError, contains: "all"},
			{name: "unknown session", method: "GET", path: "/api/code/cases?session=" + unknown, header: bearer, status: 404, answer: jsonError, contains: "unknown session"},
			{name: "unknown class", method: "GET", path: "/api/code/cases?class=nope", header: bearer, status: 404, answer: jsonError},
		},
		"DELETE /api/code/cases/:name": {
			{name: "no credentials", method: "DELETE", path: "/api/code/cases/x?all=true", status: 401, answer: jsonError},
			{name: "no target", method: "DELETE", path: "/api/code/cases/x", header: bearer, status: 400, answer: jsonError},
			{name: "unknown session", method: "DELETE", path: "/api/code/cases/x?session=" + unknown, header: bearer, status: 404, answer: jsonError, contains: "unknown session"},
			{name: "a blank name", method: "DELETE", path: "/api/code/cases/%20?all=true", header: bearer, status: 400, answer: jsonError, contains: "name"},
		},
		"GET /api/sessions/:id/diagram.svg": {
			{name: "no credentials", method: "GET", path: "/api/sessions/" + unknown + "/diagram.svg", status: 401, answer: jsonError},
			{name: "wrong bearer", method: "GET", path: "/api/sessions/" + unknown + "/diagram.svg", header: wrongBearer, status: 401, answer: jsonError},
			{name: "unknown id", method: "GET", path: "/api/sessions/" + unknown + "/diagram.svg", header: bearer, status: 404, answer: jsonError, contains: "unknown session"},
			{name: "not a UUID", method: "GET", path: "/api/sessions/nope/diagram.svg", header: bearer, status: 404, answer: jsonError},
			{name: "bad size", method: "GET", path: "/api/sessions/" + unknown + "/diagram.svg?size=2", header: bearer, status: 400, answer: jsonError, contains: "size"},
			{name: "wrong method", method: "POST", path: "/api/sessions/" + unknown + "/diagram.svg", header: bearer, status: 405, answer: jsonError},
		},
		"GET /api/sessions/:id/shiviz.log": {
			{name: "no credentials", method: "GET", path: "/api/sessions/" + unknown + "/shiviz.log", status: 401, answer: jsonError},
			{name: "unknown id", method: "GET", path: "/api/sessions/" + unknown + "/shiviz.log", header: bearer, status: 404, answer: jsonError, contains: "unknown session"},
			{name: "not a UUID", method: "GET", path: "/api/sessions/nope/shiviz.log", header: bearer, status: 404, answer: jsonError},
			{name: "wrong method", method: "POST", path: "/api/sessions/" + unknown + "/shiviz.log", header: bearer, status: 405, answer: jsonError},
		},
		"GET /lab/:id/class": {
			{name: "not a UUID", method: "GET", path: "/lab/nope/class", status: 404, answer: jsonError},
			{name: "wrong method", method: "POST", path: "/lab/" + unknown + "/class", status: 405, answer: jsonError},
		},
		"GET /instructor/classes/:id": {
			{name: "no login", method: "GET", path: "/instructor/classes/" + class.ID, status: 303, answer: redirect, location: "/instructor/login?next=%2Finstructor%2Fclasses%2F" + class.ID},
			{name: "unknown class", method: "GET", path: "/instructor/classes/" + unknown, header: bearer, status: 404, answer: htmlPage},
			{name: "not a UUID", method: "GET", path: "/instructor/classes/nope", header: bearer, status: 404, answer: htmlPage},
			{name: "another class's key", method: "GET", path: "/instructor/classes/" + other.ID, header: classKey, status: 403, answer: htmlPage, contains: "class key"},
			{name: "wrong method", method: "POST", path: "/instructor/classes/" + class.ID, header: bearer, status: 405, answer: htmlPage},
		},
		"GET /instructor/classes/:id/projector": {
			{name: "no login", method: "GET", path: "/instructor/classes/" + class.ID + "/projector", status: 303, answer: redirect, location: "/instructor/login?next=%2Finstructor%2Fclasses%2F" + class.ID + "%2Fprojector"},
			{name: "unknown class", method: "GET", path: "/instructor/classes/" + unknown + "/projector", header: bearer, status: 404, answer: htmlPage},
			{name: "another class's key", method: "GET", path: "/instructor/classes/" + other.ID + "/projector", header: classKey, status: 403, answer: htmlPage},
		},
		"POST /api/classes": {
			{name: "no credentials", method: "POST", path: "/api/classes", header: map[string]string{"Content-Type": "application/json"}, body: `{"title":"x"}`, status: 401, answer: jsonError},
			{name: "a class key", method: "POST", path: "/api/classes", header: keyJSON, body: `{"title":"x"}`, status: 403, answer: jsonError},
			{name: "not JSON content", method: "POST", path: "/api/classes", header: withBearer(map[string]string{"Content-Type": "text/plain"}), body: `{"title":"x"}`, status: 415, answer: jsonError},
			{name: "bad JSON", method: "POST", path: "/api/classes", header: asJSON, body: `{"title":`, status: 400, answer: jsonError},
			{name: "no title", method: "POST", path: "/api/classes", header: asJSON, body: `{}`, status: 400, answer: jsonError, contains: "title"},
			{name: "empty title", method: "POST", path: "/api/classes", header: asJSON, body: `{"title":"  "}`, status: 400, answer: jsonError},
			{name: "unknown field", method: "POST", path: "/api/classes", header: asJSON, body: `{"title":"x","y":1}`, status: 400, answer: jsonError},
			{name: "setting not a boolean", method: "POST", path: "/api/classes", header: asJSON, body: `{"title":"x","predictionsRequired":1}`, status: 400, answer: jsonError},
		},
		"GET /api/classes": {
			{name: "no credentials", method: "GET", path: "/api/classes", status: 401, answer: jsonError},
			{name: "a class key", method: "GET", path: "/api/classes", header: classKey, status: 403, answer: jsonError},
			{name: "wrong method", method: "PUT", path: "/api/classes", header: bearer, status: 405, answer: jsonError},
		},
		"GET /api/classes/:id": {
			{name: "no credentials", method: "GET", path: "/api/classes/" + class.ID, status: 401, answer: jsonError},
			{name: "unknown class", method: "GET", path: "/api/classes/" + unknown, header: bearer, status: 404, answer: jsonError, contains: "no such class"},
			{name: "not a UUID", method: "GET", path: "/api/classes/nope", header: bearer, status: 404, answer: jsonError},
			{name: "another class's key", method: "GET", path: "/api/classes/" + other.ID, header: classKey, status: 403, answer: jsonError},
			{name: "wrong method", method: "PUT", path: "/api/classes/" + class.ID, header: bearer, status: 405, answer: jsonError},
		},
		"POST /api/classes/:id/close": {
			{name: "unknown class", method: "POST", path: "/api/classes/" + unknown + "/close", header: bearer, status: 404, answer: jsonError},
			{name: "another class's key", method: "POST", path: "/api/classes/" + other.ID + "/close", header: classKey, status: 403, answer: jsonError},
			{name: "wrong method", method: "GET", path: "/api/classes/" + class.ID + "/close", header: bearer, status: 405, answer: jsonError},
		},
		"POST /api/classes/:id/reopen": {
			{name: "unknown class", method: "POST", path: "/api/classes/" + unknown + "/reopen", header: bearer, status: 404, answer: jsonError},
			{name: "another class's key", method: "POST", path: "/api/classes/" + other.ID + "/reopen", header: classKey, status: 403, answer: jsonError},
		},
		"POST /api/classes/:id/settings": {
			{name: "no credentials", method: "POST", path: "/api/classes/" + class.ID + "/settings", header: map[string]string{"Content-Type": "application/json"}, body: `{"predictionsRequired":true}`, status: 401, answer: jsonError},
			{name: "unknown class", method: "POST", path: "/api/classes/" + unknown + "/settings", header: asJSON, body: `{"predictionsRequired":true}`, status: 404, answer: jsonError},
			{name: "another class's key", method: "POST", path: "/api/classes/" + other.ID + "/settings", header: keyJSON, body: `{"predictionsRequired":true}`, status: 403, answer: jsonError},
			{name: "no setting", method: "POST", path: "/api/classes/" + class.ID + "/settings", header: asJSON, body: `{}`, status: 400, answer: jsonError, contains: "predictionsRequired"},
			{name: "not a boolean", method: "POST", path: "/api/classes/" + class.ID + "/settings", header: asJSON, body: `{"predictionsRequired":"yes"}`, status: 400, answer: jsonError},
			{name: "unknown field", method: "POST", path: "/api/classes/" + class.ID + "/settings", header: asJSON, body: `{"predictionsRequired":true,"x":1}`, status: 400, answer: jsonError},
			{name: "not JSON", method: "POST", path: "/api/classes/" + class.ID + "/settings", header: bearer, body: `predictionsRequired=true`, status: 415, answer: jsonError},
			{name: "wrong method", method: "GET", path: "/api/classes/" + class.ID + "/settings", header: bearer, status: 405, answer: jsonError},
		},
		"POST /api/classes/:id/key": {
			{name: "unknown class", method: "POST", path: "/api/classes/" + unknown + "/key", header: bearer, status: 404, answer: jsonError},
			{name: "its own key", method: "POST", path: "/api/classes/" + class.ID + "/key", header: classKey, status: 403, answer: jsonError},
		},
		"DELETE /api/classes/:id": {
			{name: "unknown class", method: "DELETE", path: "/api/classes/" + unknown, header: bearer, status: 404, answer: jsonError},
			{name: "its own key", method: "DELETE", path: "/api/classes/" + class.ID, header: classKey, status: 403, answer: jsonError},
		},
		"GET /api/classes/:id/qr.png": {
			{name: "unknown class", method: "GET", path: "/api/classes/" + unknown + "/qr.png", header: bearer, status: 404, answer: jsonError},
			{name: "another class's key", method: "GET", path: "/api/classes/" + other.ID + "/qr.png", header: classKey, status: 403, answer: jsonError},
		},
		"GET /api/classes/:id/export.csv": {
			{name: "unknown class", method: "GET", path: "/api/classes/" + unknown + "/export.csv", header: bearer, status: 404, answer: jsonError},
			{name: "another class's key", method: "GET", path: "/api/classes/" + other.ID + "/export.csv", header: classKey, status: 403, answer: jsonError},
		},
		"GET /api/classes/:id/grades.csv": {
			{name: "unknown class", method: "GET", path: "/api/classes/" + unknown + "/grades.csv", header: bearer, status: 404, answer: jsonError},
			{name: "another class's key", method: "GET", path: "/api/classes/" + other.ID + "/grades.csv", header: classKey, status: 403, answer: jsonError},
			{name: "no credentials", method: "GET", path: "/api/classes/" + class.ID + "/grades.csv", status: 401, answer: jsonError},
		},
		"DELETE /api/sessions/:id": {
			{name: "no credentials", method: "DELETE", path: "/api/sessions/" + unknown, status: 401, answer: jsonError},
			{name: "unknown id", method: "DELETE", path: "/api/sessions/" + unknown, header: bearer, status: 404, answer: jsonError, contains: "unknown session"},
		},
		"POST /api/sessions/delete": {
			{name: "no target", method: "POST", path: "/api/sessions/delete", header: asJSON, body: `{}`, status: 400, answer: jsonError},
			{name: "both targets", method: "POST", path: "/api/sessions/delete", header: asJSON, body: `{"sessions":["a"],"idleOpenLab":true}`, status: 400, answer: jsonError},
			{name: "not JSON content", method: "POST", path: "/api/sessions/delete", header: bearer, body: `{}`, status: 415, answer: jsonError},
			{name: "a class key, the open lab", method: "POST", path: "/api/sessions/delete", header: keyJSON, body: `{"idleOpenLab":true}`, status: 403, answer: jsonError},
			{name: "wrong method", method: "PUT", path: "/api/sessions/delete", header: bearer, status: 405, answer: jsonError},
		},
		"GET /api/grades.csv": {
			{name: "no credentials", method: "GET", path: "/api/grades.csv", status: 401, answer: jsonError},
			{name: "wrong cookie", method: "GET", path: "/api/grades.csv", header: wrongCookie, status: 401, answer: jsonError},
			{name: "wrong method", method: "POST", path: "/api/grades.csv", header: bearer, status: 405, answer: jsonError},
			{name: "a class key", method: "GET", path: "/api/grades.csv", header: classKey, status: 403, answer: jsonError},
		},
		"GET /code.json": {
			{name: "wrong method", method: "POST", path: "/code.json", status: 405, answer: jsonError},
		},
		"GET /exercise.json": {
			{name: "wrong method", method: "POST", path: "/exercise.json", status: 405, answer: jsonError},
		},
		// Not routes: paths nothing serves, which browsers may ask for.
		"": {
			{name: "unknown path", method: "GET", path: "/nope", status: 404, answer: htmlPage},
			{name: "unknown instructor page", method: "GET", path: "/instructor/nope", status: 404, answer: htmlPage},
			{name: "unknown API path", method: "GET", path: "/api/nope", header: bearer, status: 404, answer: jsonError},
			{name: "unknown API path, no credentials", method: "GET", path: "/api/nope", status: 404, answer: jsonError},
			{name: "the bare API prefix", method: "GET", path: "/api", status: 404, answer: jsonError},
			{name: "markup in the path", method: "GET", path: "/%3Cscript%3Ealert(1)%3C/script%3E", status: 404, answer: htmlPage},
			{name: "HEAD of an unknown path", method: "HEAD", path: "/nope", status: 404, answer: noBody},
		},
	}

	routes := lab.Routes()
	for _, r := range routes {
		if len(cases[r]) == 0 {
			t.Errorf("route %q has no bad-input case in this test: add some", r)
		}
	}
	for r := range cases {
		if r != "" && !slices.Contains(routes, r) {
			t.Errorf("cases for %q, which is not a route (any more?)", r)
		}
	}

	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for route, list := range cases {
		for _, tc := range list {
			t.Run(route+"/"+tc.name, func(t *testing.T) {
				req, err := http.NewRequest(tc.method, ts.URL+tc.path, strings.NewReader(tc.body))
				if err != nil {
					t.Fatal(err)
				}
				for k, v := range tc.header {
					req.Header.Set(k, v)
				}
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				ctype := resp.Header.Get("Content-Type")
				if resp.StatusCode != tc.status {
					t.Fatalf("%s %s = %d %s %.200s, want %d", tc.method, tc.path, resp.StatusCode, ctype, body, tc.status)
				}
				if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
					t.Errorf("no CSP on the answer: %q", csp)
				}
				text := string(body)
				switch tc.answer {
				case jsonError:
					var e map[string]any
					if !strings.HasPrefix(ctype, "application/json") || json.Unmarshal(body, &e) != nil {
						t.Fatalf("answer %s %q, want {\"error\": …} JSON", ctype, body)
					}
					msg, ok := e["error"].(string)
					if !ok || msg == "" || e["message"] != nil {
						t.Fatalf("answer %s, want {\"error\": \"…\"}", body)
					}
					text = msg
				case htmlPage:
					if !strings.HasPrefix(ctype, "text/html") || !strings.HasPrefix(text, "<!doctype html>") ||
						!strings.Contains(text, "<h1>"+strconv.Itoa(tc.status)+" ") ||
						strings.Contains(text, "<script") {
						t.Fatalf("answer %s %q, want an HTML error page without script", ctype, body)
					}
				case redirect:
					if loc := resp.Header.Get("Location"); loc != tc.location {
						t.Fatalf("Location %q, want %q", loc, tc.location)
					}
				case joinForm:
					if !strings.HasPrefix(ctype, "text/html") || !strings.HasPrefix(text, "<!doctype html>") ||
						!strings.Contains(text, `id="error" role="alert"`) || !strings.Contains(text, "<form") ||
						strings.Contains(text, "<script") {
						t.Fatalf("answer %s %q, want the join form with its reason, without script", ctype, body)
					}
				case noBody:
					if len(body) != 0 {
						t.Fatalf("HEAD answered a body: %q", body)
					}
				}
				if tc.contains != "" && !strings.Contains(strings.ToLower(text), strings.ToLower(tc.contains)) {
					t.Errorf("answer %q, want it to contain %q", text, tc.contains)
				}
			})
		}
	}
}
