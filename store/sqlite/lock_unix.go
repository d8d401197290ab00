//go:build unix

package sqlite

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive lock on f for as long as it is open, or
// fails at once if another process holds one.
func lockFile(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}
