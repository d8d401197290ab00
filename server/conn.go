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
// Writes happen in a flusher goroutine started on demand when there is
// something to send, so an idle connection costs no goroutine and a slow one
// never blocks its session: mu guards the outbox (waiting state and error
// frames, both bounded) and the flags.
type conn struct {
	ws           *websocket.Conn
	log          *slog.Logger
	writeTimeout time.Duration

	mu       sync.Mutex
	states   [][]byte // state frames not yet written, oldest first
	errs     [][]byte // error frames not yet written
	overflow bool     // too many errors were waiting: close with 1008
	flushing bool     // a flusher goroutine is running
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

// kick starts a flusher unless one runs or the conn is stopping. Called with mu held.
func (c *conn) kick() {
	if c.flushing || c.stopped {
		return
	}
	c.flushing = true
	c.flushers.Add(1)
	go c.flush()
}

func (c *conn) flush() {
	defer c.flushers.Done()
	for {
		c.mu.Lock()
		errs, states, overflow := c.errs, c.states, c.overflow
		c.errs, c.states = nil, nil
		if len(errs) == 0 && len(states) == 0 && !overflow {
			c.flushing = false
			c.mu.Unlock()
			return
		}
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
		if !lim.frames.Allow() {
			if !lim.refusals.Allow() {
				c.ws.Close(websocket.StatusPolicyViolation, "too many frames: kept sending over the frame rate limit")
				return
			}
			c.sendError(refuse("too many frames: at most %g a second, %d at once; this one was not applied", float64(lim.frames.Limit()), lim.frames.Burst()))
			continue
		}
		if typ != websocket.MessageText {
			c.sendError(refuse("frames must be text messages holding JSON"))
			continue
		}
		cmd, err := decodeFrame(data, by)
		if err != nil {
			c.sendError(err)
			continue
		}
		s.submit(pending{cmd: cmd, from: c})
	}
}
