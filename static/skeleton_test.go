package static

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// rescriptFlags are the lesson's warnings-as-errors (its build:res script):
// a missing case (8) or an unused variable (26, 27) stops the build.
const rescriptFlags = "+3+8+11+12+26+27+31+32+33+34+35+39+44+45+110"

// bscPath finds the ReScript compiler: LAB_RESCRIPT names bsc.exe, else the
// repository's node_modules has it; "" if neither.
func bscPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("LAB_RESCRIPT"); p != "" {
		return p
	}
	p, err := filepath.Abs(filepath.Join("..", "node_modules", "@rescript", "linux-x64", "bin", "bsc.exe"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// TestReScriptSkeletonCompiles compiles the page's ReScript skeleton
// (ToolCall.res, what a student starts from) with ReScript's bsc and the
// lesson's flags: it must build, or the student's first Check is a refused
// build they did not cause.
func TestReScriptSkeletonCompiles(t *testing.T) {
	bsc := bscPath(t)
	if bsc == "" {
		if os.Getenv("LAB_E2E") == "1" {
			t.Fatal("no ReScript compiler: set LAB_RESCRIPT to bsc.exe, or install rescript@12.2.0 in the repository (LAB_E2E=1 needs it)")
		}
		t.Skip("no ReScript compiler: set LAB_RESCRIPT to bsc.exe, or install rescript@12.2.0 in the repository")
	}
	if _, err := os.Stat(bsc); err != nil {
		t.Fatalf("LAB_RESCRIPT: %v", err)
	}
	runtime := filepath.Join(filepath.Dir(bsc), "..", "..", "runtime", "lib", "ocaml")
	src, err := os.ReadFile("ToolCall.res")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	config := `{"name":"skeleton","sources":["."],"namespace":false,"package-specs":{"module":"esmodule","in-source":true},"suffix":".res.js"}`
	if err := os.WriteFile(filepath.Join(dir, "rescript.json"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ToolCall.res"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bsc, "-color", "never", "-I", runtime, "-bs-package-name", "skeleton",
		"-bs-package-output", "esmodule:.:.res.js", "-warn-error", rescriptFlags, "ToolCall.res")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the skeleton does not compile: %v\n%s", err, out)
	}
	js, err := os.ReadFile(filepath.Join(dir, "ToolCall.res.js"))
	if err != nil {
		t.Fatalf("bsc wrote no ToolCall.res.js: %v", err)
	}
	for _, fn := range []string{"begin", "receive", "expire", "view"} {
		if !strings.Contains(string(js), "function "+fn+"(") {
			t.Errorf("the compiled skeleton has no function %s", fn)
		}
	}
}
