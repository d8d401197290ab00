package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/toolcall-lab/lab/internal/qr"
	"github.com/toolcall-lab/lab/store"
)

// Classes: the instructor's API for classes (docs/classes.md), the class
// console and projector pages, and deleting sessions. A class, its join
// code, its members and its key live in the store (store.Classes); the
// server keeps only which class each session it holds belongs to
// (Server.classOf), fixed when the session joins.

// maxTitleRunes bounds a class title.
const maxTitleRunes = 100

// idleOpenLab is how long an open-lab session must have been idle (no
// change, no open tab) for "delete idle open-lab sessions" to take it.
const idleOpenLab = time.Hour

// classJSON is a class as the API shows it. Key is there only when the key
// was just made (creation, rotation): the store keeps its hash only.
type classJSON struct {
	ID       string    `json:"id"`
	Code     string    `json:"code"`
	Title    string    `json:"title"`
	JoinURL  string    `json:"joinUrl"`
	Key      string    `json:"key,omitempty"`
	Open     bool      `json:"open"`
	Created  time.Time `json:"created"`
	Students int       `json:"students"`
	// PredictionsRequired: the class's students must predict each
	// delivery (POST /api/classes/{id}/settings).
	PredictionsRequired bool `json:"predictionsRequired"`
}

func (s *Server) classJSON(c echo.Context, cl store.Class) classJSON {
	return classJSON{
		ID: cl.ID, Code: cl.Code, Title: cl.Title, JoinURL: s.joinURL(c.Request(), cl.Code),
		Open: cl.Open, Created: cl.Created, Students: s.studentsIn(cl.ID),
		PredictionsRequired: cl.PredictionsRequired,
	}
}

// joinURL is the address students open for code: under Config.PublicURL,
// else under the address this request reached the lab at.
func (s *Server) joinURL(r *http.Request, code string) string {
	base := strings.TrimSuffix(s.cfg.PublicURL, "/")
	if base == "" {
		scheme := "http"
		if s.overTLS(r) {
			scheme = "https"
		}
		base = scheme + "://" + r.Host
	}
	return base + "/j/" + code
}

// answerClass answers {"class": <class>}, as every class route that
// changes one does.
func answerClass(c echo.Context, status int, cl classJSON) error {
	return c.JSON(status, struct {
		Class classJSON `json:"class"`
	}{cl})
}

// classOfRequest reads the :id class, which the request's grant must reach.
func (s *Server) classOfRequest(c echo.Context) (store.Class, error) {
	return s.grantedClass(c, c.Param("id"))
}

// grantedClass reads class id, which the request's grant must reach:
// else 403, 404 or 503 as an Error.
func (s *Server) grantedClass(c echo.Context, id string) (store.Class, error) {
	if !grantFrom(c).allows(id) {
		return store.Class{}, errForbidden
	}
	if !canonicalID(id) {
		return store.Class{}, errNoSuchClass
	}
	cl, err := s.cfg.Store.Class(c.Request().Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Class{}, errNoSuchClass
	}
	if err != nil {
		return store.Class{}, failed(errDataUnavailable, "reading a class", err)
	}
	return cl, nil
}

// handled turns errAnswered into nil for the handler to return.
func handled(err error) error {
	if errors.Is(err, errAnswered) {
		return nil
	}
	return err
}

// readJSON decodes a JSON request body into v: one object, no unknown
// fields, sent as application/json (which other sites' forms cannot send).
func (s *Server) readJSON(c echo.Context, v any) error {
	r := c.Request()
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return errNotJSON
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), r.Body, 64<<10))
	if err != nil {
		return badRequest("reading the request body failed (at most 64 KiB)")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("the body is not a valid request: %v", err)
	}
	if dec.More() {
		return badRequest("the body must hold one JSON object")
	}
	return nil
}

// normalizeTitle trims a class title and checks it: 1 to maxTitleRunes
// characters, no control or format characters.
func normalizeTitle(t string) (string, error) {
	t = strings.TrimSpace(t)
	switch n := utf8.RuneCountInString(t); {
	case n == 0:
		return "", badRequest(`"title" must not be empty`)
	case n > maxTitleRunes:
		return "", badRequest(`"title" is longer than %d characters`, maxTitleRunes)
	case strings.IndexFunc(t, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }) >= 0:
		return "", badRequest(`"title" must not hold control or format characters`)
	}
	return t, nil
}

// withFreeCode runs try with new codes until one is not taken by another
// open class.
func withFreeCode(first string, try func(code string) error) (string, error) {
	code := first
	for range 32 {
		err := try(code)
		if !errors.Is(err, store.ErrCodeTaken) {
			return code, err
		}
		code = store.NewCode()
	}
	return "", errors.New("no free join code found in 32 draws")
}

// createClass answers POST /api/classes.
func (s *Server) createClass(c echo.Context) error {
	var in struct {
		Title               *string `json:"title"`
		PredictionsRequired bool    `json:"predictionsRequired"`
	}
	if err := s.readJSON(c, &in); err != nil {
		return err
	}
	if in.Title == nil {
		return badRequest(`give the class a "title"`)
	}
	title, err := normalizeTitle(*in.Title)
	if err != nil {
		return err
	}
	key := store.NewSecret()
	cl := store.Class{
		ID: uuid.NewString(), Title: title, Open: true,
		Created: s.cfg.Now().UTC().Truncate(time.Millisecond), KeyHash: store.HashSecret(key),
		PredictionsRequired: in.PredictionsRequired,
	}
	ctx := c.Request().Context()
	cl.Code, err = withFreeCode(store.NewCode(), func(code string) error {
		cl.Code = code
		return s.cfg.Store.CreateClass(ctx, cl)
	})
	if err != nil {
		return failed(errDataUnavailable, "creating a class", err)
	}
	out := s.classJSON(c, cl)
	out.Key = key
	return answerClass(c, http.StatusCreated, out)
}

// listClasses answers GET /api/classes.
func (s *Server) listClasses(c echo.Context) error {
	classes, err := s.cfg.Store.Classes(c.Request().Context())
	if err != nil {
		return failed(errDataUnavailable, "listing classes", err)
	}
	out := make([]classJSON, len(classes))
	for i, cl := range classes {
		out[i] = s.classJSON(c, cl)
	}
	return c.JSON(http.StatusOK, struct {
		Classes []classJSON `json:"classes"`
	}{out})
}

// getClass answers GET /api/classes/:id: the class and its sessions' rows.
func (s *Server) getClass(c echo.Context) error {
	cl, err := s.classOfRequest(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, struct {
		Class    classJSON    `json:"class"`
		Sessions []sessionRow `json:"sessions"`
	}{s.classJSON(c, cl), s.rowsIn(cl.ID)})
}

// setClassOpen answers POST /api/classes/:id/close and …/reopen. Reopening
// keeps the code unless another open class has taken it meanwhile.
func (s *Server) setClassOpen(open bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		cl, err := s.classOfRequest(c)
		if err != nil {
			return err
		}
		ctx := c.Request().Context()
		cl.Code, err = withFreeCode(cl.Code, func(code string) error {
			return s.cfg.Store.SetClassOpen(ctx, cl.ID, open, code)
		})
		if errors.Is(err, store.ErrNotFound) {
			return errNoSuchClass
		}
		if err != nil {
			return failed(errDataUnavailable, "opening or closing a class", err)
		}
		cl.Open = open
		return answerClass(c, http.StatusOK, s.classJSON(c, cl))
	}
}

// classSettings answers POST /api/classes/:id/settings
// {"predictionsRequired": bool}: the setting is stored, then applied to
// every session of the class (a member joining meanwhile reads it from the
// store after it is counted in the class: startMember).
func (s *Server) classSettings(c echo.Context) error {
	cl, err := s.classOfRequest(c)
	if err != nil {
		return err
	}
	var in struct {
		PredictionsRequired *bool `json:"predictionsRequired"`
	}
	if err := s.readJSON(c, &in); err != nil {
		return err
	}
	if in.PredictionsRequired == nil {
		return badRequest(`give the setting to change: {"predictionsRequired": true or false}`)
	}
	err = s.cfg.Store.SetClassPredictions(c.Request().Context(), cl.ID, *in.PredictionsRequired)
	if errors.Is(err, store.ErrNotFound) {
		return errNoSuchClass
	}
	if err != nil {
		return failed(errDataUnavailable, "changing a class's settings", err)
	}
	cl.PredictionsRequired = *in.PredictionsRequired
	s.requirePredictionsIn(cl.ID, cl.PredictionsRequired)
	return answerClass(c, http.StatusOK, s.classJSON(c, cl))
}

// rotateKey answers POST /api/classes/:id/key: a new class key, shown once;
// the old key and every login made with it stop working.
func (s *Server) rotateKey(c echo.Context) error {
	cl, err := s.classOfRequest(c)
	if err != nil {
		return err
	}
	key := store.NewSecret()
	cl.KeyHash = store.HashSecret(key)
	if err := s.cfg.Store.SetClassKey(c.Request().Context(), cl.ID, cl.KeyHash); errors.Is(err, store.ErrNotFound) {
		return errNoSuchClass
	} else if err != nil {
		return failed(errDataUnavailable, "rotating a class key", err)
	}
	out := s.classJSON(c, cl)
	out.Key = key
	return answerClass(c, http.StatusOK, out)
}

// deleteClass answers DELETE /api/classes/:id: the class goes with its
// sessions and their events; open tabs of those sessions are closed.
func (s *Server) deleteClass(c echo.Context) error {
	cl, err := s.classOfRequest(c)
	if err != nil {
		return err
	}
	s.closeTabs(s.sessionsIn(cl.ID))
	ids, err := s.cfg.Store.DeleteClass(c.Request().Context(), cl.ID)
	if errors.Is(err, store.ErrNotFound) {
		return errNoSuchClass
	}
	if err != nil {
		return failed(errDataUnavailable, "deleting a class", err)
	}
	s.forget(ids)
	return c.JSON(http.StatusOK, struct {
		Deleted []string `json:"deleted"`
	}{orEmpty(ids)})
}

func orEmpty(ids []string) []string {
	if ids == nil {
		return []string{}
	}
	return ids
}

// classQR answers GET /api/classes/:id/qr.png: the join URL as a QR code.
func (s *Server) classQR(c echo.Context) error {
	cl, err := s.classOfRequest(c)
	if err != nil {
		return err
	}
	png, err := qr.PNG(s.joinURL(c.Request(), cl.Code))
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store") // the code changes when a reopen must
	return c.Blob(http.StatusOK, "image/png", png)
}

// exportClass answers GET /api/classes/:id/export.csv: the class's
// sessions' events, as GET /api/export.csv writes every session's.
func (s *Server) exportClass(c echo.Context) error {
	cl, err := s.classOfRequest(c)
	if err != nil {
		return err
	}
	all, err := s.cfg.Store.Sessions(c.Request().Context())
	if err != nil {
		return failed(errDataUnavailable, "exporting a class", err)
	}
	in := s.sessionIDsIn(cl.ID)
	sessions := slices.DeleteFunc(all, func(x store.Session) bool { return !in[x.ID] })
	return s.writeCSV(c, "lab-class-"+cl.Code+".csv", sessions)
}

// classPage serves the class console and projectorPage its projector
// page, to credentials that reach the class.
func (s *Server) classPage(page func(*Server) []byte) echo.HandlerFunc {
	return func(c echo.Context) error {
		if _, err := s.classOfRequest(c); err != nil {
			return err
		}
		c.Response().Header().Set("Cache-Control", "no-store")
		return c.HTMLBlob(http.StatusOK, page(s))
	}
}

// openLabPage serves /instructor, the open lab's console, to the server's
// token only.
func (s *Server) openLabPage(c echo.Context) error {
	if !grantFrom(c).all {
		return errForbidden
	}
	return s.instructorPage(c)
}

// sessionClass answers GET /lab/:id/class for the student page: the title
// of the session's class, or null for an open-lab session.
func (s *Server) sessionClass(c echo.Context) error {
	id, err := sessionID(c)
	if err != nil {
		return err
	}
	type title struct {
		Title string `json:"title"`
	}
	var out struct {
		Class *title `json:"class"`
	}
	if class := s.classOfSession(id); class != "" {
		cl, err := s.cfg.Store.Class(c.Request().Context(), class)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return failed(errDataUnavailable, "reading a session's class", err)
		}
		if err == nil {
			out.Class = &title{cl.Title}
		}
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, out)
}

// ---- deleting sessions -------------------------------------------------------

// deleteOne answers DELETE /api/sessions/:id.
func (s *Server) deleteOne(c echo.Context) error {
	id := c.Param("id")
	return s.deleteAndAnswer(c, []string{id}, true)
}

// deleteMany answers POST /api/sessions/delete: {"sessions": [ids]} or
// {"idleOpenLab": true} (open-lab sessions idle for over an hour; the
// server token only).
func (s *Server) deleteMany(c echo.Context) error {
	var in struct {
		Sessions    []string `json:"sessions"`
		IdleOpenLab bool     `json:"idleOpenLab"`
	}
	if err := s.readJSON(c, &in); err != nil {
		return err
	}
	switch {
	case in.IdleOpenLab && len(in.Sessions) > 0:
		return badRequest(`give either "sessions" or "idleOpenLab", not both`)
	case in.IdleOpenLab:
		if !grantFrom(c).all {
			return errForbidden
		}
		return s.deleteAndAnswer(c, s.idleOpenLabSessions(), false)
	case len(in.Sessions) == 0:
		return badRequest(`name the sessions to delete in "sessions", or set "idleOpenLab": true`)
	}
	return s.deleteAndAnswer(c, in.Sessions, false)
}

// deleteAndAnswer deletes the sessions the grant reaches. Any other
// session in the list refuses the whole request (403); an unknown one is
// 404 when it was the only one asked for, else skipped.
func (s *Server) deleteAndAnswer(c echo.Context, ids []string, one bool) error {
	g := grantFrom(c)
	var found []*session
	for _, id := range ids {
		sess, ok := s.find(id)
		if !ok {
			if one {
				return fmt.Errorf("%w %s", errUnknownSession, id)
			}
			continue
		}
		if !g.allows(s.classOfSession(id)) {
			return errForbidden
		}
		found = append(found, sess)
	}
	deleted, err := s.deleteSessions(c.Request().Context(), found)
	if err != nil {
		return failed(errDataUnavailable, "deleting sessions", err)
	}
	return c.JSON(http.StatusOK, struct {
		Deleted []string `json:"deleted"`
	}{orEmpty(deleted)})
}

// deleteSessions deletes sessions with their events: their tabs are closed,
// they are marked expiring (new connections are refused meanwhile), the
// store deletes them, and they leave the server once it has.
func (s *Server) deleteSessions(ctx context.Context, sessions []*session) ([]string, error) {
	s.closeTabs(sessions)
	var ids []string
	s.mu.Lock()
	for _, sess := range sessions {
		if !sess.expiring {
			sess.expiring = true
			ids = append(ids, sess.id)
		}
	}
	s.mu.Unlock()
	if len(ids) == 0 {
		return nil, nil
	}
	err := s.cfg.Store.Delete(ctx, ids)
	if err != nil {
		s.mu.Lock()
		for _, sess := range sessions {
			sess.expiring = false
		}
		s.mu.Unlock()
		return nil, fmt.Errorf("deleting %d sessions: %w", len(ids), err)
	}
	s.forget(ids)
	s.log.Info("deleted sessions", "count", len(ids))
	return ids, nil
}

// forget drops deleted sessions from the server.
func (s *Server) forget(ids []string) {
	s.mu.Lock()
	for _, id := range ids {
		if sess, ok := s.sessions[id]; ok {
			s.uncount(sess)
		}
		delete(s.sessions, id)
		s.classOf.leave(id)
	}
	s.mu.Unlock()
	s.overview.mark()
}

// closeTabs starts closing the student tabs of sessions about to be
// deleted, outside every lock. Each close handshake runs in a goroutine
// counted in Server.handlers (so Shutdown waits for it) and ends within the
// WebSocket library's handshake timeout; the request does not wait for a
// client slow to answer.
func (s *Server) closeTabs(sessions []*session) {
	var open []*conn
	for _, sess := range sessions {
		sess.mu.Lock()
		open = append(open, sess.conns...)
		sess.mu.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return // CloseSockets closes them
	}
	for _, c := range open {
		s.handlers.Add(1)
		go func() {
			defer s.handlers.Done()
			closeDeleted.closeConn(c.ws)
		}()
	}
}

// idleOpenLabSessions returns the open-lab sessions with no open tab and
// no change for idleOpenLab.
func (s *Server) idleOpenLabSessions() []string {
	cutoff := s.cfg.Now().Add(-idleOpenLab)
	var ids []string
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, sess := range s.sessions {
		if s.classOf.of[id] != "" || sess.admitted > 0 {
			continue
		}
		sess.mu.Lock()
		idle := len(sess.conns) == 0 && sess.lastActive.Before(cutoff)
		sess.mu.Unlock()
		if idle {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// renameMember keeps a class's names unique (docs/classes.md): a member's
// rename to a name another member of the class has is refused (name_taken),
// a blank one too (a class needs names), and an accepted one is stored with
// the membership, where the door checks names. Open-lab sessions pass.
// Called by a session's drainer with no lock held.
func (s *Server) renameMember(id, name string) error {
	class := s.classOfSession(id)
	if class == "" {
		return nil
	}
	if name == "" {
		return errNameRequired
	}
	err := s.cfg.Store.RenameMember(context.Background(), id, name)
	switch {
	case errors.Is(err, store.ErrNameTaken):
		return errNameTaken
	case errors.Is(err, store.ErrNotFound):
		return nil // the membership went with a deletion under way
	case err != nil:
		return failed(errCannotSave, "storing a rename", err)
	}
	return nil
}

// ---- which sessions are in which class ---------------------------------------

// classOfSession is the class session id joined, "" for the open lab.
func (s *Server) classOfSession(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.classOf.of[id]
}

// sessionsIn returns the sessions the server holds in class ("" for the
// open lab), ordered by id.
func (s *Server) sessionsIn(class string) []*session {
	s.mu.Lock()
	var out []*session
	for id, sess := range s.sessions {
		if s.classOf.of[id] == class {
			out = append(out, sess)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b *session) int { return strings.Compare(a.id, b.id) })
	return out
}

func (s *Server) sessionIDsIn(class string) map[string]bool {
	in := make(map[string]bool)
	for _, sess := range s.sessionsIn(class) {
		in[sess.id] = true
	}
	return in
}

func (s *Server) studentsIn(class string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for id := range s.sessions {
		if s.classOf.of[id] == class {
			n++
		}
	}
	return n
}

// rowsIn returns the overview rows of class ("" for the open lab).
func (s *Server) rowsIn(class string) []sessionRow {
	in := s.sessionsIn(class)
	rows := make([]sessionRow, len(in))
	for i, sess := range in {
		rows[i] = sess.overviewRow()
		rows[i].Class = class
	}
	return rows
}

// tableIn is rowsIn with each row's JSON (session.tableRow), for the
// overview's tables.
func (s *Server) tableIn(class string) ([]sessionRow, [][]byte) {
	in := s.sessionsIn(class)
	rows, encoded := make([]sessionRow, len(in)), make([][]byte, len(in))
	for i, sess := range in {
		rows[i], encoded[i] = sess.tableRow(class)
	}
	return rows, encoded
}

// loadSettings applies the classes' settings to their loaded sessions (for
// Start, before the sessions are shared: each re-encodes its frame at once).
func (s *Server) loadSettings(ctx context.Context, loaded []*session, classOf map[string]string) error {
	classes, err := s.cfg.Store.Classes(ctx)
	if err != nil {
		return fmt.Errorf("loading class settings: %w", err)
	}
	required := make(map[string]bool, len(classes))
	for _, cl := range classes {
		required[cl.ID] = cl.PredictionsRequired
	}
	for _, sess := range loaded {
		if required[classOf[sess.id]] {
			sess.setRequirePredictions(true)
		}
	}
	return nil
}

// loadMembers reads which class each loaded session joined (for Start).
// A membership whose session is gone (a join cut short by a crash) is
// forgotten, so that its name is free again. It touches no Server state.
func (s *Server) loadMembers(ctx context.Context, loaded []*session) (map[string]string, error) {
	members, err := s.cfg.Store.Members(ctx)
	if err != nil {
		return nil, fmt.Errorf("loading class members: %w", err)
	}
	held := make(map[string]bool, len(loaded))
	for _, sess := range loaded {
		held[sess.id] = true
	}
	classOf := make(map[string]string, len(members))
	var orphans []string
	for _, m := range members {
		if held[m.Session] {
			classOf[m.Session] = m.Class
		} else {
			orphans = append(orphans, m.Session)
		}
	}
	if len(orphans) > 0 {
		if err := s.cfg.Store.RemoveMembers(ctx, orphans); err != nil {
			return nil, fmt.Errorf("forgetting %d members without a session: %w", len(orphans), err)
		}
	}
	return classOf, nil
}
