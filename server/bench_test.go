package server_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"

	"github.com/toolcall-lab/lab/server"
)

// BenchmarkClosedLoop is labbench's throughput scenario inside one process,
// for profiling: sessions each with one tab, each sending its next frame when
// the state for the last one arrives.
func BenchmarkClosedLoop(b *testing.B) {
	const sessions = 50
	_, ts := runLab(&testing.T{}, server.Config{FrameRate: 1e9, FrameBurst: 1e9})
	ctx := context.Background()
	conns := make([]*websocket.Conn, sessions)
	for i := range conns {
		ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(ts.URL, "http")+"/lab/"+newID()+"/ws", nil)
		if err != nil {
			b.Fatal(err)
		}
		defer ws.CloseNow()
		ws.SetReadLimit(8 << 20)
		if _, _, err := ws.Read(ctx); err != nil {
			b.Fatal(err)
		}
		conns[i] = ws
	}
	frames := []string{`{"type":"queueReply","raw":"{\"runId\":\"run-1\",\"callId\":\"lookup\",\"kind\":\"completed\",\"output\":\"x\"}"}`,
		`{"type":"deliver","message":1}`, `{"type":"start"}`, `{"type":"queueDeadline"}`}
	b.ResetTimer()
	var wg sync.WaitGroup
	per := b.N/sessions + 1
	for _, ws := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				if err := ws.Write(ctx, websocket.MessageText, []byte(frames[i%len(frames)])); err != nil {
					b.Error(err)
					return
				}
				if _, _, err := ws.Read(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
