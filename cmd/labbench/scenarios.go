package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
)

// metrics are one measurement of one scenario against one server.
type metrics map[string]float64

// preloadRaw is the i-th reply a session is loaded with before measuring,
// so that its state frame starts near the fixed baseline's 2.6 KB.
func preloadRaw(i int) string {
	return fmt.Sprintf(`{"runId":"run-1","callId":"lookup","kind":"completed","output":"Preloaded answer %d: %s"}`, i, strings.Repeat("lorem ipsum dolor sit amet ", 9))
}

const preloads = 5

// rotateOps is how many ops (the preloads included) a closed-loop client
// sends to one session before it moves to a fresh one, so that creating
// sessions is part of what is measured. The lab's state frame grows from
// 0.6 KB (new) and 2.3 KB (preloaded) to 14 KB at a session's last op,
// 8 KB on average, and so does the baseline's; the fixed baseline's stays
// at 2.6 KB.
const rotateOps = 100

// opGen yields a session's ops in the lab's own walkthrough order: queue a
// reply, deliver it, start a new run, again.
type opGen struct{ n, held int }

func (g *opGen) preload(i int) []byte {
	g.held++
	return queueReplyFrame(preloadRaw(i))
}

func (g *opGen) next() []byte {
	g.n++
	switch g.n % 3 {
	case 1:
		g.held++
		return queueReplyFrame(queueReplyRaw)
	case 2:
		return append(strconv.AppendInt([]byte(`{"type":"deliver","message":`), int64(g.held), 10), '}')
	}
	return []byte(`{"type":"start"}`)
}

// queueReplyRaw is the reply the walkthrough's ops queue: a completion for
// run-2, stale from the third op on.
const queueReplyRaw = `{"runId":"run-2","callId":"lookup","kind":"completed","output":"New answer"}`

func queueReplyFrame(raw string) []byte {
	b := []byte(`{"type":"queueReply","raw":`)
	b = strconv.AppendQuote(b, raw) // raw is ASCII: Go's quoting is valid JSON
	return append(b, '}')
}

// frameSeq returns a state frame's seq, or ok false for any other frame.
func frameSeq(data []byte) (seq uint64, ok bool) {
	if !bytes.HasPrefix(data, []byte(`{"type":"state"`)) {
		return 0, false
	}
	i := bytes.Index(data, []byte(`"seq":`))
	if i < 0 {
		return 0, false
	}
	j := i + len(`"seq":`)
	k := j
	for k < len(data) && data[k] >= '0' && data[k] <= '9' {
		k++
	}
	n, err := strconv.ParseUint(string(data[j:k]), 10, 64)
	return n, err == nil
}

func dial(ctx context.Context, srv *server, session string, client *http.Client) (*websocket.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, srv.wsURL(session), &websocket.DialOptions{HTTPClient: client})
	if err != nil {
		return nil, fmt.Errorf("dialing %s: %w", srv.name, err)
	}
	ws.SetReadLimit(8 << 20)
	return ws, nil
}

// readState reads until a state frame; an error frame is a bench failure:
// the workload is meant to be all valid.
func readState(ctx context.Context, ws *websocket.Conn) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, data, err := ws.Read(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading a state frame: %w", err)
	}
	seq, ok := frameSeq(data)
	if !ok {
		return 0, fmt.Errorf("got %.200s, want a state frame", data)
	}
	return seq, nil
}

func send(ctx context.Context, ws *websocket.Conn, frame []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := ws.Write(ctx, websocket.MessageText, frame); err != nil {
		return fmt.Errorf("sending a frame: %w", err)
	}
	return nil
}

// loopClient is one closed-loop client: it sends an op, waits for its
// state, sends the next; every rotateOps ops it moves to a fresh session.
// It keeps its session from one run to the next, so a measurement taken in
// turns creates sessions exactly as often as one taken at a stretch.
type loopClient struct {
	srv *server
	ws  *websocket.Conn // the session's connection; nil before its first op
	g   opGen
	n   int // ops sent to the session, the preloads included
}

// run runs ops until the deadline and returns how many completed; their
// latencies go to lat unless it is nil.
func (c *loopClient) run(ctx context.Context, until time.Time, lat *samples) (ops int, err error) {
	for time.Now().Before(until) {
		if c.ws == nil {
			if err := c.open(ctx); err != nil {
				return ops, err
			}
			ops += preloads
			continue
		}
		t0 := time.Now()
		if err := send(ctx, c.ws, c.g.next()); err != nil {
			return ops, err
		}
		if _, err := readState(ctx, c.ws); err != nil {
			return ops, err
		}
		if lat != nil {
			lat.add(time.Since(t0))
		}
		ops++
		if c.n++; c.n == rotateOps {
			c.ws.Close(websocket.StatusNormalClosure, "")
			c.ws = nil
		}
	}
	return ops, nil
}

// open starts a fresh session and sends its preloads.
func (c *loopClient) open(ctx context.Context) error {
	ws, err := dial(ctx, c.srv, uuid.NewString(), nil)
	if err != nil {
		return err
	}
	if _, err := readState(ctx, ws); err != nil {
		ws.CloseNow()
		return err
	}
	c.ws, c.g, c.n = ws, opGen{}, 0
	for i := 1; i <= preloads; i++ {
		if err := send(ctx, ws, c.g.preload(i)); err != nil {
			return err
		}
		if _, err := readState(ctx, ws); err != nil {
			return err
		}
		c.n++
	}
	return nil
}

// close drops the client's connection, if open.
func (c *loopClient) close() {
	if c.ws != nil {
		c.ws.CloseNow()
		c.ws = nil
	}
}

// turnsPerServer is how many turns each server takes in the closed-loop
// scenarios (rtt, throughput). Measured one after another for seconds
// each, the servers saw different background load (this machine is
// shared), and the ratio of a lab's CPU per op to the baseline's swung by
// ±0.1 from rep to rep (BENCHMARKS.md); in short turns they
// share it.
const turnsPerServer = 6

// turnsResult is what one server did over its turns.
type turnsResult struct {
	ops  int
	cpu  float64       // seconds
	db   float64       // seconds of the PostgreSQL cluster's CPU (server.dbCPU)
	took time.Duration // its turns' wall time
	lat  samples       // every op's latency, when asked for
}

// inTurns runs loops closed loops against each of srvs, all up at once, in
// turns: a warm-up of duration/5 each, then turnsPerServer rounds in which
// each server's loops run for duration/turnsPerServer, the order rotating
// every round. A server's ops, CPU and latencies are counted over its own
// turns (latencies only if asked for); its loops keep their sessions from
// turn to turn. refs (the postgres lab's reference, pgRef) take turns of
// their own among the servers', one loop each, their latencies their own.
func (b *bench) inTurns(ctx context.Context, srvs []*server, loops int, latencies bool, refs ...*pgRef) ([]*turnsResult, error) {
	clients := make([][]*loopClient, len(srvs))
	for i, srv := range srvs {
		for range loops {
			clients[i] = append(clients[i], &loopClient{srv: srv})
		}
	}
	defer func() {
		for _, cs := range clients {
			for _, c := range cs {
				c.close()
			}
		}
	}()
	res := make([]*turnsResult, len(srvs))
	for i := range res {
		res[i] = new(turnsResult)
	}
	// turn runs server i's loops for d, adding to r.
	turn := func(i int, d time.Duration, r *turnsResult) error {
		db0, err := dbCPU(srvs[i])
		if err != nil {
			return err
		}
		cpu0, err := srvs[i].cpuSeconds()
		if err != nil {
			return err
		}
		t0 := time.Now()
		until := t0.Add(d)
		var lat *samples
		if latencies {
			lat = &r.lat
		}
		var mu sync.Mutex
		var errs []error
		var wg sync.WaitGroup
		for _, c := range clients[i] {
			wg.Go(func() {
				n, err := c.run(ctx, until, lat)
				mu.Lock()
				r.ops += n
				errs = append(errs, err)
				mu.Unlock()
			})
		}
		wg.Wait()
		r.took += time.Since(t0)
		cpu1, err := srvs[i].cpuSeconds()
		r.cpu += cpu1 - cpu0
		db1, dbErr := dbCPU(srvs[i])
		r.db += db1 - db0
		return errors.Join(append(errs, err, dbErr)...)
	}
	// refTurn runs reference i - len(srvs) for d.
	refTurn := func(i int, d time.Duration, lat *samples) error {
		r := refs[i-len(srvs)]
		if err := r.run(ctx, time.Now().Add(d), lat); err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
		return nil
	}
	n := len(srvs) + len(refs)
	for i := range n {
		var err error
		if i < len(srvs) {
			err = turn(i, b.duration/5, new(turnsResult))
		} else {
			err = refTurn(i, b.duration/5, nil)
		}
		if err != nil {
			return nil, fmt.Errorf("warming up: %w", err)
		}
	}
	for k := range turnsPerServer {
		for j := range n {
			i := (j + k) % n
			if i >= len(srvs) {
				if err := refTurn(i, b.duration/turnsPerServer, &refs[i-len(srvs)].lat); err != nil {
					return nil, err
				}
				continue
			}
			if err := turn(i, b.duration/turnsPerServer, res[i]); err != nil {
				return nil, fmt.Errorf("%s: %w", srvs[i].name, err)
			}
		}
	}
	for i, r := range res {
		if r.ops == 0 {
			return nil, fmt.Errorf("%s: no ops completed", srvs[i].name)
		}
	}
	return res, nil
}

// pgCPUMetric is the throughput scenario's PostgreSQL CPU per op, for a
// lab on PostgreSQL.
const pgCPUMetric = "PostgreSQL CPU s/1000 ops"

// dbCPU is srv's database CPU seconds so far (server.dbCPU), 0 for a
// server without one.
func dbCPU(srv *server) (float64, error) {
	if srv.dbCPU == nil {
		return 0, nil
	}
	return srv.dbCPU()
}

// rtt: one closed loop on each server; beside a lab on PostgreSQL, the
// cluster's one-row durable INSERT in turns of its own (pgRef).
func (b *bench) rtt(ctx context.Context, srvs []*server) (ms []metrics, err error) {
	refs, err := pgRefs(ctx, srvs)
	defer func() {
		for _, r := range refs {
			err = errors.Join(err, r.close())
		}
	}()
	if err != nil {
		return nil, err
	}
	res, err := b.inTurns(ctx, srvs, 1, true, refs...)
	if err != nil {
		return nil, err
	}
	ms = make([]metrics, len(res))
	for i, r := range res {
		ms[i] = metrics{"p50 ms": r.lat.ms(50), "p99 ms": r.lat.ms(99)}
	}
	for _, r := range refs {
		ms[r.srv][insertP50Metric], ms[r.srv][insertP99Metric] = r.lat.ms(50), r.lat.ms(99)
	}
	return ms, nil
}

// throughput: b.loops closed loops on each server.
func (b *bench) throughput(ctx context.Context, srvs []*server) ([]metrics, error) {
	res, err := b.inTurns(ctx, srvs, b.loops, false)
	if err != nil {
		return nil, err
	}
	ms := make([]metrics, len(res))
	for i, r := range res {
		ms[i] = metrics{
			"ops/s":          float64(r.ops) / r.took.Seconds(),
			"CPU s/1000 ops": r.cpu / float64(r.ops) * 1000,
		}
		if srvs[i].dbCPU != nil {
			ms[i][pgCPUMetric] = r.db / float64(r.ops) * 1000
		}
	}
	return ms, nil
}

// idle opens b.idle connections on b.idle/10 sessions, each reading its
// first state, and charges the server's RSS growth to them.
func (b *bench) idleConns(ctx context.Context, srv *server) (metrics, error) {
	sessions := max(b.idle/10, 1)
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = uuid.NewString()
	}
	before, err := srv.rssKiB()
	if err != nil {
		return nil, err
	}
	conns := make([]*websocket.Conn, b.idle)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.CloseNow()
			}
		}
	}()
	err = parallel(b.idle, 32, func(i int) error {
		ws, err := dial(ctx, srv, ids[i%sessions], nil)
		if err != nil {
			return err
		}
		conns[i] = ws
		_, err = readState(ctx, ws)
		return err
	})
	if err != nil {
		return nil, err
	}
	time.Sleep(500 * time.Millisecond) // let the server settle after the dial storm
	after, err := srv.rssKiB()
	if err != nil {
		return nil, err
	}
	return metrics{"RSS KiB/conn": float64(after-before) / float64(b.idle)}, nil
}

// parallel runs f(0..n-1) on at most width goroutines and returns the first error.
func parallel(n, width int, f func(int) error) error {
	var mu sync.Mutex
	var first error
	next := 0
	var wg sync.WaitGroup
	for range min(width, n) {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				stop := first != nil || i >= n
				mu.Unlock()
				if stop {
					return
				}
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return first
}

// classShape is one class run: sessions × tabs, an op per session about
// every interval, for duration (a fifth more warms up), and optionally a
// connection that never reads, there half of the time.
type classShape struct {
	sessions, tabs int
	interval       time.Duration
	duration       time.Duration
	slow           bool
	watch          bool // an instructor watches (lab only)
	// replicas, when set, are lab replicas on one database: tab i of
	// each session dials replicas[i % len], and each op's fan-out to tabs
	// on another replica than its sender's is measured apart (cross).
	replicas []*server
}

// classResult holds the latencies of a class run; lastSlow those of ops sent
// while the connection that never reads was there.
type classResult struct {
	sender, last, lastSlow samples
	watcher                samples // lab only: op sent to the instructor's overview showing it
	cross                  samples // replicas: op sent to a tab on another replica receiving it
}

// op is one change in flight: who sent it, when, and who has seen it.
type op struct {
	sent   time.Time
	slow   bool // sent while the connection that never reads was there
	sender int
	seen   int  // other tabs that received it
	got    bool // the sender received it
	record bool
	mine   chan struct{}
}

type classSession struct {
	id      string
	tabs    []*websocket.Conn
	replica []int // the replica each tab is on (all 0 without replicas)
	res     *classResult
	slow    *atomic.Bool

	mu      sync.Mutex
	ops     map[uint64]*op
	unseen  map[uint64]time.Time // recorded ops the instructor's overview has not shown yet
	watched bool                 // an instructor watches this run
	err     error
}

// class runs a class: each session's driver sends an op from a random tab,
// waits for the sender's state, then sleeps a jittered interval; every tab
// reads, and the reader that completes an op's fan-out records the
// last-tab latency. Ops are matched to frames by seq: each session has one
// op in flight, so op n makes state n.
//
// Against the lab, an instructor connection watches the whole class too:
// its lag is the time from an op sent to the first overview frame showing
// the session at that op's seq (the overview is coalesced, at most one
// frame every 250 ms by design).
func (b *bench) class(ctx context.Context, srv *server, shape classShape) (*classResult, error) {
	res := &classResult{}
	sessions := make([]*classSession, shape.sessions)
	var allConns []*websocket.Conn
	var mu sync.Mutex
	defer func() {
		for _, c := range allConns {
			c.CloseNow()
		}
	}()
	var slowOn atomic.Bool
	watched := shape.watch && srv.lab
	byID := make(map[string]*classSession, len(sessions))
	for i := range sessions {
		sessions[i] = &classSession{id: uuid.NewString(), res: res, slow: &slowOn, ops: make(map[uint64]*op),
			unseen: make(map[uint64]time.Time), watched: watched, tabs: make([]*websocket.Conn, shape.tabs), replica: make([]int, shape.tabs)}
		byID[sessions[i].id] = sessions[i]
	}
	err := parallel(shape.sessions*shape.tabs, 32, func(i int) error {
		s := sessions[i/shape.tabs]
		to := srv
		if n := len(shape.replicas); n > 0 {
			s.replica[i%shape.tabs] = (i % shape.tabs) % n
			to = shape.replicas[s.replica[i%shape.tabs]]
		}
		ws, err := dial(ctx, to, s.id, nil)
		if err != nil {
			return err
		}
		mu.Lock()
		allConns = append(allConns, ws)
		mu.Unlock()
		s.tabs[i%shape.tabs] = ws
		_, err = readState(ctx, ws)
		return err
	})
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var readers sync.WaitGroup
	for _, s := range sessions {
		for t, ws := range s.tabs {
			readers.Go(func() { s.read(runCtx, t, ws) })
		}
	}
	if watched {
		ws, err := dialInstructor(ctx, srv)
		if err != nil {
			return nil, err
		}
		allConns = append(allConns, ws)
		readers.Go(func() { watchOverview(runCtx, ws, byID, &res.watcher) })
	}
	start := time.Now()
	warm := start.Add(shape.duration / 5)
	until := warm.Add(shape.duration)
	var drivers sync.WaitGroup
	errs := make([]error, len(sessions)+1)
	if shape.slow {
		drivers.Go(func() { errs[len(sessions)] = slowPhases(runCtx, srv, sessions[0].id, &slowOn, warm, until) })
	}
	for i, s := range sessions {
		drivers.Go(func() { errs[i] = s.drive(runCtx, shape.interval, warm, until) })
	}
	drivers.Wait()
	// Give the last fan-outs a moment, then stop the readers.
	time.Sleep(100 * time.Millisecond)
	cancel()
	for _, c := range allConns {
		c.CloseNow()
	}
	readers.Wait()
	for _, s := range sessions {
		errs = append(errs, s.err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return res, nil
}

// instructorToken is the lab's instructor token during the benchmark.
const instructorToken = "labbench-instructor-token"

// dialInstructor opens the lab's instructor WebSocket, as a script would,
// with the bearer token.
func dialInstructor(ctx context.Context, srv *server) (*websocket.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	url := "ws" + strings.TrimPrefix(srv.base, "http") + "/instructor/ws"
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + instructorToken}}})
	if err != nil {
		return nil, fmt.Errorf("dialing the instructor socket: %w", err)
	}
	ws.SetReadLimit(64 << 20)
	return ws, nil
}

// watchOverview reads overview frames and records, for each op not shown
// yet, the lag until a frame shows its session at that seq or later.
func watchOverview(ctx context.Context, ws *websocket.Conn, sessions map[string]*classSession, lag *samples) {
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			return
		}
		now := time.Now()
		overviewSeqs(data, func(id []byte, seq uint64) {
			s := sessions[string(id)]
			if s == nil {
				return
			}
			s.mu.Lock()
			for sent, at := range s.unseen {
				if sent <= seq {
					lag.add(now.Sub(at))
					delete(s.unseen, sent)
				}
			}
			s.mu.Unlock()
		})
	}
}

// overviewSeqs calls f with each row's id and seq of an overview frame
// (nothing for another frame). It scans the bytes for them rather than
// decoding the table: a course's is 400 KB four times a second, and
// decoding it took the bench's own process a few milliseconds a table,
// on the cores whose students' round trips it measures, which the bare
// server, watched by no one, never paid for (BENCHMARKS.md, issue 35).
// A row begins with its id, and its seq is its first "seq" key; a quote
// inside a string is escaped, so neither pattern occurs inside a value
// (TestOverviewSeqs holds this against the lab's own frames).
func overviewSeqs(data []byte, f func(id []byte, seq uint64)) {
	const head, rowStart, seqKey = `{"type":"overview","sessions":[`, `{"id":"`, `"seq":`
	rest, ok := bytes.CutPrefix(data, []byte(head))
	if !ok {
		return
	}
	if end := bytes.Index(rest, []byte(`],"exercise":`)); end >= 0 {
		rest = rest[:end]
	}
	for {
		i := bytes.Index(rest, []byte(rowStart))
		if i < 0 {
			return
		}
		rest = rest[i+len(rowStart):]
		j := bytes.IndexByte(rest, '"')
		if j < 0 {
			return
		}
		id := rest[:j]
		k := bytes.Index(rest, []byte(seqKey))
		if k < 0 {
			return
		}
		rest = rest[k+len(seqKey):]
		n := 0
		for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
			n++
		}
		seq, err := strconv.ParseUint(string(rest[:n]), 10, 64)
		if err != nil {
			return
		}
		f(id, seq)
	}
}

// slowPhases alternates, in six phases after the warm-up, a class without
// and with a connection that never reads (in the first session): both halves
// then share the machine's noise, which on a shared machine is larger than
// what is measured. Each "with" phase dials a fresh such connection; its
// buffers fill within a few frames and the server's writes to it block.
func slowPhases(ctx context.Context, srv *server, session string, on *atomic.Bool, warm, until time.Time) error {
	const phases = 6
	phase := until.Sub(warm) / phases
	var ws *websocket.Conn
	defer func() {
		if ws != nil {
			ws.CloseNow()
		}
	}()
	for i := range phases {
		select {
		case <-time.After(time.Until(warm.Add(time.Duration(i) * phase))):
		case <-ctx.Done():
			return nil
		}
		if i%2 == 0 {
			on.Store(false)
			if ws != nil {
				ws.CloseNow()
				ws = nil
			}
			continue
		}
		var err error
		if ws, err = dial(ctx, srv, session, slowClient()); err != nil {
			return err
		}
		on.Store(true) // never read: the server's writes to it back up
	}
	return nil
}

// slowClient dials with a tiny receive buffer, so a connection that never
// reads pushes back on the server after a few frames.
func slowClient() *http.Client {
	d := &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
		return errors.Join(err, serr)
	}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}

func (s *classSession) drive(ctx context.Context, interval time.Duration, warm, until time.Time) error {
	var g opGen
	var seq uint64
	step := func(frame []byte, record bool) error {
		seq++
		o := &op{sent: time.Now(), slow: s.slow.Load(), sender: rand.IntN(len(s.tabs)), record: record, mine: make(chan struct{})}
		s.mu.Lock()
		s.ops[seq] = o
		if record && s.watched {
			s.unseen[seq] = o.sent
		}
		s.mu.Unlock()
		if err := send(ctx, s.tabs[o.sender], frame); err != nil {
			return err
		}
		select {
		case <-o.mine:
			return nil
		case <-ctx.Done():
			return nil
		case <-time.After(30 * time.Second):
			return fmt.Errorf("session %s: no state for op %d within 30s", s.id, seq)
		}
	}
	for i := 1; i <= preloads; i++ {
		if err := step(g.preload(i), false); err != nil {
			return err
		}
	}
	// Start at a random point of the first interval so sessions do not move in step.
	next := time.Now().Add(rand.N(interval))
	for next.Before(until) {
		select {
		case <-time.After(time.Until(next)):
		case <-ctx.Done():
			return nil
		}
		t0 := time.Now()
		if err := step(g.next(), t0.After(warm)); err != nil {
			return err
		}
		// ~interval between ops, ±50%.
		next = t0.Add(interval/2 + rand.N(interval))
	}
	return nil
}

func (s *classSession) read(ctx context.Context, tab int, ws *websocket.Conn) {
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			return
		}
		now := time.Now()
		seq, ok := frameSeq(data)
		s.mu.Lock()
		if !ok {
			if s.err == nil {
				s.err = fmt.Errorf("session %s tab %d: got %.200s, want a state frame", s.id, tab, data)
			}
			s.mu.Unlock()
			continue
		}
		o := s.ops[seq]
		if o == nil {
			s.mu.Unlock()
			continue
		}
		if tab == o.sender {
			o.got = true
			close(o.mine)
			if o.record {
				s.res.sender.add(now.Sub(o.sent))
			}
		} else {
			o.seen++
			if o.record && s.replica[tab] != s.replica[o.sender] {
				s.res.cross.add(now.Sub(o.sent))
			}
			if o.seen == len(s.tabs)-1 && o.record {
				if o.slow {
					s.res.lastSlow.add(now.Sub(o.sent))
				} else {
					s.res.last.add(now.Sub(o.sent))
				}
			}
		}
		if o.got && o.seen == len(s.tabs)-1 {
			delete(s.ops, seq)
		}
		s.mu.Unlock()
	}
}

// samples collects latencies from many goroutines.
type samples struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *samples) add(d time.Duration) {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
}

// ms is the p-th percentile in milliseconds (nearest rank).
func (s *samples) ms(p float64) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.d) == 0 {
		return 0
	}
	slices.Sort(s.d)
	i := int(p/100*float64(len(s.d))+0.5) - 1
	i = min(max(i, 0), len(s.d)-1)
	return float64(s.d[i]) / float64(time.Millisecond)
}

func (s *samples) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.d)
}
