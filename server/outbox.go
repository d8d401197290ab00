package server

import (
	"slices"

	"github.com/toolcall-lab/lab/internal/limit"
	"github.com/toolcall-lab/lab/internal/sharedframe"
)

// outFrame is a frame waiting to be written.
type outFrame struct {
	data   []byte
	shared *sharedframe.Frame // data's holder, when it is a session's frame
	state  bool               // a state frame (else an error frame)
}

// done gives up the outbox's reference, once the frame is written or dropped.
func (f outFrame) done() {
	if f.shared != nil {
		f.shared.Release()
	}
}

// outbox is one connection's frames waiting to be written, in the order
// they were produced, bounded in count (maxPendingStates state frames,
// maxPendingErrors error frames) and in bytes: its own budget
// (Config.MaxConnOutboxBytes) and all connections' together (total).
//
// A frame's bytes are counted from push until unqueue or drop gives them
// back, once: while it waits in frames, and while the flusher writes the
// batch take handed it. Each frame pushed holds a reference to its shared
// frame until then too. Ownership: not safe for concurrent use; its conn's
// mu guards it.
type outbox struct {
	frames []outFrame
	// spare is the array of the last batch written, emptied, for frames
	// to take again: a new one per frame was an allocation per change.
	spare   []outFrame
	nStates int // state frames in frames
	nErrors int // error frames in frames
	// queued counts the bytes of the frames not yet written: in frames and
	// in the batch a flusher is writing. They are also counted in total.
	queued int64
	budget int64
	total  *limit.Budget
}

func newOutbox(budget int64, total *limit.Budget) outbox {
	return outbox{budget: budget, total: total}
}

// pushState queues a state frame, taking a reference to its shared frame
// (the caller holds one meanwhile). At maxPendingStates it drops the
// oldest state frame waiting first: frames are whole states, so a newer one
// is always enough. It reports false, queuing nothing, when a budget cannot
// take the frame's bytes.
func (o *outbox) pushState(f outFrame) bool {
	if o.nStates == maxPendingStates {
		i := slices.IndexFunc(o.frames, func(f outFrame) bool { return f.state })
		o.unqueue(o.frames[i])
		o.frames[i].done()
		o.frames = slices.Delete(o.frames, i, i+1)
		o.nStates--
	}
	if !o.push(f) {
		return false
	}
	if f.shared != nil {
		f.shared.Retain()
	}
	o.nStates++
	return true
}

// errorsFull says maxPendingErrors error frames wait: the connection
// sends refused frames faster than it reads.
func (o *outbox) errorsFull() bool { return o.nErrors == maxPendingErrors }

// pushError queues an error frame, or reports false, queuing nothing, when
// a budget cannot take its bytes.
func (o *outbox) pushError(f outFrame) bool {
	if !o.push(f) {
		return false
	}
	o.nErrors++
	return true
}

// push adds f if the outbox's budget and all outboxes' budget take its
// bytes.
func (o *outbox) push(f outFrame) bool {
	n := int64(len(f.data))
	if o.queued+n > o.budget || !o.total.Take(n) {
		return false
	}
	o.queued += n
	if o.frames == nil {
		o.frames, o.spare = o.spare, nil
	}
	o.frames = append(o.frames, f)
	return true
}

// len is how many frames wait.
func (o *outbox) len() int { return len(o.frames) }

// take hands the frames waiting to a flusher, which gives back each one's
// bytes with unqueue once it is written or dropped, and then the batch's
// array with recycle.
func (o *outbox) take() []outFrame {
	frames := o.frames
	o.frames, o.nStates, o.nErrors = nil, 0, 0
	return frames
}

// unqueue gives back the bytes of a frame taken, written or dropped. Its
// reference is the caller's to give up (outFrame.done).
func (o *outbox) unqueue(f outFrame) {
	n := int64(len(f.data))
	o.queued -= n
	o.total.Give(n)
}

// recycle takes back the array of a batch written, for frames to take
// again.
func (o *outbox) recycle(batch []outFrame) {
	clear(batch)
	o.spare = batch[:0]
}

// drop drops every frame waiting, giving back its bytes and its reference.
// A batch taken is not the outbox's: its flusher gives it back.
func (o *outbox) drop() {
	for _, f := range o.frames {
		o.unqueue(f)
		f.done()
	}
	o.frames, o.nStates, o.nErrors = nil, 0, 0
}
