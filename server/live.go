package server

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/evanw/esbuild/pkg/api"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolcall-lab/lab/internal/fair"
	"github.com/toolcall-lab/lab/internal/limit"
	"github.com/toolcall-lab/lab/internal/rescript"
	"github.com/toolcall-lab/lab/model"
)

// The compiler while a student types (issue 52; docs/protocol.md,
// "Live diagnostics"): a compile frame is answered on its connection
// with what the compiler says of the editor's text, a typeAt frame with
// the type at a place of it. Neither is a change: nothing is stored,
// checked, counted as a submission or ticked, and the check's allowance
// is untouched.
//
// ReScript goes to the live compiler (internal/rescript's Live: helpers
// kept running, each bsc.exe and analysis under the compile's caps);
// JavaScript is parsed here, in process, by esbuild, which gives syntax
// errors with their place. A compile the lab did lately (any
// connection's) is answered from memory (kept), the .cmt it left serving
// a typeAt of the same source without compiling again.

// liveAsk is a decoded compile or typeAt frame (frames.go).
type liveAsk struct {
	id           int64
	typeAt       bool
	lang         model.Language
	source       string
	line, column int64 // typeAt's place, 1-based
}

// frameType is the frame's type, for metrics and refusals.
func (a liveAsk) frameType() string {
	if a.typeAt {
		return "typeAt"
	}
	return "compile"
}

// liveConn is a connection's side of the live compiler: the Server's
// service and the connection's allowance. Owned by the connection's
// reader.
type liveConn struct {
	svc    *liveCompiles
	bucket limit.Bucket
	made   bool
}

// LiveCompiler is what the live compiles need of a ReScript compiler
// (internal/rescript's *Compiler): a Compiler that also has it is used
// live; one that has not (a test's) is not.
type LiveCompiler interface {
	Live(n int) *rescript.Live
	Types() bool
}

// liveCompiles answers the students' compile and typeAt frames.
//
// Ownership: mu guards queue, workers, stopped, kept and keptOld. The
// queue is fair (internal/fair): across client addresses (a connection's
// remote) in turn and, inside one, across its connections; a connection
// has one job waiting at most, a newer one in its place (the one
// replaced is never answered). Worker goroutines, at most max, are
// started by ask while fewer run and the queue holds a job; each exits
// when the queue is empty or stop is called. No I/O under mu: a worker
// runs a job and hands its answer to the connection's outbox (which a
// flusher writes) with mu released. stop (Shutdown, Restart) drops the
// waiting jobs, ends the helpers (a running job ends with them) and
// waits for the workers.
type liveCompiles struct {
	log    *slog.Logger
	live   *rescript.Live // nil: no ReScript compiler (JavaScript only)
	types  bool           // the compiler says types (its analysis binary)
	ctx    context.Context
	cancel context.CancelFunc
	max    int
	counts *prometheus.CounterVec // lab_live_compiles_total by how
	// class is the checker's: a live compile claims a core from the same
	// count as the checks, so that while the class makes changes the
	// students' code, checked or compiled, takes one core.
	class *activity

	mu      sync.Mutex
	queue   *fair.Queue[*conn, liveAsk]
	workers int
	stopped bool
	// kept are the outcomes of recent ReScript compiles by source, the
	// oldest first in keptOld; not kept across a restart.
	kept    map[[32]byte]liveKept
	keptOld [][32]byte
	wg      sync.WaitGroup
}

// liveKept is one compile kept: what the compiler said and the .cmt it
// left (nil when none or too large).
type liveKept struct {
	diags []model.Diagnostic
	types []byte
}

func newLiveCompiles(log *slog.Logger, c Compiler, m *metrics, class *activity) *liveCompiles {
	ctx, cancel := context.WithCancel(context.Background())
	k := &liveCompiles{log: log, ctx: ctx, cancel: cancel, max: runtime.NumCPU(), class: class,
		queue: fair.New[*conn, liveAsk](), kept: make(map[[32]byte]liveKept)}
	if lc, ok := c.(LiveCompiler); ok && c != nil {
		k.live, k.types = lc.Live(k.max), lc.Types()
	}
	k.counts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lab_live_compiles_total",
		Help: "Compile and typeAt frames answered (docs/metrics.md), by how: ran (the live compiler ran), kept (answered from a recent compile), parsed (JavaScript), refused (over the allowance), failed (the compiler was stopped, or the lab could not run it).",
	}, []string{"how"})
	m.registry.MustRegister(k.counts)
	return k
}

// ask answers a compile or typeAt of c: at once when it can (JavaScript,
// a source compiled lately, no compiler, over the allowance), else the
// job waits its turn. Called by c's reader.
func (lc *liveConn) ask(c *conn, a liveAsk) {
	k := lc.svc
	if k == nil {
		c.sendLiveError(errLiveBusy, a.id)
		return
	}
	now := time.Now()
	if !lc.made {
		lc.bucket, lc.made = limit.NewBucket(liveConnRate, liveConnBurst), true
	}
	if !lc.bucket.Allow(now) {
		k.counts.WithLabelValues("refused").Inc()
		c.sendLiveError(errLiveRate, a.id)
		return
	}
	switch {
	case a.lang == model.JavaScript && a.typeAt:
		c.sendLive(typeAtFrame(a.id, "")) // no types in JavaScript
	case a.lang == model.JavaScript:
		k.counts.WithLabelValues("parsed").Inc()
		c.sendLive(compiledFrame(a.id, parseJS(a.source), ""))
	case k.live == nil:
		c.sendLiveError(errNoCompiler, a.id)
	case a.typeAt && !k.types:
		c.sendLive(typeAtFrame(a.id, ""))
	default:
		if kept, ok := k.keptOf(a.source); ok && !a.typeAt {
			k.counts.WithLabelValues("kept").Inc()
			c.sendLive(compiledFrame(a.id, kept.diags, ""))
			return
		}
		k.put(c, a)
	}
}

// put puts c's job in line, in place of one it has waiting.
func (k *liveCompiles) put(c *conn, a liveAsk) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.queue.Put(c.remote, c, a) == fair.Stopped {
		return
	}
	if k.workers < k.max && k.queue.Len() > 0 {
		k.workers++
		k.wg.Add(1)
		go k.work()
	}
}

// drop forgets c's waiting job: its connection has closed.
func (k *liveCompiles) drop(c *conn) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.queue.Remove(c)
}

// stop drops the waiting jobs, ends the helpers and waits for the
// workers.
func (k *liveCompiles) stop() {
	k.mu.Lock()
	k.stopped = true
	k.queue.Stop()
	k.mu.Unlock()
	k.cancel()
	if k.live != nil {
		k.live.Close()
	}
	k.wg.Wait()
}

func (k *liveCompiles) work() {
	defer k.wg.Done()
	for {
		k.mu.Lock()
		_, a, ok := k.queue.Peek()
		if !ok || k.stopped {
			k.workers--
			k.mu.Unlock()
			return
		}
		// A job answered from a kept compile runs no compiler: a typeAt
		// then runs the analysis alone (about 30 ms) and claims no core.
		_, kept := k.kept[liveKey(a.source)]
		if !kept {
			if wait, ok := k.class.claim(); !ok {
				k.mu.Unlock()
				k.sleep(wait)
				continue
			}
		}
		c, a, _ := k.queue.Take()
		k.mu.Unlock()
		frame := k.run(a)
		if !kept {
			k.class.release()
		}
		if frame != nil {
			c.sendLive(frame)
		}
		k.mu.Lock()
		k.queue.Done(c) // a job c asked meanwhile joins the back of the line
		k.mu.Unlock()
	}
}

// sleep waits d, or until the live compiler stops.
func (k *liveCompiles) sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-k.ctx.Done():
	}
}

// run does one ReScript job and returns its answer (nil when the lab is
// stopping).
func (k *liveCompiles) run(a liveAsk) []byte {
	kept, ok := k.keptOf(a.source)
	if ok && !a.typeAt {
		k.counts.WithLabelValues("kept").Inc()
		return compiledFrame(a.id, kept.diags, "")
	}
	job := rescript.LiveJob{Source: a.source, At: a.typeAt, Line: int(a.line), Column: int(a.column)}
	if ok {
		job.Types = kept.types // the types of the same source: no compile
	}
	out, err := k.live.Run(k.ctx, job)
	var ce *rescript.Error
	switch {
	case errors.As(err, &ce):
		// The compiler was stopped on this program: the page says so,
		// and Check builds it under the check's caps.
		k.counts.WithLabelValues("failed").Inc()
		if a.typeAt {
			return typeAtFrame(a.id, "")
		}
		return compiledFrame(a.id, nil, ce.Message)
	case err != nil && k.ctx.Err() != nil:
		return nil
	case err != nil:
		k.counts.WithLabelValues("failed").Inc()
		k.log.Warn("a live compile", "err", err)
		return liveErrorFrame(classify(k.log, errLiveBusy), a.id)
	}
	if out.Compiled {
		k.counts.WithLabelValues("ran").Inc()
		k.keep(a.source, liveKept{diags: out.Diagnostics, types: out.Types})
	} else {
		k.counts.WithLabelValues("kept").Inc()
	}
	if a.typeAt {
		return typeAtFrame(a.id, out.Type)
	}
	return compiledFrame(a.id, out.Diagnostics, "")
}

// liveKey is a ReScript source's key in kept.
func liveKey(source string) [32]byte { return sha256.Sum256([]byte(source)) }

// keptOf is the compile of source kept, if any.
func (k *liveCompiles) keptOf(source string) (liveKept, bool) {
	key := liveKey(source)
	k.mu.Lock()
	defer k.mu.Unlock()
	kept, ok := k.kept[key]
	return kept, ok
}

// keep keeps a compile of source, forgetting the oldest past maxLiveKept.
func (k *liveCompiles) keep(source string, kept liveKept) {
	key := liveKey(source)
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.kept[key]; ok {
		return
	}
	if len(k.keptOld) == maxLiveKept {
		delete(k.kept, k.keptOld[0])
		k.keptOld = slices.Delete(k.keptOld, 0, 1)
	}
	k.kept[key] = kept
	k.keptOld = append(k.keptOld, key)
}

// parseJS parses a JavaScript module (esbuild, in process: a parse runs
// none of the student's code) and says its syntax errors as the
// compiler's messages are said: 1-based lines and columns, the columns
// counted as the page's editor counts them (UTF-16 code units).
func parseJS(source string) []model.Diagnostic {
	res := api.Transform(source, api.TransformOptions{Loader: api.LoaderJS, Format: api.FormatESModule, LogLevel: api.LogLevelSilent, Sourcefile: "ToolCall.js"})
	var out []model.Diagnostic
	for _, m := range res.Errors {
		d := model.Diagnostic{Line: 1, Column: 1, EndLine: 1, EndColumn: 1, Severity: model.SeverityError, Text: m.Text}
		if l := m.Location; l != nil {
			col := units(l.LineText, l.Column) + 1
			d.Line, d.Column, d.EndLine = max(l.Line, 1), col, max(l.Line, 1)
			d.EndColumn = max(col, units(l.LineText, l.Column+l.Length))
		}
		out = append(out, d)
		if len(out) == 10 {
			break
		}
	}
	return out
}

// units is how many UTF-16 code units the first n bytes of line are.
func units(line string, n int) int {
	n = min(max(n, 0), len(line))
	u := 0
	for _, r := range line[:n] {
		if r == utf8.RuneError {
			u++
			continue
		}
		u += len(utf16.Encode([]rune{r}))
	}
	return u
}

// sendLive queues a compiled or typeAt frame (or a live error frame) for
// c; the flusher writes it.
func (c *conn) sendLive(frame []byte) { c.queueError(frame) }

// sendLiveError refuses a compile or typeAt with an error frame carrying
// its id.
func (c *conn) sendLiveError(err error, id int64) {
	r := classify(c.log, err)
	c.metrics.refused.WithLabelValues(r.reason).Inc()
	c.sendLive(liveErrorFrame(r, id))
}
