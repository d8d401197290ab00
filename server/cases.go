package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/toolcall-lab/lab/internal/jsclient"
	"github.com/toolcall-lab/lab/model"
	"github.com/toolcall-lab/lab/store"
)

// The instructor's own code cases (docs/instructor.md, "Code cases"): a
// case is a case-added event in each target session's log, typed as
// frames, made from a session's demonstration, or kept from a student's
// failing trace; a case-removed event takes it out again. Each re-checks
// the session's latest submission.

// addCases answers POST /api/code/cases: an instructor's case added to the
// target sessions' suites (an event in each log), which re-checks their
// latest submission; a result per session, as /api/inject answers.
func (s *Server) addCases(c echo.Context) error {
	body, err := s.jsonBody(c)
	if err != nil {
		return err
	}
	req, cs, from, err := decodeCaseRequest(body)
	if err != nil {
		return err
	}
	if err := s.injectAllowed(c, req); err != nil {
		return err
	}
	if from.session != "" {
		if cs.Frames, err = s.framesFrom(c, from); err != nil {
			return err
		}
		if err := checkCase(cs); err != nil {
			return err
		}
	}
	return s.answerEach(c, req, model.Command{Kind: model.AddCase, By: model.Instructor, Case: &cs})
}

// removeCases answers DELETE /api/code/cases/:name?class=…|session=…|all=true:
// the case leaves each target session that has it (a case-removed event
// in its log), which re-checks its latest submission.
func (s *Server) removeCases(c echo.Context) error {
	name := strings.TrimSpace(c.Param("name"))
	if name == "" {
		return badRequest("name the case to remove in the path")
	}
	req, err := targetsOfQuery(c)
	if err != nil {
		return err
	}
	if err := s.injectAllowed(c, req); err != nil {
		return err
	}
	return s.answerEach(c, req, model.Command{Kind: model.RemoveCase, By: model.Instructor, Case: &model.Case{Name: name}})
}

// answerEach submits cmd to each target and answers a result per session,
// as /api/inject does.
func (s *Server) answerEach(c echo.Context, req injectRequest, cmd model.Command) error {
	results := s.submitEach(req, cmd)
	applied := 0
	for _, res := range results {
		if res.Applied {
			applied++
		}
	}
	out := struct {
		Applied int            `json:"applied"`
		Results []injectResult `json:"results"`
		Error   string         `json:"error,omitempty"`
	}{applied, results, ""}
	if !req.all && req.class == "" && len(results) == 1 && results[0].Reason == "unknown_session" {
		out.Error = results[0].Error
		return c.JSON(http.StatusNotFound, out)
	}
	return c.JSON(http.StatusOK, out)
}

// caseSource is where a case's frames come from when not typed: a
// session's recorded frames (from run fromRun on), or its failing trace.
type caseSource struct {
	session string
	fromRun int
	failure bool
}

// decodeCaseRequest is the one place POST /api/code/cases bodies are
// decoded:
//
//	{"name": "<case name>",
//	 "frames": [<client frames>] | "fromSession": "<id>", "fromRun": "run-3" | "fromFailure": "<id>",
//	 "sessions": ["<id>", …] | "class": "<id>" | "all": true}
//
// Each typed frame is decoded as the student's WebSocket frames are
// (decodeFrame), and the trace checked as the checker will play it; the
// frames of a session are checked the same way once read (checkCase).
func decodeCaseRequest(body []byte) (injectRequest, model.Case, caseSource, error) {
	var in struct {
		Name        *string           `json:"name"`
		Frames      []json.RawMessage `json:"frames"`
		FromSession *string           `json:"fromSession"`
		FromRun     *string           `json:"fromRun"`
		FromFailure *string           `json:"fromFailure"`
		Sessions    []string          `json:"sessions"`
		All         bool              `json:"all"`
		Class       *string           `json:"class"`
	}
	var from caseSource
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return injectRequest{}, model.Case{}, from, badRequest("the body is not a valid case request: %v", err)
	}
	if dec.More() {
		return injectRequest{}, model.Case{}, from, badRequest("the body must hold one JSON object")
	}
	req, err := decodeTargets(in.Sessions, in.All, in.Class)
	if err != nil {
		return req, model.Case{}, from, err
	}
	if in.Name == nil || strings.TrimSpace(*in.Name) == "" {
		return req, model.Case{}, from, badRequest(`give the case a name in "name"`)
	}
	cs := model.Case{Name: strings.TrimSpace(*in.Name)}
	sources := 0
	for _, set := range []bool{in.Frames != nil, in.FromSession != nil, in.FromFailure != nil} {
		if set {
			sources++
		}
	}
	switch {
	case sources != 1:
		return req, cs, from, badRequest(`give the case's frames in one of "frames", "fromSession" (with "fromRun", optional) or "fromFailure"`)
	case in.FromRun != nil && in.FromSession == nil:
		return req, cs, from, badRequest(`"fromRun" goes with "fromSession"`)
	case in.FromSession != nil:
		from.session, from.fromRun = *in.FromSession, 1
		if in.FromRun != nil {
			if from.fromRun, err = model.ParseRun(*in.FromRun); err != nil {
				return req, cs, from, badRequest(`"fromRun": %v`, err)
			}
		}
	case in.FromFailure != nil:
		from.session, from.failure = *in.FromFailure, true
	}
	if from.session != "" {
		if !canonicalID(from.session) {
			return req, cs, from, fmt.Errorf("%w %s", errUnknownSession, from.session)
		}
		return req, cs, from, nil
	}
	if len(in.Frames) > model.MaxCaseFrames {
		return req, model.Case{}, from, badRequest("a case has at most %d frames, not %d", model.MaxCaseFrames, len(in.Frames))
	}
	cs.Frames = make(model.Trace, 0, len(in.Frames))
	for i, raw := range in.Frames {
		cmd, err := decodeFrame(raw, model.Instructor)
		if err != nil {
			return req, model.Case{}, from, badRequest("frame %d: %v", i+1, err)
		}
		cs.Frames = append(cs.Frames, model.Command{Kind: cmd.Kind, Raw: cmd.Raw, Message: cmd.Message})
	}
	return req, cs, from, checkCase(cs)
}

// checkCase refuses a case the sessions' own checks would refuse (a trace
// that cannot be played, a name too long, text over its bytes), before
// any session is asked.
func checkCase(cs model.Case) error {
	if err := model.ValidateTrace(cs.Frames); err != nil {
		return badRequest("the case cannot be played: %v", err)
	}
	if _, err := model.NewLab().Decide(model.Command{Kind: model.AddCase, Case: &cs}, model.Limits{}); err != nil {
		return badRequest("%v", err)
	}
	return nil
}

// framesFrom reads a case's frames from a session the caller may see: its
// student's recorded frames from a run on, read from the log, or the
// failing trace it shows.
func (s *Server) framesFrom(c echo.Context, from caseSource) (model.Trace, error) {
	if !grantFrom(c).allows(s.classOfSession(from.session)) {
		return nil, errForbidden
	}
	if from.failure {
		sess, ok := s.find(from.session)
		if !ok {
			return nil, fmt.Errorf("%w %s", errUnknownSession, from.session)
		}
		_, f := sess.codeOf()
		if f == nil {
			return nil, badRequest("session %s shows no failing case to keep: its program passes, is being checked, or was never checked", from.session)
		}
		return slices.Clone(f.Frames), nil
	}
	recs, err := s.logOf(c.Request().Context(), from.session)
	if err != nil {
		return nil, err
	}
	events := make([]model.Event, len(recs))
	for i, r := range recs {
		events[i] = r.Event
	}
	t, err := model.TraceOf(events, from.fromRun)
	if err != nil {
		return nil, badRequest("session %s: %v", from.session, err)
	}
	return t, nil
}

// logOf reads session id's log within the store's deadline; a session
// neither held nor stored is unknown.
func (s *Server) logOf(ctx context.Context, id string) ([]store.Record, error) {
	ctx, cancel := context.WithTimeout(ctx, orDefault(s.cfg.StoreTimeout, defaultStoreTimeout))
	defer cancel()
	recs, err := s.cfg.Store.Events(ctx, id)
	if err != nil {
		return nil, failed(errDataUnreadable, "reading session "+id+" for its cases", err)
	}
	if _, held := s.find(id); len(recs) == 0 && !held {
		return nil, fmt.Errorf("%w %s", errUnknownSession, id)
	}
	return recs, nil
}

// targetsOfQuery reads the target sessions of a GET or DELETE from the
// query, as POST bodies name them: session=<id> (repeated), class=<id> or
// all=true.
func targetsOfQuery(c echo.Context) (injectRequest, error) {
	q := c.QueryParams()
	var class *string
	if v, ok := q["class"]; ok {
		class = &v[0]
	}
	all := q.Get("all") == "true"
	if v := q.Get("all"); v != "" && v != "true" {
		return injectRequest{}, badRequest(`"all" is true or absent, not %q`, v)
	}
	return decodeTargets(q["session"], all, class)
}

// caseListing is one case of GET /api/code/cases: the case as the target
// sessions hold it (by name: the first added wins the frames shown), when
// it was first added and by whom, and how the sessions holding it do.
type caseListing struct {
	Name   string      `json:"name"`
	Frames model.Trace `json:"frames"`
	Words  []string    `json:"words"`
	By     string      `json:"by"`
	Added  string      `json:"added"`
	// Sessions hold the case; Passing pass it in their latest check and
	// Checked have a check of it (the others have no program yet, or
	// are being checked).
	Sessions int `json:"sessions"`
	Passing  int `json:"passing"`
	Checked  int `json:"checked"`
}

// listCases answers GET /api/code/cases?class=…|session=…|all=true: the
// instructor's cases the target sessions hold, read from their logs, in
// the order first added, with how many of them pass each.
func (s *Server) listCases(c echo.Context) error {
	req, err := targetsOfQuery(c)
	if err != nil {
		return err
	}
	if err := s.injectAllowed(c, req); err != nil {
		return err
	}
	var ids []string
	switch {
	case req.all:
		for _, sess := range s.allSessions() {
			ids = append(ids, sess.id)
		}
	case req.class != "":
		for _, sess := range s.sessionsIn(req.class) {
			ids = append(ids, sess.id)
		}
	default:
		ids = req.sessions
	}
	ctx := c.Request().Context()
	var list []*caseListing
	byName := map[string]*caseListing{}
	for _, id := range ids {
		recs, err := s.logOf(ctx, id)
		if errors.Is(err, errUnknownSession) && (req.all || req.class != "") {
			continue // deleted since it was listed
		}
		if err != nil {
			return err
		}
		held := map[string]bool{}
		for _, r := range recs {
			e := r.Event
			if e.Case == nil {
				continue
			}
			switch e.Kind {
			case model.CaseAdded:
				held[e.Case.Name] = true
				if byName[e.Case.Name] == nil {
					l := &caseListing{Name: e.Case.Name, Frames: e.Case.Frames, Words: e.Case.Frames.Words(),
						By: e.By.String(), Added: r.Time.UTC().Format(time.RFC3339)}
					byName[e.Case.Name] = l
					list = append(list, l)
				}
			case model.CaseRemoved:
				delete(held, e.Case.Name)
			}
		}
		var own []model.CaseOutcome
		if sess, ok := s.find(id); ok {
			if row, _ := sess.codeOf(); row != nil && row.Status != codeChecking {
				own = row.Own
			}
		}
		for name := range held {
			l := byName[name]
			l.Sessions++
			for _, o := range own {
				if o.Case == name {
					l.Checked++
					if o.Passed {
						l.Passing++
					}
				}
			}
		}
	}
	out := struct {
		Cases []*caseListing `json:"cases"`
	}{Cases: slices.DeleteFunc(list, func(l *caseListing) bool { return l.Sessions == 0 })}
	if out.Cases == nil {
		out.Cases = []*caseListing{}
	}
	return c.JSON(http.StatusOK, out)
}

// playSides answers POST /lab/:id/code/play, {"frames": [<client frames>]}:
// the trace played side by side on the lab's model and on the session's
// latest program (compiled first if it is ReScript), every step of both,
// for the student's failure view: a step of their failure, or a branch
// from one (the session's address is the grant, as for its failure). The
// program runs in the sandbox under a check's caps and deadline, and each
// play spends one of its payer's allowance of plays (Server.payer).
func (s *Server) playSides(c echo.Context) error {
	id, err := sessionID(c)
	if err != nil {
		return err
	}
	body, err := s.jsonBody(c)
	if err != nil {
		return err
	}
	t, err := decodeTraceBody(body)
	if err != nil {
		return err
	}
	sess, ok := s.find(id)
	if !ok {
		return fmt.Errorf("%w %s", errUnknownSession, id)
	}
	in := sess.codeInput()
	if in.Submissions == 0 {
		return errNoProgram
	}
	if err := s.allowPlay(id, c.RealIP()); err != nil {
		return err
	}
	steps, err := s.checker.play(c.Request().Context(), in, t)
	if err != nil {
		return err
	}
	type step struct {
		Frame model.Trace `json:"frame"` // one frame, written as a trace's
		Words string      `json:"words"`
		model.StepSides
	}
	out := struct {
		Steps []step `json:"steps"`
	}{Steps: make([]step, len(steps))}
	for i, st := range steps {
		f := model.Trace{st.Frame}
		out.Steps[i] = step{Frame: f, Words: f.Words()[0], StepSides: st}
	}
	return c.JSON(http.StatusOK, out)
}

// decodeTraceBody is the one place a played trace is decoded:
// {"frames": [<client frames>]}, each decoded as the student's frames
// are, the whole checked as a case is.
func decodeTraceBody(body []byte) (model.Trace, error) {
	var in struct {
		Frames []json.RawMessage `json:"frames"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil || dec.More() {
		return nil, badRequest(`the body must be one JSON object {"frames": [...]}`)
	}
	if len(in.Frames) > model.MaxSideBySideFrames {
		return nil, badRequest("a trace has at most %d frames, not %d", model.MaxSideBySideFrames, len(in.Frames))
	}
	t := make(model.Trace, 0, len(in.Frames))
	for i, raw := range in.Frames {
		cmd, err := decodeFrame(raw, model.Student)
		if err != nil {
			return nil, badRequest("frame %d: %v", i+1, err)
		}
		t = append(t, model.Command{Kind: cmd.Kind, Raw: cmd.Raw, Message: cmd.Message})
	}
	if err := model.ValidateTrace(t); err != nil {
		return nil, badRequest("the trace cannot be played: %v", err)
	}
	return t, nil
}

// play plays t side by side on the model and on in's program, under the
// check's deadline and the sandbox's caps.
func (k *checker) play(ctx context.Context, in model.CodeInput, t model.Trace) ([]model.StepSides, error) {
	ctx, cancel := context.WithTimeout(ctx, k.deadline)
	defer cancel()
	source := in.Source
	if in.Lang == model.ReScript {
		out, res, ok, _ := k.compile(ctx, in)
		if !ok {
			return nil, programError(res.Error)
		}
		source = out.JS
	}
	newClient, sub, err := jsclient.Load(ctx, source, k.budget)
	if err != nil {
		var se *jsclient.SourceError
		if errors.As(err, &se) {
			return nil, programError(se.Message)
		}
		return nil, fmt.Errorf("%w: %v", errCannotPlay, err)
	}
	defer sub.Close()
	unhook := context.AfterFunc(ctx, sub.Close)
	defer unhook()
	steps, err := model.SideBySide(newClient, t)
	if err != nil {
		return nil, badRequest("the trace cannot be played: %v", err)
	}
	return steps, nil
}

// allowPlay spends one of the allowance of plays of session id's payer
// (its class, or addr), or says when to try again.
func (s *Server) allowPlay(id, addr string) error {
	if ok, wait := s.addrs.AllowPlay(s.payer(id, addr)); !ok {
		return fmt.Errorf("%w (plays of a step from your class or network): %s", errCodeRate, retryIn(wait))
	}
	return nil
}

// programError is a program that cannot be played: it does not compile
// or load (the same words its check shows).
func programError(msg string) error {
	return requestErrorf(http.StatusUnprocessableEntity, "%s", msg)
}

// keepOwnCase answers POST /lab/:id/code/cases, {"name", "frames"}: a
// student keeps a trace (a branch of their failure that tells their
// program apart from the model) as a case of their own session only,
// checked with every later submission as an instructor's case is. It
// spends one of its payer's allowance of plays (Server.payer).
func (s *Server) keepOwnCase(c echo.Context) error {
	id, err := sessionID(c)
	if err != nil {
		return err
	}
	body, err := s.jsonBody(c)
	if err != nil {
		return err
	}
	var in struct {
		Name   string          `json:"name"`
		Frames json.RawMessage `json:"frames"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil || dec.More() {
		return badRequest(`the body must be one JSON object {"name": "…", "frames": [...]}`)
	}
	t, err := decodeTraceBody([]byte(`{"frames":` + string(in.Frames) + `}`))
	if err != nil {
		return err
	}
	cs := model.Case{Name: strings.TrimSpace(in.Name), Frames: t}
	if cs.Name == "" {
		return badRequest(`give the case a name in "name"`)
	}
	if err := checkCase(cs); err != nil {
		return err
	}
	sess, ok := s.find(id)
	if !ok {
		return fmt.Errorf("%w %s", errUnknownSession, id)
	}
	if err := s.allowPlay(id, c.RealIP()); err != nil {
		return err
	}
	done := make(chan outcome, 1)
	sess.submit(pending{cmd: model.Command{Kind: model.AddCase, By: model.Student, Case: &cs}, done: done})
	if o := <-done; o.err != nil {
		return o.err
	}
	return c.JSON(http.StatusOK, struct {
		Case string `json:"case"`
	}{cs.Name})
}
