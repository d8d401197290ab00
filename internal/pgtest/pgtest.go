// Package pgtest gives tests a PostgreSQL database of their own, on the
// server LAB_PG_URL names, or a whole cluster of their own (NewCluster) to
// freeze, stop and kill. Where it is unset the test skips with a message,
// unless LAB_PG=1 (CI sets it), which makes a missing PostgreSQL a failure.
package pgtest

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolcall-lab/lab/internal/procstat"
)

// URL returns LAB_PG_URL, or skips t (fails it under LAB_PG=1).
func URL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("LAB_PG_URL")
	if u == "" {
		if os.Getenv("LAB_PG") == "1" {
			t.Fatal("LAB_PG=1 but LAB_PG_URL is not set: these tests need a PostgreSQL server")
		}
		t.Skip("no PostgreSQL: set LAB_PG_URL=postgres://… to run this test (LAB_PG=1 makes its absence a failure)")
	}
	return u
}

// Database creates an empty database for t on LAB_PG_URL's server and
// returns its URL; it is dropped when t ends. Each test gets its own, so
// that tests run in parallel and notifications never cross between them.
func Database(t testing.TB) string {
	t.Helper()
	base := URL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connecting to LAB_PG_URL: %v", err)
	}
	defer admin.Close(ctx)
	name := "labtest_" + strings.ToLower(rand.Text()[:16])
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("creating a test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		admin, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("connecting to drop %s: %v", name, err)
			return
		}
		defer admin.Close(ctx)
		if _, err := admin.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("dropping %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("LAB_PG_URL: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// Cluster is a throwaway PostgreSQL cluster of one test's own, for tests
// that stop, freeze or kill the database: never the shared LAB_PG_URL one.
type Cluster struct {
	// URL is a database URL on it (the postgres database).
	URL string
	// Dir is its data directory.
	Dir string

	bin  string // PostgreSQL's bin directory
	port int
	asPG bool // run its commands as the postgres user (the test runs as root)
	t    testing.TB
}

// NewCluster initdb's a cluster into t.TempDir(), starts it on a free port
// with fsync off and returns it; it is stopped when t ends. Without
// PostgreSQL's binaries (/usr/lib/postgresql/*/bin) the test skips, or
// fails under LAB_PG=1. As root, PostgreSQL's commands run as the postgres
// user (PostgreSQL refuses root).
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		if os.Getenv("LAB_PG") == "1" {
			t.Fatal("LAB_PG=1 but no PostgreSQL binaries in /usr/lib/postgresql/*/bin")
		}
		t.Skip("no PostgreSQL binaries in /usr/lib/postgresql/*/bin")
	}
	slices.Sort(bins)
	c := &Cluster{bin: filepath.Dir(bins[len(bins)-1]), asPG: os.Geteuid() == 0, t: t}
	dir, err := os.MkdirTemp("", "labpg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	c.Dir = filepath.Join(dir, "data")
	if c.asPG {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root, PostgreSQL needs the postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	c.port = freePort(t)
	c.run("initdb", "-D", c.Dir, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
	conf := fmt.Sprintf("port = %d\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '%s'\nfsync = off\nsynchronous_commit = off\nfull_page_writes = off\nmax_connections = 60\nshared_buffers = 16MB\n", c.port, dir)
	f, err := os.OpenFile(filepath.Join(c.Dir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(conf); err != nil {
		t.Fatal(err)
	}
	f.Close()
	c.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres", c.port)
	c.Start()
	t.Cleanup(func() {
		c.Resume() // a frozen cluster does not stop
		c.pgctl("stop", "-m", "immediate")
	})
	return c
}

// freePort is a TCP port nothing listens on now.
func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// run runs one of PostgreSQL's commands, as the postgres user when root.
func (c *Cluster) run(name string, args ...string) {
	c.t.Helper()
	cmd := exec.Command(filepath.Join(c.bin, name), args...)
	if c.asPG {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", filepath.Join(c.bin, name)}, args...)...)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		c.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

func (c *Cluster) pgctl(args ...string) {
	c.t.Helper()
	c.run("pg_ctl", append([]string{"-D", c.Dir, "-w", "-l", filepath.Join(c.Dir, "log")}, args...)...)
}

// Start starts the cluster and waits until it takes connections.
func (c *Cluster) Start() { c.t.Helper(); c.pgctl("start") }

// Stop stops it (fast: connections are cut); Start starts it again.
func (c *Cluster) Stop() { c.t.Helper(); c.pgctl("stop", "-m", "fast") }

// Freeze stops (SIGSTOP) the postmaster and every backend of the cluster:
// connections stay open and nothing answers. Resume undoes it.
func (c *Cluster) Freeze() { c.t.Helper(); c.signal(syscall.SIGSTOP, c.PIDs()) }

// Resume continues (SIGCONT) every process of the cluster.
func (c *Cluster) Resume() { c.signal(syscall.SIGCONT, c.PIDs()) }

// FreezePID and ResumePID stop and continue one backend.
func (c *Cluster) FreezePID(pid int) { c.signal(syscall.SIGSTOP, []int{pid}) }
func (c *Cluster) ResumePID(pid int) { c.signal(syscall.SIGCONT, []int{pid}) }

func (c *Cluster) signal(sig syscall.Signal, pids []int) {
	for _, pid := range pids {
		_ = syscall.Kill(pid, sig)
	}
}

// PIDs is the postmaster's (postmaster.pid's first line) and its children's
// (/proc), so that nothing outside this cluster is ever signalled.
func (c *Cluster) PIDs() []int {
	b, err := os.ReadFile(filepath.Join(c.Dir, "postmaster.pid"))
	if err != nil {
		return nil
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pm, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return nil
	}
	pids := []int{pm}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, err := procstat.Parent(pid); err == nil && ppid == pm {
			pids = append(pids, pid)
		}
	}
	return pids
}

// BackendPIDs are the pids of the backends whose application_name is app.
func (c *Cluster) BackendPIDs(ctx context.Context, app string) []int {
	c.t.Helper()
	conn, err := pgx.Connect(ctx, c.URL)
	if err != nil {
		c.t.Fatalf("connecting to the test cluster: %v", err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, app)
	if err != nil {
		c.t.Fatalf("listing backends: %v", err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		c.t.Fatalf("listing backends: %v", err)
	}
	return pids
}
