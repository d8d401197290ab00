package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/toolcall-lab/lab/server"
)

// A lecture hall behind one router (docs/limits.md, "Who pays"): checks are
// shared out in turn between addresses (and classes), not refused, and a
// class's members count as people, not as the one address they share.

// wsSubmit sends source as a submitCode frame on ws and reads until its
// submission n shows a result, or an error frame; it is for goroutines
// (no t.Fatal).
func wsSubmit(ctx context.Context, ws *websocket.Conn, source string, n int) error {
	if err := ws.Write(ctx, websocket.MessageText, []byte(submitFrame(source))); err != nil {
		return err
	}
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			return err
		}
		var f struct {
			Type  string `json:"type"`
			Error string `json:"error"`
			Code  *struct {
				Submission int    `json:"submission"`
				Status     string `json:"status"`
			} `json:"code"`
		}
		if err := json.Unmarshal(data, &f); err != nil {
			return err
		}
		if f.Type == "error" {
			return fmt.Errorf("refused: %s", f.Error)
		}
		if f.Code != nil && f.Code.Submission == n && f.Code.Status != "checking" {
			return nil
		}
	}
}

// TestChecksTakeTurnsAcrossAddresses: ten sessions at one address resubmit
// a check as soon as each result shows; a student at another address
// submits once meanwhile. With one worker, the line serves the two
// addresses in turn: the bystander waits for the check under way and at
// most one more of the flood's, not for the flood's ten (as it would in a
// line served in order of arrival), and nobody is refused.
func TestChecksTakeTurnsAcrossAddresses(t *testing.T) {
	t.Parallel()
	_, ts := runLab(t, server.Config{CodeWorkers: 1})
	module := testdata(t, "ToolCall.res.js")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const flooders = 10
	var done atomic.Int64 // the flood's checks that ended
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, flooders)
	for i := range flooders {
		ws, _, err := dialFrom(t, ts, newID(), "127.0.0.2", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ws.CloseNow() })
		ws.SetReadLimit(8 << 20)
		wg.Go(func() {
			for n := 1; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				// A comment of its own: no check is answered from an
				// earlier one.
				if err := wsSubmit(ctx, ws, fmt.Sprintf("%s\n// flood %d.%d\n", module, i, n), n); err != nil {
					errs <- fmt.Errorf("flooder %d, submission %d: %w", i, n, err)
					return
				}
				done.Add(1)
			}
		})
	}
	// Let the flood fill the line.
	for done.Load() < flooders {
		time.Sleep(10 * time.Millisecond)
	}
	ws, _, err := dialFrom(t, ts, newID(), "127.0.0.3", nil)
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(8 << 20)
	t.Cleanup(func() { ws.CloseNow() })
	if _, _, err := ws.Read(ctx); err != nil { // its state
		t.Fatal(err)
	}
	before := done.Load()
	if err := wsSubmit(ctx, ws, module+"\n// the bystander\n", 1); err != nil {
		t.Fatal(err)
	}
	waited := done.Load() - before
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// The check under way when it arrived, and the flood's turn before its
	// own at most; one more for a result on its way while it submitted.
	if waited > 3 {
		t.Fatalf("the bystander waited for %d of the flood's checks; taking turns, at most 3", waited)
	}
	t.Logf("the bystander waited for %d of the flood's checks", waited)
}

// TestClassMembersCountAsPeople: with room for two WebSockets and two new
// ones at once per address, 250 students behind one address join a class
// through its door (500 requests, past a lone address's 200 joins at once)
// and each opens a socket: all get in, counted in their class, sized by
// its members; two open-lab tabs from that address still fill its own
// allowance, and a third is refused.
func TestClassMembersCountAsPeople(t *testing.T) {
	t.Parallel()
	ts := runInstructorLab(t, server.Config{MaxAddrConns: 2, AddrConnRate: 0.01})
	cl := createClass(t, ts, "Hall")
	const students = 250
	ids := make([]string, students)
	var mu sync.Mutex
	var failures []string
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range students {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			c := browserClient(t, "127.0.0.4")
			status, _, _ := getPage(t, c, ts, "/j/"+cl.Code)
			if status != http.StatusOK {
				mu.Lock()
				failures = append(failures, fmt.Sprintf("student %d's name form: %d", i, status))
				mu.Unlock()
				return
			}
			status, loc, body := joinAs(t, c, ts, cl.Code, fmt.Sprintf("Student %d", i))
			m := labPath.FindStringSubmatch(loc)
			if status != http.StatusSeeOther || m == nil {
				mu.Lock()
				failures = append(failures, fmt.Sprintf("student %d joined with %d: %.200s", i, status, body))
				mu.Unlock()
				return
			}
			ids[i] = m[1]
		})
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d of %d refused at the door, first: %s", len(failures), students, failures[0])
	}
	for i, id := range ids {
		ws, resp, err := dialFrom(t, ts, id, "127.0.0.4", nil)
		if err != nil {
			status := 0
			if resp != nil {
				status = resp.StatusCode
			}
			t.Fatalf("student %d's socket: %d %v", i, status, err)
		}
		t.Cleanup(func() { ws.CloseNow() })
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, data, err := ws.Read(ctx)
		cancel()
		if err != nil || !strings.Contains(string(data), `"type":"state"`) {
			t.Fatalf("student %d's first frame: %.200s %v", i, data, err)
		}
	}
	// The open lab from the same address: its own allowance, untouched by
	// the class, and still kept.
	for i := range 3 {
		ws, resp, err := dialFrom(t, ts, newID(), "127.0.0.4", nil)
		if i < 2 {
			if err != nil {
				t.Fatalf("open-lab tab %d refused: %v", i+1, err)
			}
			t.Cleanup(func() { ws.CloseNow() })
			continue
		}
		if err == nil {
			ws.CloseNow()
			t.Fatal("a third open-lab tab got in past the address's 2")
		}
		if resp == nil || resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("a third open-lab tab: %v %v", resp, err)
		}
	}
}

// TestOpenLabHallFromOneAddress: 200 students behind one address open `/`
// (the open lab, no class) within seconds: each gets a session of its own
// that stores its first change, with the default allowances.
func TestOpenLabHallFromOneAddress(t *testing.T) {
	t.Parallel()
	_, ts := runLab(t, server.Config{})
	c := from(t, "127.0.0.5")
	const students = 200
	var wg sync.WaitGroup
	errs := make(chan error, students)
	sem := make(chan struct{}, 16)
	for i := range students {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			resp, err := c.Get(ts.URL + "/")
			if err != nil {
				errs <- err
				return
			}
			resp.Body.Close()
			loc := strings.TrimPrefix(resp.Header.Get("Location"), "/lab/")
			if resp.StatusCode != http.StatusSeeOther || len(loc) != 36 {
				errs <- fmt.Errorf("student %d: / answered %d %q", i, resp.StatusCode, loc)
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			ws, _, err := dialFrom(t, ts, loc, "127.0.0.5", nil)
			if err != nil {
				errs <- fmt.Errorf("student %d's socket: %w", i, err)
				return
			}
			defer ws.CloseNow()
			if _, _, err := ws.Read(ctx); err != nil {
				errs <- err
				return
			}
			if err := ws.Write(ctx, websocket.MessageText, []byte(`{"type":"start"}`)); err != nil {
				errs <- err
				return
			}
			_, data, err := ws.Read(ctx)
			if err != nil || !strings.Contains(string(data), `"type":"state"`) {
				errs <- fmt.Errorf("student %d's first change: %.200s %v", i, data, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
