package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"

	"github.com/toolcall-lab/lab/server"
)

// stateFrame is the server's state frame as the protocol documents it.
type stateFrame struct {
	Type    string `json:"type"`
	Session string `json:"session"`
	Seq     uint64 `json:"seq"`
	Call    struct {
		RunID  string `json:"runId"`
		CallID string `json:"callId"`
		Status string `json:"status"`
		Detail string `json:"detail"`
	} `json:"call"`
	Notice string `json:"notice"`
	Draft  string `json:"draft"`
	Queue  []struct {
		ID    int    `json:"id"`
		Kind  string `json:"kind"`
		From  string `json:"from"`
		Label string `json:"label"`
	} `json:"queue"`
	Receipts []struct {
		Message int    `json:"message"`
		Notice  string `json:"notice"`
		By      string `json:"by"`
	} `json:"receipts"`
	Name   string `json:"name"`
	Error  string `json:"error"`
	Reason string `json:"reason"`
	raw    []byte
}

// startServer builds a lab server and starts it (no HTTP server yet).
func startServer(t testing.TB, cfg server.Config) *server.Server {
	t.Helper()
	lab, err := server.New(cfg)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	if err := lab.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return lab
}

// runLab runs a lab server behind a real httptest server.
func runLab(t *testing.T, cfg server.Config) (*server.Server, *httptest.Server) {
	t.Helper()
	lab := startServer(t, cfg)
	ts := httptest.NewServer(lab.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := lab.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		ts.Close()
	})
	return lab, ts
}

type client struct {
	t  *testing.T
	ws *websocket.Conn
}

func wsURL(ts *httptest.Server, id string) string {
	return "ws" + strings.TrimPrefix(ts.URL, "http") + "/lab/" + id + "/ws"
}

// dial opens a student connection to session id and returns it with the
// state frame it receives on open.
func dial(t *testing.T, ts *httptest.Server, id string) (*client, stateFrame) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, wsURL(ts, id), nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	ws.SetReadLimit(8 << 20)
	t.Cleanup(func() { ws.CloseNow() })
	c := &client{t: t, ws: ws}
	return c, c.state()
}

func newID() string { return uuid.NewString() }

func (c *client) send(frame string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.ws.Write(ctx, websocket.MessageText, []byte(frame)); err != nil {
		c.t.Fatalf("send %s: %v", frame, err)
	}
}

func (c *client) read() stateFrame {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	typ, data, err := c.ws.Read(ctx)
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	if typ != websocket.MessageText {
		c.t.Fatalf("got a %v message, want text", typ)
	}
	var f stateFrame
	if err := json.Unmarshal(data, &f); err != nil {
		c.t.Fatalf("frame is not JSON: %v: %s", err, data)
	}
	f.raw = data
	return f
}

func (c *client) state() stateFrame {
	c.t.Helper()
	f := c.read()
	if f.Type != "state" {
		c.t.Fatalf("got %s frame %q, want a state", f.Type, f.raw)
	}
	return f
}

// refused reads an error frame, which must have its text and reason word,
// and returns the text.
func (c *client) refused() string {
	c.t.Helper()
	return c.refusal().Error
}

func (c *client) refusal() stateFrame {
	c.t.Helper()
	f := c.read()
	if f.Type != "error" || f.Error == "" || f.Reason == "" {
		c.t.Fatalf("got %s, want an error frame", f.raw)
	}
	return f
}

// do sends a frame and returns the state it causes.
func (c *client) do(frame string) stateFrame {
	c.t.Helper()
	c.send(frame)
	return c.state()
}

func get(t *testing.T, ts *httptest.Server, path string) *http.Response {
	t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(ts.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func queueReply(raw string) string {
	b, _ := json.Marshal(map[string]string{"type": "queueReply", "raw": raw})
	return string(b)
}
