package server

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/time/rate"

	"github.com/toolcall-lab/lab/model"
)

// maxPendingStates bounds the state frames waiting for one connection. A
// connection further behind loses the oldest: frames are whole states, so the
// latest one is always enough to catch up.
const maxPendingStates = 64

// maxPendingErrors bounds the error frames waiting for a connection that
// sends refused frames faster than it reads; past it the connection is closed.
const maxPendingErrors = 16

// conn is one WebSocket connection of a session.
//
// Ownership: its HTTP handler goroutine reads and owns the conn's lifetime.
// Writes happen in a flusher started on demand when there is something to
// send: a goroutine, or the reader itself right after handling a frame
// (flushHeld). So an idle connection costs no goroutine and a slow one never
// blocks its session: mu guards the outbox (waiting state and error frames,
// both bounded) and the flags.
type conn struct {
	ws           *websocket.Conn
	log          *slog.Logger
	writeTimeout time.Duration

	mu       sync.Mutex
	states   [][]byte // state frames not yet written, oldest first
	errs     [][]byte // error frames not yet written
	overflow bool     // too many errors were waiting: close with 1008
	flushing bool     // a flusher is running
	held     bool     // the reader is handling a frame and flushes after it
	stopped  bool     // the handler is tearing down: start no more flushers

	flushers sync.WaitGroup
}

func (c *conn) sendState(frame []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.states) == maxPendingStates {
		copy(c.states, c.states[1:])
		c.states = c.states[:maxPendingStates-1]
	}
	c.states = append(c.states, frame)
	c.kick()
}

func (c *conn) sendError(err error) {
	frame := errorFrame(clientMessage(c.log, err))
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.errs) >= maxPendingErrors {
		c.overflow = true
	} else {
		c.errs = append(c.errs, frame)
	}
	c.kick()
}

// kick starts a flusher goroutine unless one runs, the reader will flush
// (held), or the conn is stopping. Called with mu held.
func (c *conn) kick() {
	if c.flushing || c.held || c.stopped {
		return
	}
	c.flushing = true
	c.flushers.Add(1)
	go c.flush(false)
}

// holdFlush and flushHeld bracket the reader's handling of one frame: what
// the frame causes for this connection (its own state, an error) is written
// by the reader itself afterwards, not by a new goroutine. That saves a
// goroutine start and a handoff per frame; a client slow to read only
// delays its own next read.
func (c *conn) holdFlush() {
	c.mu.Lock()
	c.held = true
	c.mu.Unlock()
}

func (c *conn) flushHeld() {
	c.mu.Lock()
	c.held = false
	run := !c.flushing && !c.stopped && (len(c.states) > 0 || len(c.errs) > 0 || c.overflow)
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
// cannot keep the reader from reading.
func (c *conn) flush(inline bool) {
	defer c.flushers.Done()
	for batch := 0; ; batch++ {
		c.mu.Lock()
		errs, states, overflow := c.errs, c.states, c.overflow
		if len(errs) == 0 && len(states) == 0 && !overflow {
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
		c.errs, c.states = nil, nil
		c.mu.Unlock()
		if overflow {
			c.ws.Close(websocket.StatusPolicyViolation, "too many refused frames; reconnect to resync")
			c.finish()
			return
		}
		for _, f := range errs {
			if !c.write(f) {
				return
			}
		}
		for _, f := range states {
			if !c.write(f) {
				return
			}
		}
	}
}

// write sends one frame; a connection that cannot take it within the write
// timeout is closed (by the library) and resyncs when it reconnects.
func (c *conn) write(frame []byte) bool {
	ctx, cancel := context.WithTimeout(context.Background(), c.writeTimeout)
	defer cancel()
	if err := c.ws.Write(ctx, websocket.MessageText, frame); err != nil {
		if !errors.Is(err, context.DeadlineExceeded) && websocket.CloseStatus(err) == -1 {
			c.log.Debug("websocket write failed", "err", err)
		}
		c.ws.CloseNow()
		c.finish()
		return false
	}
	return true
}

// finish marks the flusher gone for good after the connection broke.
func (c *conn) finish() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	c.flushing = false
	c.states, c.errs = nil, nil
}

// stop is the handler's teardown: no new flushers, then wait for the running one.
func (c *conn) stop() {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	c.flushers.Wait()
}

// frameLimit is one connection's frame rate limit. Frames over it are
// refused; refusals have an allowance of their own (the burst, refilled at a
// quarter of the rate), so a burst of clicks gets error frames while a client
// that keeps going over is closed.
type frameLimit struct {
	frames, refusals *rate.Limiter
}

func (s *Server) newFrameLimit() frameLimit {
	r := rate.Limit(s.cfg.FrameRate)
	return frameLimit{frames: rate.NewLimiter(r, s.cfg.FrameBurst), refusals: rate.NewLimiter(r/4, s.cfg.FrameBurst)}
}

// readLoop reads frames until the connection closes and submits each
// command to the session. It uses conn.Read, not wsjson: a bad frame gets an
// error frame and the connection stays open.
func (c *conn) readLoop(s *session, by model.Actor, lim frameLimit) {
	for {
		typ, data, err := c.ws.Read(context.Background())
		if err != nil {
			return
		}
		c.holdFlush()
		open := c.handle(s, by, lim, typ, data)
		c.flushHeld()
		if !open {
			return
		}
	}
}

// handle refuses or submits one frame; false means the connection was closed.
func (c *conn) handle(s *session, by model.Actor, lim frameLimit, typ websocket.MessageType, data []byte) bool {
	if !lim.frames.Allow() {
		if !lim.refusals.Allow() {
			c.ws.Close(websocket.StatusPolicyViolation, "too many frames: kept sending over the frame rate limit")
			return false
		}
		c.sendError(refuse("too many frames: at most %g a second, %d at once; this one was not applied", float64(lim.frames.Limit()), lim.frames.Burst()))
		return true
	}
	if typ != websocket.MessageText {
		c.sendError(refuse("frames must be text messages holding JSON"))
		return true
	}
	cmd, err := decodeFrame(data, by)
	if err != nil {
		c.sendError(err)
		return true
	}
	s.submit(pending{cmd: cmd, from: c})
	return true
}
