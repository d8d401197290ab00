// Package pgtest gives tests a PostgreSQL database of their own, on the
// server LAB_PG_URL names. Where it is unset the test skips with a message,
// unless LAB_PG=1 (CI sets it), which makes a missing PostgreSQL a failure.
package pgtest

import (
	"context"
	"crypto/rand"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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
