package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/toolcall-lab/lab/server"
)

// amplify runs finding 2's attack on the lab at base, from ip: per session,
// 16 held replies of 64 KiB of U+0001 (each state frame about 6 MB once
// escaped), 31 tabs that never read, and one tab sending start frames at 20
// a second, which reads. It returns the tabs that never read, open until
// the test ends.
func amplify(t *testing.T, base, ip string, sessions int, d time.Duration) []*websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
	defer cancel()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	tr := &http.Transport{DialContext: dialer.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	dialErr := func(id string) (*websocket.Conn, error) {
		ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/lab/"+id+"/ws", &websocket.DialOptions{HTTPClient: &http.Client{Transport: tr}})
		if err != nil {
			return nil, err
		}
		ws.SetReadLimit(-1)
		t.Cleanup(func() { ws.CloseNow() })
		return ws, nil
	}
	dial := func(id string) *websocket.Conn {
		ws, err := dialErr(id)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		return ws
	}
	reply, _ := json.Marshal(map[string]string{"type": "queueReply", "raw": strings.Repeat("\x01", 64<<10)})
	// active opens a tab that reads whatever comes, until it is closed.
	active := func(id string) (*websocket.Conn, error) {
		ws, err := dialErr(id)
		if err != nil {
			return nil, err
		}
		go func() {
			for {
				if _, _, err := ws.Read(ctx); err != nil {
					return
				}
			}
		}()
		return ws, nil
	}
	var slow []*websocket.Conn
	var senders sync.WaitGroup
	end := time.Now().Add(d)
	for range sessions {
		id := newID()
		ws, err := active(id)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		for range 16 {
			if err := ws.Write(ctx, websocket.MessageText, reply); err != nil {
				t.Fatalf("queue: %v", err)
			}
		}
		for range 31 {
			slow = append(slow, dial(id))
		}
		senders.Add(1)
		go func() { // start frames at 20 a second; a closed tab is opened again
			defer senders.Done()
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for ; time.Now().Before(end); <-tick.C {
				if ws.Write(ctx, websocket.MessageText, []byte(`{"type":"start"}`)) != nil {
					ws.CloseNow()
					if ws, err = active(id); err != nil {
						return // refused: the lab holds
					}
				}
			}
			ws.CloseNow()
		}()
	}
	senders.Wait()
	return slow
}

// TestAmplificationBoundedInBytes: finding 2. Under the attack the bytes
// waiting in outboxes, by the server's own accounting, stay within
// MaxOutboxBytes; the tabs that never read are closed with 1008 (too slow);
// once everything closes the accounting is back to zero.
func TestAmplificationBoundedInBytes(t *testing.T) {
	t.Parallel()
	const total = 48 << 20
	lab, ts := runLab(t, server.Config{MaxOutboxBytes: total, MaxConnOutboxBytes: 16 << 20})
	done := make(chan struct{})
	var peakSeen int64
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for {
			if now, _ := lab.OutboxBytes(); now > peakSeen {
				peakSeen = now
			}
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	slow := amplify(t, ts.URL, "127.0.0.2", 1, 3*time.Second)
	close(done)
	sampler.Wait()
	_, peak := lab.OutboxBytes()
	t.Logf("amplification: outboxes held at most %.1f MiB (sampled %.1f MiB), bound %d MiB", float64(peak)/(1<<20), float64(peakSeen)/(1<<20), total>>20)
	if peak > total || peakSeen > total {
		t.Fatalf("outboxes held %d bytes, over the bound of %d", max(peak, peakSeen), total)
	}
	if peak < 6<<20 {
		t.Fatalf("outboxes held at most %d bytes: the attack did not reach the server", peak)
	}
	// Tabs that never read were closed as too slow: each finds the close
	// after what the kernel buffered. (Some got all they were sent within
	// their budget and are simply open.)
	var closed atomic.Int32
	var readers sync.WaitGroup
	for _, ws := range slow {
		readers.Add(1)
		go func() {
			defer readers.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			for {
				_, _, err := ws.Read(ctx)
				var ce websocket.CloseError
				if errors.As(err, &ce) && ce.Code == websocket.StatusPolicyViolation && strings.Contains(ce.Reason, "too slow") {
					closed.Add(1)
				}
				if err != nil {
					return
				}
			}
		}()
	}
	readers.Wait()
	t.Logf("%d of %d tabs that never read were closed with 1008 (too slow)", closed.Load(), len(slow))
	if closed.Load() == 0 {
		t.Fatal("no tab that never read was closed as too slow")
	}
	for _, ws := range slow {
		ws.CloseNow()
	}
	waitFor(t, func() bool { now, _ := lab.OutboxBytes(); return now == 0 })
}

// TestAmplificationAgainstARunningLab runs the attack on a lab started
// elsewhere (LAB_ATTACK_URL, e.g. http://127.0.0.1:8080) for the RSS figure
// of docs/limits.md: three sessions, 8 s.
func TestAmplificationAgainstARunningLab(t *testing.T) {
	base := os.Getenv("LAB_ATTACK_URL")
	if base == "" {
		t.Skip("set LAB_ATTACK_URL to attack a running lab")
	}
	slow := amplify(t, base, "127.0.0.2", 3, 8*time.Second)
	t.Logf("%d tabs that never read", len(slow))
}
