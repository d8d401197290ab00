package server

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/toolcall-lab/lab/model"
)

// BenchmarkSessionChange is the lab's own work per change, without the
// network: decode a frame, decide, store (in memory), apply, encode the
// state and queue it for one tab, in labbench's walkthrough order with a
// new session every 100 changes. labbench measures the rest.
func BenchmarkSessionChange(b *testing.B) {
	srv, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	q := func(raw string) []byte { return []byte(`{"type":"queueReply","raw":` + strconv.Quote(raw) + `}`) }
	var frames [][]byte // one session's: 5 preloads, then queue, deliver, start
	held := 0
	for i := 1; i <= 5; i++ {
		held++
		frames = append(frames, q(fmt.Sprintf(`{"runId":"run-1","callId":"lookup","kind":"completed","output":"Preloaded answer %d: %s"}`, i, strings.Repeat("lorem ipsum dolor sit amet ", 9))))
	}
	for n := 1; len(frames) < 100; n++ {
		switch n % 3 {
		case 1:
			held++
			frames = append(frames, q(`{"runId":"run-2","callId":"lookup","kind":"completed","output":"New answer"}`))
		case 2:
			frames = append(frames, []byte(`{"type":"deliver","message":`+strconv.Itoa(held)+`}`))
		default:
			frames = append(frames, []byte(`{"type":"start"}`))
		}
	}
	var sess *session
	var c *conn
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%100 == 0 {
			if c != nil {
				c.mu.Lock()
				c.out.drop()
				c.mu.Unlock()
				sess.unsubscribe(c)
			}
			sess = newSession(uuid.NewString(), &srv.cfg, srv.metrics, srv.frames, func() {})
			c = collector(srv.metrics)
			sess.subscribe(c)
		}
		cmd, err := decodeFrame(frames[i%100], model.Student)
		if err != nil {
			b.Fatal(err)
		}
		sess.submit(pending{cmd: cmd, from: c})
		c.mu.Lock()
		c.out.drop()
		c.mu.Unlock()
	}
}
