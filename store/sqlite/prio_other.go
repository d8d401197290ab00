//go:build !linux

package sqlite

// background does nothing where threads have no priority of their own
// (prio_linux.go).
func background() (restore func()) { return func() {} }
