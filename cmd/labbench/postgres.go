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

// The rtt scenario's reference for a lab on PostgreSQL: what the cluster
// needs for one durable write, measured in the same run on the same
// cluster, in turns among the servers' (bench.inTurns).
const (
	insertP50Metric = "INSERT p50 ms"
	insertP99Metric = "INSERT p99 ms"
	// pgOverInsertMetric is the goal's measure: (the lab's rtt p99 − the
	// default's) ÷ the INSERT's p99.
	pgOverInsertMetric = "(p99 − default) ÷ INSERT p99"
)

// pgRef is one closed loop of one-row INSERTs into a table of one int
// column, each its own (autocommit, so durable) transaction, prepared
// (pgx's statement cache), on one connection to a database of its own:
// pgbench's `-n -M prepared -c 1` of `INSERT INTO t VALUES (1);`.
//
// Ownership: one goroutine at a time (inTurns) runs it; lat is its own.
type pgRef struct {
	name    string
	srv     int // the index of the lab it is measured for
	cluster *pgCluster
	db      string
	conn    *pgx.Conn
	lat     samples
}

// pgRefs opens a reference for each lab in srvs that runs on PostgreSQL.
// The references it opened before an error are returned with it, to close.
func pgRefs(ctx context.Context, srvs []*server) ([]*pgRef, error) {
	var refs []*pgRef
	for i, srv := range srvs {
		if srv.pg == nil {
			continue
		}
		db, dbURL, err := srv.pg.database(ctx)
		if err != nil {
			return refs, err
		}
		r := &pgRef{name: srv.name + "'s INSERT", srv: i, cluster: srv.pg, db: db}
		refs = append(refs, r)
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		r.conn, err = pgx.Connect(cctx, dbURL)
		if err == nil {
			_, err = r.conn.Exec(cctx, `CREATE TABLE t (x int)`)
		}
		cancel()
		if err != nil {
			return refs, fmt.Errorf("the INSERT reference: %w", err)
		}
	}
	return refs, nil
}

// run INSERTs one row at a time until the deadline; each one's latency
// goes to lat unless it is nil.
func (r *pgRef) run(ctx context.Context, until time.Time, lat *samples) error {
	for time.Now().Before(until) {
		t0 := time.Now()
		if _, err := r.conn.Exec(ctx, `INSERT INTO t VALUES (1)`); err != nil {
			return err
		}
		if lat != nil {
			lat.add(time.Since(t0))
		}
	}
	return nil
}

// close ends the connection and drops the database.
func (r *pgRef) close() error {
	if r.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r.conn.Close(ctx)
		cancel()
	}
	return r.cluster.drop(r.db)
}
