// Package rescript compiles a student's ToolCall.res with the ReScript
// compiler the lesson uses (npm's rescript 12: its static bsc.exe and the
// @rescript/runtime beside it) into one JavaScript module, the lab's
// sandbox can run: what the compiler said as data (model.Diagnostic), and,
// when the build is not refused, the compiled module with the runtime it
// imports bundled in (esbuild).
//
// The compiler is untrusted execution: a program can make it run for
// minutes or write without end. Each compile runs in a temporary directory
// of its own, in a child process (this executable again, see sandbox.go)
// under CPU-time, memory, file-size and output caps, with an empty
// environment and a wall deadline, killed with its process group when
// over; the directory is removed after.
package rescript

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/toolcall-lab/lab/internal/idle"
	"github.com/toolcall-lab/lab/model"
)

// The caps of one compile (docs/code.md, "ReScript"; docs/limits.md).
const (
	// CompileCPU is the CPU time the compiler may use (RLIMIT_CPU): the
	// lesson's module takes about 0.03 s.
	CompileCPU = 5 * time.Second
	// CompileWall is how long a compile may take on the wall clock,
	// waiting for a core included.
	CompileWall = 10 * time.Second
	// CompileMemory caps the sandbox's writable memory (RLIMIT_DATA): the
	// compiler needs about 14 MiB for the lesson's module.
	CompileMemory = 512 << 20
	// maxFileBytes caps each file the compiler writes (RLIMIT_FSIZE).
	maxFileBytes = 8 << 20
	// maxMessages caps what the compiler may print.
	maxMessages = 256 << 10
	// maxJS caps the bundled module handed back.
	maxJS = 4 << 20
)

// WarnError is the lesson's build's warning flags: these warnings stop the
// build ("Keep the warning-as-error flags in the build command so missing
// cases stop the build").
const WarnError = "+3+8+11+12+26+27+31+32+33+34+35+39+44+45+110"

// packageName is the lesson's package, from its rescript.json.
const packageName = "rescript-tool-call-states"

// rescriptJSON is the lesson's rescript.json, the module beside it.
const rescriptJSON = `{
  "name": "rescript-tool-call-states",
  "sources": ["."],
  "namespace": false,
  "package-specs": { "module": "esmodule", "in-source": true },
  "suffix": ".res.js"
}
`

// moduleFile is the file a submission is compiled as: the lesson's module.
const moduleFile = "ToolCall.res"

// ErrNotFound says no compiler was found where the lab looks.
var ErrNotFound = errors.New("no ReScript compiler found")

// Compiler is a ReScript 12 compiler and its runtime.
type Compiler struct {
	bin string // bsc.exe
	// analysis is rescript-editor-analysis.exe beside bsc.exe, which
	// says the type under the pointer (analysis.go); "" without one.
	analysis string
	runtime  string // @rescript/runtime: lib/ocaml for the compiler, lib/es6 for the bundle
	version  string
}

// Version is the compiler's own word for its version ("ReScript 12.2.0").
func (c *Compiler) Version() string { return c.version }

// Find finds the compiler: setting names bsc.exe (the lab's -rescript);
// empty, ./node_modules/@rescript/linux-x64/bin/bsc.exe (where `npm
// install rescript@12.2.0` puts it), then bsc.exe on the PATH. The runtime
// is the @rescript/runtime package beside the compiler's. A compiler that
// is not ReScript 12 is refused, saying what it is.
func Find(setting string, lookPath func(string) (string, error)) (*Compiler, error) {
	bin := setting
	if bin == "" {
		local := filepath.Join("node_modules", "@rescript", "linux-x64", "bin", "bsc.exe")
		if _, err := os.Stat(local); err == nil {
			bin = local
		} else if p, err := lookPath("bsc.exe"); err == nil {
			bin = p
		} else {
			return nil, fmt.Errorf("%w: not in ./node_modules (npm install rescript@12.2.0) nor bsc.exe on the PATH", ErrNotFound)
		}
	}
	bin, err := filepath.Abs(bin)
	if err == nil {
		bin, err = filepath.EvalSymlinks(bin)
	}
	if err != nil {
		return nil, fmt.Errorf("the ReScript compiler %s: %w", setting, err)
	}
	rt := filepath.Join(filepath.Dir(bin), "..", "..", "runtime")
	for _, dir := range []string{"ocaml", "es6"} {
		if fi, err := os.Stat(filepath.Join(rt, "lib", dir)); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("the ReScript compiler %s has no runtime beside it (%s): install the npm package rescript@12.2.0 whole", bin, filepath.Join(rt, "lib", dir))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-version")
	cmd.Env = []string{}
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("the ReScript compiler %s does not run: %w", bin, err)
	}
	version := strings.TrimSpace(string(out))
	if !strings.HasPrefix(version, "ReScript 12.") {
		return nil, fmt.Errorf("%s says it is %q; the lesson needs ReScript 12 (npm install rescript@12.2.0)", bin, clip(version, 80))
	}
	rt, _ = filepath.Abs(rt)
	return &Compiler{bin: bin, runtime: rt, version: version, analysis: analysisBeside(bin)}, nil
}

// Output is a compile's outcome: what the compiler said (errors and
// warnings, in its order), whether it refused the build, and the module
// when it did not.
type Output struct {
	JS          string
	Diagnostics []model.Diagnostic
	Refused     bool
}

// ErrorKind says why a compile did not end with the compiler's answer.
type ErrorKind uint8

const (
	TooLong       ErrorKind = iota + 1 // over its CPU time or the wall deadline
	TooMuchOutput                      // printed or wrote more than its caps
	OutOfMemory                        // over its memory cap
	ImportRefused                      // the program imports what is not the runtime
	Crashed                            // the compiler or the sandbox failed otherwise
	TooLarge                           // the source is over model.MaxSourceBytes
)

// Error is a compile that did not end with the compiler's answer, said for
// the student.
type Error struct {
	Kind    ErrorKind
	Message string
}

func (e *Error) Error() string { return e.Message }

// slots bounds the compiles running at once by the cores: each is CPU
// work, and a class compiles together.
var slots = make(chan struct{}, runtime.NumCPU())

// Compile builds source as the lesson's ToolCall.res. The error is an
// *Error for a compile that did not end with the compiler's answer, or ctx's.
func (c *Compiler) Compile(ctx context.Context, source string) (Output, error) {
	if len(source) > model.MaxSourceBytes {
		return Output{}, &Error{TooLarge, fmt.Sprintf("The program has %d bytes; at most %d can be compiled.", len(source), model.MaxSourceBytes)}
	}
	select {
	case slots <- struct{}{}:
		defer func() { <-slots }()
	case <-ctx.Done():
		return Output{}, ctx.Err()
	}
	ctx, cancel := context.WithTimeout(ctx, CompileWall)
	defer cancel()
	// TMPDIR may name a directory under a volume that is not made yet (a
	// container with a read-only root).
	if err := os.MkdirAll(os.TempDir(), 0o700); err != nil {
		return Output{}, fmt.Errorf("the compile's directory: %w", err)
	}
	dir, err := os.MkdirTemp("", "lab-rescript-")
	if err != nil {
		return Output{}, fmt.Errorf("the compile's directory: %w", err)
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "rescript.json"), []byte(rescriptJSON), 0o600); err != nil {
		return Output{}, err
	}
	if err := os.WriteFile(filepath.Join(dir, moduleFile), []byte(source), 0o600); err != nil {
		return Output{}, err
	}
	return c.sandboxed(ctx, dir)
}

// sandboxed runs the compile in a child (sandbox.go) and reads its answer.
func (c *Compiler) sandboxed(ctx context.Context, dir string) (Output, error) {
	exe, err := os.Executable()
	if err != nil {
		return Output{}, fmt.Errorf("finding the lab's executable: %w", err)
	}
	job, err := json.Marshal(job{Bin: c.bin, Runtime: c.runtime, Dir: dir})
	if err != nil {
		return Output{}, err
	}
	cmd := exec.Command(exe)
	cmd.Env = []string{sandboxEnv + "=" + string(job)}
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stdout bytes.Buffer
	cmd.Stdout = &capped{w: &stdout, n: maxJS + maxMessages + 64<<10}
	stderr := &capped{w: &bytes.Buffer{}, n: 4 << 10}
	cmd.Stderr = stderr
	if err := idle.Start(cmd); err != nil {
		return Output{}, fmt.Errorf("starting the compile's sandbox: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var waitErr error
	select {
	case waitErr = <-done:
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return Output{}, &Error{TooLong, fmt.Sprintf("The compiler took longer than %v on this program and was stopped.", CompileWall)}
		}
		return Output{}, ctx.Err()
	}
	// The compiler may have left children of its own: none survive.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	var a answer
	if err := json.Unmarshal(stdout.Bytes(), &a); err != nil {
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && (ws.Signal() == syscall.SIGXCPU || ws.Signal() == syscall.SIGKILL) {
			return Output{}, &Error{TooLong, fmt.Sprintf("The compiler took longer than %v of CPU time on this program and was stopped.", CompileCPU)}
		}
		return Output{}, fmt.Errorf("the compile's sandbox ended without an answer (%v): %s", waitErr, clip(stderr.w.(*bytes.Buffer).String(), 300))
	}
	if a.Kind != 0 {
		return Output{}, &Error{a.Kind, a.Message}
	}
	return Output{JS: a.JS, Diagnostics: a.Diagnostics, Refused: a.Refused}, nil
}

// job is what the parent asks of the sandbox: the compiler, its runtime
// and the directory holding rescript.json and ToolCall.res.
type job struct {
	Bin, Runtime, Dir string
}

// answer is the sandbox's one reply: an Output, or an Error's kind and
// sentence.
type answer struct {
	JS          string             `json:"js,omitempty"`
	Diagnostics []model.Diagnostic `json:"diagnostics,omitempty"`
	Refused     bool               `json:"refused,omitempty"`
	Kind        ErrorKind          `json:"kind,omitempty"`
	Message     string             `json:"message,omitempty"`
}

// capped writes at most n bytes to w and drops the rest.
type capped struct {
	mu sync.Mutex
	w  io.Writer
	n  int
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := min(len(p), c.n)
	if k > 0 {
		c.w.Write(p[:k])
		c.n -= k
	}
	return len(p), nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
