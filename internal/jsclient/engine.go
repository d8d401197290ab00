package jsclient

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dop251/goja"
	"github.com/dop251/goja/parser"
	"golang.org/x/sys/unix"

	"github.com/toolcall-lab/lab/model"
)

// This file is the engine itself: it runs in the sandbox process (child.go)
// and never in the lab's own.

// Budget is what one submission may spend.
type Budget struct {
	Total   time.Duration // all calls of all cases, the top level included
	PerCall time.Duration // one call of begin, receive, expire or view
	Heap    int64         // bytes of the sandbox's heap the program may fill
	Result  int           // bytes of a notice, or of a view's JSON
}

// DefaultBudget is the issue's: 2 s in all, 50 ms a call, results of 64 KiB.
func DefaultBudget() Budget {
	return Budget{Total: 2 * time.Second, PerCall: 50 * time.Millisecond, Heap: 64 << 20, Result: 64 << 10}
}

func (b Budget) withDefaults() Budget {
	d := DefaultBudget()
	if b.Total <= 0 {
		b.Total = d.Total
	}
	if b.PerCall <= 0 {
		b.PerCall = d.PerCall
	}
	if b.Heap <= 0 {
		b.Heap = d.Heap
	}
	if b.Result <= 0 {
		b.Result = d.Result
	}
	return b
}

// maxDepth bounds nested calls: the seed's module nests four deep.
const maxDepth = 2000

// maxHandles bounds the call values one instance keeps for the host.
const maxHandles = 1 << 16

const fileName = "module.js"

// program is a compiled submission: compiled once, run in a fresh runtime
// for every instance.
type program struct {
	prg    *goja.Program
	lines  int // of the source as written
	budget Budget
	used   time.Duration
	meter  meter
}

// compileSource rewrites and compiles a source. The epilogue, on a line of
// its own after the source, evaluates to the four exported bindings.
func compileSource(src string, b Budget) (*program, error) {
	rw, err := rewrite(src)
	if err != nil {
		return nil, err
	}
	var ep strings.Builder
	ep.WriteString("\n;({")
	for i, name := range wanted {
		local, ok := rw.local[name]
		if i > 0 {
			ep.WriteString(", ")
		}
		if !ok {
			fmt.Fprintf(&ep, "%q: undefined", name)
			continue
		}
		fmt.Fprintf(&ep, "%q: typeof %s === \"undefined\" ? undefined : %s", name, local, local)
	}
	ep.WriteString("})\n")
	lines := strings.Count(src, "\n") + 1
	prg, err := goja.Compile(fileName, rw.script+ep.String(), true)
	if err != nil {
		return nil, syntaxError(err, lines)
	}
	return &program{prg: prg, lines: lines, budget: b.withDefaults()}, nil
}

// parsedAt reads the parser's "file: Line 2:14 Unexpected token ; (and 3
// more errors)", which the compiler passes on as text.
var parsedAt = regexp.MustCompile(`Line (\d+):(\d+) (.*?)(?: \(and \d+ more errors?\))?$`)

func syntaxError(err error, lines int) error {
	line, col, msg := 0, 0, err.Error()
	var list parser.ErrorList
	var one *parser.Error
	var ce *goja.CompilerSyntaxError
	switch {
	case errors.As(err, &list) && len(list) > 0:
		line, col, msg = list[0].Position.Line, list[0].Position.Column, list[0].Message
	case errors.As(err, &one):
		line, col, msg = one.Position.Line, one.Position.Column, one.Message
	case errors.As(err, &ce):
		msg = ce.Message
		if ce.File != nil {
			p := ce.File.Position(ce.Offset)
			line, col = p.Line, p.Column
		} else if m := parsedAt.FindStringSubmatch(msg); m != nil {
			line, _ = strconv.Atoi(m[1])
			col, _ = strconv.Atoi(m[2])
			msg = m[3]
		}
	}
	if line > lines { // in the epilogue: the source ended inside something
		line, col = lines, 0
		msg = "the source ends in the middle of a statement, a string or a comment (" + msg + ")"
	}
	if line == 0 {
		return &SourceError{Kind: SyntaxError, Message: "Syntax error: " + msg + "."}
	}
	return &SourceError{Kind: SyntaxError, Line: line, Column: col,
		Message: fmt.Sprintf("Syntax error at line %d, column %d: %s.", line, col, strings.TrimSuffix(msg, "."))}
}

// instance is one fresh runtime of a program: the state of one case.
type instance struct {
	p         *program
	rt        *goja.Runtime
	fn        [len(wanted)]goja.Callable
	stringify goja.Callable // the engine's own, taken before the program ran
	handles   []goja.Value
}

// The reasons an interrupt gives; the watchdog and the timer set them.
var (
	errCallTime  = errors.New("call time")
	errTotalTime = errors.New("total time")
	errMemory    = errors.New("memory")
)

// threadClock is the CPU clock of the thread the sandbox runs programs on
// (child.go locks it); 0 in the lab's own process, where the wall clock
// stands in.
var threadClock int32

// cpuNow is the time the program's thread has run.
func cpuNow() time.Duration {
	if threadClock != 0 {
		var ts unix.Timespec
		if unix.ClockGettime(threadClock, &ts) == nil {
			return time.Duration(ts.Nano())
		}
	}
	return time.Duration(time.Now().UnixNano())
}

// meter times the program's calls in CPU time without reading the
// thread's CPU clock twice a call: that read is a system call (1.5–2 µs
// on the dev machine, more than a short call of the lesson's module, a
// third of a check's time in the sandbox). A call is timed on the
// monotonic clock, which bounds its CPU time from above; the CPU clock is
// read at a call's start when the last reading is older than meterSlack
// or the last call was long, and at the end of a call longer than
// meterShort, which is then charged at most the CPU the thread ran since
// that reading. So a short call is
// charged under meterShort of waiting for a core, a long one (a call
// preempted on a busy machine is long) under meterSlack of the model's own
// work before it, and nobody's budget runs out because the machine is busy.
type meter struct {
	cpu  time.Duration // the thread's CPU clock at wall
	wall time.Time     // zero before the first reading
	long bool          // the last call was long: the next is read at its start
}

const (
	meterSlack = 100 * time.Microsecond
	meterShort = 50 * time.Microsecond
)

// begin is a call's start: the wall time and a CPU reading at or before
// it, at most meterSlack of wall time before, and at the start itself
// after a long call (a program's calls are alike: one whose calls are
// long is charged each exactly).
func (m *meter) begin() (wall time.Time, cpu time.Duration) {
	now := time.Now()
	if m.wall.IsZero() || m.long || now.Sub(m.wall) > meterSlack {
		m.cpu, m.wall = cpuNow(), now
	}
	return now, m.cpu
}

// end is the CPU time to charge a call that began at began.
func (m *meter) end(began time.Time) time.Duration {
	took := time.Since(began)
	m.long = took >= meterShort
	if !m.long {
		return took
	}
	c := cpuNow()
	ran := c - m.cpu
	m.cpu, m.wall = c, time.Now()
	return min(took, ran)
}

// current is the runtime running a call now, for the memory watchdog.
var current atomic.Pointer[goja.Runtime]

// heapSample is the sandbox's live heap, as the watchdog samples it.
var heapSample = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}

// watchHeap interrupts the running call when the heap passes its cap. The
// sandbox runs one program, so all its heap growth is that program's.
func watchHeap(limit int64, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for range t.C {
		rt := current.Load()
		if rt == nil {
			continue
		}
		metrics.Read(heapSample)
		if int64(heapSample[0].Value.Uint64()) > limit {
			rt.Interrupt(errMemory)
		}
	}
}

// epoch is the only time a program sees: Date is the same on every run, so
// that a check is a function of its source, seed and cases.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func (p *program) newInstance() (*instance, error) {
	rt := goja.New()
	rt.SetMaxCallStackSize(maxDepth)
	rt.SetTimeSource(func() time.Time { return epoch })
	rng := rand.New(rand.NewPCG(1, 2))
	rt.SetRandSource(rng.Float64)
	in := &instance{p: p, rt: rt}
	js := rt.Get("JSON").ToObject(rt)
	in.stringify, _ = goja.AssertFunction(js.Get("stringify"))
	var exports goja.Value
	err := in.guard("the top level", func() error {
		v, err := rt.RunProgram(p.prg)
		exports = v
		return err
	})
	if err != nil {
		return nil, &SourceError{Kind: LoadFailed, Message: err.Error()}
	}
	obj, _ := exports.(*goja.Object)
	var missing []string
	for i, name := range wanted {
		var v goja.Value
		if obj != nil {
			v = obj.Get(name)
		}
		f, ok := goja.AssertFunction(v)
		if !ok {
			missing = append(missing, name)
			continue
		}
		in.fn[i] = f
	}
	if len(missing) > 0 {
		return nil, &SourceError{Kind: MissingFunction, Message: missingSentence(missing)}
	}
	return in, nil
}

func missingSentence(missing []string) string {
	list := missing[0]
	if n := len(missing); n > 1 {
		list = strings.Join(missing[:n-1], ", ") + " and " + missing[n-1]
	}
	what := "a function"
	if len(missing) > 1 {
		what = "functions"
	}
	return fmt.Sprintf("The module does not define %s as %s: it must have begin, receive, expire and view.", list, what)
}

// CallError is a call of the module that failed: what happened and where,
// in a sentence (Message), and which way (Kind).
type CallError struct {
	Kind    CallErrorKind
	Message string
	dead    bool // the sandbox was killed or ended with it
}

func (e *CallError) Error() string { return e.Message }

// Unwrap is model.ErrStop when the program cannot be run further: a spent
// budget (one call's or the submission's), its memory cap, or a sandbox
// that ended. The checker then stops at once instead of playing (and
// shrinking) on a program that only fails the same way again.
func (e *CallError) Unwrap() error {
	switch {
	case e.dead, e.Kind == TooLong, e.Kind == OutOfTime, e.Kind == OutOfMemory, e.Kind == Crashed:
		return model.ErrStop
	}
	return nil
}

// CallErrorKind says which way a call failed.
type CallErrorKind uint8

const (
	Threw       CallErrorKind = iota + 1 // the program threw
	TooLong                              // one call passed Budget.PerCall
	OutOfTime                            // the submission passed Budget.Total
	OutOfMemory                          // the heap passed Budget.Heap, or the sandbox its address space
	TooDeep                              // calls nested past the depth limit
	BadResult                            // a result of the wrong shape: no object, a notice not a string, a view with no JSON
	TooLarge                             // a notice or view over Budget.Result
	Crashed                              // the sandbox ended for another reason
)

// guard runs f under the call budget: a timer and the heap watchdog
// interrupt it, and every way it can fail becomes a sentence naming what
// and where. Everything that may run the program's code (its getters, its
// toString, its toJSON) must run inside a guard.
func (in *instance) guard(what string, f func() error) (err error) {
	p := in.p
	left := p.budget.Total - p.used
	if left <= 0 {
		return &CallError{Kind: OutOfTime, Message: fmt.Sprintf("The program has used all of its %v of time; %s was not run.", p.budget.Total, what)}
	}
	limit, reason := p.budget.PerCall, errCallTime
	if left < limit {
		limit, reason = left, errTotalTime
	}
	rt := in.rt
	rt.ClearInterrupt()
	began, start := p.meter.begin()
	var timer *time.Timer
	var mu sync.Mutex
	var check func()
	// The timer runs on the wall clock; the budget is CPU time, so that a
	// busy machine does not fail a program that waited for a core.
	done := false // set when the call has returned: a late check must not interrupt the next
	check = func() {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return
		}
		if spent := cpuNow() - start; spent < limit {
			timer = time.AfterFunc(limit-spent, check)
			return
		}
		rt.Interrupt(reason)
	}
	mu.Lock()
	timer = time.AfterFunc(limit, check)
	mu.Unlock()
	current.Store(rt)
	defer func() {
		current.Store(nil)
		mu.Lock()
		done = true
		timer.Stop()
		mu.Unlock()
		p.used += p.meter.end(began)
		if x := recover(); x != nil {
			err = in.describe(what, x)
		}
		rt.ClearInterrupt()
	}()
	if err := f(); err != nil {
		return in.describe(what, err)
	}
	return nil
}

// describe turns what a call raised into a sentence.
func (in *instance) describe(what string, x any) error {
	if e, ok := x.(*CallError); ok {
		return e
	}
	var intr *goja.InterruptedError
	var over *goja.StackOverflowError
	var exc *goja.Exception
	err, _ := x.(error)
	switch {
	case errors.As(err, &intr):
		where := in.where(intr.Stack())
		switch intr.Value() {
		case errMemory:
			return &CallError{Kind: OutOfMemory, Message: fmt.Sprintf("%s used more than %d MiB of memory and was stopped%s.", capital(what), in.p.budget.Heap>>20, where)}
		case errTotalTime:
			return &CallError{Kind: OutOfTime, Message: fmt.Sprintf("%s was stopped%s: the program has used all of its %v of time.", capital(what), where, in.p.budget.Total)}
		default:
			return &CallError{Kind: TooLong, Message: fmt.Sprintf("%s ran for more than %v and was stopped%s (an endless loop?).", capital(what), in.p.budget.PerCall, where)}
		}
	case errors.As(err, &over):
		return &CallError{Kind: TooDeep, Message: fmt.Sprintf("%s nested calls more than %d deep and was stopped%s (an endless recursion?).", capital(what), maxDepth, in.where(over.Stack()))}
	case errors.As(err, &exc):
		return &CallError{Kind: Threw, Message: fmt.Sprintf("%s threw %s%s.", capital(what), in.thrown(exc.Value()), in.where(exc.Stack()))}
	case err != nil:
		return &CallError{Kind: Threw, Message: fmt.Sprintf("%s failed: %s.", capital(what), strings.TrimSuffix(err.Error(), "."))}
	}
	if v, ok := x.(goja.Value); ok {
		return &CallError{Kind: Threw, Message: fmt.Sprintf("%s threw %s.", capital(what), in.thrown(v))}
	}
	return &CallError{Kind: Threw, Message: fmt.Sprintf("%s failed: %v.", capital(what), x)}
}

// thrown names a thrown value: a string as it is, an Error by its name and
// message. Reading those may run the program's getters, so it runs under a
// short timer of its own, and anything that goes wrong reads "a value".
func (in *instance) thrown(v goja.Value) (s string) {
	rt := in.rt
	rt.ClearInterrupt()
	// done keeps a timer that fired late (a loaded machine) from
	// interrupting the next call once this one has cleared the flag.
	var mu sync.Mutex
	done := false
	t := time.AfterFunc(10*time.Millisecond, func() {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			rt.Interrupt(errCallTime)
		}
	})
	defer func() {
		mu.Lock()
		done = true
		mu.Unlock()
		t.Stop()
		if recover() != nil {
			s = "a value"
		}
		rt.ClearInterrupt()
	}()
	obj, ok := v.(*goja.Object)
	if !ok {
		switch {
		case v == nil || goja.IsUndefined(v):
			return "undefined"
		case goja.IsString(v):
			return fmt.Sprintf("%q", clip(v.String(), 200))
		}
		return clip(v.String(), 200)
	}
	str := func(k string) string {
		if p := obj.Get(k); p != nil && goja.IsString(p) {
			return p.String()
		}
		return ""
	}
	name, msg := str("name"), str("message")
	if name == "" {
		name = "an object"
	}
	if msg == "" {
		return name
	}
	return clip(name+": "+msg, 300)
}

// where is " at line L, column C (in f)" for the innermost frame in the
// program's own text.
func (in *instance) where(stack []goja.StackFrame) string {
	for _, f := range stack {
		pos := f.Position()
		if pos.Filename != fileName || pos.Line == 0 || pos.Line > in.p.lines {
			continue
		}
		s := fmt.Sprintf(" at line %d, column %d", pos.Line, pos.Column)
		if name := f.FuncName(); name != "" {
			s += " (in " + name + ")"
		}
		return s
	}
	return ""
}

func capital(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func (in *instance) keep(v goja.Value) (int, error) {
	if len(in.handles) >= maxHandles {
		return 0, &CallError{Kind: TooLarge, Message: fmt.Sprintf("The case made more than %d calls.", maxHandles)}
	}
	in.handles = append(in.handles, v)
	return len(in.handles) - 1, nil
}

func (in *instance) handle(id int) (goja.Value, error) {
	if id < 0 || id >= len(in.handles) {
		return nil, &CallError{Kind: BadResult, Message: "The host passed a call this instance never returned."}
	}
	return in.handles[id], nil
}

// begin calls begin(runId, callId) and keeps the call it returns.
func (in *instance) begin(runID, callID string) (int, error) {
	var call goja.Value
	err := in.guard("begin", func() error {
		v, err := in.fn[0](goja.Undefined(), in.rt.ToValue(runID), in.rt.ToValue(callID))
		call = v
		return err
	})
	if err != nil {
		return 0, err
	}
	return in.keep(call)
}

// update calls receive or expire, and reads {call, notice} from what it
// returned.
func (in *instance) update(which int, call int, args ...string) (int, string, error) {
	c, err := in.handle(call)
	if err != nil {
		return 0, "", err
	}
	name := wanted[which]
	vals := []goja.Value{c}
	for _, a := range args {
		vals = append(vals, in.rt.ToValue(a))
	}
	var next goja.Value
	var notice string
	err = in.guard(name, func() error {
		v, err := in.fn[which](goja.Undefined(), vals...)
		if err != nil {
			return err
		}
		obj, ok := v.(*goja.Object)
		if !ok {
			return &CallError{Kind: BadResult, Message: fmt.Sprintf("%s returned %s, not an object {call, notice}.", capital(name), typeName(v))}
		}
		next = obj.Get("call")
		if next == nil {
			next = goja.Undefined()
		}
		n := obj.Get("notice")
		if n == nil || !goja.IsString(n) {
			return &CallError{Kind: BadResult, Message: fmt.Sprintf("%s returned a notice that is not a string (%s).", capital(name), typeName(n))}
		}
		notice = n.String()
		if len(notice) > in.p.budget.Result {
			return &CallError{Kind: TooLarge, Message: fmt.Sprintf("%s returned a notice longer than %d KiB.", capital(name), in.p.budget.Result>>10)}
		}
		return nil
	})
	if err != nil {
		return 0, "", err
	}
	id, err := in.keep(next)
	return id, notice, err
}

// view calls view(call) and writes what it returned as JSON, with the
// engine's own JSON.stringify, stopping as soon as the text would pass the
// result cap.
func (in *instance) view(call int) ([]byte, error) {
	c, err := in.handle(call)
	if err != nil {
		return nil, err
	}
	var out string
	err = in.guard("view", func() error {
		v, err := in.fn[3](goja.Undefined(), c)
		if err != nil {
			return err
		}
		size, capBytes := 0, in.p.budget.Result
		tooBig := &CallError{Kind: TooLarge, Message: fmt.Sprintf("View returned an object whose JSON is longer than %d KiB.", capBytes>>10)}
		replacer := in.rt.ToValue(func(fc goja.FunctionCall) goja.Value {
			key, val := fc.Argument(0), fc.Argument(1)
			size += len(key.String()) + 8
			if goja.IsString(val) {
				size += len(val.String())
			}
			if size > capBytes {
				panic(tooBig)
			}
			return val
		})
		s, err := in.stringify(goja.Undefined(), v, replacer)
		if err != nil {
			var exc *goja.Exception
			if errors.As(err, &exc) && strings.Contains(in.thrown(exc.Value()), "circular") {
				return &CallError{Kind: BadResult, Message: "View returned an object that refers to itself: it cannot be written as JSON."}
			}
			return err
		}
		if s == nil || goja.IsUndefined(s) {
			return &CallError{Kind: BadResult, Message: fmt.Sprintf("View returned %s, which has no JSON.", typeName(v))}
		}
		out = s.String()
		if len(out) > capBytes {
			return tooBig
		}
		return nil
	})
	return []byte(out), err
}

func typeName(v goja.Value) string {
	switch {
	case v == nil || goja.IsUndefined(v):
		return "undefined"
	case goja.IsNull(v):
		return "null"
	case goja.IsString(v):
		return "a string"
	case goja.IsNumber(v):
		return "a number"
	}
	if _, ok := v.(*goja.Object); ok {
		return "an object"
	}
	return "a " + v.ExportType().String()
}
