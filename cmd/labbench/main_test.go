package main

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"go.uber.org/goleak"

	labserver "github.com/toolcall-lab/lab/server"
)

// TestMain fails the package if a test server, connection or reader
// goroutine outlives the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// startLab serves a lab of cfg (its frame rate limit lifted: the tests
// send as fast as they can) in the test's process, for the bench's
// clients; it is shut down when the test ends.
func startLab(t *testing.T, cfg labserver.Config) *server {
	t.Helper()
	cfg.FrameRate, cfg.FrameBurst = 1e6, 1e6
	lab, err := labserver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := lab.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(lab.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		lab.Shutdown(ctx)
	})
	return &server{name: "lab", base: ts.URL, lab: true}
}
