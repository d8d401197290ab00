package server

import (
	"crypto/subtle"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/toolcall-lab/lab/store"
)

// Instructor authentication. Scripts send a secret as "Authorization:
// Bearer <secret>"; the console page logs in once with a form that posts
// it, and gets a cookie holding a random login id (never the secret) that
// the store maps to a login, so a login outlives a restart. The secret is
// the server's instructor token, which grants every class and the open lab,
// or a class key, which grants its class only (grants.go). Secrets and
// login ids are compared as hashes (so that neither their content nor their
// length shows in the timing), and never logged.

const (
	instructorCookie = "lab_instructor"
	// loginTTL is how long a console login lasts: a teaching day.
	loginTTL = 12 * time.Hour
	// maxLogins bounds the stored logins; the soonest to expire gives way
	// to a new one.
	maxLogins = 64
)

// instructorAuth checks the server's instructor token. Fixed at New.
type instructorAuth struct {
	token [32]byte // store.HashSecret of the token
	unset bool     // no token configured: the token is refused
}

func newInstructorAuth(token string) *instructorAuth {
	return &instructorAuth{token: store.HashSecret(token), unset: token == ""}
}

// tokenOK compares a presented token with the configured one.
func (a *instructorAuth) tokenOK(got string) bool {
	h := store.HashSecret(got)
	return subtle.ConstantTimeCompare(h[:], a.token[:]) == 1 && !a.unset
}

// requireInstructor lets through requests with instructor credentials (the
// console's login cookie, the bearer token or a class key), and records
// their grant for the handler (grantFrom). Others are refused: a page
// request is sent to the login form, anything else gets 401 and a JSON
// error.
func (s *Server) requireInstructor(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		g, ok, err := s.grantOf(r)
		if err != nil {
			c.Response().Header().Set("Retry-After", "2")
			return answerError(c, http.StatusServiceUnavailable, err.Error())
		}
		if ok {
			c.Set(grantKey, g)
			return next(c)
		}
		upgrade := strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
		if r.Method == http.MethodGet && !upgrade && !strings.HasPrefix(r.URL.Path, "/api/") {
			c.Response().Header().Set("Cache-Control", "no-store")
			return c.Redirect(http.StatusSeeOther, "/instructor/login")
		}
		c.Response().Header().Set("WWW-Authenticate", `Bearer realm="instructor"`)
		return c.JSON(http.StatusUnauthorized, apiErrorBody{"instructor credentials required: log in at /instructor/login or send Authorization: Bearer <token>"})
	}
}

// loginPage serves the login form.
func (s *Server) loginPage(c echo.Context) error {
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.HTMLBlob(http.StatusOK, s.loginHTML)
}

// login checks the posted token and starts a console login. A wrong token
// goes back to the form, which then says so.
func (s *Server) login(c echo.Context) error {
	c.Response().Header().Set("Cache-Control", "no-store")
	// One limiter for the whole server: guessing the token is slow, and a
	// teacher who mistypes it a few times is not locked out for long.
	if !s.loginLimiter.Allow() {
		c.Response().Header().Set("Retry-After", "1")
		return c.String(http.StatusTooManyRequests, "too many login attempts: wait a moment and try again\n")
	}
	l, ok, err := s.credentialLogin(c.Request().Context(), c.FormValue("token"))
	if err != nil {
		return c.String(http.StatusServiceUnavailable, err.Error()+"\n")
	}
	if !ok {
		return c.Redirect(http.StatusSeeOther, "/instructor/login?failed=1")
	}
	id := store.NewSecret()
	l.IDHash = store.HashSecret(id)
	if err := s.cfg.Store.SaveLogin(c.Request().Context(), l, s.cfg.Now(), maxLogins); err != nil {
		s.log.Error("saving a console login", "err", err)
		return c.String(http.StatusServiceUnavailable, "the lab cannot save the login right now; try again shortly\n")
	}
	c.SetCookie(&http.Cookie{
		Name:     instructorCookie,
		Value:    id,
		Path:     "/",
		MaxAge:   int(loginTTL / time.Second),
		HttpOnly: true,
		Secure:   s.overTLS(c.Request()),
		SameSite: http.SameSiteStrictMode,
	})
	if l.Class != "" {
		return c.Redirect(http.StatusSeeOther, "/instructor/classes/"+l.Class)
	}
	return c.Redirect(http.StatusSeeOther, "/instructor")
}

// logout ends the console login of the request, if any.
func (s *Server) logout(c echo.Context) error {
	if ck, err := c.Cookie(instructorCookie); err == nil && ck.Value != "" {
		if err := s.cfg.Store.DeleteLogin(c.Request().Context(), store.HashSecret(ck.Value)); err != nil {
			s.log.Warn("ending a console login", "err", err)
		}
	}
	c.SetCookie(&http.Cookie{
		Name: instructorCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: c.Request().TLS != nil, SameSite: http.SameSiteStrictMode,
	})
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.Redirect(http.StatusSeeOther, "/instructor/login")
}

// overTLS reports whether the browser reached the lab over HTTPS: directly,
// or through a trusted proxy that says so in X-Forwarded-Proto.
func (s *Server) overTLS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	if r.Header.Get("X-Forwarded-Proto") != "https" {
		return false
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && slices.ContainsFunc(s.cfg.TrustedProxies, func(n *net.IPNet) bool { return n.Contains(ip) })
}
