package server

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/toolcall-lab/lab/internal/sharedframe"
	"github.com/toolcall-lab/lab/model"
)

// TestSharedFramesOutliveNewerOnes: a tab that has not read yet keeps every
// state frame it was sent, byte for byte, while the session publishes newer
// ones from recycled buffers. A frame given back too early would be
// rewritten by a later change: its seq or its queue would not match.
func TestSharedFramesOutliveNewerOnes(t *testing.T) {
	t.Parallel()
	srv, sess := newTestSession(t)
	slow := collector(srv.metrics) // a tab that has not read yet
	sess.subscribe(slow)
	const changes = 40 // below maxPendingStates: every frame stays queued
	for i := 1; i <= changes; i++ {
		done := make(chan outcome, 1)
		sess.submit(pending{cmd: model.Command{Kind: model.QueueReply, By: model.Student, Raw: fmt.Sprintf("reply %d", i)}, done: done})
		if o := <-done; o.err != nil {
			t.Fatal(o.err)
		}
	}
	slow.mu.Lock()
	defer slow.mu.Unlock()
	if len(slow.out.frames) != changes+1 {
		t.Fatalf("%d frames queued, want %d", len(slow.out.frames), changes+1)
	}
	for i, f := range slow.out.frames {
		var st struct {
			Seq   int `json:"seq"`
			Queue []struct {
				Label string `json:"label"`
			} `json:"queue"`
		}
		if err := json.Unmarshal(f.data, &st); err != nil {
			t.Fatalf("frame %d: %v: %q", i, err, f.data)
		}
		if st.Seq != i || len(st.Queue) != i || i > 0 && st.Queue[i-1].Label != fmt.Sprintf("reply %d", i) {
			t.Fatalf("frame %d holds seq %d with %d held messages: %q", i, st.Seq, len(st.Queue), f.data)
		}
		if got := f.shared.Refs(); got < 1 {
			t.Fatalf("frame %d has %d references while queued", i, got)
		}
	}
}

// TestRewrittenFramesAreWholeStates: once its tab has written a frame, the
// session writes its next state over that frame from the first byte that
// changed (stateEncoder.rewrite). Every frame sent must still be the whole
// state, byte for byte as encoded from scratch, whichever part a change
// touched: the receipts, the queue, only what follows them, or a setting.
// A frame the tab still holds is never written over: the next state is a
// new frame and the held one keeps its bytes.
func TestRewrittenFramesAreWholeStates(t *testing.T) {
	t.Parallel()
	srv, sess := newTestSession(t)
	tab := collector(srv.metrics)
	sess.subscribe(tab)
	// sent takes the one frame the last change sent the tab, and checks it
	// against the session's state encoded by a new encoder.
	sent := func(step string) *sharedframe.Frame {
		t.Helper()
		tab.mu.Lock()
		defer tab.mu.Unlock()
		if len(tab.out.frames) != 1 {
			t.Fatalf("%s: %d frames sent, want 1", step, len(tab.out.frames))
		}
		f := tab.out.frames[0].shared
		tab.out.frames, tab.out.nStates, tab.out.queued = nil, 0, 0
		e := newStateEncoder(sess.id, &sharedframe.Pool{})
		e.predictionsRequired = sess.requirePredictions.Load()
		want, _ := e.frame(sess.lab)
		if string(f.Data) != string(want.Data) {
			t.Fatalf("%s: sent\n%s\nwant\n%s", step, f.Data, want.Data)
		}
		return f
	}
	do := func(cmd model.Command) {
		t.Helper()
		cmd.By = model.Student
		done := make(chan outcome, 1)
		sess.submit(pending{cmd: cmd, done: done})
		if o := <-done; o.err != nil {
			t.Fatalf("%+v: %v", cmd, o.err)
		}
	}
	reply := func(run string) model.Command {
		return model.Command{Kind: model.QueueReply, Raw: `{"runId":"` + run + `","callId":"lookup","kind":"completed","output":"Answer for ` + run + `"}`}
	}

	first := sent("the first state")
	first.Release()
	rewritten, grown := 0, 0
	steps := []struct {
		name string
		cmd  model.Command
	}{
		{"a reply queued (the queue grows)", reply("run-1")},
		{"a deadline queued", model.Command{Kind: model.QueueDeadline}},
		{"a delivery (the receipts grow)", model.Command{Kind: model.Deliver, Message: 1}},
		{"a new run (only what follows the lists)", model.Command{Kind: model.StartRun}},
		{"a late delivery with a prediction", model.Command{Kind: model.Deliver, Message: 1, Predict: model.PredictIgnored}},
		{"a rename", model.Command{Kind: model.Rename, Name: "Ada"}},
		{"a reply that is not JSON", model.Command{Kind: model.QueueReply, Raw: `{"runId":`}},
		{"its delivery", model.Command{Kind: model.Deliver, Message: 3}},
	}
	last := first
	for _, st := range steps {
		do(st.cmd)
		f := sent(st.name)
		switch fits := len(f.Data) <= cap(last.Data); {
		case f == last:
			rewritten++
		case fits:
			t.Errorf("%s: a new frame, though the state fits in the one before", st.name)
		default:
			grown++ // a new frame from the next bucket
		}
		last = f
		f.Release()
	}
	if rewritten == 0 || rewritten+grown != len(steps) {
		t.Errorf("of %d states, %d were written over the frame before and %d outgrew it", len(steps), rewritten, grown)
	}

	// A frame the tab holds is not written over.
	do(reply("run-2"))
	held := sent("a reply queued while the tab holds the frame before")
	kept := string(held.Data)
	do(model.Command{Kind: model.Deliver, Message: 4})
	next := sent("a delivery while the tab holds the frame before")
	if next == held || string(held.Data) != kept {
		t.Fatalf("the held frame was written over:\n%s\nwas\n%s", held.Data, kept)
	}
	held.Release()
	next.Release()

	// A setting changes only what follows the lists. Nobody else drains
	// the session, so the refresh is applied before the call returns.
	sess.setRequirePredictions(true)
	if f := sent("a setting changed"); f != next {
		t.Error("a setting's state was not written over the frame before it")
	}
}
