//go:build unix

package secagg

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user and system) the process has used,
// for benchmarks on a shared machine, where wall time depends on the load.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
