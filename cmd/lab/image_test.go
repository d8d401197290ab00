package main

import (
	"context"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// buildLikeDockerfile runs the Dockerfile's own go build line, with the
// output redirected into dir, and returns the binary's path.
func buildLikeDockerfile(t *testing.T, dir string) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is not on PATH: cannot build the binary")
	}
	dockerfile, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)^RUN (CGO_ENABLED=0 go build .*-o /out/lab ./cmd/lab)$`).FindSubmatch(dockerfile)
	if line == nil {
		t.Fatal("the Dockerfile has no 'RUN CGO_ENABLED=0 go build … -o /out/lab ./cmd/lab' line")
	}
	bin := filepath.Join(dir, "lab")
	script := strings.NewReplacer("${VERSION}", "image-test", "/out/lab", bin).Replace(string(line[1]))
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	return bin
}

// TestBinary builds the binary once, as the container does, and tests it
// as a process: what the image needs of it, SIGTERM, a restart after
// kill -9 that loses nothing, and the same for one of two replicas.
func TestBinary(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildLikeDockerfile(t, t.TempDir())
	t.Run("image", func(t *testing.T) { imageChecks(t, bin) })
	t.Run("restart after kill", func(t *testing.T) { restartAfterKill(t, bin) })
	t.Run("replica killed under load", func(t *testing.T) { replicaKilledUnderLoad(t, bin) })
}

func imageChecks(t *testing.T, bin string) {
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatal("the binary asks for a dynamic loader: it is not statically linked")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Fatalf("the binary needs shared libraries %v", libs)
	}

	if out, err := exec.Command(bin, "-version").Output(); err != nil || string(out) != "lab image-test\n" {
		t.Fatalf("-version: %q %v", out, err)
	}

	lab := startLab(t, bin, "-data", ":memory:")
	addr := strings.TrimPrefix(lab.base, "http://")
	healthcheck := func() error {
		cmd := exec.Command(bin, "healthcheck")
		cmd.Env = append(os.Environ(), "LAB_ADDR="+addr)
		return cmd.Run()
	}
	if err := healthcheck(); err != nil {
		t.Fatalf("healthcheck against a live server: %v", err)
	}

	// SIGTERM closes open pages with 1012 (service restart) and exits 0.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws://"+addr+"/lab/5f0c2a7e-8b1d-4c3a-9e2f-0a1b2c3d4e5f/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	if _, _, err := ws.Read(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lab.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ws.Read(ctx); websocket.CloseStatus(err) != websocket.StatusServiceRestart {
		t.Fatalf("after SIGTERM: %v, want close 1012", err)
	}
	if err := lab.cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	if err := healthcheck(); err == nil {
		t.Fatal("healthcheck passed against a stopped server")
	}
}
