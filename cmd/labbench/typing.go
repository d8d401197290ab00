package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
)

// The typing scenario (issue 52): students type while the compiler speaks.
// A compile frame of the lesson's module alone, five times, each a source
// of its own (the lab keeps recent compiles); then the class plain, and
// the class while typists (from one client address, a class behind one
// router) each send a compile of a different source once a second, as a
// page does at every pause in typing. Measured: a lone compile's time to
// its compiled frame, the typists' p50 and p99, how many were refused
// (error frames) or not answered before the typist's next one, and the
// class's last-tab p99 with the typists ÷ without.

// typingModule is the module typed: the lesson's ToolCall.res.
const typingModule = "internal/rescript/testdata/ToolCall.res"

// typingRun counts the scenario's runs, so that no run's sources are an
// earlier one's (kept by the lab).
var typingRun atomic.Int64

// compileFrameOf is a compile frame of source in ReScript.
func compileFrameOf(id int, source string) []byte {
	b, _ := json.Marshal(map[string]any{"type": "compile", "id": id, "language": "rescript", "source": source})
	return b
}

// liveAnswer is a compiled or error frame's id and type.
type liveAnswer struct {
	Type   string `json:"type"`
	ID     *int   `json:"id"`
	Error  string `json:"error"`
	Reason string `json:"reason"`
}

// awaitCompiled reads frames until the answer to compile id: a compiled
// frame (refused false) or an error frame with its id (refused true).
// Answers to older ids and state frames are skipped; late counts the
// older answers seen.
func awaitCompiled(ctx context.Context, ws *websocket.Conn, id int, late *atomic.Int64) (refused bool, err error) {
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			return false, err
		}
		var a liveAnswer
		if json.Unmarshal(data, &a) != nil || a.ID == nil {
			continue
		}
		switch {
		case *a.ID < id:
			late.Add(1)
		case *a.ID == id && a.Type == "compiled":
			if a.Error != "" {
				return false, fmt.Errorf("compile %d: %s", id, a.Error)
			}
			return false, nil
		case *a.ID == id && a.Type == "error":
			return true, nil
		}
	}
}

// typing measures on a fresh lab of kind t.
func (b *bench) typing(ctx context.Context, t target) (m metrics, err error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	src, err := os.ReadFile(filepath.Join(root, typingModule))
	if err != nil {
		return nil, err
	}
	run := typingRun.Add(1)
	srv, stop, err := launch(ctx, t)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, stop()) }()
	m = metrics{}

	// One compile alone, five times.
	ws, err := dial(ctx, srv, uuid.NewString(), fromAddr(2))
	if err != nil {
		return nil, err
	}
	defer ws.CloseNow()
	if _, err := readState(ctx, ws); err != nil {
		return nil, err
	}
	var lone samples
	var late atomic.Int64
	for i := range 5 {
		t0 := time.Now()
		if err := send(ctx, ws, compileFrameOf(i, fmt.Sprintf("%s// run %d, alone %d\n", src, run, i))); err != nil {
			return nil, err
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		refused, err := awaitCompiled(rctx, ws, i, &late)
		cancel()
		if err != nil || refused {
			return nil, fmt.Errorf("a lone compile: refused %v, %w", refused, err)
		}
		lone.add(time.Since(t0))
		time.Sleep(200 * time.Millisecond)
	}
	m["lone compile ms"] = lone.ms(50)

	shape := classShape{sessions: b.sessions, tabs: b.tabs, interval: b.interval, duration: b.classDuration}
	plain, err := b.class(ctx, srv, shape)
	if err != nil {
		return nil, fmt.Errorf("class, plain: %w", err)
	}
	m["last-tab p99 ms, plain"] = plain.last.ms(99)

	typing, cancel := context.WithCancel(ctx)
	var took samples
	var sent, refused, unanswered atomic.Int64
	var typeErr error
	var once sync.Once
	var wg sync.WaitGroup
	client := fromAddr(3)
	for k := range b.typists {
		wg.Go(func() {
			fail := func(err error) {
				if typing.Err() == nil {
					once.Do(func() { typeErr = err })
				}
			}
			ws, err := dial(typing, srv, uuid.NewString(), client)
			if err != nil {
				fail(err)
				return
			}
			defer ws.CloseNow()
			if _, err := readState(typing, ws); err != nil {
				fail(err)
				return
			}
			answers := make(chan liveAnswer, 64)
			go func() {
				defer close(answers)
				for {
					_, data, err := ws.Read(typing)
					if err != nil {
						return
					}
					var a liveAnswer
					if json.Unmarshal(data, &a) == nil && a.ID != nil {
						answers <- a
					}
				}
			}()
			// Typists start spread over the first second.
			next := time.Now().Add(time.Duration(k) * time.Second / time.Duration(b.typists))
			for i := 0; ; i++ {
				select {
				case <-typing.Done():
					return
				case <-time.After(time.Until(next)):
				}
				next = next.Add(time.Second)
				t0 := time.Now()
				if err := send(typing, ws, compileFrameOf(i, fmt.Sprintf("%s// run %d, typist %d, pause %d\n", src, run, k, i))); err != nil {
					fail(err)
					return
				}
				sent.Add(1)
				// Wait for its answer until the next pause; a read whose
				// context ends closes the connection, so one goroutine
				// reads them all (answers).
				wait := time.NewTimer(time.Until(next))
				no, answered := false, false
				for !answered {
					select {
					case a, ok := <-answers:
						switch {
						case !ok:
							wait.Stop()
							if typing.Err() == nil {
								fail(errors.New("the connection closed"))
							} else {
								sent.Add(-1)
							}
							return
						case *a.ID < i:
							late.Add(1)
						case a.Type == "compiled" && a.Error != "":
							wait.Stop()
							fail(fmt.Errorf("compile %d: %s", i, a.Error))
							return
						default:
							no, answered = a.Type == "error", true
						}
					case <-wait.C:
						unanswered.Add(1)
						answered, no = true, false
						t0 = time.Time{}
					case <-typing.Done():
						wait.Stop()
						sent.Add(-1) // cut by the end of the run, not the lab
						return
					}
				}
				wait.Stop()
				switch {
				case t0.IsZero():
				case no:
					refused.Add(1)
				default:
					took.add(time.Since(t0))
				}
			}
		})
	}
	with, err := b.class(ctx, srv, shape)
	cancel()
	wg.Wait()
	if err != nil {
		return nil, fmt.Errorf("class with typists: %w", err)
	}
	if typeErr != nil {
		return nil, fmt.Errorf("typists: %w", typeErr)
	}
	m["last-tab p99 ms, typing"] = with.last.ms(99)
	m["typing p50 ms"] = took.ms(50)
	m["typing p99 ms"] = took.ms(99)
	m["typing compiles sent"] = float64(sent.Load())
	m["typing refused"] = float64(refused.Load())
	m["typing not answered within 1 s"] = float64(unanswered.Load())
	return m, nil
}

// typingRows are the scenario's lines of the tables.
func typingRows(b *bench) []row {
	classRatio := func(r results, server string) (float64, bool) {
		with, ok1 := r.median("typing", server, "last-tab p99 ms, typing")
		without, ok2 := r.median("typing", server, "last-tab p99 ms, plain")
		if !ok1 || !ok2 || without == 0 {
			return 0, false
		}
		return with / without, true
	}
	return []row{
		{scenario: "typing", metric: "lone compile ms", goal: goal{def: 300, onLab: true},
			headline: "typing: a live compile of the lesson's module alone, to its compiled frame, ms"},
		{scenario: "typing", metric: "typing p50 ms"},
		{scenario: "typing", metric: "typing p99 ms", goal: goal{def: 500, onLab: true},
			headline: fmt.Sprintf("typing: %d students each compiling a different source once a second beside the class, p99 ms", b.typists)},
		{scenario: "typing", metric: "typing compiles sent"},
		{scenario: "typing", metric: "typing refused", goal: goal{def: 0, onLab: true},
			headline: "typing: live compiles refused"},
		{scenario: "typing", metric: "typing not answered within 1 s"},
		{scenario: "typing", metric: "last-tab p99 ms, plain"},
		{scenario: "typing", metric: "last-tab p99 ms, typing"},
		{scenario: "typing", metric: "typing ÷ plain", goal: goal{def: 1.5, onLab: true}, derived: classRatio,
			headline: "typing: the class's last-tab p99 while students type ÷ without"},
	}
}
