package store_test

import (
	"testing"

	"github.com/toolcall-lab/lab/store"
)

func TestCodes(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		c := store.NewCode()
		if !store.ValidCode(c) {
			t.Fatalf("NewCode() = %q", c)
		}
		seen[c] = true
	}
	if len(seen) < 190 {
		t.Fatalf("200 codes gave only %d distinct ones", len(seen))
	}
	for _, bad := range []string{"", "12345", "1234567", "12345a", "١٢٣٤٥٦", " 12345"} {
		if store.ValidCode(bad) {
			t.Errorf("ValidCode(%q) = true", bad)
		}
	}
	if store.NameKey("  Ada   LOVELACE ") != "ada lovelace" {
		t.Errorf("NameKey = %q", store.NameKey("  Ada   LOVELACE "))
	}
	if a, b := store.NewSecret(), store.NewSecret(); a == b || len(a) < 26 {
		t.Errorf("NewSecret gave %q and %q", a, b)
	}
}
