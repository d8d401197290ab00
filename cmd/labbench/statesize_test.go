package main

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	labserver "github.com/toolcall-lab/lab/server"
)

// TestBaselineIsStateSized runs a closed loop's session against the lab
// itself and checks that the baseline's frame at every seq is as big as the
// lab's state frame at that seq: the baseline stands for "a server that
// writes the lab's state and does nothing else" only while that holds, so
// a change to the state frame's size fails here until appendStateSized
// follows it.
func TestBaselineIsStateSized(t *testing.T) {
	t.Parallel()
	srv := startLab(t, labserver.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	id := uuid.NewString()
	ws, err := dial(ctx, srv, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	var g opGen
	labTotal, baseTotal, worst := 0, 0, 0
	for seq := range uint64(rotateOps + 1) {
		switch {
		case seq == 0: // the frame on connect
		case seq <= preloads:
			err = send(ctx, ws, g.preload(int(seq)))
		default:
			err = send(ctx, ws, g.next())
		}
		if err != nil {
			t.Fatal(err)
		}
		_, data, err := ws.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := frameSeq(data); !ok || got != seq {
			t.Fatalf("op %d: got %.200s, want the state at seq %d", seq, data, seq)
		}
		labLen, baseLen := len(data), len(appendBaselineFrame(nil, id, seq, false))
		labTotal += labLen
		baseTotal += baseLen
		d := max(labLen-baseLen, baseLen-labLen) // the lab's run numbers and ids have other widths
		worst = max(worst, d)
		if d > 16 {
			t.Errorf("seq %d: the lab's state frame has %d bytes, the baseline's %d", seq, labLen, baseLen)
		}
	}
	t.Logf("mean frame over %d ops: lab %d bytes, baseline %d; at most %d bytes apart", rotateOps+1, labTotal/(rotateOps+1), baseTotal/(rotateOps+1), worst)
}
