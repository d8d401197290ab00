package store_test

import (
	"testing"

	"github.com/toolcall-lab/lab/store"
	"github.com/toolcall-lab/lab/store/storetest"
)

// TestConformance runs the suite every store passes (store/storetest) on
// Memory.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) storetest.Store { return store.NewMemory() })
}
