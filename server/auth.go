package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"net/url"
	"path"
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
// credentials lately (limit.AddrTable.AuthAllowed).
func tooManyFailures(c echo.Context) error {
	c.Response().Header().Set("Retry-After", "2")
	return errTooManyFailures
}

// requireInstructor lets through requests with instructor credentials (the
// console's login cookie, the bearer token or a class key) and records
// their grant for the handler (grantFrom). Others are refused: a page
// request is sent to the login form, anything else gets 401 (as JSON, see
// the route's group, routes.go). Wrong credentials are throttled per client address: past
// the allowance, that address gets 429 until it refills; others never do.
// When the store cannot be read to check a login, 503: an outage must not
// send the console to the login form.
func (s *Server) requireInstructor(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		presented := presentsCredentials(r)
		if presented && !s.addrs.AuthAllowed(c.RealIP()) {
			return tooManyFailures(c)
		}
		g, ok, err := s.grantOf(r)
		if err != nil {
			c.Response().Header().Set("Retry-After", "2")
			return err
		}
		if ok {
			c.Set(grantKey, g)
			return next(c)
		}
		if presented {
			s.addrs.AuthFailed(c.RealIP())
		}
		if r.Method == http.MethodGet && s.renderers.of(c) == pageErrors {
			c.Response().Header().Set("Cache-Control", "no-store")
			return c.Redirect(http.StatusSeeOther, loginURL(r.URL.RequestURI(), false))
		}
		c.Response().Header().Set("WWW-Authenticate", `Bearer realm="instructor"`)
		return errCredentialsRequired
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
			if ok && !s.addrs.AuthAllowed(c.RealIP()) {
				return tooManyFailures(c)
			}
			h := sha256.Sum256([]byte(got))
			if !ok || subtle.ConstantTimeCompare(h[:], want[:]) != 1 {
				if ok {
					s.addrs.AuthFailed(c.RealIP())
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
	// lock out another (limit.AddrTable.AuthAllowed).
	if !s.addrs.AuthAllowed(c.RealIP()) {
		return tooManyFailures(c)
	}
	ctx := c.Request().Context()
	l, ok, err := s.credentialLogin(ctx, c.FormValue("token"))
	if err != nil {
		return err
	}
	if !ok {
		s.addrs.AuthFailed(c.RealIP())
		return c.Redirect(http.StatusSeeOther, loginURL(c.FormValue("next"), true))
	}
	id := store.NewSecret()
	l.IDHash = store.HashSecret(id)
	if err := s.cfg.Store.SaveLogin(ctx, l, s.cfg.Now(), maxLogins); err != nil {
		return failed(errLoginUnsaved, "saving a console login", err)
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
	return c.Redirect(http.StatusSeeOther, afterLogin(c.FormValue("next"), l.Class))
}

// loginURL is the login form that returns to next once logged in (when
// next is a console page, consolePath), saying the last try failed if so.
func loginURL(next string, failed bool) string {
	q := url.Values{}
	if failed {
		q.Set("failed", "1")
	}
	if consolePath(next) && next != "/instructor" { // the form's own default
		q.Set("next", next)
	}
	if len(q) == 0 {
		return "/instructor/login"
	}
	return "/instructor/login?" + q.Encode()
}

// afterLogin is where a login goes: next, the page that sent the browser
// to the form, when it is a console page the login may see; else the
// class's console for a class key, the class list for the token.
func afterLogin(next, class string) string {
	home := "/instructor"
	if class != "" {
		home = "/instructor/classes/" + url.PathEscape(class)
	}
	if !consolePath(next) {
		return home
	}
	if class != "" {
		p, _, _ := strings.Cut(next, "?")
		if p != home && !strings.HasPrefix(p, home+"/") {
			return home
		}
	}
	return next
}

// consolePath reports whether next is a path of this lab's console
// (/instructor or under it, with an optional query) and nothing else: no
// scheme, host, "//", backslash, dot segment, fragment or control
// character, so that the login's redirect can never leave the lab (an
// open redirect) nor land on the form itself.
func consolePath(next string) bool {
	if len(next) > 2048 || strings.ContainsAny(next, "\\#") {
		return false
	}
	for _, r := range next {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return false
	}
	p := u.Path
	if strings.Contains(u.EscapedPath(), "//") || path.Clean(p) != p || u.RawPath != "" && strings.Contains(strings.ToLower(u.RawPath), "%2f") {
		return false
	}
	if p != "/instructor" && !strings.HasPrefix(p, "/instructor/") {
		return false
	}
	return p != "/instructor/login" && p != "/instructor/logout"
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
