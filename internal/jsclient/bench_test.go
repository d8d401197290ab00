package jsclient

import (
	"context"
	"golang.org/x/sys/unix"
	"runtime"
	"strconv"
	"testing"

	"github.com/toolcall-lab/lab/model"
)

const benchReply = `{"runId":"run-1","callId":"lookup","kind":"completed","output":"Answer for run-1"}`

// Load: start a sandbox, compile the seed's module, run its top level once.
func BenchmarkLoad(b *testing.B) {
	src := read(b, "ToolCall.res.js")
	for b.Loop() {
		_, s, err := Load(context.Background(), src, Budget{})
		if err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}

// A fresh instance (a new runtime running the compiled program) in the sandbox.
func BenchmarkNewClient(b *testing.B) {
	newClient, _ := load(b, read(b, "ToolCall.res.js"), Budget{Total: 1 << 62})
	for b.Loop() {
		if _, err := newClient(); err != nil {
			b.Fatal(err)
		}
	}
}

// One receive and one view of the seed's module, through the sandbox.
func BenchmarkReceiveView(b *testing.B) {
	newClient, _ := load(b, read(b, "ToolCall.res.js"), Budget{Total: 1 << 62})
	c, _ := newClient()
	call, _ := c.Begin("run-1", "lookup")
	for b.Loop() {
		next, _, err := c.Receive(call, benchReply)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.View(next); err != nil {
			b.Fatal(err)
		}
	}
}

// The same in the lab's own process: what the engine costs without the pipe.
func BenchmarkReceiveViewInProcess(b *testing.B) {
	p, err := compileSource(read(b, "ToolCall.res.js"), Budget{Total: 1 << 62})
	if err != nil {
		b.Fatal(err)
	}
	in, err := p.newInstance()
	if err != nil {
		b.Fatal(err)
	}
	call, _ := in.begin("run-1", "lookup")
	for b.Loop() {
		in.handles = in.handles[:1]
		next, _, err := in.update(1, call, benchReply)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := in.view(next); err != nil {
			b.Fatal(err)
		}
	}
}

// A fresh instance in process, with its memory.
func BenchmarkNewInstanceInProcess(b *testing.B) {
	p, err := compileSource(read(b, "ToolCall.res.js"), Budget{Total: 1 << 62})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.newInstance(); err != nil {
			b.Fatal(err)
		}
	}
}

// The search of issue 43 on the lesson's module, in the lab's process and
// through the sandbox, at the default depth and one deeper, and the whole
// check through the sandbox and in process, with and without the search.
func BenchmarkSearchInProcess(b *testing.B) {
	benchSearch(b, inProcess(b, read(b, "ToolCall.res.js")))
}

func BenchmarkSearchSandbox(b *testing.B) {
	nc, _ := load(b, read(b, "ToolCall.res.js"), Budget{Total: 1 << 62})
	benchSearch(b, nc)
}

func benchSearch(b *testing.B, nc model.NewClient) {
	for _, depth := range []int{5, 6} {
		b.Run("depth="+strconv.Itoa(depth), func(b *testing.B) {
			bounds := model.DefaultSearchBounds()
			bounds.Depth = depth
			var r model.SearchReport
			for b.Loop() {
				r = model.Search(nc, bounds)
				if r.Failure != nil || !r.Exhausted {
					b.Fatalf("%+v %s", r.Failure, r.Note)
				}
			}
			b.ReportMetric(float64(r.Explored), "states")
			b.ReportMetric(float64(r.Steps), "steps")
			b.ReportMetric(float64(r.Calls), "calls")
		})
	}
}

// The whole check as the server runs it: Load, then model.Check within
// the default budget; "without the search" is the check before issue 43.
func BenchmarkCheckSandbox(b *testing.B) {
	src := read(b, "ToolCall.res.js")
	for _, search := range []bool{true, false} {
		b.Run("search="+strconv.FormatBool(search), func(b *testing.B) {
			bounds := model.DefaultSearchBounds()
			if !search {
				bounds = model.SearchBounds{}
			}
			for b.Loop() {
				nc, s, err := Load(context.Background(), src, Budget{})
				if err != nil {
					b.Fatal(err)
				}
				if r := model.CheckWithin(nc, 7, nil, bounds); r.Status != model.CodePassed {
					b.Fatalf("%+v", r)
				}
				s.Close()
			}
		})
	}
}

func BenchmarkCheckInProcess(b *testing.B) {
	nc := inProcess(b, read(b, "ToolCall.res.js"))
	for b.Loop() {
		if r := model.Check(nc, 7, nil); r.Status != model.CodePassed {
			b.Fatalf("%+v", r)
		}
	}
}

// The whole check as the server runs it since issue 42: Load, then one
// opCheck that runs model.Check in the sandbox.
func BenchmarkCheckWhole(b *testing.B) {
	src := read(b, "ToolCall.res.js")
	for b.Loop() {
		_, s, err := Load(context.Background(), src, Budget{})
		if err != nil {
			b.Fatal(err)
		}
		if r, err := s.Check(context.Background(), 7, nil); err != nil || r.Status != model.CodePassed {
			b.Fatalf("%+v %v", r, err)
		}
		s.Close()
	}
}

// opCheck's own work in the lab's process: what the sandbox's check costs
// without the process around it.
func BenchmarkRunCheckInProcess(b *testing.B) {
	src := read(b, "ToolCall.res.js")
	for b.Loop() {
		p, err := compileSource(src, Budget{Total: 1 << 62}.withDefaults())
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.runCheck(7, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRunCheckThreadClock(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	threadClock = int32(^unix.Gettid()<<3 | 6)
	defer func() { threadClock = 0 }()
	BenchmarkRunCheckInProcess(b)
}

func BenchmarkCPUNow(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	threadClock = int32(^unix.Gettid()<<3 | 6)
	defer func() { threadClock = 0 }()
	for b.Loop() {
		cpuNow()
	}
}

// The whole check in a sandbox reused from check to check (Pool), as the
// server runs it.
func BenchmarkCheckPooled(b *testing.B) {
	src := read(b, "ToolCall.res.js")
	p := NewPool(1)
	defer p.Close()
	for b.Loop() {
		_, s, err := p.Load(context.Background(), src, Budget{})
		if err != nil {
			b.Fatal(err)
		}
		if r, err := s.Check(context.Background(), 7, nil); err != nil || r.Status != model.CodePassed {
			b.Fatalf("%+v %v", r, err)
		}
		s.Close()
	}
}
