package sqlite

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a store's writer or checkpointer, or a
// database/sql goroutine, outlives the tests: Close must stop them all.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
