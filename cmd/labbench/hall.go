package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
)

// The hall scenario (issue 51): a lecture hall behind one router. hallSize
// students from one address (127.0.1.1) join a class through its door
// within hallJoin, open their sockets, submit programs of their own at once
// (round 1) and resubmit each as soon as its result shows (round 2). Then
// a second address (127.0.1.2) floods: hallFlooders sessions resubmitting
// back to back; a student at a third address (127.0.1.3) checks once
// alone, before the flood, and once during it. What is measured: joins,
// sockets and checks refused (the goal is none), each round's median and
// slowest from submission to result, and the bystander's time alone and
// during the flood. The programs are the first of -burst-modules, each
// with a comment of its own, so that every check runs.

const (
	hallFlooders   = 50
	hallFloodWarm  = 2 * time.Second // the flood's lead before the bystander checks
	hallAddr       = 1               // 127.0.1.1: the hall
	floodAddr      = 2               // 127.0.1.2
	bystanderAddr  = 3               // 127.0.1.3
	hallCheckLimit = 120 * time.Second
)

// hallClient is an HTTP client from 127.0.1.k that follows no redirects.
func hallClient(k int) *http.Client {
	c := fromNet(1, k)
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

// hall measures a lecture hall on a fresh lab of kind t.
func (b *bench) hall(ctx context.Context, t target) (m metrics, err error) {
	mods, err := burstModulesOf(b.burstModules[:1])
	if err != nil {
		return nil, err
	}
	mod := mods[0]
	srv, stop, err := launch(ctx, t)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, stop()) }()
	code, err := createClass(ctx, srv, "Lecture hall")
	if err != nil {
		return nil, err
	}
	m = metrics{}

	// The door: the students come in evenly over nine tenths of hallJoin,
	// each a GET of the name form and a POST of the name, as a browser
	// does; all must have joined within hallJoin.
	hall := hallClient(hallAddr)
	n := b.hallSize
	ids := make([]string, n)
	var joinRefused atomic.Int64
	started := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			at := time.Duration(i) * b.hallJoin * 9 / 10 / time.Duration(n)
			select {
			case <-time.After(time.Until(started.Add(at))):
			case <-ctx.Done():
				return
			}
			id, err := joinDoor(ctx, hall, srv, code, fmt.Sprintf("Student %d", i+1))
			if err != nil {
				joinRefused.Add(1)
				fmt.Fprintf(b.stderr, "  hall: student %d at the door: %v\n", i+1, err)
				return
			}
			ids[i] = id
		})
	}
	wg.Wait()
	m["joins refused"] = float64(joinRefused.Load())
	m["joined within s"] = time.Since(started).Seconds()

	// The sockets, then the two rounds.
	wsClient := fromNet(1, hallAddr)
	conns := make([]*websocket.Conn, n)
	defer func() {
		for _, ws := range conns {
			if ws != nil {
				ws.CloseNow()
			}
		}
	}()
	var socketsRefused atomic.Int64
	_ = parallel(n, 32, func(i int) error {
		if ids[i] == "" {
			return nil
		}
		ws, err := dial(ctx, srv, ids[i], wsClient)
		if err == nil {
			_, err = readState(ctx, ws)
		}
		if err != nil {
			socketsRefused.Add(1)
			fmt.Fprintf(b.stderr, "  hall: student %d's socket: %v\n", i+1, err)
			return nil
		}
		conns[i] = ws
		return nil
	})
	m["sockets refused"] = float64(socketsRefused.Load())

	k := burstCount.Add(1)
	rounds := [2][]time.Duration{}
	var mu sync.Mutex
	var checksRefused, checksFailed atomic.Int64
	gate := make(chan struct{})
	for i, ws := range conns {
		if ws == nil {
			continue
		}
		wg.Go(func() {
			<-gate
			for round := range 2 {
				src := fmt.Sprintf("%s\n// hall %d, student %d, round %d\n", mod.source, k, i+1, round+1)
				took, refused, err := checkOnce(ctx, ws, src, mod.language, round+1)
				switch {
				case err != nil:
					checksFailed.Add(1)
					fmt.Fprintf(b.stderr, "  hall: student %d, round %d: %v\n", i+1, round+1, err)
					return
				case refused:
					checksRefused.Add(1)
					return
				}
				mu.Lock()
				rounds[round] = append(rounds[round], took)
				mu.Unlock()
			}
		})
	}
	close(gate)
	wg.Wait()
	m["checks refused"] = float64(checksRefused.Load())
	m["checks failed"] = float64(checksFailed.Load())
	for r, took := range rounds {
		slices.Sort(took)
		m[fmt.Sprintf("checks in round %d", r+1)] = float64(len(took))
		if len(took) > 0 {
			m[fmt.Sprintf("round %d median s", r+1)] = took[len(took)/2].Seconds()
			m[fmt.Sprintf("round %d slowest s", r+1)] = took[len(took)-1].Seconds()
		}
	}
	for _, ws := range conns {
		if ws != nil {
			ws.CloseNow()
		}
	}
	clear(conns)

	// The bystander alone, then during the flood.
	alone, err := bystander(ctx, srv, mod, fmt.Sprintf("// hall %d, bystander alone", k))
	if err != nil {
		return nil, fmt.Errorf("the bystander alone: %w", err)
	}
	m["bystander alone s"] = alone.Seconds()
	flooding, cancel := context.WithCancel(ctx)
	defer cancel()
	var floodChecks, floodRefused atomic.Int64
	floodErr := make(chan error, hallFlooders)
	floodClient := fromNet(1, floodAddr)
	for f := range hallFlooders {
		wg.Go(func() {
			ws, err := dial(flooding, srv, uuid.NewString(), floodClient)
			if err != nil {
				floodErr <- err
				return
			}
			defer ws.CloseNow()
			if _, err := readState(flooding, ws); err != nil {
				floodErr <- err
				return
			}
			for sub := 1; flooding.Err() == nil; {
				src := fmt.Sprintf("%s\n// hall %d, flood %d.%d\n", mod.source, k, f, sub)
				_, refused, err := checkOnce(flooding, ws, src, mod.language, sub)
				switch {
				case flooding.Err() != nil:
					return
				case err != nil:
					floodErr <- err
					return
				case refused:
					// Past the session's allowance: as a page would, wait
					// and send it again.
					floodRefused.Add(1)
					time.Sleep(time.Second)
					continue
				}
				floodChecks.Add(1)
				sub++
			}
		})
	}
	select {
	case <-time.After(hallFloodWarm):
	case <-ctx.Done():
	}
	during, err := bystander(ctx, srv, mod, fmt.Sprintf("// hall %d, bystander in the flood", k))
	cancel()
	wg.Wait()
	close(floodErr)
	if err != nil {
		return nil, fmt.Errorf("the bystander during the flood: %w", err)
	}
	for err := range floodErr {
		return nil, fmt.Errorf("the flood: %w", err)
	}
	m["bystander during the flood s"] = during.Seconds()
	m["flood checks"] = float64(floodChecks.Load())
	m["flood refusals"] = float64(floodRefused.Load())
	return m, nil
}

// bystander is one student at the third address who checks once: the time
// from submission to result.
func bystander(ctx context.Context, srv *server, mod burstModule, tail string) (time.Duration, error) {
	ws, err := dial(ctx, srv, uuid.NewString(), fromNet(1, bystanderAddr))
	if err != nil {
		return 0, err
	}
	defer ws.CloseNow()
	if _, err := readState(ctx, ws); err != nil {
		return 0, err
	}
	took, refused, err := checkOnce(ctx, ws, mod.source+"\n"+tail+"\n", mod.language, 1)
	if err == nil && refused {
		err = errors.New("refused")
	}
	return took, err
}

// checkOnce submits source as submission n of ws's session and waits for
// its result.
func checkOnce(ctx context.Context, ws *websocket.Conn, source, language string, n int) (took time.Duration, refused bool, err error) {
	frame, err := submitCodeFrame(source, language)
	if err != nil {
		return 0, false, err
	}
	ctx, cancel := context.WithTimeout(ctx, hallCheckLimit)
	defer cancel()
	t0 := time.Now()
	if err := send(ctx, ws, frame); err != nil {
		return 0, false, err
	}
	status, refused, err := awaitCheck(ctx, ws, n)
	if err == nil && !refused && (status == "" || status == "checking") {
		err = fmt.Errorf("no status: %q", status)
	}
	return time.Since(t0), refused, err
}

// createClass makes a class through the instructor API and returns its
// join code.
func createClass(ctx context.Context, srv *server, title string) (string, error) {
	body, _ := json.Marshal(map[string]string{"title": title})
	req, err := http.NewRequestWithContext(ctx, "POST", srv.base+"/api/classes", strings.NewReader(string(body)))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+instructorToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		Class struct {
			Code string `json:"code"`
		} `json:"class"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("creating a class: %d %v", resp.StatusCode, err)
	}
	return out.Class.Code, nil
}

var labLocation = regexp.MustCompile(`^/lab/([0-9a-f-]{36})$`)

// joinDoor joins the class of code as name, as a browser does: the name
// form, then the name. It returns the session's id.
func joinDoor(ctx context.Context, c *http.Client, srv *server, code, name string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", srv.base+"/j/"+code, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("the name form: %d", resp.StatusCode)
	}
	req, err = http.NewRequestWithContext(ctx, "POST", srv.base+"/j/"+code, strings.NewReader(url.Values{"name": {name}}.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = c.Do(req)
	if err != nil {
		return "", err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	loc := labLocation.FindStringSubmatch(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || loc == nil {
		return "", fmt.Errorf("joining: %d", resp.StatusCode)
	}
	return loc[1], nil
}

// hallRows are the scenario's lines of the tables.
func hallRows(b *bench) []row {
	h := func(metric string) row { return row{scenario: "hall", metric: metric} }
	goal0 := func(metric, headline string) row {
		return row{scenario: "hall", metric: metric, goal: goal{def: 0, onLab: true, text: "= 0"}, headline: headline}
	}
	return []row{
		goal0("joins refused", fmt.Sprintf("hall: %d students behind one address join through the door within %v, refused", b.hallSize, b.hallJoin)),
		{scenario: "hall", metric: "joined within s", goal: goal{def: b.hallJoin.Seconds(), onLab: true},
			headline: "hall: the last join done, s after the first began"},
		goal0("sockets refused", "hall: their sockets refused"),
		goal0("checks refused", "hall: their checks refused (two rounds)"),
		goal0("checks failed", "hall: their checks with no result"),
		h("checks in round 1"), h("checks in round 2"),
		h("round 1 median s"),
		{scenario: "hall", metric: "round 1 slowest s", goal: goal{def: 15, onLab: true},
			headline: "hall: round 1 (all at once), the slowest from submission to result, s"},
		h("round 2 median s"),
		{scenario: "hall", metric: "round 2 slowest s", goal: goal{def: 15, onLab: true},
			headline: "hall: round 2 (each on seeing its result), the slowest, s"},
		h("bystander alone s"),
		{scenario: "hall", metric: "bystander during the flood s", goal: goal{def: 3, onLab: true},
			headline: fmt.Sprintf("hall: a student at a third address checks once while %d sessions at a second resubmit back to back, s", hallFlooders)},
		h("flood checks"), h("flood refusals"),
	}
}
