package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// baseline is the reference server: plain net/http and coder/websocket on
// the lab's paths, one fixed state-sized frame per received frame to every
// connection of the session, and one on connect. It is what a lab server
// costs at the least, so the lab is measured as a ratio of it.
type baseline struct {
	mu       sync.Mutex
	sessions map[string]*baseSession
}

type baseSession struct {
	seq   uint64
	conns map[*websocket.Conn]struct{}
}

func (b *baseline) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /lab/{id}/ws", b.socket)
	return mux
}

func (b *baseline) socket(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer ws.CloseNow()
	ws.SetReadLimit(1 << 20)

	b.mu.Lock()
	s := b.sessions[id]
	if s == nil {
		s = &baseSession{conns: make(map[*websocket.Conn]struct{})}
		b.sessions[id] = s
	}
	s.conns[ws] = struct{}{}
	first := appendBaselineFrame(nil, id, s.seq)
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(s.conns, ws)
		b.mu.Unlock()
	}()

	if !writeBounded(ws, first) {
		return
	}
	var to []*websocket.Conn
	for {
		if _, _, err := ws.Read(context.Background()); err != nil {
			return
		}
		b.mu.Lock()
		s.seq++
		frame := appendBaselineFrame(make([]byte, 0, len(first)+8), id, s.seq)
		to = to[:0]
		for c := range s.conns {
			to = append(to, c)
		}
		b.mu.Unlock()
		// Written from the reading goroutine, outside the lock: the least a
		// server can do. A slow connection holds up its session's senders.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		for _, c := range to {
			if err := c.Write(ctx, websocket.MessageText, frame); err != nil {
				c.CloseNow()
			}
		}
		cancel()
	}
}

func writeBounded(ws *websocket.Conn, frame []byte) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return ws.Write(ctx, websocket.MessageText, frame) == nil
}

// baselineTail is a real-looking state frame after its seq: a run with five
// held replies and three receipts, about 3 KB in all.
var baselineTail = func() string {
	var b strings.Builder
	b.WriteString(`,"call":{"runId":"run-2","callId":"lookup","status":"Completed","detail":"New answer"},"notice":"Accepted completion.","draft":"{\"runId\":\"run-2\",\"callId\":\"lookup\",\"kind\":\"completed\",\"output\":\"Answer for run-2\"}","queue":[`)
	for i := 1; i <= 5; i++ {
		if i > 1 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d,"kind":"reply","from":"student","label":%s}`, i, strconv.Quote(preloadRaw(i)))
	}
	b.WriteString(`],"receipts":[`)
	for i := 1; i <= 3; i++ {
		if i > 1 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"message":%d,"notice":"Ignored reply: final outcome already recorded.","by":"student"}`, i)
	}
	b.WriteString(`]}`)
	return b.String()
}()

func appendBaselineFrame(b []byte, session string, seq uint64) []byte {
	b = append(b, `{"type":"state","session":"`...)
	b = append(b, session...)
	b = append(b, `","seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	return append(b, baselineTail...)
}

// serveBaseline is the hidden -serve-baseline mode: the bench runs the
// baseline as a child process so /proc measures it alone.
func serveBaseline(ctx context.Context, addr string, stdout io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	b := &baseline{sessions: make(map[string]*baseSession)}
	srv := &http.Server{Handler: b.handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "baseline: students open http://%s/\n", ln.Addr())
	select {
	case err := <-served:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	// The bench kills its children at the end; hijacked sockets die with us.
	srv.Close()
	<-served
	return nil
}
