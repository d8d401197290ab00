package server_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives its tests: every
// goroutine the server starts has an owner and an exit.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
