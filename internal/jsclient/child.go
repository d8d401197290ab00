package jsclient

import (
	"bufio"
	"encoding/gob"
	"errors"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toolcall-lab/lab/internal/idle"
)

// The sandbox is a child process: the lab's own executable started again
// with childEnv set, which init below turns into the engine's loop before
// main runs. Its writable memory is capped with setrlimit, so that whatever
// a program does (an allocation inside a native builtin included, which no
// interrupt can reach) it cannot take the lab's memory; the parent kills it
// when a call overruns its time.

const (
	childEnv    = "LAB_JSCLIENT_SANDBOX" // its value: the memory cap in bytes
	childBudEnv = "LAB_JSCLIENT_BUDGET"  // total,perCall,heap,result in ns and bytes
)

type op uint8

const (
	opLoad op = iota + 1
	opNew
	opBegin
	opReceive
	opExpire
	opView
	opCheck // the whole check, in the sandbox (check.go)
	opKey   // the call value's JSON (callkey.go)
)

type request struct {
	Op   op
	Inst int
	Call int
	A, B string
	// opCheck: the campaign's seed and the instructor's cases.
	Seed  uint64
	Cases []wireCase
}

type response struct {
	Inst, Call int
	Notice     string
	JSON       []byte // opView: the view; opCheck: the model.Result
	Err        string
	Kind       SourceErrorKind // for opLoad and opNew
	Line, Col  int
	CallKind   CallErrorKind
	Used       time.Duration
}

func init() {
	v, ok := os.LookupEnv(childEnv)
	if !ok {
		return
	}
	os.Exit(serveChild(v, os.Getenv(childBudEnv)))
}

// orphanCPU is the CPU time past its kill point that a sandbox runs before
// it ends itself.
const orphanCPU = 10 * time.Second

// maxInstances is how many cases' instances the sandbox keeps: the host
// drives one case at a time, and an older instance's calls are refused.
const maxInstances = 4

// yieldCPU puts the calling thread, the one programs run on, below every
// thread of the lab (the sandbox starts there already, idle.Start; this
// holds where it could not). The budget is this thread's CPU time, so
// waiting for a core spends none of it.
func yieldCPU() {
	idle.Thread(0)
}

// yieldProcess puts every thread the sandbox has so far below the lab's
// (the collector's, the watchdog's, the runtime's own), so that threads
// made later, which inherit their maker's policy, are there too: with
// checks on every core (issue 42), no part of a sandbox competes with the
// students' changes.
func yieldProcess() {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return
	}
	for _, t := range tasks {
		if tid, err := strconv.Atoi(t.Name()); err == nil {
			idle.Thread(tid)
		}
	}
}

func serveChild(asCap, budget string) int {
	yieldProcess()
	b := parseBudget(budget)
	if n, err := strconv.ParseInt(asCap, 10, 64); err == nil && n > 0 && !raceBuild {
		lim := unix.Rlimit{Cur: uint64(n), Max: uint64(n)}
		if err := unix.Setrlimit(unix.RLIMIT_DATA, &lim); err != nil {
			return 3
		}
	}
	// The lab kills a sandbox past the program's budget plus checkAllowance
	// of CPU; this cap ends one the lab no longer watches (the lab died: it
	// is started from a thread that ends, so it has no parent-death signal).
	cpu := uint64((b.Total + checkAllowance + orphanCPU).Seconds())
	if err := unix.Setrlimit(unix.RLIMIT_CPU, &unix.Rlimit{Cur: cpu, Max: cpu + 1}); err != nil {
		return 3
	}
	// The collector keeps garbage near the cap, so that the watchdog sees
	// mostly what the program holds; at the cap itself the collector would
	// run without end and starve the watchdog.
	debug.SetMemoryLimit(2 * b.Heap)
	debug.SetMaxStack(64 << 20)
	go watchHeap(b.Heap, time.Millisecond)
	// Programs run on this goroutine's thread only, so that its CPU clock
	// (Linux's per-thread clock id for a tid) is the program's time.
	runtime.LockOSThread()
	threadClock = int32(^unix.Gettid()<<3 | 6)
	yieldCPU()

	in := bufio.NewReader(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	dec, enc := gob.NewDecoder(in), gob.NewEncoder(out)
	var prog *program
	instances := map[int]*instance{}
	nextInst := 0
	for {
		var req request
		if err := dec.Decode(&req); err != nil {
			return 0 // the lab closed the pipe
		}
		var resp response
		fail := func(err error) {
			resp.Err = err.Error()
			var se *SourceError
			if errors.As(err, &se) {
				resp.Kind, resp.Line, resp.Col = se.Kind, se.Line, se.Column
			}
			var ce *CallError
			if errors.As(err, &ce) {
				resp.CallKind = ce.Kind
			}
		}
		inst := instances[req.Inst]
		switch {
		case req.Op == opLoad:
			// A sandbox from a Pool: nothing of the last submission stays.
			prog, nextInst = nil, 0
			clear(instances)
			p, err := compileSource(req.A, b)
			if err != nil {
				fail(err)
				break
			}
			prog = p
			// One instance now, so that a missing function or a throw at the
			// top level is a load error rather than every case's.
			if _, err := prog.newInstance(); err != nil {
				fail(err)
			}
		case prog == nil:
			fail(errors.New("no program is loaded"))
		case req.Op == opCheck:
			j, err := prog.runCheck(req.Seed, req.Cases)
			resp.JSON = j
			if err != nil {
				fail(err)
			}
		case req.Op == opNew:
			i, err := prog.newInstance()
			if err != nil {
				fail(err)
				break
			}
			nextInst++
			instances[nextInst] = i
			delete(instances, nextInst-maxInstances)
			resp.Inst = nextInst
		case inst == nil:
			fail(&CallError{Kind: BadResult, Message: "This case's instance of the module has been discarded."})
		case req.Op == opBegin:
			id, err := inst.begin(req.A, req.B)
			resp.Call = id
			if err != nil {
				fail(err)
			}
		case req.Op == opReceive:
			id, n, err := inst.update(1, req.Call, req.A)
			resp.Call, resp.Notice = id, n
			if err != nil {
				fail(err)
			}
		case req.Op == opExpire:
			id, n, err := inst.update(2, req.Call, req.A, req.B)
			resp.Call, resp.Notice = id, n
			if err != nil {
				fail(err)
			}
		case req.Op == opKey:
			j, err := inst.callKey(req.Call)
			resp.JSON = j
			if err != nil {
				fail(err)
			}
		case req.Op == opView:
			j, err := inst.view(req.Call)
			resp.JSON = j
			if err != nil {
				fail(err)
			}
		}
		if prog != nil {
			resp.Used = prog.used
		}
		if err := enc.Encode(&resp); err != nil {
			return 0
		}
		if err := out.Flush(); err != nil {
			return 0
		}
	}
}

func formatBudget(b Budget) string {
	return strconv.FormatInt(int64(b.Total), 10) + "," + strconv.FormatInt(int64(b.PerCall), 10) + "," +
		strconv.FormatInt(b.Heap, 10) + "," + strconv.Itoa(b.Result)
}

func parseBudget(s string) Budget {
	var n [4]int64
	for i := range n {
		j := 0
		for j < len(s) && s[j] != ',' {
			j++
		}
		n[i], _ = strconv.ParseInt(s[:j], 10, 64)
		s = s[min(j+1, len(s)):]
	}
	return Budget{Total: time.Duration(n[0]), PerCall: time.Duration(n[1]), Heap: n[2], Result: int(n[3])}.withDefaults()
}
