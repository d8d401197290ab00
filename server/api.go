package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/toolcall-lab/lab/model"
)

// The instructor's HTTP JSON API (docs/instructor.md). Every route is behind
// requireInstructor. Handlers are thin: decode, ask the sessions, encode.

// listSessions answers GET /api/sessions.
func (s *Server) listSessions(c echo.Context) error {
	return c.JSON(http.StatusOK, struct {
		Sessions []sessionRow `json:"sessions"`
	}{s.rows()})
}

// getSession answers GET /api/sessions/:id: the row, the state exactly as
// the student's page receives it, and the timeline.
func (s *Server) getSession(c echo.Context) error {
	id := c.Param("id")
	sess, ok := s.find(id)
	if !ok || !canonicalID(id) {
		return fmt.Errorf("%w %s", errUnknownSession, id)
	}
	if !grantFrom(c).allows(s.classOfSession(id)) {
		return errForbidden
	}
	timeline, err := sess.recentTimeline()
	if err != nil {
		return err
	}
	row := sess.overviewRow()
	row.Class = s.classOfSession(id)
	return c.JSON(http.StatusOK, struct {
		Session  sessionRow      `json:"session"`
		State    json.RawMessage `json:"state"`
		Timeline []timelineEntry `json:"timeline"`
	}{row, sess.snapshot(), timeline})
}

// injectRequest is a decoded POST /api/inject body.
type injectRequest struct {
	sessions []string // distinct, in the order given; empty with all or class
	all      bool
	class    string // every session of this class
	inject   model.Injection
}

// injectResult is what one session made of an injection.
type injectResult struct {
	Session string `json:"session"`
	Applied bool   `json:"applied"`
	Reason  string `json:"reason,omitempty"` // a stable word: limit, not_applicable, unknown_session, busy, …
	Error   string `json:"error,omitempty"`  // the sentence for people
	// Notice is what a message delivered at once did: the seed's notice;
	// Outcome is its prediction word (accepted, ignored, unresolved or
	// diagnostic), what the class distribution counts.
	Notice  string `json:"notice,omitempty"`
	Outcome string `json:"outcome,omitempty"`
}

// jsonBody reads a POST's JSON body, at most MaxFrameBytes of it. The
// content type is also what keeps other sites' forms out: they cannot send
// it.
func (s *Server) jsonBody(c echo.Context) ([]byte, error) {
	r := c.Request()
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return nil, errNotJSON
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), r.Body, s.cfg.MaxFrameBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, requestErrorf(http.StatusRequestEntityTooLarge, "request body size in bytes limit reached (at most %d)", s.cfg.MaxFrameBytes)
		}
		return nil, badRequest("reading the request body failed")
	}
	return body, nil
}

// inject answers POST /api/inject: one injection into each target session,
// each applied whole or not at all, with a result per session.
func (s *Server) inject(c echo.Context) error {
	body, err := s.jsonBody(c)
	if err != nil {
		return err
	}
	req, err := decodeInjectRequest(body, s.cfg.Limits)
	if err != nil {
		return err
	}
	if err := s.injectAllowed(c, req); err != nil {
		return err
	}
	results := s.submitEach(req, model.Command{Kind: model.Inject, By: model.Instructor, Inject: req.inject})
	applied := 0
	outcomes := map[string]int{}
	for _, res := range results {
		if res.Applied {
			applied++
		}
		if res.Outcome != "" {
			outcomes[res.Outcome]++
		}
	}
	out := struct {
		Applied int            `json:"applied"`
		Results []injectResult `json:"results"`
		// Outcomes counts the delivered messages by outcome word: the
		// class distribution ("12 unresolved, 18 ignored").
		Outcomes map[string]int `json:"outcomes"`
		Error    string         `json:"error,omitempty"`
	}{applied, results, outcomes, ""}
	if !req.all && req.class == "" && len(results) == 1 && results[0].Reason == "unknown_session" {
		// Still {"error": "…"}, with the results beside it.
		out.Error = results[0].Error
		return c.JSON(http.StatusNotFound, out)
	}
	return c.JSON(http.StatusOK, out)
}

// injectAllowed checks an injection's targets against the request's grant:
// "all" needs the server's token, "class" a grant of that class (which must
// exist), and every named session that exists must be in a granted class.
func (s *Server) injectAllowed(c echo.Context, req injectRequest) error {
	g := grantFrom(c)
	switch {
	case req.all && !g.all:
		return errForbidden
	case req.class != "":
		_, err := s.grantedClass(c, req.class)
		return err
	}
	for _, id := range req.sessions {
		if _, ok := s.find(id); ok && !g.allows(s.classOfSession(id)) {
			return errForbidden
		}
	}
	return nil
}

// submitEach submits cmd (an injection, an instructor's case) to every
// target of req and waits for each result.
func (s *Server) submitEach(req injectRequest, cmd model.Command) []injectResult {
	ids := req.sessions
	switch {
	case req.all:
		ids = ids[:0]
		for _, sess := range s.allSessions() {
			ids = append(ids, sess.id)
		}
	case req.class != "":
		ids = ids[:0]
		for _, sess := range s.sessionsIn(req.class) {
			ids = append(ids, sess.id)
		}
	}
	results := make([]injectResult, len(ids))
	waits := make([]chan outcome, len(ids))
	for i, id := range ids {
		results[i].Session = id
		sess, ok := s.find(id)
		if !ok {
			r := classify(s.log, fmt.Errorf("%w %s", errUnknownSession, id))
			results[i].Reason, results[i].Error = r.reason, r.text
			continue
		}
		waits[i] = make(chan outcome, 1)
		sess.submit(pending{cmd: cmd, done: waits[i]})
	}
	for i, done := range waits {
		if done == nil {
			continue
		}
		res := <-done
		if res.err != nil {
			r := classify(s.log, res.err)
			results[i].Reason, results[i].Error = r.reason, r.text
			continue
		}
		results[i].Applied = true
		if res.delivered {
			results[i].Notice, results[i].Outcome = res.notice, model.ClassifyNotice(res.notice).String()
		}
	}
	return results
}

// decodeInjectRequest is the one place POST /api/inject bodies are decoded.
//
//	{"sessions": ["<id>", …] | "class": "<id>" | "all": true,
//	 "mode": "hold" | "deliver"  (default hold),
//	 and exactly one of
//	 "preset": "<name>" | "raw": "<reply text>" | "deadline": {"runId": "…", "callId": "…"}}
func decodeInjectRequest(body []byte, lim model.Limits) (injectRequest, error) {
	var in struct {
		Sessions []string `json:"sessions"`
		All      bool     `json:"all"`
		Class    *string  `json:"class"`
		Mode     *string  `json:"mode"`
		Preset   *string  `json:"preset"`
		Raw      *string  `json:"raw"`
		Deadline *struct {
			RunID  *string `json:"runId"`
			CallID *string `json:"callId"`
		} `json:"deadline"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return injectRequest{}, badRequest("the body is not a valid injection request: %v", err)
	}
	if dec.More() {
		return injectRequest{}, badRequest("the body must hold one JSON object")
	}
	req, err := decodeTargets(in.Sessions, in.All, in.Class)
	if err != nil {
		return req, err
	}
	if in.Mode != nil {
		switch *in.Mode {
		case "hold":
		case "deliver":
			req.inject.Deliver = true
		default:
			return req, badRequest(`"mode" must be "hold" or "deliver", not %q`, *in.Mode)
		}
	}
	given := 0
	for _, set := range []bool{in.Preset != nil, in.Raw != nil, in.Deadline != nil} {
		if set {
			given++
		}
	}
	if given != 1 {
		return req, badRequest(`give exactly one of "preset", "raw" or "deadline"`)
	}
	switch {
	case in.Preset != nil:
		p, ok := model.ParsePreset(*in.Preset)
		if !ok {
			names := make([]string, 0, 10)
			for _, p := range model.Presets() {
				names = append(names, p.String())
			}
			return req, badRequest("unknown preset %q: want one of %s", *in.Preset, strings.Join(names, ", "))
		}
		if p == model.PracticePreset && req.inject.Deliver {
			return req, badRequest(`the "practice" preset is held only: the student predicts a practice before delivering it; use "mode": "hold"`)
		}
		req.inject.Preset = p
	case in.Raw != nil:
		if len(*in.Raw) > lim.MaxReplyBytes {
			return req, requestErrorf(http.StatusRequestEntityTooLarge, "raw reply size in bytes limit reached (at most %d)", lim.MaxReplyBytes)
		}
		req.inject.Kind, req.inject.Raw = model.ReplyMessage, *in.Raw
	default:
		d := in.Deadline
		if d.RunID == nil || d.CallID == nil {
			return req, badRequest(`"deadline" needs string fields "runId" and "callId"`)
		}
		req.inject.Kind, req.inject.Key = model.DeadlineMessage, model.Key{RunID: *d.RunID, CallID: *d.CallID}
	}
	return req, nil
}

// decodeTargets reads the targets of an injection or a case: "sessions",
// "class" or "all", exactly one.
func decodeTargets(sessions []string, all bool, class *string) (injectRequest, error) {
	var req injectRequest
	targets := 0
	for _, set := range []bool{all, len(sessions) > 0, class != nil} {
		if set {
			targets++
		}
	}
	switch {
	case targets > 1:
		return req, badRequest(`give one of "sessions", "class" or "all": not both, nor all three`)
	case targets == 0:
		return req, badRequest(`name the target sessions in "sessions", a class in "class", or set "all": true`)
	case class != nil && !canonicalID(*class):
		return req, fmt.Errorf("%w %q", errNoSuchClass, *class)
	}
	req.all = all
	if class != nil {
		req.class = *class
	}
	seen := make(map[string]bool, len(sessions))
	for _, id := range sessions {
		if !seen[id] {
			seen[id] = true
			req.sessions = append(req.sessions, id)
		}
	}
	return req, nil
}
