//go:build !unix

package sqlite

import "os"

// lockFile does nothing where flock(2) is missing: one lab per data file
// is then the operator's to keep.
func lockFile(*os.File) error { return nil }
