package server_test

// Issue 10, a hostile classroom: each finding's attack, on loopback, with
// other clients as other loopback addresses (127.0.0.2, 127.0.0.3, …).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"

	"github.com/toolcall-lab/lab/server"
	"github.com/toolcall-lab/lab/store"
)

// from is an HTTP client whose connections leave from the loopback address
// ip, as another machine's would; it follows no redirects.
func from(t *testing.T, ip string) *http.Client {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	tr := &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// dialFrom opens a student WebSocket from ip; it returns the HTTP answer too.
func dialFrom(t *testing.T, ts *httptest.Server, id, ip string, header http.Header) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := from(t, ip)
	c.Timeout = 0 // the library refuses a client with a timeout
	ws, resp, err := websocket.Dial(ctx, wsURL(ts, id), &websocket.DialOptions{HTTPClient: c, HTTPHeader: header})
	if err == nil {
		ws.SetReadLimit(-1)
		t.Cleanup(func() { ws.CloseNow() })
	}
	return ws, resp, err
}

// readClose reads until the server closes ws and returns the close.
func readClose(t *testing.T, ws *websocket.Conn) websocket.CloseError {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		_, _, err := ws.Read(ctx)
		if err == nil {
			continue
		}
		var ce websocket.CloseError
		if !errors.As(err, &ce) {
			t.Fatalf("read: %v, want a close", err)
		}
		return ce
	}
}

// waitLog waits for a log line holding every one of parts.
func waitLog(t *testing.T, logs *logBuffer, parts ...string) {
	t.Helper()
	waitFor(t, func() bool {
		for _, line := range strings.Split(logs.String(), "\n") {
			if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(line, p) }) {
				return true
			}
		}
		return false
	})
}

// TestGETFloodCreatesNothing: finding 1. Plain GETs, upgrades from a
// foreign origin and connections that change nothing create no session,
// count against no cap and do not extend a session's life.
func TestGETFloodCreatesNothing(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	st := store.NewMemory()
	lab, ts := runLab(t, server.Config{Store: st, MaxSessions: 5, SessionTTL: time.Hour, Now: clock.Now})
	ctx := context.Background()

	// A session a student made, then left.
	kept := newID()
	c, _ := dial(t, ts, kept)
	c.do(`{"type":"start"}`)
	c.ws.Close(websocket.StatusNormalClosure, "")
	waitFor(t, func() bool { return lab.Attached(kept) == 0 })

	attacker := from(t, "127.0.0.2")
	evil := http.Header{"Origin": {"https://evil.example"}}
	flood := func(id string) {
		resp, err := attacker.Get(ts.URL + "/lab/" + id + "/ws")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUpgradeRequired {
			t.Fatalf("a plain GET: %d, want 426", resp.StatusCode)
		}
		if _, resp, err := dialFrom(t, ts, id, "127.0.0.2", evil); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Fatalf("a foreign origin's upgrade: %v %v, want 403", resp, err)
		}
		ws, _, err := dialFrom(t, ts, id, "127.0.0.2", nil)
		if err != nil {
			t.Fatalf("an upgrade: %v", err)
		}
		ws.Close(websocket.StatusNormalClosure, "")
	}
	const n = 200
	for range n {
		flood(newID())
	}
	// The kept session's own address, 59 minutes later, too.
	clock.Advance(59 * time.Minute)
	for range 5 {
		flood(kept)
	}
	waitFor(t, func() bool { return len(lab.SessionIDs()) == 1 })
	t.Logf("GET flood: %d plain GETs, %d foreign-origin upgrades and %d empty connections left %d sessions (the one made by a change)", n+5, n+5, n+5, len(lab.SessionIDs()))
	if got := lab.StoredSessions(); got != 1 {
		t.Fatalf("%d sessions counted against the cap, want 1", got)
	}
	if infos, _ := st.Sessions(ctx); len(infos) != 1 {
		t.Fatalf("%d sessions stored, want 1", len(infos))
	}

	// The cap of 5 still takes four new sessions, from anyone.
	for i := range 4 {
		ws, _, err := dialFrom(t, ts, newID(), fmt.Sprintf("127.0.0.%d", 3+i), nil)
		if err != nil {
			t.Fatal(err)
		}
		cl := &client{t: t, ws: ws}
		cl.state()
		if f := cl.do(`{"type":"start"}`); f.Seq != 1 {
			t.Fatalf("a new session after the flood: seq %d", f.Seq)
		}
	}

	// The flood on the kept session did not extend its life. Its empty
	// connections are closed, but the server lets go of each on its own
	// goroutine: a session still attached is never swept.
	waitFor(t, func() bool { return lab.Attached(kept) == 0 })
	clock.Advance(2 * time.Minute)
	if err := lab.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(lab.SessionIDs(), kept) {
		t.Fatal("GETs and empty connections kept an idle session alive past its TTL")
	}
}

// TestPerAddressLimits: finding 1. Connections and sessions are limited
// per client address; another address is not affected; the page is told
// why; the address is the one the server sees (logged as remote).
func TestPerAddressLimits(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	lab, ts := runLab(t, server.Config{MaxAddrConns: 3, AddrConnRate: 0.001, MaxAddrSessions: 1, Logger: logs.logger()})
	a := newID()
	var tabs []*websocket.Conn
	for range 3 {
		ws, _, err := dialFrom(t, ts, a, "127.0.0.2", nil)
		if err != nil {
			t.Fatal(err)
		}
		tabs = append(tabs, ws)
	}
	waitLog(t, logs, "websocket open", "remote=127.0.0.2")
	// A fourth at once: refused before the upgrade.
	if _, resp, err := dialFrom(t, ts, a, "127.0.0.2", nil); err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("fourth connection from one address: %v %v, want 429", resp, err)
	}
	// Another address is not affected.
	other, _, err := dialFrom(t, ts, a, "127.0.0.3", nil)
	if err != nil {
		t.Fatalf("another address refused: %v", err)
	}
	waitLog(t, logs, "websocket open", "remote=127.0.0.3")
	// With a place free again, the address has used up its new
	// connections: accepted, and closed with a reason the page shows.
	tabs[0].Close(websocket.StatusNormalClosure, "")
	waitFor(t, func() bool { return lab.Attached(a) == 3 })
	ws, _, err := dialFrom(t, ts, a, "127.0.0.2", nil)
	if err != nil {
		t.Fatal(err)
	}
	if ce := readClose(t, ws); ce.Code != websocket.StatusTryAgainLater || !strings.Contains(ce.Reason, "the lab is full right now: too many connections from your network") {
		t.Fatalf("past the rate: %v", ce)
	}
	waitLog(t, logs, "websocket refused", "remote=127.0.0.2", "code=1013")

	// Sessions per address: 127.0.0.3 made none yet; its first is stored,
	// its second refused with an error frame.
	oc := &client{t: t, ws: other}
	oc.state()
	if f := oc.do(`{"type":"start"}`); f.Seq != 1 {
		t.Fatalf("first session of an address: seq %d", f.Seq)
	}
	ws, _, err = dialFrom(t, ts, newID(), "127.0.0.3", nil)
	if err != nil {
		t.Fatal(err)
	}
	second := &client{t: t, ws: ws}
	second.state()
	second.send(`{"type":"start"}`)
	if f := second.refusal(); f.Reason != "full" || !strings.Contains(f.Error, "sessions were started from your network") {
		t.Fatalf("second session of an address: %s", f.raw)
	}
}

// TestTrustedProxyDecidesAddress: behind a trusted proxy the per-address
// limits apply to the forwarded address, not the proxy's.
func TestTrustedProxyDecidesAddress(t *testing.T) {
	t.Parallel()
	_, loopback, _ := net.ParseCIDR("127.0.0.0/8")
	_, ts := runLab(t, server.Config{MaxAddrConns: 1, TrustedProxies: []*net.IPNet{loopback}})
	xff := func(ip string) http.Header { return http.Header{"X-Forwarded-For": {ip}} }
	if _, _, err := dialFrom(t, ts, newID(), "127.0.0.2", xff("10.0.0.1")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := dialFrom(t, ts, newID(), "127.0.0.2", xff("10.0.0.2")); err != nil {
		t.Fatalf("another client behind the same proxy refused: %v", err)
	}
	if _, resp, err := dialFrom(t, ts, newID(), "127.0.0.2", xff("10.0.0.1")); err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a second connection of 10.0.0.1: %v %v, want 429", resp, err)
	}
}

// TestEventCaps: finding 3. Runs, renames and changes in all are bounded
// per session, refused past the bound with an error frame.
func TestEventCaps(t *testing.T) {
	t.Parallel()
	_, ts := runLab(t, server.Config{MaxRuns: 2, MaxRenames: 1, MaxEvents: 5})
	c, _ := dial(t, ts, newID())
	c.do(`{"type":"start"}`)
	c.do(`{"type":"start"}`)
	c.send(`{"type":"start"}`)
	if f := c.refusal(); f.Reason != "limit" || f.Error != "runs in one session limit reached (at most 2)" {
		t.Fatalf("third run: %s", f.raw)
	}
	c.do(`{"type":"rename","name":"Ada"}`)
	c.send(`{"type":"rename","name":"Bob"}`)
	if f := c.refusal(); f.Reason != "limit" || !strings.Contains(f.Error, "renames in one session") {
		t.Fatalf("second rename: %s", f.raw)
	}
	c.do(`{"type":"queueDeadline"}`)
	if f := c.do(`{"type":"queueDeadline"}`); f.Seq != 5 {
		t.Fatalf("seq %d, want 5", f.Seq)
	}
	c.send(`{"type":"queueDeadline"}`)
	if f := c.refusal(); f.Reason != "limit" || !strings.Contains(f.Error, "changes in one session limit reached (at most 5)") {
		t.Fatalf("sixth change: %s", f.raw)
	}
}

// TestLoginFloodFromOneAddress: finding 4. One address posting wrong tokens
// (and wrong bearer tokens) is throttled; the instructor at another address
// logs in every time meanwhile.
func TestLoginFloodFromOneAddress(t *testing.T) {
	t.Parallel()
	const metricsToken = "metrics-token-0123456789"
	_, ts := runLab(t, server.Config{InstructorToken: testToken, MetricsToken: metricsToken})
	login := func(c *http.Client, token string) int {
		resp, err := c.PostForm(ts.URL+"/instructor/login", url.Values{"token": {token}})
		if err != nil {
			t.Error(err)
			return 0
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusSeeOther && resp.Header.Get("Location") == "/instructor" {
			return 200 // logged in
		}
		return resp.StatusCode
	}
	attacker, teacher := from(t, "127.0.0.2"), from(t, "127.0.0.3")
	stop := make(chan struct{})
	var tries, throttled atomic.Int64
	var flood sync.WaitGroup
	for range 4 {
		flood.Add(1)
		go func() {
			defer flood.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				tries.Add(1)
				if login(attacker, "wrong-token-guess-000") == http.StatusTooManyRequests {
					throttled.Add(1)
				}
			}
		}()
	}
	waitFor(t, func() bool { return throttled.Load() > 0 })
	const want = 20
	ok := 0
	for range want {
		if login(teacher, testToken) == 200 {
			ok++
		}
	}
	close(stop)
	flood.Wait()
	t.Logf("login flood: %d wrong tokens from 127.0.0.2 (%d answered 429); %d of %d right-token logins from 127.0.0.3 succeeded", tries.Load(), throttled.Load(), ok, want)
	if ok != want {
		t.Fatalf("%d of %d right-token logins from another address succeeded during the flood", ok, want)
	}
	if got := login(attacker, testToken); got != http.StatusTooManyRequests {
		t.Fatalf("the flooding address, right token: %d, want 429 until its allowance refills", got)
	}

	// Bearer tokens: the API and /metrics.
	for _, path := range []string{"/api/sessions", "/metrics"} {
		bearer := func(c *http.Client, token string) int {
			req, _ := http.NewRequest(http.MethodGet, ts.URL+path, nil)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		right := testToken
		if path == "/metrics" {
			right = metricsToken
		}
		guesser := from(t, "127.0.0.4") // throttled across both paths: fine, it only gets more 429s
		codes := map[int]int{}
		for range 30 {
			codes[bearer(guesser, "wrong-bearer-guess-000")]++
		}
		if codes[http.StatusTooManyRequests] == 0 || codes[http.StatusUnauthorized] > 11 {
			t.Fatalf("%s: 30 wrong bearer tokens from one address answered %v, want 429 after the first few", path, codes)
		}
		if got := bearer(from(t, "127.0.0.5"), right); got != http.StatusOK {
			t.Fatalf("%s: the right bearer token from another address: %d", path, got)
		}
	}
}

// TestTextFramesMustBeUTF8: finding 8. An invalid UTF-8 text frame closes
// the connection with 1007 (RFC 6455 §8.1); finding 9: the log carries the
// close code the server sent, for 1007, 1008 and 1009 alike.
func TestTextFramesMustBeUTF8(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	_, ts := runLab(t, server.Config{Logger: logs.logger(), FrameRate: 1, FrameBurst: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	c, _ := dial(t, ts, newID())
	if err := c.ws.Write(ctx, websocket.MessageText, []byte("{\"type\":\"rename\",\"name\":\"\xff\"}")); err != nil {
		t.Fatal(err)
	}
	if ce := readClose(t, c.ws); ce.Code != websocket.StatusInvalidFramePayloadData {
		t.Fatalf("invalid UTF-8: %v, want 1007", ce)
	}
	waitLog(t, logs, "websocket closed", "code=1007")

	big, _ := dial(t, ts, newID())
	big.ws.Write(ctx, websocket.MessageText, []byte(queueReply(strings.Repeat("y", 1<<21))))
	if ce := readClose(t, big.ws); ce.Code != websocket.StatusMessageTooBig {
		t.Fatalf("oversized: %v, want 1009", ce)
	}
	waitLog(t, logs, "websocket closed", "code=1009")

	abuse, _ := dial(t, ts, newID())
	go func() {
		for ctx.Err() == nil {
			if abuse.ws.Write(ctx, websocket.MessageText, []byte(`{"type":"queueDeadline"}`)) != nil {
				return
			}
		}
	}()
	if ce := readClose(t, abuse.ws); ce.Code != websocket.StatusPolicyViolation {
		t.Fatalf("rate abuse: %v, want 1008", ce)
	}
	waitLog(t, logs, "websocket closed", "code=1008")
	if strings.Contains(logs.String(), "code=-1") {
		t.Fatalf("a close the server sent was logged as -1:\n%s", logs.String())
	}
}

// TestOriginComparedByScheme: finding 10. The lab's own origin is its
// scheme, host and port: https://host:port is not an http server's origin.
func TestOriginComparedByScheme(t *testing.T) {
	t.Parallel()
	_, ts := runLab(t, server.Config{})
	host := strings.TrimPrefix(ts.URL, "http://")
	for origin, ok := range map[string]bool{
		"http://" + host:                        true,
		"https://" + host:                       false,
		"http://" + strings.Split(host, ":")[0]: false, // port 80
		"ws://" + host:                          false,
	} {
		_, resp, err := dialFrom(t, ts, newID(), "127.0.0.2", http.Header{"Origin": {origin}})
		if ok && err != nil {
			t.Errorf("Origin %s refused: %v", origin, err)
		}
		if !ok && (err == nil || resp == nil || resp.StatusCode != http.StatusForbidden) {
			t.Errorf("Origin %s: %v %v, want 403", origin, resp, err)
		}
	}
}

// TestBrowserSaysTheLabIsFull: finding 1's "Reconnecting in 2 s…" forever.
// A page the lab refuses says why, from the close's reason, and keeps
// trying.
func TestBrowserSaysTheLabIsFull(t *testing.T) {
	t.Parallel()
	p := newBrowser(t)
	base := startLabWith(t, server.Config{MaxSessions: 1})
	// The one session the cap allows, made by a change.
	ws, _, err := websocket.Dial(p.ctx, "ws"+strings.TrimPrefix(base, "http")+"/lab/"+newID()+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	full := &client{t: t, ws: ws}
	full.state()
	full.do(`{"type":"start"}`)

	p.do("open a new session", chromedp.Navigate(base+"/lab/"+newID()))
	v := p.waitView("the refusal", func(v pageView) bool {
		return strings.HasPrefix(v.Connection, "The lab is full right now")
	})
	t.Logf("the page says: %q", v.Connection)
}
