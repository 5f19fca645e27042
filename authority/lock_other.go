//go:build !unix

package authority

import "os"

// lockFile is a no-op where flock is missing: one process at a time
// must use a ledger there.
func lockFile(*os.File) error { return nil }

// unlockFile is a no-op.
func unlockFile(*os.File) {}
