package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
)

// TestCorruptDataFileExits: a data file that is not a database stops the
// lab with an error naming the file, rather than starting empty.
func TestCorruptDataFileExits(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "lab.db")
	if err := os.WriteFile(path, bytes.Repeat([]byte("garbage!"), 1024), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	code := run(context.Background(), []string{"lab", "-addr", "127.0.0.1:0", "-data", path}, env(nil), io.Discard, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), path) {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}

// labProcess is the real binary, running.
type labProcess struct {
	cmd  *exec.Cmd
	base string // http://host:port
}

func startLab(t *testing.T, bin string, args ...string) *labProcess {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"-addr", "127.0.0.1:0"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	found := make(chan string, 1)
	go func() { // ends when the process exits and closes stdout
		sc := bufio.NewScanner(stdout)
		url := regexp.MustCompile(`students open (http://\S+)/`)
		for sc.Scan() {
			if m := url.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		close(found)
	}()
	select {
	case base, ok := <-found:
		if !ok {
			t.Fatalf("the lab exited before listening; stderr: %s", stderr.String())
		}
		return &labProcess{cmd: cmd, base: base}
	case <-time.After(20 * time.Second):
		t.Fatalf("no student URL printed; stderr: %s", stderr.String())
	}
	return nil
}

// socket opens session id and returns it with its first state frame.
func (p *labProcess) socket(t *testing.T, id string) (*websocket.Conn, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(p.base, "http")+"/lab/"+id+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	return ws, readFrame(t, ws)
}

func readFrame(t *testing.T, ws *websocket.Conn) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, data, err := ws.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func change(t *testing.T, ws *websocket.Conn, frame string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ws.Write(ctx, websocket.MessageText, []byte(frame)); err != nil {
		t.Fatal(err)
	}
	got := readFrame(t, ws)
	if !bytes.HasPrefix(got, []byte(`{"type":"state"`)) {
		t.Fatalf("%s got %s", frame, got)
	}
	return got
}

var seqField = regexp.MustCompile(`"seq":(\d+)`)

// restartAfterKill makes changes over a WebSocket, kills the binary with
// SIGKILL, starts it again on the same data and compares the state frame
// byte for byte.
func restartAfterKill(t *testing.T, bin string) {
	data := filepath.Join(t.TempDir(), "data", "lab.db")

	first := startLab(t, bin, "-data", data)
	id := uuid.NewString()
	ws, _ := first.socket(t, id)
	change(t, ws, `{"type":"queueReply","raw":"{\"runId\":\"run-1\",\"callId\":\"lookup\",\"kind\":\"completed\",\"output\":\"é \\u0000 x\"}"}`)
	change(t, ws, `{"type":"queueDeadline"}`)
	change(t, ws, `{"type":"start"}`)
	change(t, ws, `{"type":"deliver","message":2}`)
	last := change(t, ws, `{"type":"deliver","message":1}`)
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	first.cmd.Wait()

	second := startLab(t, bin, "-data", data)
	ws2, got := second.socket(t, id)
	if !bytes.Equal(got, last) {
		t.Fatalf("after kill -9 and restart:\n got %s\nwant %s", got, last)
	}
	next := change(t, ws2, `{"type":"start"}`)
	if m := seqField.FindSubmatch(next); m == nil || string(m[1]) != "6" {
		t.Fatalf("seq after restart: %s, want 6", next)
	}
}
