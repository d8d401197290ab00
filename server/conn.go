package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
	"github.com/labstack/echo/v4"

	"github.com/toolcall-lab/lab/internal/sharedframe"
	"github.com/toolcall-lab/lab/model"
)

// conn is one WebSocket connection of a session.
//
// Ownership: its HTTP handler goroutine reads and owns the conn's lifetime.
// Writes happen in a flusher started on demand when there is something to
// send: the reader itself, right after handling a frame (what a frame causes
// for its own connection needs no goroutine start and no handoff), or else a
// goroutine. So an idle connection costs no goroutine and a slow one never
// blocks its session. mu guards the outbox and the flags.
type conn struct {
	ws           *websocket.Conn
	role         model.Actor
	remote       string // the client address (RealIP), "" for instructors
	log          *slog.Logger
	metrics      *metrics
	writeTimeout time.Duration
	limit        frameLimit   // used by the reader only
	bufs         *readBuffers // the Server's
	// The write watchdog closes the connection when a write takes longer
	// than writeTimeout (watchWrite). writeStart is when the running write
	// began, as time since born (at least 1), 0 when none runs, and
	// writeTimedOut once the watchdog closed the connection for it;
	// watchArmed says writeTimer is set. Set by the flusher (one at a time:
	// see flushing) and the timer's function.
	born       time.Time
	writeStart atomic.Int64
	watchArmed atomic.Bool
	writeTimer atomic.Pointer[time.Timer] // made by the first write
	// live is the Server's live compiler, and this connection's allowance
	// of it (live.go); used by the reader only.
	live liveConn
	// watching is the session an instructor connection asked to watch last
	// (session.watch), nil once it stops; its reader sets it.
	watching atomic.Pointer[session]
	// slowCounted: the connection is in lab_slow_connection_closes_total.
	// A connection over its byte budget while a write to it is blocked
	// then runs into the write timeout too: one slow close (countSlow).
	slowCounted atomic.Bool

	mu  sync.Mutex
	out outbox // the frames not yet written
	// closeWith, when set, is how the flusher closes the connection: too
	// many errors waited (closeTooManyRefusals) or too many bytes
	// (closeTooSlow). Nothing more is queued then.
	closeWith *closeReason
	sent      websocket.StatusCode // the close code the server sent, 0 if none
	flushing  bool                 // a flusher is running
	// readerFlushes: the reader is handling a frame and writes what it
	// causes afterwards, so no flusher goroutine is needed for it.
	readerFlushes bool
	stopped       bool // the handler is tearing down: start no more flushers
	// torn is set once the handler has torn down: a frame handed over
	// after that (an overview flush that took its list of connections
	// earlier) is dropped, so its bytes are never counted.
	torn bool

	flushers sync.WaitGroup
}

// sendState queues a frame of the state kind that is the caller's own
// (an overview, a timeline); sendShared queues a session's state frame,
// taking a reference to it.
func (c *conn) sendState(frame []byte) { c.queueState(outFrame{data: frame, state: true}) }

func (c *conn) sendShared(f *sharedframe.Frame) {
	c.queueState(outFrame{data: f.Data, shared: f, state: true})
}

func (c *conn) queueState(f outFrame) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closeWith != nil || c.torn {
		return
	}
	if !c.out.pushState(f) {
		c.tooSlow()
	}
	c.kick()
}

// tooSlow: a frame did not fit the connection's byte budget or all
// connections' budget. The connection is too slow: what waits is dropped
// and the flusher closes it (closeTooSlow). Called with mu held.
func (c *conn) tooSlow() {
	c.countSlow()
	c.closeWith = &closeTooSlow
	c.out.drop()
}

// countSlow counts the connection as closed for being too slow, once
// however many of its limits it runs into.
func (c *conn) countSlow() {
	if c.slowCounted.CompareAndSwap(false, true) {
		c.metrics.slowCloses.Inc()
	}
}

func (c *conn) sendError(err error) {
	r := classify(c.log, err)
	c.metrics.refused.WithLabelValues(r.reason).Inc()
	c.queueError(errorFrame(r))
}

// queueError queues a frame that is no state (an error frame, or a live
// compile's answer: live.go) for the flusher to write; one that does not
// read them closes.
func (c *conn) queueError(frame []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closeWith != nil || c.torn:
		return
	case c.out.errorsFull():
		c.closeWith = &closeTooManyRefusals
	case !c.out.pushError(outFrame{data: frame}):
		c.tooSlow()
	}
	c.kick()
}

// kick starts a flusher goroutine unless one runs, the reader will flush
// (readerFlushes), or the conn is stopping. Called with mu held.
func (c *conn) kick() {
	if c.flushing || c.readerFlushes || c.stopped {
		return
	}
	c.flushing = true
	c.flushers.Add(1)
	go c.flush(false)
}

// deferFlush and readerFlush bracket the reader's handling of one frame:
// what the frame causes for this connection (its own state, an error) is
// written by the reader itself afterwards. A client slow to read only delays
// its own next read.
func (c *conn) deferFlush() {
	c.mu.Lock()
	c.readerFlushes = true
	c.mu.Unlock()
}

func (c *conn) readerFlush() {
	c.mu.Lock()
	c.readerFlushes = false
	run := !c.flushing && !c.stopped && (c.out.len() > 0 || c.closeWith != nil)
	if run {
		c.flushing = true
		c.flushers.Add(1)
	}
	c.mu.Unlock()
	if run {
		c.flush(true)
	}
}

// flush writes the outbox until it is empty. Inline (in the reader), it
// writes one batch and hands any rest to a goroutine, so a busy session
// cannot keep the reader from reading. A frame's bytes stay counted until it
// is written.
func (c *conn) flush(inline bool) {
	defer c.flushers.Done()
	var written []outFrame // the last batch
	for batch := 0; ; batch++ {
		c.mu.Lock()
		if written != nil {
			c.out.recycle(written)
			written = nil
		}
		why := c.closeWith
		if c.out.len() == 0 && why == nil {
			c.flushing = false
			c.mu.Unlock()
			return
		}
		if inline && batch > 0 {
			c.flushers.Add(1)
			go c.flush(false) // still flushing: the flag passes to it
			c.mu.Unlock()
			return
		}
		if why != nil {
			c.out.drop()
			c.mu.Unlock()
			if why == &closeTooManyRefusals {
				c.countSlow()
			}
			c.close(*why)
			c.finish()
			return
		}
		frames := c.out.take()
		c.mu.Unlock()
		for i, f := range frames {
			typ := "error"
			if f.state {
				typ = "state"
			}
			ok := c.write(f.data, typ)
			f.done()
			c.mu.Lock()
			c.out.unqueue(f)
			if !ok {
				for _, rest := range frames[i+1:] {
					c.out.unqueue(rest)
					rest.done()
				}
			}
			c.mu.Unlock()
			if !ok {
				c.finish()
				return
			}
		}
		written = frames
	}
}

// write sends one frame; a connection that cannot take it within the write
// timeout is closed and resyncs when it reconnects.
func (c *conn) write(frame []byte, typ string) bool {
	// Counted before the write: the peer may read the frame before Write returns.
	if typ == "state" {
		c.metrics.framesOutState.Inc()
	} else {
		c.metrics.framesOutErr.Inc()
	}
	c.writeStart.Store(int64(time.Since(c.born)) + 1)
	if !c.watchArmed.Swap(true) {
		if t := c.writeTimer.Load(); t != nil {
			t.Reset(c.writeTimeout)
		} else {
			c.writeTimer.Store(time.AfterFunc(c.writeTimeout, c.watchWrite))
		}
	}
	err := c.ws.Write(context.Background(), websocket.MessageText, frame)
	if c.writeStart.Swap(0) == writeTimedOut {
		// The watchdog closed the connection: this write, or the next, fails.
		c.countSlow()
		c.log.Info("closing a connection that stopped reading", "timeout", c.writeTimeout)
		err = errWriteTimeout
	}
	if err != nil {
		c.ws.CloseNow()
		return false
	}
	return true
}

// writeTimedOut is writeStart once the watchdog closed the connection.
const writeTimedOut = -1

// watchWrite is the write watchdog, the function of writeTimer. Armed by a
// write when it is not armed already, it closes the connection if the
// running write began writeTimeout ago or more, waits out the rest of the
// timeout if one began since, and else stays unarmed until the next write.
// So a busy connection resets its timer once per timeout, not once per
// frame: Timer.Reset per frame wakes the runtime's poller for every frame.
func (c *conn) watchWrite() {
	c.watchArmed.Store(false) // before the load: a write that begins after it arms the timer again
	start := c.writeStart.Load()
	if start <= 0 {
		return
	}
	ran := time.Since(c.born) - time.Duration(start-1)
	if ran < c.writeTimeout {
		if !c.watchArmed.Swap(true) {
			c.writeTimer.Load().Reset(c.writeTimeout - ran)
		}
		return
	}
	if c.writeStart.CompareAndSwap(start, writeTimedOut) {
		c.ws.CloseNow()
	}
}

// close closes the connection with why, remembering the code for the log.
func (c *conn) close(why closeReason) {
	c.mu.Lock()
	if c.sent == 0 {
		c.sent = why.code
	}
	c.mu.Unlock()
	why.closeConn(c.ws)
}

// closeCode is the close code to log for a connection that ended with err:
// the one the server sent, else 1009 if the library closed it for a frame
// over the cap, else the peer's (-1 when there was none).
func (c *conn) closeCode(err error) int {
	c.mu.Lock()
	sent := c.sent
	c.mu.Unlock()
	switch {
	case sent != 0:
		return int(sent)
	case errors.Is(err, websocket.ErrMessageTooBig):
		return int(closeTooBig.code)
	}
	return int(websocket.CloseStatus(err))
}

// finish marks the flusher gone for good after the connection broke.
func (c *conn) finish() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	c.flushing = false
	c.out.drop()
}

// stop is the handler's teardown: no new flushers, then wait for the running one.
func (c *conn) stop() {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	c.flushers.Wait()
	if t := c.writeTimer.Load(); t != nil {
		t.Stop()
	}
	c.mu.Lock()
	c.torn = true
	c.out.drop() // what no flusher will write
	c.mu.Unlock()
}

// readLoop reads frames until the connection closes and submits each
// command to the session; it returns the error that ended the connection.
// It uses conn.Read, not wsjson: a bad frame gets an error frame and the
// connection stays open.
func (c *conn) readLoop(s *session) error {
	for {
		data, err := c.nextText()
		if err != nil {
			return err
		}
		cmd, ask, err := decodeStudentFrame(*data, c.role) // keeps no byte of data
		c.bufs.put(data)
		if err != nil {
			c.metrics.frameIn("invalid")
			c.sendError(err)
			continue
		}
		if ask != nil {
			c.metrics.frameIn(ask.frameType())
			c.live.ask(c, *ask) // live.go: no change of the session
			continue
		}
		c.metrics.frameIn(frameType(cmd.Kind))
		s.submit(pending{cmd: cmd, from: c})
	}
}

// nextText returns the next text frame within the rate limit. Frames over
// the limit and binary ones get an error frame. Before it waits for a frame
// it writes what the previous one caused (see deferFlush).
func (c *conn) nextText() (*[]byte, error) {
	for {
		c.readerFlush()
		typ, data, err := c.read()
		if err != nil {
			return nil, err
		}
		c.deferFlush()
		switch {
		case !c.limit.frames.Allow(time.Now()):
			c.metrics.frameIn("invalid")
			if !c.limit.refusals.Allow(time.Now()) {
				c.metrics.refused.WithLabelValues("rate_limit").Inc()
				c.close(closeRateAbuse)
				return nil, errRateAbuse
			}
			c.sendError(fmt.Errorf("%w: at most %g a second, %d at once; this one was not applied",
				errTooManyFrames, c.limit.frames.PerSecond(), c.limit.frames.Burst()))
		case typ != websocket.MessageText:
			c.metrics.frameIn("invalid")
			c.sendError(badFrame("frames must be text messages holding JSON"))
		case !utf8.Valid(*data):
			// RFC 6455 §8.1: a text frame that is not UTF-8 fails the connection.
			c.metrics.framesIn.WithLabelValues("invalid").Inc()
			c.close(closeInvalidUTF8)
			c.bufs.put(data)
			return nil, errNotUTF8
		default:
			return data, nil
		}
		c.bufs.put(data)
	}
}

// readBuffers lends the buffers frames are read into, from a frame's first
// byte to its decoding: an idle connection, waiting in Reader for its next
// frame, holds none. Safe for concurrent use; the Server owns one.
type readBuffers struct{ pool sync.Pool }

func (p *readBuffers) get() *[]byte {
	if b, ok := p.pool.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 0, 1024)
	return &b
}

// put takes back a buffer; one grown by a rare big frame is left to the GC,
// so the pool keeps only what ordinary frames need.
func (p *readBuffers) put(b *[]byte) {
	if cap(*b) <= maxPooledRead {
		*b = (*b)[:0]
		p.pool.Put(b)
	}
}

// maxPooledRead: a 64 KiB reply, JSON-escaped in its frame, fits.
const maxPooledRead = 128 << 10

// read reads the next message into a buffer from c.bufs, which the caller
// puts back once done with it.
func (c *conn) read() (websocket.MessageType, *[]byte, error) {
	typ, r, err := c.ws.Reader(context.Background())
	if err != nil {
		return 0, nil, err
	}
	buf := c.bufs.get()
	b := *buf
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			*buf = b
			c.bufs.put(buf)
			return 0, nil, err
		}
	}
	*buf = b
	return typ, buf, nil
}

// accept upgrades c's request (see checkUpgrade for what is refused
// before), writing through Echo's response as any handler does. The
// connection it returns writes through a buffer of writeBufferSize, not the
// 4 KiB one net/http hands over: coder/websocket writes a frame's header
// into that buffer and its payload after it, so a state frame past 4 KiB
// took two write calls where one does (BENCHMARKS.md). The buffer is
// written first by the connection's first state, so an idle connection
// costs it in full.
func (s *Server) accept(c echo.Context) (*websocket.Conn, error) {
	return websocket.Accept(biggerWrites{c.Response()}, c.Request(), &websocket.AcceptOptions{OriginPatterns: s.cfg.Origins})
}

// writeBufferSize holds a state frame with its header through a long
// session: labbench's sessions end at 100 changes with 14 KiB frames, which
// took two write calls each with 12 KiB. Only the pages a connection's
// frames reach are resident, so an idle one costs no more.
const writeBufferSize = 16 << 10

// biggerWrites is Echo's response, whose Hijack hands over a bigger write
// buffer (see accept).
type biggerWrites struct{ *echo.Response }

func (w biggerWrites) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := w.Response.Hijack()
	if err != nil {
		return nil, nil, err
	}
	if err := brw.Writer.Flush(); err != nil { // nothing is buffered yet; if it were, it goes first
		nc.Close()
		return nil, nil, fmt.Errorf("flushing the upgrade: %w", err)
	}
	brw.Writer = bufio.NewWriterSize(nc, writeBufferSize)
	return nc, brw, nil
}

// checkUpgrade refuses, before the upgrade and as an HTTP error like every
// other, a request that is not a WebSocket handshake (426) or whose Origin
// may not open one (403). websocket.Accept checks the Origin again, more
// loosely (it ignores the scheme): what it refuses after these checks (a
// malformed handshake) it answers in plain text itself.
func (s *Server) checkUpgrade(r *http.Request) error {
	if !isUpgrade(r) {
		return errNotUpgrade
	}
	if !s.originAllowed(r) {
		return fmt.Errorf("%w: %s", errForeignOrigin, r.Header.Get("Origin"))
	}
	return nil
}

// originAllowed: no Origin (not a browser), the lab's own origin compared
// by scheme, host and port (the scheme is https when the request came over
// TLS, or from a trusted proxy that says so in X-Forwarded-Proto), or a
// host matching one of Config.Origins (scheme and host when the pattern
// has a scheme).
func (s *Server) originAllowed(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	scheme := "http"
	if s.overTLS(r) {
		scheme = "https"
	}
	if strings.EqualFold(u.Scheme, scheme) && strings.EqualFold(withPort(u.Host, scheme), withPort(r.Host, scheme)) {
		return true
	}
	for _, p := range s.cfg.Origins {
		target := u.Host
		if strings.Contains(p, "://") {
			target = u.Scheme + "://" + u.Host
		}
		if ok, err := path.Match(strings.ToLower(p), strings.ToLower(target)); err == nil && ok {
			return true
		}
	}
	return false
}

// withPort writes host with its port, the scheme's default if it has none.
func withPort(host, scheme string) string {
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	if scheme == "https" {
		return net.JoinHostPort(strings.Trim(host, "[]"), "443")
	}
	return net.JoinHostPort(strings.Trim(host, "[]"), "80")
}
