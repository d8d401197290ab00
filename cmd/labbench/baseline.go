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
// the lab's paths, one state-sized frame per received frame to every
// connection of the session, and one on connect. It is what a lab server
// costs at the least, so the lab is measured as a ratio of it: per op it
// reads the frame (into a pooled buffer, not decoded), copies the prepared
// frame with the session's seq into a pooled buffer and writes it to each
// connection from the reading goroutine. Nothing is allocated per op but
// what coder/websocket allocates itself, and an idle connection holds no
// buffer of ours.
type baseline struct {
	// sized: the frame grows through a session as the lab's does (see
	// appendBaselineFrame); the -sized-baseline column.
	sized    bool
	mu       sync.Mutex // guards sessions and every baseSession's fields
	sessions map[string]*baseSession
}

type baseSession struct {
	seq   uint64
	conns map[*websocket.Conn]struct{}
}

// framePool holds frame buffers between ops: a frame lives from the copy to
// the end of its fan-out.
var framePool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

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
	// No deadline on writes: a context with a timeout allocates a timer per
	// op. A client that stops reading is closed by the bench, which ends
	// the write blocked on it.
	ctx := context.Background()

	b.mu.Lock()
	s := b.sessions[id]
	if s == nil {
		s = &baseSession{conns: make(map[*websocket.Conn]struct{})}
		b.sessions[id] = s
	}
	s.conns[ws] = struct{}{}
	seq := s.seq
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(s.conns, ws)
		b.mu.Unlock()
	}()

	if !b.write(ctx, []*websocket.Conn{ws}, id, seq) {
		return
	}
	var to []*websocket.Conn
	for {
		_, rd, err := ws.Reader(ctx)
		if err != nil {
			return
		}
		// io.Discard reads through a pooled buffer.
		if _, err := io.Copy(io.Discard, rd); err != nil {
			return
		}
		b.mu.Lock()
		s.seq++
		seq := s.seq
		to = to[:0]
		for c := range s.conns {
			to = append(to, c)
		}
		b.mu.Unlock()
		b.write(ctx, to, id, seq)
	}
}

// write sends the state frame at seq to every connection in to, outside
// the lock, from the calling goroutine; it reports whether all writes went.
func (b *baseline) write(ctx context.Context, to []*websocket.Conn, id string, seq uint64) bool {
	buf := framePool.Get().(*[]byte)
	frame := appendBaselineFrame((*buf)[:0], id, seq, b.sized)
	ok := true
	for _, c := range to {
		if err := c.Write(ctx, websocket.MessageText, frame); err != nil {
			c.CloseNow()
			ok = false
		}
	}
	*buf = frame
	framePool.Put(buf)
	return ok
}

// baselineHead and baselineTail make a real-looking state frame around its
// seq and held messages: a run with five held replies and three receipts,
// 2.6 KB in all.
const baselineHead = `,"call":{"runId":"run-2","callId":"lookup","status":"Completed","detail":"New answer"},"notice":"Accepted completion.","draft":"{\"runId\":\"run-2\",\"callId\":\"lookup\",\"kind\":\"completed\",\"output\":\"Answer for run-2\"}","queue":[`

var baselineTail = func() string {
	var b strings.Builder
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

// grownEntry is a held message as the lab encodes one of its walkthrough's
// replies (157 bytes).
const grownEntry = `{"id":37,"kind":"reply","from":"student","label":"{\"runId\":\"run-2\",\"callId\":\"lookup\",\"kind\":\"completed\",\"output\":\"New answer\"}","number":"37"},`

// appendBaselineFrame appends the frame at seq. A sized frame also holds
// 7/10 of seq more messages, so that over labbench's 100-op sessions it grows
// from 2.6 to 13.6 KB, 8 KB on average, as the lab's grow from 0.6 to
// 14 KB, 8 KB on average: it costs what writing the lab's frames costs,
// without the lab's work (BENCHMARKS.md, round 4).
func appendBaselineFrame(b []byte, session string, seq uint64, sized bool) []byte {
	b = append(b, `{"type":"state","session":"`...)
	b = append(b, session...)
	b = append(b, `","seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, baselineHead...)
	if sized {
		for range seq * 7 / 10 {
			b = append(b, grownEntry...)
		}
	}
	return append(b, baselineTail...)
}

// serveBaseline is the hidden -serve-baseline mode (-serve-sized-baseline
// for a sized one): the bench runs the baseline as a child process so /proc
// measures it alone.
func serveBaseline(ctx context.Context, addr string, sized bool, stdout io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	b := &baseline{sized: sized, sessions: make(map[string]*baseSession)}
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
