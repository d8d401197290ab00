package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(config) bool
		wantErr string
	}{
		{"defaults", nil, nil, func(c config) bool {
			return c.addr == ":8080" && c.server.Limits.MaxHeld == 256 && c.shutdownTimeout == 10*time.Second &&
				c.data == "./lab-data/lab.db" && c.server.SessionTTL == 168*time.Hour && c.server.MaxSessions == 10000 && c.server.InstructorToken == ""
		}, ""},
		{"data settings", []string{"-data", ":memory:", "-max-sessions", "3"}, map[string]string{"LAB_SESSION_TTL": "2h", "LAB_INSTRUCTOR_TOKEN": "t"}, func(c config) bool {
			return c.data == ":memory:" && c.server.MaxSessions == 3 && c.server.SessionTTL == 2*time.Hour && c.server.InstructorToken == "t"
		}, ""},
		{"bad ttl", nil, map[string]string{"LAB_SESSION_TTL": "forever"}, nil, "LAB_SESSION_TTL"},
		{"env", nil, map[string]string{"LAB_ADDR": "127.0.0.1:9", "LAB_MAX_HELD": "5", "LAB_ORIGINS": "a.example, ,b.example"}, func(c config) bool {
			return c.addr == "127.0.0.1:9" && c.server.Limits.MaxHeld == 5 && slices.Equal(c.server.Origins, []string{"a.example", "b.example"})
		}, ""},
		{"flag wins over env", []string{"-addr", ":1"}, map[string]string{"LAB_ADDR": ":2"}, func(c config) bool { return c.addr == ":1" }, ""},
		{"bad env names the variable", nil, map[string]string{"LAB_MAX_HELD": "lots"}, nil, "LAB_MAX_HELD"},
		{"bad flag names the flag", []string{"-max-receipts", "0"}, nil, nil, "-max-receipts"},
		{"protections", []string{"-frame-rate", "2.5", "-max-session-conns", "4"}, map[string]string{"LAB_MAX_CONNS": "9", "LAB_FRAME_BURST": "7", "LAB_MAX_SESSIONS": "3"}, func(c config) bool {
			return c.server.FrameRate == 2.5 && c.server.FrameBurst == 7 && c.server.MaxConns == 9 && c.server.MaxSessionConns == 4 && c.server.MaxSessions == 3
		}, ""},
		{"bad rate names the flag", []string{"-frame-rate", "-1"}, nil, nil, "-frame-rate"},
		{"bad duration", nil, map[string]string{"LAB_SHUTDOWN_TIMEOUT": "soon"}, nil, "LAB_SHUTDOWN_TIMEOUT"},
		{"unknown flag", []string{"-nope"}, nil, nil, "-nope"},
		{"stray argument", []string{"serve"}, nil, nil, `unexpected argument "serve"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			c, err := parseConfig(append([]string{"lab"}, tt.args...), env(tt.env), &stderr)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error()+stderr.String(), tt.wantErr) {
					t.Fatalf("error %v (stderr %q), want one naming %s", err, stderr.String(), tt.wantErr)
				}
				return
			}
			if err != nil || !tt.check(c) {
				t.Fatalf("config %+v, err %v", c, err)
			}
		})
	}
}

func TestInvalidConfigExitsTwo(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"lab", "-max-held", "-3"}, env(nil), io.Discard, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "max-held") {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}

// syncBuffer is written by run's goroutine and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRunServesAndShutsDown runs the whole program on a free port, opens a
// student WebSocket, then cancels: the socket is closed with 1001 and run
// returns 0.
func TestRunServesAndShutsDown(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"lab", "-addr", "127.0.0.1:0", "-data", ":memory:"}, env(nil), &stdout, &stderr)
	}()

	url := regexp.MustCompile(`students open (http://\S+)`)
	var base string
	for deadline := time.Now().Add(10 * time.Second); base == ""; {
		if m := url.FindStringSubmatch(stdout.String()); m != nil {
			base = strings.TrimSuffix(m[1], "/")
		} else if time.Now().After(deadline) {
			t.Fatalf("no student URL printed; stderr: %s", stderr.String())
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	lab := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(lab, "/lab/") {
		t.Fatalf("GET / = %d %q", resp.StatusCode, lab)
	}

	dialCtx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	ws, _, err := websocket.Dial(dialCtx, "ws"+strings.TrimPrefix(base, "http")+lab+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	if _, _, err := ws.Read(dialCtx); err != nil {
		t.Fatalf("first frame: %v", err)
	}
	cancel()
	if _, _, err := ws.Read(dialCtx); websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Fatalf("after shutdown: %v, want close 1001", err)
	}
	select {
	case code := <-exited:
		if code != 0 {
			t.Fatalf("exit %d; stderr: %s", code, stderr.String())
		}
	case <-dialCtx.Done():
		t.Fatal("run did not return after cancel")
	}
}

// TestInstructorToken: without a configured token, run generates one and
// prints it once on stdout with the console URL; it opens the API and never
// reaches the log. A configured token is never printed.
func TestInstructorToken(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		vars  map[string]string
		token string // "" means: read the generated one from stdout
	}{
		{"generated", nil, ""},
		{"configured", map[string]string{"LAB_INSTRUCTOR_TOKEN": "s3cret-token-value"}, "s3cret-token-value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			var stdout, stderr syncBuffer
			exited := make(chan int, 1)
			go func() {
				exited <- run(ctx, []string{"lab", "-addr", "127.0.0.1:0", "-data", ":memory:"}, env(tc.vars), &stdout, &stderr)
			}()
			defer func() {
				cancel()
				<-exited
			}()
			console := regexp.MustCompile(`Instructor console: (http://\S+)/instructor `)
			var base string
			for deadline := time.Now().Add(10 * time.Second); base == ""; {
				if m := console.FindStringSubmatch(stdout.String()); m != nil {
					base = m[1]
				} else if time.Now().After(deadline) {
					t.Fatalf("no console URL printed; stdout: %s", stdout.String())
				} else {
					time.Sleep(10 * time.Millisecond)
				}
			}
			token := tc.token
			printed := regexp.MustCompile(`Instructor token \(generated[^)]*\): (\S+)\n`).FindAllStringSubmatch(stdout.String(), -1)
			if tc.token == "" {
				if len(printed) != 1 || len(printed[0][1]) < 20 {
					t.Fatalf("generated token printed %d times: %q", len(printed), stdout.String())
				}
				token = printed[0][1]
			} else if len(printed) != 0 || strings.Contains(stdout.String(), token) {
				t.Fatalf("a configured token was printed: %q", stdout.String())
			}
			for _, bearer := range []string{token, token + "x"} {
				req, _ := http.NewRequest(http.MethodGet, base+"/api/sessions", nil)
				req.Header.Set("Authorization", "Bearer "+bearer)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if want := map[bool]int{true: 200, false: 401}[bearer == token]; resp.StatusCode != want {
					t.Fatalf("GET /api/sessions with bearer %q = %d, want %d", bearer, resp.StatusCode, want)
				}
			}
			cancel()
			<-exited
			exited <- 0
			if strings.Contains(stderr.String(), token) {
				t.Fatalf("the token reached the log: %s", stderr.String())
			}
		})
	}
}

// TestListenFailureLeavesNothingRunning: when the address is taken, run
// exits 1 naming it, before the lab starts anything (TestMain's goleak
// check fails the package if a janitor or anything else kept running).
func TestListenFailureLeavesNothingRunning(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	var stderr syncBuffer
	code := run(context.Background(), []string{"lab", "-addr", taken.Addr().String(), "-data", ":memory:"}, env(nil), io.Discard, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "listening on "+taken.Addr().String()) {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}

// TestSettingsCheckedBeforeDisk: finding 7 of issue 10. Every bad setting,
// including the listen address and limits that contradict each other, exits
// 2 naming the setting and its variable, before the data file exists.
func TestSettingsCheckedBeforeDisk(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"listen address", map[string]string{"LAB_ADDR": "not-an-address"}, "-addr (LAB_ADDR)"},
		{"listen port", map[string]string{"LAB_ADDR": ":http-ish"}, "-addr (LAB_ADDR)"},
		{"reply over the frame cap", map[string]string{"LAB_MAX_REPLY_BYTES": "174593"}, "-max-reply-bytes (LAB_MAX_REPLY_BYTES)"},
		{"reply over the held bytes", map[string]string{"LAB_MAX_REPLY_BYTES": "100000", "LAB_MAX_HELD_BYTES": "50000"}, "-max-reply-bytes (LAB_MAX_REPLY_BYTES)"},
		{"tiny ttl", map[string]string{"LAB_SESSION_TTL": "1ns"}, "-session-ttl (LAB_SESSION_TTL)"},
		{"tiny frame rate", map[string]string{"LAB_FRAME_RATE": "1e-300"}, "-frame-rate (LAB_FRAME_RATE)"},
		{"wildcard origin", map[string]string{"LAB_ORIGINS": "*"}, "-origins (LAB_ORIGINS)"},
		{"wildcard origin with scheme", map[string]string{"LAB_ORIGINS": "school.example,https://*"}, "-origins (LAB_ORIGINS)"},
		{"short instructor token", map[string]string{"LAB_INSTRUCTOR_TOKEN": "a"}, "-instructor-token (LAB_INSTRUCTOR_TOKEN)"},
		{"short metrics token", map[string]string{"LAB_METRICS_TOKEN": "fifteen-chars.."}, "-metrics-token (LAB_METRICS_TOKEN)"},
		{"outbox below a state", map[string]string{"LAB_MAX_CONN_OUTBOX_BYTES": "1000"}, "-max-conn-outbox-bytes (LAB_MAX_CONN_OUTBOX_BYTES)"},
		{"total outbox below one", map[string]string{"LAB_MAX_OUTBOX_BYTES": "1000"}, "-max-outbox-bytes (LAB_MAX_OUTBOX_BYTES)"},
		{"session conns above all", map[string]string{"LAB_MAX_SESSION_CONNS": "20000"}, "-max-session-conns (LAB_MAX_SESSION_CONNS)"},
		{"runs above events", map[string]string{"LAB_MAX_RUNS": "9000"}, "-max-runs (LAB_MAX_RUNS)"},
		{"collector all but always", map[string]string{"LAB_GC_PERCENT": "5"}, "-gc-percent (LAB_GC_PERCENT)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			data := filepath.Join(t.TempDir(), "data", "lab.db")
			vars := map[string]string{"LAB_DATA": data}
			for k, v := range tt.env {
				vars[k] = v
			}
			var stderr bytes.Buffer
			code := run(context.Background(), []string{"lab"}, env(vars), io.Discard, &stderr)
			if code != 2 || !strings.Contains(stderr.String(), tt.want) {
				t.Fatalf("exit %d, stderr %q; want 2 naming %s", code, stderr.String(), tt.want)
			}
			if _, err := os.Stat(filepath.Dir(data)); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("the data directory exists after a refused setting: %v", err)
			}
		})
	}
	// A sixteen-character token and a host pattern are fine.
	c := defaultConfig()
	c.server.InstructorToken = "sixteen-chars..."
	c.server.Origins = []string{"*.school.example"}
	if err := validate(c); err != nil {
		t.Fatalf("valid settings refused: %v", err)
	}
}

// TestRunMakesTMPDIR: the image's TMPDIR is under the data volume, which
// starts without it; the lab makes it (0700) before it serves.
func TestRunMakesTMPDIR(t *testing.T) {
	t.Parallel()
	tmp := filepath.Join(t.TempDir(), "data", "tmp")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"lab", "-addr", "127.0.0.1:0", "-data", ":memory:"}, env(map[string]string{"TMPDIR": tmp}), &stdout, &stderr)
	}()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(stdout.String(), "students open"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no student URL printed; stderr: %s", stderr.String())
		}
	}
	if fi, err := os.Stat(tmp); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Errorf("TMPDIR %s after start: %v %v, want a directory 0700", tmp, fi, err)
	}
	cancel()
	if code := <-exited; code != 0 {
		t.Fatalf("exit %d; stderr: %s", code, stderr.String())
	}
}
