package server

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolcall-lab/lab/store"
)

// outage is one way the server can fail to work (its store's writes, its
// listening to other replicas): logged once when it starts, and once when
// it ends with how long it lasted, however many calls fail meanwhile.
//
// Ownership: mu guards since; it is a leaf lock, and the logging happens
// after it is released.
type outage struct {
	what string // "store writes", "listening to other replicas"
	log  *slog.Logger

	mu    sync.Mutex
	since time.Time // when it began; zero while working

	// trying is set while one call tries a failing store (bounded.Append).
	trying atomic.Bool
}

// fail notes that it does not work now (err says why).
func (o *outage) fail(err error) {
	o.mu.Lock()
	began := o.since.IsZero()
	if began {
		o.since = time.Now()
	}
	o.mu.Unlock()
	if began {
		o.log.Warn(o.what+" failing; /readyz answers 503 until they work again", "err", err)
	}
}

// ok notes that it works now.
func (o *outage) ok() {
	o.mu.Lock()
	since := o.since
	o.since = time.Time{}
	o.mu.Unlock()
	if !since.IsZero() {
		o.log.Info(o.what+" working again", "after", time.Since(since).Round(time.Millisecond))
	}
}

// failing reports whether it has failed and not worked since.
func (o *outage) failing() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return !o.since.IsZero()
}

// noteWrite feeds an append's result to the writes outage: a seq another
// replica took is the database answering.
func (o *outage) noteWrite(err error) {
	if err == nil || errors.Is(err, store.ErrSeqTaken) {
		o.ok()
		return
	}
	o.fail(err)
}

// readyTimeout bounds a readiness probe's write, so that /readyz answers
// within a second whatever the database does.
const readyTimeout = 800 * time.Millisecond

// prober runs the store's readiness probe for every caller of Ready, one
// probe at a time: callers that come while one runs wait for its answer.
// The probe has its own context (never a caller's, so one prober that
// gives up cancels nothing and no one is told "context canceled"), under
// readyTimeout; its answer is not kept beyond the callers waiting for it.
//
// Ownership: mu guards running and err; the goroutine of a probe is
// started by the caller that found none running and ends within
// readyTimeout, closing running.
type prober struct {
	mu      sync.Mutex
	running chan struct{} // closed when the probe in flight ends; nil when none
	err     error         // the answer of the probe last ended
}

// probe runs st.Ready, or joins the probe running, and returns its answer,
// or ctx's error if ctx ends first.
func (p *prober) probe(ctx context.Context, st store.Store, timeout time.Duration, writes *outage) error {
	p.mu.Lock()
	done := p.running
	if done == nil {
		ch := make(chan struct{})
		p.running, done = ch, ch
		go func() {
			pctx, cancel := context.WithTimeout(context.Background(), timeout)
			err := st.Ready(pctx)
			cancel()
			p.mu.Lock()
			p.err, p.running = err, nil
			p.mu.Unlock()
			close(ch)
			if err != nil {
				writes.fail(err)
			} else {
				writes.ok()
			}
		}()
	}
	p.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}
