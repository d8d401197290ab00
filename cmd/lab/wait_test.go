package main

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolcall-lab/lab/internal/pgtest"
)

// TestWaitsForTheDatabase: a replica started while its PostgreSQL refuses
// connections does not exit: it serves /healthz 200 and /readyz 503 while
// it waits, logs the wait once, and serves once the database is up.
func TestWaitsForTheDatabase(t *testing.T) {
	cl := pgtest.NewCluster(t)
	cl.Stop()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"lab", "-addr", addr, "-data", cl.URL, "-store-timeout", "1s"}, env(nil), &stdout, &stderr)
	}()
	status := func(path string) int {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for deadline := time.Now().Add(5 * time.Second); status("/healthz") != http.StatusOK; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no /healthz while waiting for the database; stderr: %s", stderr.String())
		}
	}
	time.Sleep(1500 * time.Millisecond) // some attempts
	if got := status("/readyz"); got != http.StatusServiceUnavailable {
		t.Fatalf("/readyz = %d while the database refuses, want 503", got)
	}
	select {
	case code := <-exited:
		t.Fatalf("exited %d while waiting; stderr: %s", code, stderr.String())
	default:
	}
	if n := strings.Count(stderr.String(), "waiting for the database"); n != 1 {
		t.Errorf("%d log lines say it waits, want 1 (one per change of reason):\n%s", n, stderr.String())
	}
	cl.Start()
	up := time.Now()
	for status("/readyz") != http.StatusOK {
		if time.Since(up) > 10*time.Second {
			t.Fatalf("/readyz not 200 10 s after the database started; stderr: %s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("ready %v after the database started", time.Since(up).Round(time.Millisecond))
	if !strings.Contains(stderr.String(), "the database answers") {
		t.Errorf("the end of the wait is not logged:\n%s", stderr.String())
	}
	cancel()
	if code := <-exited; code != 0 {
		t.Fatalf("exit %d; stderr: %s", code, stderr.String())
	}
}
