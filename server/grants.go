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

// grantOf resolves a request's credentials: a bearer secret (the token or a
// class key) or a console login cookie. ok is false for missing or wrong
// credentials; err is errCredentialsUnchecked when the store failed.
func (s *Server) grantOf(r *http.Request) (g grant, ok bool, err error) {
	ctx := r.Context()
	if got, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); found {
		l, ok, err := s.credentialLogin(ctx, got)
		return grant{all: l.Class == "", class: l.Class}, ok, err
	}
	ck, cerr := r.Cookie(instructorCookie)
	if cerr != nil || ck.Value == "" {
		return grant{}, false, nil
	}
	l, lerr := s.cfg.Store.Login(ctx, store.HashSecret(ck.Value))
	switch {
	case errors.Is(lerr, store.ErrNotFound):
		return grant{}, false, nil
	case lerr != nil:
		s.log.Warn("reading a console login", "err", lerr)
		return grant{}, false, errCredentialsUnchecked
	case !s.cfg.Now().Before(l.Expires):
		return grant{}, false, nil
	}
	// A login lasts only as long as the secret it was made with: another
	// token after a restart, or a rotated class key, ends it.
	want, found, err := s.credentialOf(ctx, l.Class)
	if err != nil || !found || want != l.Credential {
		return grant{}, false, err
	}
	return grant{all: l.Class == "", class: l.Class}, true, nil
}

// credentialLogin checks a presented secret and returns the login it would
// start (without its id): the server token's, or a class key's.
func (s *Server) credentialLogin(ctx context.Context, secret string) (store.Login, bool, error) {
	l := store.Login{Expires: s.cfg.Now().Add(loginTTL)}
	if secret == "" {
		return l, false, nil
	}
	if s.auth.tokenOK(secret) {
		l.Credential = s.auth.token
		return l, true, nil
	}
	c, err := s.cfg.Store.ClassByKey(ctx, store.HashSecret(secret))
	if errors.Is(err, store.ErrNotFound) {
		return l, false, nil
	}
	if err != nil {
		s.log.Warn("checking a class key", "err", err)
		return l, false, errCredentialsUnchecked
	}
	l.Class, l.Credential = c.ID, c.KeyHash
	return l, true, nil
}

// credentialOf is the hash of the secret that logins of class ("" for the
// server token) must have been made with; found is false for a class that
// is gone.
func (s *Server) credentialOf(ctx context.Context, class string) (hash [32]byte, found bool, err error) {
	if class == "" {
		return s.auth.token, !s.auth.unset, nil
	}
	c, err := s.cfg.Store.Class(ctx, class)
	if errors.Is(err, store.ErrNotFound) {
		return hash, false, nil
	}
	if err != nil {
		s.log.Warn("reading a login's class", "err", err)
		return hash, false, errCredentialsUnchecked
	}
	return c.KeyHash, true, nil
}

// serverWide lets through requests whose grant covers everything: routes
// that span classes, the open lab, or the server.
func serverWide(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !grantFrom(c).all {
			return errForbidden
		}
		return next(c)
	}
}
