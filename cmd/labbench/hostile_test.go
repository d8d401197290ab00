package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	labserver "github.com/toolcall-lab/lab/server"
)

// TestHostileFlags: the scenario is asked for by name, not run by
// default, and -short makes it a check or two on one session.
func TestHostileFlags(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	env := func(string) string { return "" }
	b, err := parseFlags([]string{"labbench"}, env, &stderr)
	if err != nil || slices.Contains(b.scenarios, "hostile") {
		t.Fatalf("defaults: %v, %v", b.scenarios, err)
	}
	b, err = parseFlags([]string{"labbench", "-scenarios", "hostile"}, env, &stderr)
	if err != nil || !slices.Equal(b.scenarios, []string{"hostile"}) || b.hostileSessions != 10 || !b.hostileEvery {
		t.Fatalf("-scenarios hostile: %+v, %v", b, err)
	}
	b, err = parseFlags([]string{"labbench", "-short", "-scenarios", "hostile"}, env, &stderr)
	if err != nil || b.hostileSessions != 1 || b.hostileEvery || b.classDuration >= time.Second {
		t.Fatalf("-short: %+v, %v", b, err)
	}
	if code := run(context.Background(), []string{"labbench", "-scenarios", "hostile", "-hostile-sessions", "0"}, env, &stderr, &stderr); code != 2 {
		t.Fatalf("-hostile-sessions 0: exit %d, stderr %q", code, stderr.String())
	}
}

// TestHostilePrograms: the bench finds the hostile programs of the
// module, every one a submission the lab takes (at most 64 KiB).
func TestHostilePrograms(t *testing.T) {
	t.Parallel()
	progs, err := hostilePrograms()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range progs {
		names = append(names, p.name)
		if p.source == "" || len(p.source) > 64<<10 {
			t.Errorf("%s: %d bytes", p.name, len(p.source))
		}
	}
	for _, want := range []string{"loop.js", "alloc.js", "recursion.js", "throw.js", "getter.js", "cyclic.js", "bigstring.js"} {
		if !slices.Contains(names, want) {
			t.Errorf("no %s among %v", want, names)
		}
	}
}

// TestHostileStudent drives the hostile student against the lab itself:
// each program handed out is checked once and ends as status "error",
// and a submission past the session's allowance is seen as refused.
func TestHostileStudent(t *testing.T) {
	t.Parallel()
	progs, err := hostilePrograms()
	if err != nil {
		t.Fatal(err)
	}
	// Two of the quick ones that end as errors: a top level that runs too
	// long and a cyclic view (throw.js fails first at a deadline it ignores).
	progs = slices.DeleteFunc(progs, func(p hostileProgram) bool { return p.name != "toplevel.js" && p.name != "cyclic.js" })
	if len(progs) != 2 {
		t.Fatalf("programs: %v", progs)
	}
	srv := startLab(t, labserver.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Stopped before it starts, it still checks every program once.
	h := &hostileStudent{programs: progs, every: true, stop: make(chan struct{})}
	close(h.stop)
	if err := h.session(ctx, srv); err != nil {
		t.Fatal(err)
	}
	if len(h.checks) != len(progs) {
		t.Fatalf("checks %+v, want one per program", h.checks)
	}
	for i, c := range h.checks {
		if c.program != progs[i].name || c.status != "error" || c.took <= 0 {
			t.Errorf("check %d: %+v", i, c)
		}
	}
	if _, ok := (&hostileStudent{programs: progs, stop: h.stop}).take(); ok {
		t.Error("a student not asked for every program went on past stop")
	}

	// The allowance is ten at once; the eleventh is refused.
	ws, err := dial(ctx, srv, uuid.NewString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	if _, err := readState(ctx, ws); err != nil {
		t.Fatal(err)
	}
	// Sent at once, so that no check's time refills the allowance (one
	// a second) before the last is decided.
	frame, _ := json.Marshal(map[string]string{"type": "submitCode", "source": progs[0].source})
	for n := 1; n <= codeSessionBurst+1; n++ {
		if err := send(ctx, ws, frame); err != nil {
			t.Fatal(err)
		}
	}
	// The results of the first ten may come before the refusal (the
	// program's outcome is kept from its check above): what matters is
	// that the eleventh is refused, not checked.
	if _, refused, err := awaitCheck(ctx, ws, codeSessionBurst+1); err != nil || !refused {
		t.Fatalf("submission %d: refused %v (want true), %v", codeSessionBurst+1, refused, err)
	}
}

// TestProcSampler: the sampler sees a child of the process it watches,
// with its peak RSS.
func TestProcSampler(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep to start: %v", err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	p, err := newProcSampler(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for range 100 { // until exec has replaced the fork's memory with sleep's
		p.sample()
		if c := p.children[cmd.Process.Pid]; c != nil && c.hwm > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	c := p.children[cmd.Process.Pid]
	if c == nil || c.hwm <= 0 || p.before <= 0 || p.sumPeak <= c.hwm {
		t.Fatalf("child %+v, sampler %+v", c, p)
	}
}

// TestHostileRows: the ratio with ÷ without and the RSS growths are
// judged against their goals in the first table.
func TestHostileRows(t *testing.T) {
	t.Parallel()
	r := results{}
	for _, m := range []metrics{
		{"last-tab p99 ms, plain": 10, "last-tab p99 ms, hostile": 12, "lab RSS growth MB": 5, "lab + sandbox RSS growth MB": 120, "hostile checks": 9, "hostile checks ending as error": 9},
		{"last-tab p99 ms, plain": 10, "last-tab p99 ms, hostile": 30, "lab RSS growth MB": 4, "lab + sandbox RSS growth MB": 90},
		{"last-tab p99 ms, plain": 10, "last-tab p99 ms, hostile": 14, "lab RSS growth MB": 6, "lab + sandbox RSS growth MB": 95},
	} {
		r.add("hostile", "default", m)
	}
	var out strings.Builder
	r.print(&out, &bench{labs: []string{"default"}, hostileSessions: 10})
	got := out.String()
	for pattern, want := range map[string]string{
		`with them ÷ without.*`:      "lab ≤ 1.5 1.4 met",
		`the lab's RSS growth, MB.*`: "lab ≤ 100 5 met",
		`sandbox's peak, growth.*`:   "lab ≤ 100 95 met",
		`hostile ÷ plain.*`:          "1.4 -",
		`ending as error.*`:          "9 -",
	} {
		lines := regexp.MustCompile(pattern).FindAllString(got, -1)
		if len(lines) != 1 || !strings.Contains(strings.Join(strings.Fields(lines[0]), " "), want) {
			t.Errorf("%s: %q, want %q in:\n%s", pattern, lines, want, got)
		}
	}
}
