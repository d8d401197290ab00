package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives its tests, such as
// a janitor left running after run returned.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
