package server

import "context"

// Sweep runs one janitor pass now, for tests.
func (s *Server) Sweep(ctx context.Context) error { return s.sweep(ctx) }
