package server

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/toolcall-lab/lab/store"
)

// grant is what a request's instructor credentials allow: the server's
// token grants every class and the open lab (all); a class key, or a login
// made with one, grants that class only.
type grant struct {
	all   bool
	class string // without all: the one class granted
}

// allows reports whether g may see and act on class ("" is the open lab).
func (g grant) allows(class string) bool {
	return g.all || (class != "" && class == g.class)
}

// grantKey is where requireInstructor leaves the grant in echo's context.
const grantKey = "lab.grant"

// grantFrom returns the grant requireInstructor found.
func grantFrom(c echo.Context) grant {
	g, _ := c.Get(grantKey).(grant)
	return g
}

// errForbidden refuses a request whose credentials do not reach its target.
var errForbidden = errors.New("these credentials do not give access to this: a class key opens its own class only")

// grantOf resolves a request's credentials: a bearer secret (the token or a
// class key) or a console login cookie. A store that cannot be read grants
// nothing (and is logged).
func (s *Server) grantOf(r *http.Request) (grant, bool) {
	ctx := r.Context()
	if got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		l, ok := s.credentialLogin(ctx, got)
		return grant{all: l.Class == "", class: l.Class}, ok
	}
	ck, err := r.Cookie(instructorCookie)
	if err != nil || ck.Value == "" {
		return grant{}, false
	}
	l, err := s.cfg.Store.Login(ctx, store.HashSecret(ck.Value))
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			s.log.Warn("reading a console login", "err", err)
		}
		return grant{}, false
	}
	if !s.cfg.Now().Before(l.Expires) {
		return grant{}, false
	}
	// A login lasts only as long as the secret it was made with: another
	// token after a restart, or a rotated class key, ends it.
	want, ok := s.credentialOf(ctx, l.Class)
	if !ok || want != l.Credential {
		return grant{}, false
	}
	return grant{all: l.Class == "", class: l.Class}, true
}

// credentialLogin checks a presented secret and returns the login it would
// start (without its id): the server token's, or a class key's.
func (s *Server) credentialLogin(ctx context.Context, secret string) (store.Login, bool) {
	l := store.Login{Expires: s.cfg.Now().Add(loginTTL)}
	if secret == "" {
		return l, false
	}
	if s.auth.tokenOK(secret) {
		l.Credential = s.auth.token
		return l, true
	}
	c, err := s.cfg.Store.ClassByKey(ctx, store.HashSecret(secret))
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			s.log.Warn("checking a class key", "err", err)
		}
		return l, false
	}
	l.Class, l.Credential = c.ID, c.KeyHash
	return l, true
}

// credentialOf is the hash of the secret that logins of class ("" for the
// server token) must have been made with.
func (s *Server) credentialOf(ctx context.Context, class string) ([32]byte, bool) {
	if class == "" {
		return s.auth.token, !s.auth.unset
	}
	c, err := s.cfg.Store.Class(ctx, class)
	if err != nil {
		return [32]byte{}, false
	}
	return c.KeyHash, true
}

// serverWide lets through requests whose grant covers everything: routes
// that span classes, the open lab, or the server.
func serverWide(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !grantFrom(c).all {
			return answerError(c, http.StatusForbidden, errForbidden.Error())
		}
		return next(c)
	}
}
