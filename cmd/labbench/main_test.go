package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test server, connection or reader
// goroutine outlives the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
