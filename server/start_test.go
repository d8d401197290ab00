package server_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/toolcall-lab/lab/internal/pgtest"
	"github.com/toolcall-lab/lab/server"
	"github.com/toolcall-lab/lab/store"
	"github.com/toolcall-lab/lab/store/postgres"
)

// A listeningStore must stay a store.Listener, or the tests below pass
// without a listener to stop.
var _ store.Listener = (*listeningStore)(nil)

var errStoreDown = errors.New("the store is down (injected)")

// listeningStore is a store other replicas share (a Listener) whose reads
// of sessions, members or classes fail as failing says. listening counts
// the Listen calls under way: each stands for a listening connection.
type listeningStore struct {
	*store.Memory
	failing   string
	listening atomic.Int32
}

func (l *listeningStore) Listen(ctx context.Context, _ time.Duration, ready func(), _ func(string, uint64)) error {
	l.listening.Add(1)
	defer l.listening.Add(-1)
	ready()
	<-ctx.Done()
	return nil
}

func (l *listeningStore) Sessions(ctx context.Context) ([]store.Session, error) {
	if l.failing == "sessions" {
		return nil, errStoreDown
	}
	return l.Memory.Sessions(ctx)
}

func (l *listeningStore) Members(ctx context.Context) ([]store.Member, error) {
	if l.failing == "members" {
		return nil, errStoreDown
	}
	return l.Memory.Members(ctx)
}

func (l *listeningStore) Classes(ctx context.Context) ([]store.Class, error) {
	if l.failing == "classes" {
		return nil, errStoreDown
	}
	return l.Memory.Classes(ctx)
}

// TestStartFailureStopsTheListener: when a step of Start after the
// listener started fails (loading sessions, members or class settings),
// Start returns the error having stopped what it started: no Listen call
// is left running and no goroutine outlives it. Not parallel, so that the
// goroutines it checks are its own.
func TestStartFailureStopsTheListener(t *testing.T) {
	for _, step := range []string{"sessions", "members", "classes"} {
		t.Run(step, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			st := &listeningStore{Memory: store.NewMemory(), failing: step}
			lab, err := server.New(server.Config{Store: st})
			if err != nil {
				t.Fatal(err)
			}
			if err := lab.Start(context.Background()); !errors.Is(err, errStoreDown) {
				t.Fatalf("Start = %v, want the store's failure", err)
			}
			if n := st.listening.Load(); n != 0 {
				t.Fatalf("%d listening after Start failed", n)
			}
			if err := lab.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
	// Started and shut down, the listener is stopped too.
	t.Run("shut down", func(t *testing.T) {
		defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
		st := &listeningStore{Memory: store.NewMemory()}
		lab, err := server.New(server.Config{Store: st})
		if err != nil {
			t.Fatal(err)
		}
		if err := lab.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := st.listening.Load(); n != 1 {
			t.Fatalf("%d listening after Start, want 1", n)
		}
		if err := lab.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := st.listening.Load(); n != 0 {
			t.Fatalf("%d listening after Shutdown", n)
		}
	})
}

// classesDown is PostgreSQL whose class settings cannot be read.
type classesDown struct{ *postgres.Store }

func (classesDown) Classes(context.Context) ([]store.Class, error) { return nil, errStoreDown }

// TestStartFailureClosesTheListeningConnection: on PostgreSQL, a Start
// that fails loading class settings leaves no listening connection open
// on the database.
func TestStartFailureClosesTheListeningConnection(t *testing.T) {
	t.Parallel()
	url := pgtest.Database(t)
	st := openPostgres(t, url)
	lab, err := server.New(server.Config{Store: classesDown{st}})
	if err != nil {
		t.Fatal(err)
	}
	if err := lab.Start(context.Background()); !errors.Is(err, errStoreDown) {
		t.Fatalf("Start = %v, want the store's failure", err)
	}
	admin, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	listeners := func() int {
		var n int
		if err := admin.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`, postgres.ListenerName).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// The backend leaves pg_stat_activity a moment after its client hangs up.
	waitFor(t, func() bool { return listeners() == 0 })
	if err := lab.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}
