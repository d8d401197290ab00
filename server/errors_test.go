package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
)

// TestErrorRendererChosenByGroup: a route's errors are JSON or an HTML page
// because of the group it was registered in, whatever its path says: a
// JSON route among pages' paths answers its 400, 404 and 405 as
// {"error": …}, a page route among the API's paths as an HTML page, and a
// path nothing serves takes the renderer of the group whose prefix holds it.
func TestErrorRendererChosenByGroup(t *testing.T) {
	s, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	s.renderers = errorRenderers{}
	e := echo.New()
	e.HTTPErrorHandler = s.httpErrorHandler
	refuse := func(c echo.Context) error {
		if c.QueryParam("bad") != "" {
			return badRequest("a bad %s", "request")
		}
		return fmt.Errorf("%w %s", errUnknownSession, c.Param("id"))
	}
	pages := s.routeGroup(e, "", pageErrors)
	programs := s.routeGroup(e, "", jsonErrors)
	v2 := s.routeGroup(e, "/v2", jsonErrors)
	programs.GET("/lab/:id/feed", refuse) // JSON, under the student page's path
	pages.GET("/api/print/:id", refuse)   // a page, under the API's path
	v2.GET("/things/:id", refuse)
	pages.GET("/things/:id", refuse)

	for _, tc := range []struct {
		method, path string
		status       int
		json         bool
	}{
		{"GET", "/lab/x/feed?bad=1", 400, true},
		{"GET", "/lab/x/feed", 404, true},
		{"POST", "/lab/x/feed", 405, true},
		{"GET", "/api/print/x?bad=1", 400, false},
		{"GET", "/api/print/x", 404, false},
		{"DELETE", "/api/print/x", 405, false},
		{"GET", "/v2/things/x?bad=1", 400, true},
		{"GET", "/v2/things/x", 404, true},
		{"POST", "/v2/things/x", 405, true},
		{"GET", "/v2/nothing", 404, true},
		{"GET", "/v2", 404, true},
		{"GET", "/things/x", 404, false},
		{"POST", "/things/x", 405, false},
		{"GET", "/v2nothing", 404, false},
		{"GET", "/nothing", 404, false},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			e.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
			ctype, body := rec.Header().Get("Content-Type"), rec.Body.String()
			if rec.Code != tc.status {
				t.Fatalf("status %d %s %.200s, want %d", rec.Code, ctype, body, tc.status)
			}
			if tc.json {
				var got map[string]any
				if !strings.HasPrefix(ctype, "application/json") || json.Unmarshal(rec.Body.Bytes(), &got) != nil {
					t.Fatalf("answer %s %q, want JSON", ctype, body)
				}
				if msg, ok := got["error"].(string); !ok || msg == "" || len(got) != 1 {
					t.Fatalf("answer %s, want {\"error\": \"…\"}", body)
				}
				return
			}
			if !strings.HasPrefix(ctype, "text/html") || !strings.HasPrefix(body, "<!doctype html>") ||
				!strings.Contains(body, "<h1>"+strconv.Itoa(tc.status)+" ") {
				t.Fatalf("answer %s %q, want the HTML error page", ctype, body)
			}
		})
	}
}

// TestRouteGroupsAgree: registering one route in groups with different
// renderers is a mistake routes makes loudly.
func TestRouteGroupsAgree(t *testing.T) {
	s := &Server{}
	e := echo.New()
	s.routeGroup(e, "", pageErrors).GET("/x", func(echo.Context) error { return nil })
	defer func() {
		if recover() == nil {
			t.Fatal("one route in a page group and a JSON group: no panic")
		}
	}()
	s.routeGroup(e, "", jsonErrors).POST("/x", func(echo.Context) error { return nil })
}

// TestErrorCarriesItsStatus: an Error wrapped with more words keeps its
// status and reason in an HTTP answer and a refusal; a store failure shows
// the sentinel's sentence alone, never its cause.
func TestErrorCarriesItsStatus(t *testing.T) {
	s, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	cause := fmt.Errorf("disk on fire at /var/lib/secret")
	for _, tc := range []struct {
		err    error
		status int
		reason string
		text   string
	}{
		{fmt.Errorf("%w %s", errUnknownSession, "abc"), 404, "unknown_session", "unknown session abc"},
		{errForbidden, 403, "forbidden", errForbidden.Text},
		{fmt.Errorf("%w (3 open)", errAddrFull), 429, "full", "the lab is full right now: too many connections from your network (3 open)"},
		{failed(errCannotSave, "storing a change", cause), 503, "store", errCannotSave.Text},
		{failed(errDataUnreadable, "grading", cause), 503, "store", errDataUnreadable.Text},
	} {
		rec := httptest.NewRecorder()
		c := echo.New().NewContext(httptest.NewRequest("GET", "/api/x", nil), rec)
		s.renderers = errorRenderers{byPrefix: map[string]errorRenderer{"/api": jsonErrors}}
		s.httpErrorHandler(tc.err, c)
		var body apiErrorBody
		if rec.Code != tc.status || json.Unmarshal(rec.Body.Bytes(), &body) != nil || body.Error != tc.text {
			t.Errorf("%v: answered %d %s, want %d %q", tc.err, rec.Code, rec.Body, tc.status, tc.text)
		}
		if r := classify(s.log, tc.err); r.reason != tc.reason || r.text != tc.text {
			t.Errorf("%v: classified %+v, want %s %q", tc.err, r, tc.reason, tc.text)
		}
	}
	if !errors.Is(fmt.Errorf("%w (3 open)", errAddrFull), errLabFull) {
		t.Error("errAddrFull is not a case of errLabFull")
	}
	if !errors.Is(failed(errCannotSave, "storing", cause), cause) {
		t.Error("a store failure does not keep its cause")
	}
}
