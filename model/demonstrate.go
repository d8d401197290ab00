package model

import (
	"errors"
	"fmt"
)

// A case by demonstration: a teacher clicks through a situation in an
// ordinary lab page (queue a deadline, start a new run, deliver the old
// deadline) and the session's log becomes a case, so nobody types frames.

// ErrNoDemonstration refuses a session whose log holds no frames to make
// a case of (from the run asked).
var ErrNoDemonstration = errors.New("nothing to make a case of")

// ParseRun reads a run's identifier as the lab writes it ("run-3"), the
// run a case by demonstration starts from.
func ParseRun(id string) (int, error) {
	n := runNumber(id)
	if n == 0 {
		return 0, fmt.Errorf("%q is not a run of the lab (run-1, run-2, …)", id)
	}
	return n, nil
}

// TraceOf is the frames a session's student played, as a case plays them
// (a Trace), from run fromRun on (1: all of them). Every run's start is
// kept, so the replies and deadlines name the runs they named; a message
// queued before fromRun is kept only if it is delivered from fromRun on,
// and deliveries before it are dropped (a new run begins Pending whatever
// came before). The instructor's messages are left out (a case plays the
// student's frames), with their deliveries; messages are numbered again.
// The trace is not validated here: a case's own checks apply.
func TraceOf(events []Event, fromRun int) (Trace, error) {
	if fromRun < 1 {
		return nil, fmt.Errorf("a run number starts at 1, not %d", fromRun)
	}
	// first pass: the run each student message is queued in and the last
	// run it is delivered in.
	type msg struct {
		queuedRun int
		kept      bool // delivered from fromRun on, or queued from it on
		number    int  // its number in the trace, once queued there
	}
	msgs := map[int]*msg{}
	run := 1
	for _, e := range events {
		switch e.Kind {
		case RunStarted:
			run++
		case MessageQueued:
			if e.Message.From == Student {
				msgs[e.Message.ID] = &msg{queuedRun: run, kept: run >= fromRun}
			}
		case MessageDelivered:
			if m, ok := msgs[e.Message.ID]; ok && run >= fromRun {
				m.kept = true
			}
		}
	}
	if run < fromRun {
		return nil, fmt.Errorf("%w: the session has runs 1 to %d, not run-%d", ErrNoDemonstration, run, fromRun)
	}
	var t Trace
	queued := 0
	run = 1
	for _, e := range events {
		switch e.Kind {
		case RunStarted:
			run++
			t = append(t, Command{Kind: StartRun})
		case MessageQueued:
			m, ok := msgs[e.Message.ID]
			if !ok || !m.kept {
				continue
			}
			queued++
			m.number = queued
			if e.Message.Kind == DeadlineMessage {
				t = append(t, Command{Kind: QueueDeadline})
			} else {
				t = append(t, Command{Kind: QueueReply, Raw: e.Message.Raw})
			}
		case MessageDelivered:
			if m, ok := msgs[e.Message.ID]; ok && m.kept && run >= fromRun {
				t = append(t, Command{Kind: Deliver, Message: m.number})
			}
		}
	}
	// Starts before fromRun are needed for the run numbers; a trace of
	// starts alone demonstrates nothing.
	for _, f := range t {
		if f.Kind != StartRun {
			return t, nil
		}
	}
	return nil, fmt.Errorf("%w: the session queued no message from run-%d on", ErrNoDemonstration, fromRun)
}
