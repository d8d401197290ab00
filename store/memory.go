package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/toolcall-lab/lab/model"
)

// Memory keeps sessions in process memory: for tests and demos, gone when
// the process exits. It behaves as store/sqlite does, minus durability.
//
// Ownership: mu guards sessions, classes and closed; records are copied in
// and out.
type Memory struct {
	mu       sync.Mutex
	sessions map[string]*memSession
	classes  memClasses // memory_classes.go
	closed   bool
}

var _ Store = (*Memory)(nil)

type memSession struct {
	info Session
	// chunks hold the records in seq order, each chunk filled before the
	// next is made, twice as big up to maxMemChunk: an append never copies
	// the records before it, as a growing slice did at every doubling.
	chunks [][]Record
	n      int // records in all chunks
}

// maxMemChunk bounds a memSession chunk's records.
const maxMemChunk = 256

func (s *memSession) add(r Record) {
	if k := len(s.chunks); k == 0 || len(s.chunks[k-1]) == cap(s.chunks[k-1]) {
		s.chunks = append(s.chunks, make([]Record, 0, min(8<<k, maxMemChunk)))
	}
	last := &s.chunks[len(s.chunks)-1]
	*last = append(*last, r)
	s.n++
}

// after returns a copy of the records after the first n.
func (s *memSession) after(n int) []Record {
	out := make([]Record, 0, s.n-n)
	for _, c := range s.chunks {
		if n >= len(c) {
			n -= len(c)
			continue
		}
		out = append(out, c[n:]...)
		n = 0
	}
	return out
}

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory { return &Memory{sessions: make(map[string]*memSession)} }

// Append stores r. Seqs must count up from 1 in each session.
func (m *Memory) Append(_ context.Context, r Record) error {
	if err := check(r); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	s := m.sessions[r.Session]
	if s == nil {
		s = &memSession{info: Session{ID: r.Session, Created: r.Time}}
		m.sessions[r.Session] = s
	}
	if want := uint64(s.n) + 1; r.Seq != want {
		if r.Seq < want {
			return fmt.Errorf("appending to session %s seq %d: %w", r.Session, r.Seq, ErrSeqTaken)
		}
		return fmt.Errorf("appending to session %s: seq %d, want %d", r.Session, r.Seq, want)
	}
	s.add(r)
	s.info.LastActive = r.Time
	if r.Event.Kind == model.Renamed {
		s.info.Name = r.Event.Name
	}
	return nil
}

// Sessions lists the stored sessions, oldest first.
func (m *Memory) Sessions(context.Context) ([]Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	out := make([]Session, 0, len(m.sessions))
	for _, s := range m.sessions {
		out = append(out, s.info)
	}
	slices.SortFunc(out, bySessionAge)
	return out, nil
}

func bySessionAge(a, b Session) int {
	if c := a.Created.Compare(b.Created); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// Events returns one session's records in order; none for an unknown session.
func (m *Memory) Events(ctx context.Context, id string) ([]Record, error) {
	return m.EventsAfter(ctx, id, 0)
}

// EventsAfter returns one session's records after seq after, in order.
func (m *Memory) EventsAfter(_ context.Context, id string, after uint64) ([]Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	if s := m.sessions[id]; s != nil && after < uint64(s.n) {
		return s.after(int(after)), nil
	}
	return nil, nil
}

// Delete removes the sessions with their events.
func (m *Memory) Delete(_ context.Context, ids []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	for _, id := range ids {
		delete(m.sessions, id)
		delete(m.classes.members, id)
	}
	return nil
}

// Ready reports whether the store takes writes.
func (m *Memory) Ready(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	return nil
}

// Close makes every later call fail with ErrClosed.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}
