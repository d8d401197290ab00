package server_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolcall-lab/lab/server"
)

// logBuffer collects a server's logs for a test.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	lab := startServer(t, server.Config{})
	ts := httptest.NewServer(lab.Handler())
	defer ts.Close()
	if resp := get(t, ts, "/healthz"); resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz = %d", resp.StatusCode)
	}
	if resp := get(t, ts, "/readyz"); resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz = %d", resp.StatusCode)
	}
	if err := lab.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	resp := get(t, ts, "/readyz")
	if text := body(t, resp); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(text, "shutting down") {
		t.Fatalf("/readyz while shutting down = %d %q", resp.StatusCode, text)
	}
	if resp := get(t, ts, "/healthz"); resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz while shutting down = %d", resp.StatusCode)
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	_, ts := runLab(t, server.Config{})
	c, _ := dial(t, ts, newID())
	c.do(`{"type":"queueDeadline"}`)
	c.do(`{"type":"deliver","message":1}`)
	c.send(`{"type":"nope"}`)
	c.refused()

	text := body(t, get(t, ts, "/metrics"))
	for _, want := range []string{
		`lab_connections{role="student"} 1`,
		`lab_sessions 1`,
		`lab_frames_in_total{type="queueDeadline"} 1`,
		`lab_frames_in_total{type="deliver"} 1`,
		`lab_frames_in_total{type="invalid"} 1`,
		`lab_frames_out_total{type="state"} 3`,
		`lab_frames_out_total{type="error"} 1`,
		`lab_refused_frames_total{reason="invalid_frame"} 1`,
		`lab_deliveries_total{notice="Unresolved: deadline observed without a final reply."} 1`,
		`lab_slow_connection_closes_total 0`,
		`go_goroutines`,
	} {
		if !strings.Contains(text, want+"\n") && !strings.Contains(text, want+" ") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestMetricsToken(t *testing.T) {
	t.Parallel()
	_, ts := runLab(t, server.Config{MetricsToken: "s3cret"})
	if code := get(t, ts, "/metrics").StatusCode; code != http.StatusUnauthorized {
		t.Fatalf("/metrics without a token = %d, want 401", code)
	}
	for token, want := range map[string]int{"wrong": http.StatusUnauthorized, "s3cret": http.StatusOK} {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("/metrics with token %q = %d, want %d", token, resp.StatusCode, want)
		}
	}
}

func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	_, ts := runLab(t, server.Config{})
	resp := get(t, ts, "/lab/"+newID())
	for header, want := range map[string]string{
		"Content-Security-Policy": "frame-ancestors 'none'",
		"X-Content-Type-Options":  "nosniff",
		"Referrer-Policy":         "no-referrer",
	} {
		if got := resp.Header.Get(header); !strings.Contains(got, want) {
			t.Errorf("%s = %q, want it to contain %q", header, got, want)
		}
	}
}

// TestLogs: one line per request and per connection, with the close code,
// and never a frame body.
func TestLogs(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	lab, ts := runLab(t, server.Config{Logger: logs.logger()})
	id := newID()
	c, _ := dial(t, ts, id)
	c.do(queueReply("secret-body-text"))
	c.send(`{"type":"queueReply","raw":"another-secret","x":`)
	c.refused()
	c.ws.Close(4000, "bye")
	// The close line is written when the handler finishes. Wait for it
	// before shutting down: a shutdown racing the student's close would
	// send 1001 too, and either code would be true.
	waitFor(t, func() bool { return strings.Contains(logs.String(), `msg="websocket closed"`) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := lab.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	get(t, ts, "/healthz")
	text := logs.String()
	for _, want := range []string{
		`msg="websocket open" session=` + id + ` role=student`,
		`msg="websocket closed" session=` + id + ` role=student remote=127.0.0.1 code=4000`,
		`msg="http request" method=GET path=/healthz status=200`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("logs lack %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "secret") {
		t.Errorf("logs contain a frame body:\n%s", text)
	}
}

// TestTrustedProxies: X-Forwarded-For names the client only when the
// request comes from a trusted proxy.
func TestTrustedProxies(t *testing.T) {
	t.Parallel()
	_, loopback, _ := net.ParseCIDR("127.0.0.0/8")
	_, elsewhere, _ := net.ParseCIDR("192.0.2.0/24")
	for _, tt := range []struct {
		proxies []*net.IPNet
		want    string
	}{
		{nil, "remote=127.0.0.1"},
		{[]*net.IPNet{elsewhere}, "remote=127.0.0.1"},
		{[]*net.IPNet{loopback}, "remote=203.0.113.9"},
	} {
		var logs logBuffer
		_, ts := runLab(t, server.Config{Logger: logs.logger(), TrustedProxies: tt.proxies})
		req, _ := http.NewRequest(http.MethodGet, ts.URL+"/healthz", nil)
		req.Header.Set("X-Forwarded-For", "203.0.113.9")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if text := logs.String(); !strings.Contains(text, tt.want) {
			t.Errorf("proxies %v: logs lack %q:\n%s", tt.proxies, tt.want, text)
		}
	}
}
