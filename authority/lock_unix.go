//go:build unix

package authority

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive advisory lock on f, waiting for it: the
// service and a batch certification may share one ledger.
func lockFile(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }

// unlockFile releases it.
func unlockFile(f *os.File) { syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
