package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/toolcall-lab/lab/model"
	"github.com/toolcall-lab/lab/store"
)

// Joining a class (docs/classes.md): GET /join asks for the code, GET
// /j/{code} (the QR code's target) for the name, and POST /j/{code} makes a
// session in the class under that name and sends the browser to it. A
// cookie per class sends the same browser back to its own session. The
// pages are plain HTML forms rendered here (static/join.html), no script.

const (
	// joinCookiePrefix + class id names the cookie that holds the session
	// a browser joined the class with.
	joinCookiePrefix = "lab_join_"
	// joinCookieAge is how long that cookie lasts.
	joinCookieAge = 30 * 24 * time.Hour
)

// maxNameFormSize bounds the join form's body.
const maxNameFormSize = 4 << 10

// joinForm is what the join template shows.
type joinForm struct {
	Code  string // the class's code: the name form; "" for the code form
	Title string // the class's title
	Name  string // the name typed, to type again
	Typed string // the code typed, to type again
	Error string // what went wrong, in words
}

// joinPage renders the join template with status.
func (s *Server) joinPage(c echo.Context, status int, f joinForm) error {
	var buf bytes.Buffer
	if err := s.joinTmpl.Execute(&buf, f); err != nil {
		return fmt.Errorf("rendering the join page: %w", err)
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.HTMLBlob(status, buf.Bytes())
}

// joinCodeForm answers GET /join: the code form, or with ?code= the class's
// name form (by a redirect to /j/{code}).
func (s *Server) joinCodeForm(c echo.Context) error {
	typed := strings.TrimSpace(c.QueryParam("code"))
	if typed == "" {
		return s.joinPage(c, http.StatusOK, joinForm{})
	}
	if !store.ValidCode(typed) {
		return s.joinPage(c, http.StatusBadRequest, joinForm{Typed: cut(typed, 20), Error: "A class code is six digits. Check the code on the screen and try again."})
	}
	return c.Redirect(http.StatusSeeOther, "/j/"+typed)
}

// joinClass finds the open class of the :code, or answers a page that
// says why not: 429 over the rate limit, 404 for an unknown code, 410 for a
// closed class. Codes that name no class are counted per address (guessing
// them costs); a request for a class is counted in the class's allowance,
// sized by its members, so a hall behind one router joins as its students
// would from homes of their own.
func (s *Server) joinClass(c echo.Context) (store.Class, error) {
	addr := c.RealIP()
	if !s.addrs.MayKnock(addr) {
		return store.Class{}, s.tooManyJoins(c)
	}
	code := c.Param("code")
	var cl store.Class
	err := store.ErrNotFound
	if store.ValidCode(code) {
		cl, err = s.cfg.Store.ClassByCode(c.Request().Context(), code)
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		s.addrs.JoinMissed(addr) // guessing codes costs more
		return store.Class{}, s.answered(s.joinPage(c, http.StatusNotFound, joinForm{Typed: cut(code, 20), Error: "No class has the code " + cut(code, 20) + ". Check the code on the screen and try again."}))
	case err != nil:
		s.log.Error("finding a class by code", "err", err)
		return store.Class{}, s.answered(s.joinPage(c, http.StatusServiceUnavailable, joinForm{Typed: code, Error: "The lab cannot look up classes right now. Try again in a moment."}))
	case !cl.Open:
		return store.Class{}, s.answered(s.joinPage(c, http.StatusGone, joinForm{Typed: code, Error: "The class " + cl.Title + " is closed: nobody can join it now. Ask your instructor, or type another code."}))
	case !s.addrs.AllowJoin(s.classPayer(cl.ID)):
		return store.Class{}, s.tooManyJoins(c)
	}
	return cl, nil
}

// tooManyJoins answers a join over its allowance: 429, and when to try
// again.
func (s *Server) tooManyJoins(c echo.Context) error {
	c.Response().Header().Set("Retry-After", "5")
	return s.answered(s.joinPage(c, http.StatusTooManyRequests, joinForm{Error: "Too many attempts to join lately. Wait five seconds and try again."}))
}

// answered turns a written answer into errAnswered.
func (s *Server) answered(err error) error {
	if err != nil {
		return err
	}
	return errAnswered
}

// returning sends a browser that already joined cl back to its session.
func (s *Server) returning(c echo.Context, cl store.Class) (string, bool) {
	ck, err := c.Cookie(joinCookiePrefix + cl.ID)
	if err != nil || !canonicalID(ck.Value) {
		return "", false
	}
	if _, ok := s.find(ck.Value); !ok || s.classOfSession(ck.Value) != cl.ID {
		return "", false
	}
	return ck.Value, true
}

// joinNameForm answers GET /j/:code: the name form, or the session this
// browser joined the class with.
func (s *Server) joinNameForm(c echo.Context) error {
	cl, err := s.joinClass(c)
	if err != nil {
		return handled(err)
	}
	if id, ok := s.returning(c, cl); ok {
		return c.Redirect(http.StatusSeeOther, "/lab/"+id)
	}
	return s.joinPage(c, http.StatusOK, joinForm{Code: cl.Code, Title: cl.Title})
}

// join answers POST /j/:code (form field name): a new session in the class,
// named, and 303 to it; the same browser is sent back to its session.
func (s *Server) join(c echo.Context) error {
	cl, err := s.joinClass(c)
	if err != nil {
		return handled(err)
	}
	if id, ok := s.returning(c, cl); ok {
		return c.Redirect(http.StatusSeeOther, "/lab/"+id)
	}
	c.Request().Body = http.MaxBytesReader(c.Response(), c.Request().Body, maxNameFormSize)
	typed := c.FormValue("name")
	form := joinForm{Code: cl.Code, Title: cl.Title, Name: cut(typed, 200)}
	name, problem := joinName(typed)
	if problem != "" {
		form.Error = problem
		return s.joinPage(c, http.StatusBadRequest, form)
	}
	form.Name = name
	id := uuid.NewString()
	ctx := c.Request().Context()
	err = s.cfg.Store.AddMember(ctx, store.Member{Session: id, Class: cl.ID, Name: name, Joined: s.cfg.Now().UTC().Truncate(time.Millisecond)})
	switch {
	case errors.Is(err, store.ErrNameTaken):
		form.Error = "Someone in this class is already called " + name + ". Add an initial or a number to yours."
		return s.joinPage(c, http.StatusConflict, form)
	case errors.Is(err, store.ErrClassClosed):
		return s.joinPage(c, http.StatusGone, joinForm{Typed: cl.Code, Error: "The class " + cl.Title + " has just closed: nobody can join it now."})
	case errors.Is(err, store.ErrNotFound):
		return s.joinPage(c, http.StatusNotFound, joinForm{Typed: cl.Code, Error: "This class no longer exists."})
	case err != nil:
		s.log.Error("adding a class member", "err", err)
		form.Error = "The lab cannot save right now. Try again in a moment."
		return s.joinPage(c, http.StatusServiceUnavailable, form)
	}
	if err := s.startMember(ctx, id, cl.ID, name); err != nil {
		if rmErr := s.cfg.Store.RemoveMembers(ctx, []string{id}); rmErr != nil {
			s.log.Warn("forgetting a member whose session failed", "err", rmErr)
		}
		if errors.Is(err, errTooManySessions) {
			form.Error = "The lab is full right now. Ask your instructor."
		} else {
			form.Error = classify(s.log, err).text
		}
		return s.joinPage(c, http.StatusServiceUnavailable, form)
	}
	c.SetCookie(&http.Cookie{
		Name: joinCookiePrefix + cl.ID, Value: id, Path: "/j",
		MaxAge: int(joinCookieAge / time.Second), HttpOnly: true,
		Secure: s.overTLS(c.Request()), SameSite: http.SameSiteLaxMode,
	})
	s.log.Info("joined a class", "class", cl.ID, "session", id)
	return c.Redirect(http.StatusSeeOther, "/lab/"+id)
}

// startMember makes session id in class, named: its first event is the
// rename, stored before the student's page opens.
func (s *Server) startMember(ctx context.Context, id, class, name string) error {
	s.mu.Lock()
	sess, err := s.getOrCreate(id)
	if err == nil {
		s.classOf.join(id, class)
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	// Read after the session is counted in the class, so that a setting
	// changed meanwhile reaches it either way (classSettings).
	cl, err := s.cfg.Store.Class(ctx, class)
	if err != nil {
		s.forget([]string{id})
		return fmt.Errorf("reading the class's settings: %w", err)
	}
	sess.setRequirePredictions(cl.PredictionsRequired)
	done := make(chan outcome, 1)
	sess.submit(pending{cmd: model.Command{Kind: model.Rename, By: model.Student, Name: name}, done: done})
	if o := <-done; o.err != nil {
		s.forget([]string{id})
		return o.err
	}
	return nil
}

// joinName checks a name given at the door: the rename rules
// (model.NormalizeName, the one place that decides a name) and not empty.
// Too long is refused with the limit, never cut. A refusal is the sentence
// the join page shows (problem), not an error.
func joinName(typed string) (name, problem string) {
	name, err := model.NormalizeName(typed)
	var le *model.LimitError
	switch {
	case errors.As(err, &le) && le.Max == model.MaxNameLength:
		return "", fmt.Sprintf("A name has at most %d characters; this one has %d. Shorten it: nothing is cut for you.", model.MaxNameLength, model.NameLength(strings.TrimSpace(typed)))
	case errors.As(err, &le) && le.Max == model.MaxNameBytes:
		return "", fmt.Sprintf("That name is too long to keep (at most %d bytes of text). Shorten it.", model.MaxNameBytes)
	case errors.As(err, &le):
		return "", "A letter in that name carries too many accents. Type it again."
	case err != nil:
		return "", "A name cannot hold control or invisible formatting characters (such as direction overrides). Emoji and accents are fine."
	case name == "":
		return "", "Type your name: your instructor sees it next to your work."
	}
	return name, ""
}

// parseJoinTemplate reads static/join.html.
func parseJoinTemplate(src []byte) (*template.Template, error) {
	t, err := template.New("join").Parse(string(src))
	if err != nil {
		return nil, fmt.Errorf("parsing the join page: %w", err)
	}
	return t, nil
}
