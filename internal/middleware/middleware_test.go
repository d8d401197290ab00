package middleware_test

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/toolcall-lab/lab/internal/middleware"
)

// TestSecurityHeaders: every answer, an error too, forbids inline script,
// framing, sniffing and referrers.
func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	e := echo.New()
	e.Use(middleware.SecurityHeaders)
	e.GET("/ok", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
	e.GET("/fails", func(c echo.Context) error { return errors.New("broken") })
	for _, path := range []string{"/ok", "/fails", "/not-a-route"} {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		h := rec.Header()
		csp := h.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'self'", "script-src 'self'", "frame-ancestors 'none'", "base-uri 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: Content-Security-Policy %q lacks %q", path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") {
			t.Errorf("%s: Content-Security-Policy %q allows inline script or style", path, csp)
		}
		for k, want := range map[string]string{"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY"} {
			if got := h.Get(k); got != want {
				t.Errorf("%s: %s = %q, want %q", path, k, got, want)
			}
		}
	}
}

// TestRequestLog: one line per request with its method, path, status and
// address, and nothing of its query string or headers.
func TestRequestLog(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	e := echo.New()
	e.Use(middleware.RequestLog(slog.New(slog.NewTextHandler(&buf, nil))))
	e.GET("/page", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
	e.GET("/denied", func(c echo.Context) error { return echo.NewHTTPError(http.StatusForbidden) })

	req := httptest.NewRequest(http.MethodGet, "/page?token=secret-in-query", nil)
	req.Header.Set("Authorization", "Bearer secret-in-header")
	req.RemoteAddr = "192.0.2.7:4321"
	e.ServeHTTP(httptest.NewRecorder(), req)
	e.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/denied", nil))

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines for 2 requests:\n%s", len(lines), buf.String())
	}
	for i, want := range []string{
		`msg="http request" method=GET path=/page status=200`,
		`msg="http request" method=GET path=/denied status=403`,
	} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d = %s; want it to hold %s", i+1, lines[i], want)
		}
	}
	if !strings.Contains(lines[0], "remote=192.0.2.7") {
		t.Errorf("line 1 = %s; want the client's address", lines[0])
	}
	if strings.Contains(buf.String(), "secret") {
		t.Errorf("the log holds a query string or a header:\n%s", buf.String())
	}
}
