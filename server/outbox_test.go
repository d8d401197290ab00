package server

import (
	"math/rand/v2"
	"testing"

	"github.com/toolcall-lab/lab/internal/limit"
	"github.com/toolcall-lab/lab/internal/sharedframe"
)

// sharedOf returns a shared frame of n bytes with one reference, the
// test's (as a session holds its latest).
func sharedOf(p *sharedframe.Pool, n int) *sharedframe.Frame {
	f := p.Get(n)
	f.Data = f.Data[:n]
	return f
}

// TestOutboxCounts: at most maxPendingStates state frames wait, the oldest
// giving way to a newer one and its reference given up; error frames are
// counted up to maxPendingErrors; the bytes of what waits are counted in
// the outbox and in all outboxes' budget.
func TestOutboxCounts(t *testing.T) {
	t.Parallel()
	var pool sharedframe.Pool
	total := limit.NewBudget(1 << 30)
	o := newOutbox(1<<30, total)
	var sent []*sharedframe.Frame
	for i := range maxPendingStates + 10 {
		f := sharedOf(&pool, 100+i)
		sent = append(sent, f)
		if !o.pushState(outFrame{data: f.Data, shared: f, state: true}) {
			t.Fatalf("state %d refused", i)
		}
		if o.nStates > maxPendingStates {
			t.Fatalf("%d states wait", o.nStates)
		}
	}
	if o.len() != maxPendingStates {
		t.Fatalf("%d frames wait, want %d", o.len(), maxPendingStates)
	}
	var bytes int64
	for i, f := range sent {
		kept := i >= 10
		if want := int32(1 + btoi(kept)); f.Refs() != want {
			t.Fatalf("state %d (kept %v) has %d references, want %d", i, kept, f.Refs(), want)
		}
		if kept {
			if o.frames[i-10].shared != f {
				t.Fatalf("frame %d is not the state sent %d-th", i-10, i)
			}
			bytes += int64(len(f.Data))
		}
	}
	if o.queued != bytes || total.Used() != bytes {
		t.Fatalf("%d bytes queued, %d in the budget; the frames hold %d", o.queued, total.Used(), bytes)
	}

	for i := 0; !o.errorsFull(); i++ {
		if i == maxPendingErrors {
			t.Fatalf("%d error frames wait and errorsFull says no", i)
		}
		if !o.pushError(outFrame{data: []byte(`{"type":"error"}`)}) {
			t.Fatal("an error frame refused")
		}
		bytes += 16
	}
	if o.nErrors != maxPendingErrors || o.queued != bytes || total.Used() != bytes {
		t.Fatalf("%d errors, %d bytes queued, %d in the budget; want %d, %d", o.nErrors, o.queued, total.Used(), maxPendingErrors, bytes)
	}

	o.drop()
	o.drop() // nothing waits: nothing to give back twice
	if o.len() != 0 || o.nStates != 0 || o.nErrors != 0 || o.queued != 0 || total.Used() != 0 {
		t.Fatalf("after drop: %d frames, %d states, %d errors, %d bytes queued, %d in the budget", o.len(), o.nStates, o.nErrors, o.queued, total.Used())
	}
	for i, f := range sent {
		if f.Refs() != 1 {
			t.Fatalf("state %d has %d references after drop, want the test's", i, f.Refs())
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestOutboxBudgets: a frame over the outbox's own budget or over all
// outboxes' budget is refused whole, taking no reference and no byte.
func TestOutboxBudgets(t *testing.T) {
	t.Parallel()
	var pool sharedframe.Pool
	total := limit.NewBudget(250)
	a, b := newOutbox(200, total), newOutbox(200, total)
	push := func(o *outbox, n int) (bool, *sharedframe.Frame) {
		f := sharedOf(&pool, n)
		return o.pushState(outFrame{data: f.Data, shared: f, state: true}), f
	}
	if ok, _ := push(&a, 150); !ok {
		t.Fatal("150 bytes refused by budgets of 200 and 250")
	}
	if ok, f := push(&a, 51); ok || f.Refs() != 1 {
		t.Fatalf("a frame over the outbox's budget: queued %v, %d references", ok, f.Refs())
	}
	if ok, f := push(&b, 101); ok || f.Refs() != 1 {
		t.Fatalf("a frame over all outboxes' budget: queued %v, %d references", ok, f.Refs())
	}
	if a.queued != 150 || b.queued != 0 || total.Used() != 150 || a.len() != 1 || b.len() != 0 {
		t.Fatalf("after refusals: %d and %d bytes queued, %d in the budget, %d and %d frames", a.queued, b.queued, total.Used(), a.len(), b.len())
	}
	if ok, _ := push(&b, 100); !ok {
		t.Fatal("a frame that fits both budgets refused")
	}
}

// TestOutboxBatches: a batch taken stays counted until its flusher gives
// back each frame, exactly once, whether the outbox is dropped meanwhile
// or not; a batch's array is taken again, so writing frames allocates
// nothing.
func TestOutboxBatches(t *testing.T) { // not parallel: AllocsPerRun
	var pool sharedframe.Pool
	total := limit.NewBudget(1 << 20)
	o := newOutbox(1<<20, total)
	f := sharedOf(&pool, 1000)
	for range 3 {
		o.pushState(outFrame{data: f.Data, shared: f, state: true})
	}
	batch := o.take()
	if len(batch) != 3 || o.len() != 0 || o.nStates != 0 || o.queued != 3000 || total.Used() != 3000 {
		t.Fatalf("after take: a batch of %d, %d waiting, %d states, %d bytes queued, %d in the budget", len(batch), o.len(), o.nStates, o.queued, total.Used())
	}
	o.pushError(outFrame{data: make([]byte, 10)})
	o.drop() // the handler tears down while the batch is being written
	if o.queued != 3000 || total.Used() != 3000 || f.Refs() != 4 {
		t.Fatalf("drop gave back the batch: %d bytes queued, %d in the budget, %d references", o.queued, total.Used(), f.Refs())
	}
	for _, fr := range batch {
		o.unqueue(fr)
		fr.done()
	}
	o.recycle(batch)
	if o.queued != 0 || total.Used() != 0 || f.Refs() != 1 {
		t.Fatalf("after the batch was written: %d bytes queued, %d in the budget, %d references", o.queued, total.Used(), f.Refs())
	}

	allocs := testing.AllocsPerRun(100, func() {
		for range 4 {
			o.pushState(outFrame{data: f.Data, shared: f, state: true})
		}
		b := o.take()
		for _, fr := range b {
			o.unqueue(fr)
			fr.done()
		}
		o.recycle(b)
	})
	if allocs != 0 {
		t.Fatalf("%g allocations a batch of four frames", allocs)
	}
}

// TestOutboxInvariants: through a random mix of what a connection does
// (states, errors, batches written, drops), the count of each kind, the
// bytes queued, the budget and every shared frame's references always
// match the frames waiting and the batch being written.
func TestOutboxInvariants(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 30))
	var pool sharedframe.Pool
	total := limit.NewBudget(40_000)
	o := newOutbox(30_000, total)
	frames := make([]*sharedframe.Frame, 8)
	for i := range frames {
		frames[i] = sharedOf(&pool, 200+300*i)
	}
	var batch []outFrame // being written
	refused := 0
	for step := range 20_000 {
		switch op := r.IntN(20); {
		case op < 12:
			f := frames[r.IntN(len(frames))]
			if !o.pushState(outFrame{data: f.Data, shared: f, state: true}) {
				refused++
				o.drop() // as the conn does when it is too slow
			}
		case op < 15:
			if !o.errorsFull() && !o.pushError(outFrame{data: make([]byte, r.IntN(200))}) {
				refused++
				o.drop()
			}
		case op < 18:
			if batch == nil {
				batch = o.take()
			}
		case op < 19:
			for _, f := range batch {
				o.unqueue(f)
				f.done()
			}
			if batch != nil {
				o.recycle(batch)
			}
			batch = nil
		default:
			o.drop()
		}

		var bytes int64
		states, errs := 0, 0
		refs := map[*sharedframe.Frame]int32{}
		for _, f := range o.frames {
			bytes += int64(len(f.data))
			if f.state {
				states++
				refs[f.shared]++
			} else {
				errs++
			}
		}
		for _, f := range batch {
			bytes += int64(len(f.data))
			refs[f.shared]++
		}
		switch {
		case o.nStates != states || o.nErrors != errs:
			t.Fatalf("step %d: counts %d states %d errors, the frames hold %d and %d", step, o.nStates, o.nErrors, states, errs)
		case o.nStates > maxPendingStates || o.nErrors > maxPendingErrors:
			t.Fatalf("step %d: %d states, %d errors wait", step, o.nStates, o.nErrors)
		case o.queued != bytes || total.Used() != bytes:
			t.Fatalf("step %d: %d bytes queued, %d in the budget; the frames hold %d", step, o.queued, total.Used(), bytes)
		case o.queued > 30_000:
			t.Fatalf("step %d: %d bytes queued over a budget of 30000", step, o.queued)
		}
		for i, f := range frames {
			if want := 1 + refs[f]; f.Refs() != want {
				t.Fatalf("step %d: frame %d has %d references, want %d", step, i, f.Refs(), want)
			}
		}
	}
	if refused == 0 {
		t.Fatal("no frame ever met the budget: the test did not reach it")
	}
}
