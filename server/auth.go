package server

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
)

// Instructor authentication. Scripts send the instructor token as
// "Authorization: Bearer <token>"; the console page logs in once with a form
// that posts the token, and gets a cookie holding a random login id (never
// the token) that the server maps to an instructor login. Tokens and login
// ids are compared in constant time (hashed first, so that neither their
// content nor their length shows in the timing), and never logged.

const (
	instructorCookie = "lab_instructor"
	// loginTTL is how long a console login lasts: a teaching day.
	loginTTL = 12 * time.Hour
)

// instructorAuth checks instructor credentials.
//
// Ownership: token is fixed at New; mu guards logins (login id hash ->
// expiry).
type instructorAuth struct {
	token [32]byte // sha256 of the token
	unset bool     // no token configured: every instructor request is refused

	mu     sync.Mutex
	logins map[[32]byte]time.Time
}

func newInstructorAuth(token string) *instructorAuth {
	return &instructorAuth{token: sha256.Sum256([]byte(token)), unset: token == "", logins: make(map[[32]byte]time.Time)}
}

// tokenOK compares a presented token with the configured one.
func (a *instructorAuth) tokenOK(got string) bool {
	h := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(h[:], a.token[:]) == 1 && !a.unset
}

// login starts a console login and returns its id for the cookie.
func (a *instructorAuth) login(now time.Time) string {
	var raw [32]byte
	rand.Read(raw[:]) // never fails (crypto/rand panics rather than return an error)
	id := base64.RawURLEncoding.EncodeToString(raw[:])
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, exp := range a.logins {
		if now.After(exp) {
			delete(a.logins, k)
		}
	}
	if len(a.logins) >= maxLogins {
		var oldest [32]byte
		var first time.Time
		for k, exp := range a.logins {
			if first.IsZero() || exp.Before(first) {
				oldest, first = k, exp
			}
		}
		delete(a.logins, oldest)
	}
	a.logins[sha256.Sum256([]byte(id))] = now.Add(loginTTL)
	return id
}

// loginOK reports whether id names a live console login. The map is keyed
// by the id's hash, so a lookup's timing says nothing about the ids held.
func (a *instructorAuth) loginOK(id string, now time.Time) bool {
	if id == "" {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	exp, ok := a.logins[sha256.Sum256([]byte(id))]
	return ok && now.Before(exp)
}

func (a *instructorAuth) logout(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.logins, sha256.Sum256([]byte(id)))
}

// instructorOK reports whether the request carries instructor credentials:
// a bearer token or a console login cookie.
func (s *Server) instructorOK(r *http.Request) bool {
	if got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return s.auth.tokenOK(got)
	}
	if ck, err := r.Cookie(instructorCookie); err == nil {
		return s.auth.loginOK(ck.Value, time.Now())
	}
	return false
}

// presentsCredentials reports whether r carries instructor credentials,
// right or wrong.
func presentsCredentials(r *http.Request) bool {
	if strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		return true
	}
	_, err := r.Cookie(instructorCookie)
	return err == nil
}

// tooManyFailures answers a client address that presented too many wrong
// credentials lately (addrTable.authAllowed).
func tooManyFailures(c echo.Context) error {
	c.Response().Header().Set("Retry-After", "2")
	return requestErrorf(http.StatusTooManyRequests, "too many wrong instructor credentials from your address: wait a moment and try again")
}

// requireInstructor lets through requests with instructor credentials (the
// console's login cookie or the bearer token). Others are refused: a page
// request is sent to the login form, anything else gets 401 (as JSON, see
// answersJSON). Wrong credentials are throttled per client address: past
// the allowance, that address gets 429 until it refills; others never do.
func (s *Server) requireInstructor(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		presented := presentsCredentials(r)
		if presented && !s.addrs.authAllowed(c.RealIP()) {
			return tooManyFailures(c)
		}
		if s.instructorOK(r) {
			return next(c)
		}
		if presented {
			s.addrs.authFailed(c.RealIP())
		}
		if r.Method == http.MethodGet && !answersJSON(r) {
			c.Response().Header().Set("Cache-Control", "no-store")
			return c.Redirect(http.StatusSeeOther, "/instructor/login")
		}
		c.Response().Header().Set("WWW-Authenticate", `Bearer realm="instructor"`)
		return requestErrorf(http.StatusUnauthorized, "instructor credentials required: log in at /instructor/login or send Authorization: Bearer <token>")
	}
}

// bearer requires "Authorization: Bearer token" when token is set. Wrong
// tokens are throttled per client address, as the instructor's are.
func (s *Server) bearer(token, what string) echo.MiddlewareFunc {
	want := sha256.Sum256([]byte(token))
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		if token == "" {
			return next
		}
		return func(c echo.Context) error {
			got, ok := strings.CutPrefix(c.Request().Header.Get("Authorization"), "Bearer ")
			if ok && !s.addrs.authAllowed(c.RealIP()) {
				return tooManyFailures(c)
			}
			h := sha256.Sum256([]byte(got))
			if !ok || subtle.ConstantTimeCompare(h[:], want[:]) != 1 {
				if ok {
					s.addrs.authFailed(c.RealIP())
				}
				c.Response().Header().Set("WWW-Authenticate", `Bearer realm="`+what+`"`)
				return requestErrorf(http.StatusUnauthorized, "%s needs a bearer token", what)
			}
			return next(c)
		}
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
	// Throttled per client address: wrong tokens from one address never
	// lock out another (addrTable.authAllowed).
	if !s.addrs.authAllowed(c.RealIP()) {
		return tooManyFailures(c)
	}
	if !s.auth.tokenOK(c.FormValue("token")) {
		s.addrs.authFailed(c.RealIP())
		return c.Redirect(http.StatusSeeOther, "/instructor/login?failed=1")
	}
	c.SetCookie(&http.Cookie{
		Name:     instructorCookie,
		Value:    s.auth.login(time.Now()),
		Path:     "/",
		MaxAge:   int(loginTTL / time.Second),
		HttpOnly: true,
		Secure:   s.overTLS(c.Request()),
		SameSite: http.SameSiteStrictMode,
	})
	return c.Redirect(http.StatusSeeOther, "/instructor")
}

// logout ends the console login of the request, if any.
func (s *Server) logout(c echo.Context) error {
	if ck, err := c.Cookie(instructorCookie); err == nil {
		s.auth.logout(ck.Value)
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
