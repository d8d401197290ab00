package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"

	"github.com/toolcall-lab/lab/internal/pgtest"
)

// replicaKilledUnderLoad runs two replicas of the binary on one PostgreSQL
// database, with a tab on each for several sessions, both tabs adding
// replies as fast as the lab acknowledges them. Replica A is killed with
// SIGKILL mid-flight; its pages reconnect to B (as a load balancer would
// send them) and must find every reply A's tabs saw acknowledged, and the
// frames both replicas sent for one seq must be the same bytes.
func replicaKilledUnderLoad(t *testing.T, bin string) {
	url := pgtest.Database(t)
	flags := []string{"-data", url, "-frame-rate", "1000", "-frame-burst", "1000"}
	a, b := startLab(t, bin, flags...), startLab(t, bin, flags...)

	// Each tab changes its session at most perTab times, so a session holds
	// at most 2*perTab replies, under -max-held (256), however unevenly a
	// loaded machine runs the two replicas.
	const sessions, ackedBeforeKill, perTab = 4, 120, 120
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = uuid.NewString()
	}
	var (
		mu     sync.Mutex
		acked  = map[string][]string{}       // by session: the labels A's tabs saw stored
		frames = map[string]map[int][]byte{} // by replica and session, the frame of each seq
		total  int
	)
	killed := make(chan struct{})
	stop := make(chan struct{})
	var load sync.WaitGroup
	for i, id := range ids {
		for _, r := range []struct {
			name string
			lab  *labProcess
		}{{"a", a}, {"b", b}} {
			ws, _ := r.lab.socket(t, id)
			ws.SetReadLimit(8 << 20) // every frame holds the whole queue
			bySeq := map[int][]byte{}
			mu.Lock()
			frames[r.name+id] = bySeq
			mu.Unlock()
			load.Go(func() {
				for k := 0; k < perTab; k++ {
					select {
					case <-stop:
						return
					default:
					}
					label := fmt.Sprintf("[%s%d-%d]", r.name, i, k)
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					err := ws.Write(ctx, websocket.MessageText, []byte(`{"type":"queueReply","raw":"`+label+`"}`))
					for err == nil {
						var data []byte
						if _, data, err = ws.Read(ctx); err != nil {
							break
						}
						if isBusy(data) {
							// Two replicas racing for one session's seqs:
							// refused, not stored, nothing acknowledged;
							// the tab goes on with its next change.
							break
						}
						seq := seqOf(data)
						if seq < 0 {
							t.Errorf("replica %s, session %d: %.200s", r.name, i, data)
							err = fmt.Errorf("not a state frame")
							break
						}
						mu.Lock()
						bySeq[seq] = data
						mine := bytes.Contains(data, []byte(label))
						if mine && r.name == "a" {
							acked[id] = append(acked[id], label)
							if total++; total == ackedBeforeKill {
								close(killed)
							}
						}
						mu.Unlock()
						if mine {
							break
						}
					}
					cancel()
					if err != nil {
						if r.name == "b" && !t.Failed() {
							t.Errorf("replica b, session %d: %v", i, err)
						}
						return // a was killed
					}
				}
			})
		}
	}
	select {
	case <-killed:
	case <-time.After(60 * time.Second):
		t.Fatal("the load never reached its first acknowledgements")
	}
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	a.cmd.Wait()
	close(stop)
	load.Wait()

	compared := 0
	for i, id := range ids {
		ws, state := b.socket(t, id) // A's page, reconnected through the balancer to B
		ws.SetReadLimit(8 << 20)
		mu.Lock()
		for _, label := range acked[id] {
			if !bytes.Contains(state, []byte(label)) {
				t.Errorf("session %d: %s was acknowledged by the killed replica and is lost", i, label)
			}
		}
		for seq, fa := range frames["a"+id] {
			if fb, ok := frames["b"+id][seq]; ok {
				compared++
				if !bytes.Equal(fa, fb) {
					t.Errorf("session %d seq %d differs between replicas:\n%s\n%s", i, seq, fa, fb)
				}
			}
		}
		last := seqOf(state)
		mu.Unlock()
		if next := change(t, ws, `{"type":"start"}`); seqOf(next) != last+1 {
			t.Errorf("session %d: seq after reconnecting %d, want %d", i, seqOf(next), last+1)
		}
	}
	if compared == 0 {
		t.Error("no seq was seen on both replicas: the comparison proved nothing")
	}
	t.Logf("%d changes acknowledged by the killed replica, all found on the other; %d frames identical on both", total, compared)
}

// isBusy reports whether frame is the refusal of a change that lost the
// race for its seq to the other replica too often (reason busy).
func isBusy(frame []byte) bool {
	var f struct{ Type, Reason string }
	return json.Unmarshal(frame, &f) == nil && f.Type == "error" && f.Reason == "busy"
}

// seqOf is a state frame's seq, -1 for any other frame.
func seqOf(frame []byte) int {
	m := seqField.FindSubmatch(frame)
	if m == nil || !bytes.HasPrefix(frame, []byte(`{"type":"state"`)) {
		return -1
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}
