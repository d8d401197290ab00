package rescript

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/evanw/esbuild/pkg/api"

	"github.com/toolcall-lab/lab/model"
)

// sandboxEnv, set in a child of the lab's own executable, makes this
// package's init the compile's sandbox before the program's main runs, so
// any binary that links the package (the lab, a test) is its own sandbox.
const sandboxEnv = "LAB_RESCRIPT_SANDBOX"

func init() {
	spec, ok := os.LookupEnv(sandboxEnv)
	if !ok {
		return
	}
	var j job
	if err := json.Unmarshal([]byte(spec), &j); err != nil {
		fmt.Fprintf(os.Stderr, "rescript sandbox: %v\n", err)
		os.Exit(2)
	}
	a := compileHere(j)
	if err := json.NewEncoder(os.Stdout).Encode(a); err != nil {
		os.Exit(2)
	}
	os.Exit(0)
}

// compileHere is the sandbox: it caps itself (the caps pass to the
// compiler it starts), runs the compiler on the module, reads what it said
// and bundles what it wrote.
func compileHere(j job) answer {
	if err := capSelf(CompileCPU); err != nil {
		return *err
	}
	// The sandbox, and so the compiler, runs at SCHED_IDLE (idle.Start):
	// a compile takes only a core the students' changes leave.
	diags, refused, fail := build(j.Bin, j.Runtime, j.Dir, CompileCPU)
	if fail != nil {
		return *fail
	}
	if refused {
		return answer{Diagnostics: diags, Refused: true}
	}
	compiled := filepath.Join(j.Dir, strings.TrimSuffix(moduleFile, ".res")+".res.js")
	js, rerr := os.ReadFile(compiled)
	if rerr != nil {
		return answer{Kind: Crashed, Message: "The compiler accepted the program but wrote no JavaScript."}
	}
	if !bytes.Contains(js, []byte("import")) {
		// Nothing to bundle (the lesson's module uses no library): the
		// compiler's own output, as the lesson's browser loads it.
		return answer{JS: string(js), Diagnostics: diags}
	}
	out, aerr := bundle(compiled, filepath.Join(j.Runtime, "lib", "es6"))
	if aerr != nil {
		return *aerr
	}
	return answer{JS: out, Diagnostics: diags}
}

// capSelf caps the sandbox's process, and so every process it starts:
// cpu of CPU time each (SIGXCPU, then SIGKILL a second later), and the
// memory, file-size, open-file and core caps of a compile.
func capSelf(cpu time.Duration) *answer {
	for _, l := range []struct {
		res int
		cur uint64
	}{
		{syscall.RLIMIT_CPU, uint64(max(cpu.Seconds(), 1))},
		{syscall.RLIMIT_DATA, CompileMemory},
		{syscall.RLIMIT_FSIZE, maxFileBytes},
		{syscall.RLIMIT_NOFILE, 64},
		{syscall.RLIMIT_CORE, 0},
	} {
		max := l.cur
		if l.res == syscall.RLIMIT_CPU {
			max++ // SIGXCPU first, then SIGKILL a second later
		}
		if err := syscall.Setrlimit(l.res, &syscall.Rlimit{Cur: l.cur, Max: max}); err != nil {
			return &answer{Kind: Crashed, Message: "The lab could not start the compiler safely; check the program again."}
		}
	}
	return nil
}

// build runs the compiler (bin, with the runtime's lib/ocaml) on dir's
// module with the lesson's flags, under the caps the caller set (cpu is
// its CPU cap, for the sentence), and reads what it said, and whether it
// refused the build. A compiler that ended without saying why, or was
// stopped, is fail.
func build(bin, runtime, dir string, cpu time.Duration) (diags []model.Diagnostic, refused bool, fail *answer) {
	cmd := exec.Command(bin, "-color", "never",
		"-I", filepath.Join(runtime, "lib", "ocaml"),
		"-bs-package-name", packageName,
		"-bs-package-output", "esmodule:.:.res.js",
		"-warn-error", WarnError,
		moduleFile)
	cmd.Dir, cmd.Env = dir, []string{}
	var said bytes.Buffer
	over := &limited{w: &said, n: maxMessages}
	cmd.Stdout, cmd.Stderr = over, over
	err := cmd.Start()
	if err == nil {
		over.stop = func() { _ = cmd.Process.Kill() }
		err = cmd.Wait()
	}
	if over.over {
		return nil, false, &answer{Kind: TooMuchOutput, Message: fmt.Sprintf("The compiler printed more than %d KiB about this program and was stopped.", maxMessages>>10)}
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			switch ws.Signal() {
			case syscall.SIGXCPU, syscall.SIGKILL:
				return nil, false, &answer{Kind: TooLong, Message: fmt.Sprintf("The compiler took longer than %v of CPU time on this program and was stopped.", cpu)}
			case syscall.SIGXFSZ:
				return nil, false, &answer{Kind: TooMuchOutput, Message: fmt.Sprintf("The compiler wrote more than %d MiB for this program and was stopped.", maxFileBytes>>20)}
			}
			return nil, false, &answer{Kind: Crashed, Message: fmt.Sprintf("The compiler stopped (%v) on this program.", ws.Signal())}
		}
		if strings.Contains(said.String(), "Out of memory") || strings.Contains(said.String(), "out of memory") {
			return nil, false, &answer{Kind: OutOfMemory, Message: fmt.Sprintf("The compiler needed more than %d MiB for this program and was stopped.", CompileMemory>>20)}
		}
	} else if err != nil {
		return nil, false, &answer{Kind: Crashed, Message: "The lab could not run the compiler; check the program again."}
	}
	diags = ParseDiagnostics(said.String())
	if err != nil && len(diags) == 0 {
		return nil, false, &answer{Kind: Crashed, Message: "The compiler refused the program without saying why: " + clip(strings.TrimSpace(said.String()), 300)}
	}
	refused = err != nil || slices.ContainsFunc(diags, func(d model.Diagnostic) bool { return d.Severity == model.SeverityError })
	return diags, refused, nil
}

// bundle makes the compiled module one ES module: what it imports of the
// runtime (lib/es6) is put in; any other import is refused, naming it.
func bundle(entry, es6 string) (string, *answer) {
	var refused string
	inside := func(p string) bool {
		rel, err := filepath.Rel(es6, p)
		return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
	}
	guard := api.Plugin{Name: "the ReScript runtime only", Setup: func(b api.PluginBuild) {
		b.OnResolve(api.OnResolveOptions{Filter: ".*"}, func(args api.OnResolveArgs) (api.OnResolveResult, error) {
			if args.Kind == api.ResolveEntryPoint {
				return api.OnResolveResult{Path: entry}, nil
			}
			var p string
			switch {
			case strings.HasPrefix(args.Path, "@rescript/runtime/lib/es6/"):
				p = filepath.Join(es6, strings.TrimPrefix(args.Path, "@rescript/runtime/lib/es6/"))
			case strings.HasPrefix(args.Path, "./") && inside(args.Importer):
				p = filepath.Join(filepath.Dir(args.Importer), args.Path)
			}
			if p != "" && inside(p) {
				if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
					return api.OnResolveResult{Path: p}, nil
				}
			}
			if refused == "" {
				refused = args.Path
			}
			return api.OnResolveResult{}, fmt.Errorf("refused import %q", args.Path)
		})
	}}
	res := api.Build(api.BuildOptions{
		EntryPoints: []string{entry},
		Bundle:      true,
		Write:       false,
		Format:      api.FormatESModule,
		Platform:    api.PlatformNeutral,
		Target:      api.ES2020,
		Plugins:     []api.Plugin{guard},
		LogLevel:    api.LogLevelSilent,
		Outfile:     "ToolCall.js",
		// Paths in the bundle's comments relative to the module's
		// directory, not the lab's temporary one.
		AbsWorkingDir: filepath.Dir(entry),
	})
	if refused != "" {
		return "", &answer{Kind: ImportRefused, Message: fmt.Sprintf("The program imports %q; only the ReScript standard library can be imported (nothing a program writes may read the lab's files or network).", clip(refused, 100))}
	}
	if len(res.Errors) > 0 || len(res.OutputFiles) != 1 {
		msg := "no output"
		if len(res.Errors) > 0 {
			msg = res.Errors[0].Text
		}
		return "", &answer{Kind: Crashed, Message: "The lab could not bundle the compiled program: " + clip(msg, 300)}
	}
	js := string(res.OutputFiles[0].Contents)
	if len(js) > maxJS {
		return "", &answer{Kind: TooMuchOutput, Message: fmt.Sprintf("The compiled program is over %d MiB.", maxJS>>20)}
	}
	return js, nil
}

// limited writes at most n bytes to w; past them it says so (over) and
// drops the rest, so that a compiler printing without end is stopped by
// its caller, not by the machine's memory.
type limited struct {
	w    *bytes.Buffer
	n    int
	over bool
	stop func() // kills the writer, once it is over
}

func (l *limited) Write(p []byte) (int, error) {
	if len(p) > l.n {
		l.w.Write(p[:l.n])
		l.n = 0
		if !l.over && l.stop != nil {
			l.stop()
		}
		l.over = true
		return 0, errors.New("over the cap on what the compiler may print")
	}
	l.n -= len(p)
	return l.w.Write(p)
}
