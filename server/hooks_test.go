package server

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/toolcall-lab/lab/internal/limit"
)

// Sweep runs one janitor pass now, for tests.
func (s *Server) Sweep(ctx context.Context) error { return s.sweep(ctx) }

// Attached counts the connections admitted to session id, for tests that
// must wait for a closed connection's handler to finish.
func (s *Server) Attached(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.sessions[id]
	if !ok {
		return 0
	}
	return sess.admitted
}

// Routes lists every registered route as "METHOD path", for the test that
// walks them all with bad input.
func (s *Server) Routes() []string {
	var out []string
	for _, r := range s.echo.Routes() {
		out = append(out, r.Method+" "+r.Path)
	}
	return out
}

// OutboxBytes is what every connection's outbox holds now, and the most it
// has held, by the server's own accounting.
func (s *Server) OutboxBytes() (now, peak int64) {
	return s.outbox.Used(), s.outbox.Peak()
}

// StoredSessions counts the sessions counted against MaxSessions.
func (s *Server) StoredSessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stored
}

// newTestSession returns a new session of a server with the default
// config, and the server.
func newTestSession(t testing.TB) (*Server, *session) {
	t.Helper()
	srv, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	return srv, newSession(uuid.NewString(), &srv.cfg, srv.metrics, srv.frames, func() {})
}

// collector is a connection that keeps every frame it is sent in its
// outbox, for a test to read, and starts no flusher.
func collector(m *metrics) *conn {
	return &conn{stopped: true, out: newOutbox(1<<30, limit.NewBudget(1<<30)), metrics: m}
}
