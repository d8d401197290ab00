package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/toolcall-lab/lab/model"
)

// maxPendingStates bounds the state frames waiting for one connection. A
// connection further behind loses the oldest waiting state: frames are whole
// states, so a newer one is always enough to catch up.
const maxPendingStates = 64

// maxPendingErrors bounds the error frames waiting for a connection that
// sends refused frames faster than it reads; past it the connection is closed.
const maxPendingErrors = 16

// outFrame is a frame waiting to be written.
type outFrame struct {
	data  []byte
	state bool // a state frame (else an error frame)
}

// conn is one WebSocket connection of a session.
//
// Ownership: its HTTP handler goroutine reads and owns the conn's lifetime.
// Writes happen in a flusher goroutine started on demand when there is
// something to send, so an idle connection costs no goroutine and a slow one
// never blocks its session. mu guards the outbox (frames in the order they
// were produced, bounded) and the flags.
type conn struct {
	ws           *websocket.Conn
	role         model.Actor
	log          *slog.Logger
	metrics      *metrics
	writeTimeout time.Duration

	mu       sync.Mutex
	outbox   []outFrame
	states   int  // state frames in outbox
	errors   int  // error frames in outbox
	overflow bool // too many errors were waiting: close with 1008
	flushing bool // a flusher goroutine is running
	stopped  bool // the handler is tearing down: start no more flushers

	flushers sync.WaitGroup
}

func (c *conn) sendState(frame []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.states == maxPendingStates {
		i := slices.IndexFunc(c.outbox, func(f outFrame) bool { return f.state })
		c.outbox = slices.Delete(c.outbox, i, i+1)
		c.states--
	}
	c.outbox = append(c.outbox, outFrame{data: frame, state: true})
	c.states++
	c.kick()
}

func (c *conn) sendError(err error) {
	r := classify(c.log, err)
	c.metrics.refused.WithLabelValues(r.reason).Inc()
	frame := errorFrame(r.text)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.errors == maxPendingErrors {
		c.overflow = true
	} else {
		c.outbox = append(c.outbox, outFrame{data: frame})
		c.errors++
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
		frames, overflow := c.outbox, c.overflow
		c.outbox, c.states, c.errors = nil, 0, 0
		if len(frames) == 0 && !overflow {
			c.flushing = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		if overflow {
			c.metrics.slowCloses.Inc()
			c.ws.Close(websocket.StatusPolicyViolation, "too many refused frames; reconnect to resync")
			c.finish()
			return
		}
		for _, f := range frames {
			typ := "error"
			if f.state {
				typ = "state"
			}
			if !c.write(f.data, typ) {
				return
			}
		}
	}
}

// write sends one frame; a connection that cannot take it within the write
// timeout is closed (by the library) and resyncs when it reconnects.
func (c *conn) write(frame []byte, typ string) bool {
	// Counted before the write: the peer may read the frame before Write returns.
	c.metrics.framesOut.WithLabelValues(typ).Inc()
	ctx, cancel := context.WithTimeout(context.Background(), c.writeTimeout)
	defer cancel()
	if err := c.ws.Write(ctx, websocket.MessageText, frame); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			c.metrics.slowCloses.Inc()
			c.log.Info("closing a connection that stopped reading", "timeout", c.writeTimeout)
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
	c.outbox, c.states, c.errors = nil, 0, 0
}

// stop is the handler's teardown: no new flushers, then wait for the running one.
func (c *conn) stop() {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	c.flushers.Wait()
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
		cmd, err := decodeFrame(data, c.role)
		if err != nil {
			c.metrics.framesIn.WithLabelValues("invalid").Inc()
			c.sendError(err)
			continue
		}
		c.metrics.framesIn.WithLabelValues(frameType(cmd.Kind)).Inc()
		s.submit(pending{cmd: cmd, from: c})
	}
}

// instructorLoop reads an instructor's frames until the connection closes:
// watch one session (replacing the one watched before) or stop watching.
// *watched is the session watched now; the caller unwatches it at the end.
func (c *conn) instructorLoop(s *Server, watched **session) error {
	for {
		data, err := c.nextText()
		if err != nil {
			return err
		}
		cmd, err := decodeInstructorFrame(data)
		if err != nil {
			c.metrics.framesIn.WithLabelValues("invalid").Inc()
			c.sendError(err)
			continue
		}
		c.metrics.framesIn.WithLabelValues(cmd.typ).Inc()
		if *watched != nil {
			(*watched).unwatch(c)
			*watched = nil
		}
		if cmd.typ != "watch" {
			continue
		}
		sess, ok := s.existing(cmd.session)
		if !ok {
			c.sendError(fmt.Errorf("%w %s", errUnknownSession, cmd.session))
			continue
		}
		sess.watch(c)
		*watched = sess
	}
}

// nextText returns the next text frame; a binary one gets an error frame.
func (c *conn) nextText() ([]byte, error) {
	for {
		typ, data, err := c.ws.Read(context.Background())
		if err != nil {
			return nil, err
		}
		if typ == websocket.MessageText {
			return data, nil
		}
		c.metrics.framesIn.WithLabelValues("invalid").Inc()
		c.sendError(refuse("frames must be text messages holding JSON"))
	}
}
