package jsclient

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolcall-lab/lab/model"
)

// perCallCheck is the check as the lab played it before issue 42: a round
// trip to the sandbox per call of the module.
func perCallCheck(t *testing.T, src string, seed uint64, cases []model.Case) model.Result {
	t.Helper()
	newClient, s, err := Load(context.Background(), src, Budget{})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	defer s.Close()
	return model.Check(newClient, seed, cases)
}

// loadFails says whether src's Load fails (the same Load either way: a
// top level that never ends is refused before any check).
func loadFails(src string) bool {
	_, s, err := Load(context.Background(), src, Budget{})
	if err == nil {
		s.Close()
	}
	return err != nil
}

// inSandboxCheck is the check in one request (Submission.Check).
func inSandboxCheck(t *testing.T, src string, seed uint64, cases []model.Case) (model.Result, *Submission) {
	t.Helper()
	_, s, err := Load(context.Background(), src, Budget{})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	defer s.Close()
	res, err := s.Check(context.Background(), seed, cases)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	return res, s
}

// spent says whether a check stopped because the program used its whole
// budget.
func spent(r model.Result) bool {
	return strings.Contains(r.Error, "the program has used all of its") || strings.Contains(r.Error, "The program has used all of its")
}

// timedOut reports whether one call of the program ran past its time.
func timedOut(r model.Result) bool {
	return strings.Contains(r.Error, " ran for more than ")
}

// interruptedAt is the place an interrupted call was stopped at.
var interruptedAt = regexp.MustCompile(`stopped at line \d+, column \d+`)

// TestCheckInSandboxIsTheSame: for every test module (the seed's, a
// correct one, each wrong one and each hostile one), two seeds, with and
// without an instructor's case, the check run in the sandbox gives the
// Result the old round trip per call gives, to the byte of its JSON (for
// a hostile program, but for where in its loop an interrupt stopped it).
func TestCheckInSandboxIsTheSame(t *testing.T) {
	files := []string{"ToolCall.res.js", "correct.js"}
	for _, dir := range []string{"wrong", "hostile"} {
		m, _ := filepath.Glob(filepath.Join("testdata", dir, "*.js"))
		for _, f := range m {
			files = append(files, strings.TrimPrefix(f, "testdata/"))
		}
	}
	if len(files) < 2+10+9 {
		t.Fatalf("only %d test modules", len(files))
	}
	own := []model.Case{{Name: "the first final stays", Frames: model.Trace{
		{Kind: model.QueueReply, Raw: `{"runId":"run-1","callId":"lookup","kind":"completed","output":"A"}`},
		{Kind: model.QueueReply, Raw: `{"runId":"run-1","callId":"lookup","kind":"completed","output":""}`},
		{Kind: model.Deliver, Message: 1}, {Kind: model.Deliver, Message: 2},
	}}}
	statuses := map[string]int{}
	for _, f := range files {
		hostile := strings.HasPrefix(f, "hostile/")
		runs := []struct {
			seed  uint64
			cases []model.Case
		}{{7, nil}, {1 << 40, own}}
		if hostile {
			runs = runs[:1] // each spends up to its whole budget
		}
		src := read(t, f)
		if loadFails(src) {
			statuses["load error"]++
			continue
		}
		for _, r := range runs {
			began := time.Now()
			want := perCallCheck(t, src, r.seed, r.cases)
			old := time.Since(began)
			began = time.Now()
			got, s := inSandboxCheck(t, src, r.seed, r.cases)
			took := time.Since(began)
			if hostile && (spent(want) || spent(got)) {
				// Where a program's 2 s of CPU run out (recursion.js, slow
				// under -race) is the machine's timing, whichever way the
				// check runs, and so is how far it got: whether it got to a
				// failing case first too, when only one of the two ran out.
				if spent(want) == spent(got) && want.Status != got.Status {
					t.Errorf("%s: %s in the sandbox, %s per call", f, got.Status, want.Status)
				}
				t.Logf("%s: ran out of time (in the sandbox %v, per call %v): not compared further", f, spent(got), spent(want))
				continue
			}
			wj, _ := json.Marshal(want)
			gj, _ := json.Marshal(got)
			if hostile {
				// Where an interrupt lands in a loop is the machine's
				// timing, whichever way the check is run.
				wj, gj = interruptedAt.ReplaceAll(wj, nil), interruptedAt.ReplaceAll(gj, nil)
			}
			if string(wj) != string(gj) && hostile && (timedOut(want) || timedOut(got)) {
				// Which call first runs past its 50 ms (bigstring.js's 10 MB
				// view on a loaded machine) is the machine's timing too.
				if want.Status != got.Status {
					t.Errorf("%s: %s in the sandbox, %s per call", f, got.Status, want.Status)
				}
				t.Logf("%s: a call ran out of time: not compared further", f)
				continue
			}
			if string(wj) != string(gj) {
				t.Errorf("%s, seed %d, %d own cases:\n in the sandbox %s\n per call      %s", f, r.seed, len(r.cases), gj, wj)
				continue
			}
			statuses[want.Status]++
			t.Logf("%s, seed %d: %s, %d of %d (per call %v, in the sandbox %v, replayed %v)", f, r.seed, want.Status, want.Passed, want.Cases,
				old.Round(time.Millisecond), took.Round(time.Millisecond), s.Replayed())
		}
	}
	if statuses[model.CodePassed] == 0 || statuses[model.CodeFailed] == 0 || statuses[model.CodeError] == 0 {
		t.Fatalf("statuses %v: want some of each", statuses)
	}
}

// TestCheckReplaysWhenTheSandboxEnds: a sandbox that ends in the middle of
// a check (here killed from outside while stopped) has the check played
// again a round trip per call, which gives the Result of the old path.
func TestCheckReplaysWhenTheSandboxEnds(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	src := read(t, "wrong/last-final-wins.js")
	want := perCallCheck(t, src, 7, nil)
	_, s, err := Load(context.Background(), src, Budget{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	proc := s.cmd.Process
	if err := proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	killed := time.AfterFunc(200*time.Millisecond, func() { proc.Kill() })
	defer killed.Stop()
	got, err := s.Check(context.Background(), 7, nil)
	if err != nil {
		t.Fatal(err)
	}
	wj, _ := json.Marshal(want)
	gj, _ := json.Marshal(got)
	if !s.Replayed() || string(wj) != string(gj) {
		t.Fatalf("replayed %v:\n got  %s\n want %s", s.Replayed(), gj, wj)
	}
}

// TestCheckIsKilledPastItsAllowance: the lab kills a checking sandbox
// once it has used the program's budget plus the allowance of CPU (here
// an allowance below nothing, so that the sandbox passes it long before
// the program spends its budget), then replays the check.
func TestCheckIsKilledPastItsAllowance(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	// A call may take the whole budget: under -race on a busy machine one
	// call of slow.js can pass the default 50 ms, which would end the
	// check as a slow call before the allowance is passed.
	_, s, err := Load(context.Background(), read(t, "slow.js"), Budget{Total: time.Second, PerCall: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.allowance = -600 * time.Millisecond
	res, err := s.Check(context.Background(), 7, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Replayed() || res.Status != model.CodeError || !strings.Contains(res.Error, "used all of its 1s") {
		t.Fatalf("replayed %v, %s: %s", s.Replayed(), res.Status, res.Error)
	}
}

// TestCheckStopsAtItsDeadline: a check whose context ends (the check's
// wall deadline) kills its sandbox and says so, even one kept off the
// cores (here stopped).
func TestCheckStopsAtItsDeadline(t *testing.T) {
	_, s, err := Load(context.Background(), read(t, "ToolCall.res.js"), Budget{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	_, err = s.Check(ctx, 7, nil)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(began) > 5*time.Second {
		t.Fatalf("Check = %v after %v, want the deadline", err, time.Since(began))
	}
	if s.Replayed() {
		t.Fatal("a check stopped at its deadline was replayed")
	}
}
