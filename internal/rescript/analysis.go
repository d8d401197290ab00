package rescript

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/toolcall-lab/lab/internal/idle"
	"github.com/toolcall-lab/lab/model"
)

// The compiler while a student types (issue 52): what it says of the
// editor's text at every pause, and the type of the name under the
// pointer, from rescript-editor-analysis.exe (npm's rescript ships it
// beside bsc.exe) reading the .cmt the compile leaves.
//
// A live compile costs what a compile costs (bsc.exe: about 30 ms of CPU
// for the lesson's module), but a class types all the time, so what a
// check's compile pays besides (a new sandbox process, a temporary
// directory made and removed) is paid once here: a Live keeps a few
// sandboxes (helpers) running, each with a prepared work directory of its
// own, and hands each job to one. A helper is the lab's executable again
// (LAB_RESCRIPT_LIVE), capped exactly as a compile's sandbox is, CPU
// aside (LiveCPU), at SCHED_IDLE, in a process group of its own, with an
// empty environment; the caps pass to every bsc.exe and analysis it
// starts, each of which is a process of its own with its own CPU clock.
// A job over the wall deadline (LiveWall), or whose caller gives up, ends
// its helper's whole group; a new one is started for the next job.
// Between jobs a helper deletes what the last one wrote, so one student's
// types never answer another's pointer.

// The caps of a live job (docs/code.md, "Live diagnostics").
const (
	// LiveCPU is the CPU time each compiler and analysis process of a
	// live job may use: a live compile of a program the check's compile
	// (CompileCPU) would take seconds on is stopped sooner; Check still
	// builds it.
	LiveCPU = time.Second
	// LiveWall bounds a live job on the wall clock, waiting for a core
	// included.
	LiveWall = 5 * time.Second
	// maxTypes caps the .cmt a compile's answer carries back (the
	// lesson's is 32 KB): a larger one is not kept, and a typeAt compiles
	// again.
	maxTypes = 1 << 20
	// maxTypeText caps the type a hover says.
	maxTypeText = 2 << 10
	// maxJobs is how many jobs a helper does before it is replaced: its
	// own CPU clock counts towards LiveCPU too.
	maxJobs = 200
)

// analysisName is the analysis binary's name, beside bsc.exe.
const analysisName = "rescript-editor-analysis.exe"

// analysisBeside is the analysis binary beside bsc, "" if there is none
// that can be run.
func analysisBeside(bsc string) string {
	p := filepath.Join(filepath.Dir(bsc), analysisName)
	if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return ""
	}
	return p
}

// Types says whether the compiler can say the type under the pointer
// (its analysis binary was found).
func (c *Compiler) Types() bool { return c.analysis != "" }

// LiveJob is what a live job asks: the diagnostics of Source, and with At
// the type at line, column (1-based, as diagnostics are). Types, when
// given, is the .cmt an earlier compile of the same Source left
// (LiveOutput.Types): the job then does not compile.
type LiveJob struct {
	Source       string
	Types        []byte
	At           bool
	Line, Column int
}

// LiveOutput is a live job's answer: what the compiler said (when it
// compiled), the .cmt it left (nil when too large or none), and the type
// at the place asked ("" where nothing has one).
type LiveOutput struct {
	Diagnostics []model.Diagnostic
	Refused     bool
	Compiled    bool
	Types       []byte
	Type        string
}

// Live runs live jobs on up to n helpers at once. Safe for concurrent
// use; Close ends its helpers.
//
// Ownership: idle holds the helpers not running a job (a helper is owned
// by the goroutine that took it until it puts it back or ends it); mu
// guards started and closed. No I/O under mu.
type Live struct {
	c    *Compiler
	idle chan *helper // free helpers; nil entries are places for new ones
	mu   sync.Mutex
	// started are the helpers alive (idle or running), for Close.
	started map[*helper]struct{}
	closed  bool
}

// Live returns n places for live jobs (at least 1).
func (c *Compiler) Live(n int) *Live {
	n = max(n, 1)
	l := &Live{c: c, idle: make(chan *helper, n), started: make(map[*helper]struct{})}
	for range n {
		l.idle <- nil
	}
	return l
}

// ErrClosed is a job asked of a Live after Close.
var ErrClosed = errors.New("the live compiler is closed")

// Run does one job, waiting for a place. The error is an *Error for a
// job that did not end with the compiler's answer, ctx's, or ErrClosed.
func (l *Live) Run(ctx context.Context, j LiveJob) (LiveOutput, error) {
	if len(j.Source) > model.MaxSourceBytes {
		return LiveOutput{}, &Error{TooLarge, fmt.Sprintf("The program has %d bytes; at most %d can be compiled.", len(j.Source), model.MaxSourceBytes)}
	}
	if j.At && l.c.analysis == "" {
		j.At = false // no analysis: no type anywhere
	}
	var h *helper
	select {
	case h = <-l.idle:
	case <-ctx.Done():
		return LiveOutput{}, ctx.Err()
	}
	if h == nil || h.jobs >= maxJobs {
		l.end(h)
		var err error
		if h, err = l.start(); err != nil {
			l.idle <- nil
			return LiveOutput{}, err
		}
	}
	out, err := h.run(ctx, j)
	if err != nil {
		// A helper that did not answer is ended with its group: whatever
		// it was doing, the next job gets a fresh one.
		l.end(h)
		l.idle <- nil
		return LiveOutput{}, err
	}
	l.idle <- h
	return out, nil
}

// Close ends every helper; a job under way ends with an error.
func (l *Live) Close() {
	l.mu.Lock()
	l.closed = true
	hs := make([]*helper, 0, len(l.started))
	for h := range l.started {
		hs = append(hs, h)
	}
	l.mu.Unlock()
	for _, h := range hs {
		h.kill()
	}
	for range cap(l.idle) {
		l.end(<-l.idle)
	}
	for range cap(l.idle) {
		l.idle <- nil // a job asked from now on is refused by start
	}
}

// start starts a helper in a work directory of its own.
func (l *Live) start() (*helper, error) {
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding the lab's executable: %w", err)
	}
	if err := os.MkdirAll(os.TempDir(), 0o700); err != nil {
		return nil, fmt.Errorf("the live compiler's directory: %w", err)
	}
	dir, err := os.MkdirTemp("", "lab-rescript-live-")
	if err != nil {
		return nil, fmt.Errorf("the live compiler's directory: %w", err)
	}
	if err := prepare(dir); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	spec, err := json.Marshal(liveSpec{Bin: l.c.bin, Analysis: l.c.analysis, Runtime: l.c.runtime, Dir: dir})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = []string{liveEnv + "=" + string(spec)}
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cmd.Stderr = &capped{w: io.Discard, n: 0}
	if err := idle.Start(cmd); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting the live compiler's sandbox: %w", err)
	}
	h := &helper{cmd: cmd, in: stdin, out: bufio.NewReaderSize(stdout, 64<<10), dir: dir}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		h.kill()
		h.wait()
		return nil, ErrClosed
	}
	l.started[h] = struct{}{}
	l.mu.Unlock()
	return h, nil
}

// end ends h (nil: nothing) and forgets it.
func (l *Live) end(h *helper) {
	if h == nil {
		return
	}
	h.kill()
	h.wait()
	l.mu.Lock()
	delete(l.started, h)
	l.mu.Unlock()
}

// prepare makes dir a project the compiler and the analysis recognise:
// the lesson's rescript.json, and lib/bs for the .cmt the analysis reads.
func prepare(dir string) error {
	if err := os.WriteFile(filepath.Join(dir, "rescript.json"), []byte(rescriptJSON), 0o600); err != nil {
		return err
	}
	return os.MkdirAll(filepath.Join(dir, "lib", "bs"), 0o700)
}

// helper is one running live sandbox: its process, the pipes to it, and
// its work directory.
type helper struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	dir  string
	jobs int
}

// maxAnswer caps a helper's answer line: the messages, a .cmt in base64,
// a type.
const maxAnswer = maxMessages*2 + maxTypes*4/3 + 64<<10

// run sends j and reads the answer, ending the helper's group when the
// wall deadline passes or ctx ends first.
func (h *helper) run(ctx context.Context, j LiveJob) (LiveOutput, error) {
	h.jobs++
	ctx, cancel := context.WithTimeout(ctx, LiveWall)
	defer cancel()
	stop := context.AfterFunc(ctx, h.kill)
	defer stop()
	line, err := json.Marshal(liveAsk(j))
	if err != nil {
		return LiveOutput{}, err
	}
	if _, err := h.in.Write(append(line, '\n')); err != nil {
		return LiveOutput{}, h.why(ctx, err)
	}
	b, err := readLine(h.out, maxAnswer)
	if err != nil {
		return LiveOutput{}, h.why(ctx, err)
	}
	var a liveAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		return LiveOutput{}, fmt.Errorf("the live compiler's answer: %w", err)
	}
	if a.Kind != 0 {
		return LiveOutput{}, &Error{a.Kind, a.Message}
	}
	return LiveOutput{Diagnostics: a.Diagnostics, Refused: a.Refused, Compiled: a.Compiled, Types: a.Types, Type: a.Type}, nil
}

// why says why a helper did not answer: the wall deadline, ctx, or the
// helper's end.
func (h *helper) why(ctx context.Context, err error) error {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return &Error{TooLong, fmt.Sprintf("The compiler took longer than %v on this program and was stopped.", LiveWall)}
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return fmt.Errorf("the live compiler's sandbox ended: %w", err)
}

// kill ends the helper's process group: the helper and what it runs.
func (h *helper) kill() {
	if p := h.cmd.Process; p != nil {
		_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
	}
}

// wait reaps the helper once killed and removes its directory.
func (h *helper) wait() {
	h.in.Close()
	_ = h.cmd.Wait()
	os.RemoveAll(h.dir)
}

// readLine reads one line of at most max bytes.
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		part, err := r.ReadSlice('\n')
		if len(line)+len(part) > max {
			return nil, fmt.Errorf("an answer over %d bytes", max)
		}
		line = append(line, part...)
		switch {
		case err == nil:
			return line, nil
		case !errors.Is(err, bufio.ErrBufferFull):
			return nil, err
		}
	}
}

// ---- the helper's side ------------------------------------------------------

// liveEnv, set in a child of the lab's own executable, makes this
// package's init a live helper before the program's main runs.
const liveEnv = "LAB_RESCRIPT_LIVE"

// liveSpec is what a helper is started with.
type liveSpec struct {
	Bin, Analysis, Runtime, Dir string
}

// liveAsk is one job over the pipe, a line of JSON.
type liveAsk struct {
	Source string `json:"source"`
	Types  []byte `json:"types,omitempty"`
	At     bool   `json:"at,omitempty"`
	Line   int    `json:"line,omitempty"`
	Column int    `json:"column,omitempty"`
}

// liveAnswer is one answer over the pipe, a line of JSON.
type liveAnswer struct {
	Diagnostics []model.Diagnostic `json:"diagnostics,omitempty"`
	Refused     bool               `json:"refused,omitempty"`
	Compiled    bool               `json:"compiled,omitempty"`
	Types       []byte             `json:"types,omitempty"`
	Type        string             `json:"type,omitempty"`
	Kind        ErrorKind          `json:"kind,omitempty"`
	Message     string             `json:"message,omitempty"`
}

func init() {
	spec, ok := os.LookupEnv(liveEnv)
	if !ok {
		return
	}
	var s liveSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Fprintf(os.Stderr, "live sandbox: %v\n", err)
		os.Exit(2)
	}
	os.Exit(serveLive(s, os.Stdin, os.Stdout))
}

// serveLive is the helper: it caps itself (the caps pass to every process
// it starts) and does the jobs it reads, one at a time, until its input
// ends.
func serveLive(s liveSpec, in io.Reader, out io.Writer) int {
	capErr := capSelf(LiveCPU)
	r := bufio.NewReaderSize(in, 64<<10)
	enc := json.NewEncoder(out)
	for {
		line, err := readLine(r, 8<<20)
		if err != nil {
			return 0
		}
		var a liveAnswer
		var job liveAsk
		switch {
		case capErr != nil:
			a = liveAnswer{Kind: capErr.Kind, Message: capErr.Message}
		case json.Unmarshal(line, &job) != nil:
			return 2
		default:
			a = s.do(job)
		}
		if enc.Encode(a) != nil {
			return 2
		}
	}
}

// outputs are the files a job may leave in the work directory, removed
// before the next.
var outputs = []string{"ToolCall.res", "ToolCall.cmi", "ToolCall.cmj", "ToolCall.cmt", "ToolCall.res.js", filepath.Join("lib", "bs", "ToolCall.cmt")}

// do does one job in the work directory.
func (s liveSpec) do(j liveAsk) liveAnswer {
	for _, f := range outputs {
		if err := os.Remove(filepath.Join(s.Dir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return liveAnswer{Kind: Crashed, Message: "The lab could not prepare the compiler's directory."}
		}
	}
	if err := os.WriteFile(filepath.Join(s.Dir, moduleFile), []byte(j.Source), 0o600); err != nil {
		return liveAnswer{Kind: Crashed, Message: "The lab could not write the program for the compiler."}
	}
	cmt := filepath.Join(s.Dir, "lib", "bs", "ToolCall.cmt")
	var a liveAnswer
	if len(j.Types) > 0 {
		if err := os.WriteFile(cmt, j.Types, 0o600); err != nil {
			return liveAnswer{Kind: Crashed, Message: "The lab could not write the program's types."}
		}
	} else {
		diags, refused, fail := build(s.Bin, s.Runtime, s.Dir, LiveCPU)
		if fail != nil {
			return liveAnswer{Kind: fail.Kind, Message: fail.Message}
		}
		a = liveAnswer{Diagnostics: diags, Refused: refused, Compiled: true}
		if fi, err := os.Stat(filepath.Join(s.Dir, "ToolCall.cmt")); err == nil && fi.Size() <= maxTypes {
			if err := os.Rename(filepath.Join(s.Dir, "ToolCall.cmt"), cmt); err == nil {
				a.Types, _ = os.ReadFile(cmt)
			}
		}
	}
	if j.At && s.Analysis != "" && fileThere(cmt) {
		t, fail := s.hover(j.Line, j.Column)
		if fail != nil {
			return liveAnswer{Kind: fail.Kind, Message: fail.Message}
		}
		a.Type = t
	}
	return a
}

func fileThere(p string) bool { _, err := os.Stat(p); return err == nil }

// hover runs the analysis for the type at line, column (1-based) of the
// module, and reads the type out of its answer.
func (s liveSpec) hover(line, column int) (string, *answer) {
	cmd := exec.Command(s.Analysis, "hover", moduleFile, strconv.Itoa(max(line-1, 0)), strconv.Itoa(max(column-1, 0)), moduleFile, "true")
	cmd.Dir, cmd.Env = s.Dir, []string{}
	var said bytes.Buffer
	over := &limited{w: &said, n: maxMessages}
	cmd.Stdout, cmd.Stderr = over, io.Discard
	err := cmd.Start()
	if err == nil {
		over.stop = func() { _ = cmd.Process.Kill() }
		err = cmd.Wait()
	}
	var exit *exec.ExitError
	switch {
	case over.over:
		return "", &answer{Kind: TooMuchOutput, Message: fmt.Sprintf("The type checker printed more than %d KiB about this program and was stopped.", maxMessages>>10)}
	case errors.As(err, &exit):
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && (ws.Signal() == syscall.SIGXCPU || ws.Signal() == syscall.SIGKILL) {
			return "", &answer{Kind: TooLong, Message: fmt.Sprintf("The type checker took longer than %v of CPU time on this program and was stopped.", LiveCPU)}
		}
		return "", nil // it knows no type there
	case err != nil:
		return "", &answer{Kind: Crashed, Message: "The lab could not run the type checker."}
	}
	return HoverType(said.Bytes()), nil
}

// HoverType reads the type out of the analysis's hover answer
// ({"contents":{"kind":"markdown","value":"```rescript\n(call, reply) =>
// update\n```…"}}): the first ReScript block's text, without the
// markdown around it; "" for null or anything else.
func HoverType(out []byte) string {
	var h struct {
		Contents struct {
			Value string `json:"value"`
		} `json:"contents"`
	}
	if json.Unmarshal(out, &h) != nil {
		return ""
	}
	_, rest, ok := strings.Cut(h.Contents.Value, "```rescript\n")
	if !ok {
		return ""
	}
	t, _, _ := strings.Cut(rest, "\n```")
	return clip(strings.TrimSpace(t), maxTypeText)
}
