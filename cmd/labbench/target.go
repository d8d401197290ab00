package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/toolcall-lab/lab/internal/procstat"
)

// server is one server child process under test.
type server struct {
	name string
	cmd  *exec.Cmd
	base string // http://127.0.0.1:PORT
	log  *tailBuffer
	done chan error
	lab  bool // a lab, not a baseline
	// dbCPU, for a lab on PostgreSQL, is the CPU seconds the cluster has
	// spent on its database so far (pgCluster.cpuSeconds); nil otherwise.
	dbCPU func() (float64, error)
	// pg is the cluster a lab on PostgreSQL runs on (nil otherwise): rtt
	// measures its durable INSERT beside the lab (pgRef).
	pg *pgCluster
}

// isLab tells a lab configuration's server from a baseline's by its name
// ("baseline", "fixed-baseline").
func isLab(name string) bool { return !strings.HasSuffix(name, "baseline") }

var urlLine = regexp.MustCompile(`students open (http://127\.0\.0\.1:\d+)/`)

// start runs bin with args in dir (the bench's own when empty), which must
// make it print its URL on stdout.
func start(ctx context.Context, name, bin, dir string, args, env []string) (*server, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env, cmd.Dir = env, dir
	// A bench killed outright must not leave servers behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	s := &server{name: name, cmd: cmd, log: &tailBuffer{max: 16 << 10}, done: make(chan error, 1), lab: isLab(name)}
	cmd.Stderr = s.log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s (%s): %w", name, bin, err)
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := urlLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		s.done <- cmd.Wait() // after stdout hit EOF, as Wait requires
	}()
	select {
	case s.base = <-found:
		return s, nil
	case err := <-s.done:
		return nil, fmt.Errorf("%s exited before listening: %v: %s", name, err, s.log)
	case <-time.After(20 * time.Second):
	case <-ctx.Done():
	}
	s.cmd.Process.Kill()
	<-s.done
	return nil, fmt.Errorf("%s printed no URL: %s", name, s.log)
}

// stop ends the child with SIGTERM, then SIGKILL if it lingers; it reports
// an exit that was not asked for.
func (s *server) stop() error {
	select {
	case err := <-s.done:
		return fmt.Errorf("%s had exited during the run: %v: %s", s.name, err, s.log)
	default:
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(3 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
	return nil
}

func (s *server) wsURL(session string) string {
	return "ws" + strings.TrimPrefix(s.base, "http") + "/lab/" + session + "/ws"
}

// rssKiB reads the child's resident set size from /proc/PID/status.
func (s *server) rssKiB() (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0, fmt.Errorf("reading %s memory: %w", s.name, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				return strconv.ParseInt(f[0], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("no VmRSS for %s", s.name)
}

// cpuSeconds reads the child's user plus system CPU time from /proc/PID/stat.
func (s *server) cpuSeconds() (float64, error) {
	t, err := procstat.CPU(s.cmd.Process.Pid)
	if err != nil {
		return 0, fmt.Errorf("reading %s cpu: %w", s.name, err)
	}
	return t.Seconds(), nil
}

// tailBuffer keeps the last max bytes written, for error messages.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}

var _ io.Writer = (*tailBuffer)(nil)

// raiseFileLimit lifts the soft open-file limit to the hard one; the server
// children inherit it.
func raiseFileLimit() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("reading the open-file limit: %w", err)
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return 0, fmt.Errorf("raising the open-file limit: %w", err)
		}
	}
	return lim.Cur, nil
}
