package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolcall-lab/lab/internal/procstat"
)

// postgresLab is the lab configuration "postgres": one replica on a fresh
// PostgreSQL database of its own on -pg's server, measured beside the
// default in the closed-loop scenarios (rtt, throughput).
const postgresLab = "postgres"

// pgLabScenarios are the scenarios the postgres lab takes part in.
var pgLabScenarios = []string{"rtt", "throughput"}

// pgCluster is the PostgreSQL server -pg names, for the postgres lab: it
// makes a database per lab server and reads the CPU time the cluster
// spends on it.
//
// Ownership: admin is one connection, used by one goroutine at a time
// (mu): the bench makes databases and samples CPU between turns.
type pgCluster struct {
	base  string
	mu    sync.Mutex
	admin *pgx.Conn
}

func openCluster(ctx context.Context, base string) (*pgCluster, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		return nil, fmt.Errorf("connecting to -pg: %w", err)
	}
	return &pgCluster{base: base, admin: admin}, nil
}

func (c *pgCluster) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.admin.Close(ctx)
}

// database creates an empty database and returns its name and URL.
func (c *pgCluster) database(ctx context.Context) (name, dbURL string, err error) {
	u, err := url.Parse(c.base)
	if err != nil {
		return "", "", fmt.Errorf("-pg: %w", err)
	}
	name = "labbench_" + strings.ToLower(rand.Text()[:12])
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := c.admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", "", fmt.Errorf("creating a database for the postgres lab: %w", err)
	}
	u.Path = "/" + name
	return name, u.String(), nil
}

// drop removes a database database made, with its connections.
func (c *pgCluster) drop(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.admin.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("dropping %s: %w", name, err)
	}
	return nil
}

// cpuSeconds is the user plus system CPU time, from /proc, of the
// cluster's processes that serve database db: the postmaster, its
// auxiliary processes (checkpointer, WAL writer, …) and the backends
// connected to db. Backends of other databases (other users of a shared
// server) and the bench's own connection are left out. A backend that
// exits between two samples takes its time with it: the lab's pool keeps
// its connections for the run.
func (c *pgCluster) cpuSeconds(ctx context.Context, db string) (float64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var self int
	if err := c.admin.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&self); err != nil {
		return 0, fmt.Errorf("sampling PostgreSQL's CPU: %w", err)
	}
	rows, err := c.admin.Query(ctx, `SELECT pid FROM pg_stat_activity
		WHERE pid <> pg_backend_pid() AND (datname = $1 OR backend_type <> 'client backend')`, db)
	if err != nil {
		return 0, fmt.Errorf("sampling PostgreSQL's CPU: %w", err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return 0, fmt.Errorf("sampling PostgreSQL's CPU: %w", err)
	}
	// Every backend's parent is the postmaster.
	postmaster, err := procstat.Parent(self)
	if err != nil {
		return 0, fmt.Errorf("finding the postmaster (is -pg's server on this machine?): %w", err)
	}
	var sum float64
	for _, pid := range append(pids, postmaster) {
		t, err := procstat.CPU(pid)
		if err != nil {
			continue // exited since the query
		}
		sum += t.Seconds()
	}
	return sum, nil
}
