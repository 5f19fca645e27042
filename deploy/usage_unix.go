//go:build unix

package deploy

import (
	"os"
	"syscall"
)

// processUsage returns the process's CPU time so far (user + system, in
// seconds), its resident set now and its highest resident set since it
// started, in bytes. The high-water mark is not reset (Linux could,
// through /proc/self/clear_refs): that would also lower what getrusage
// and /usr/bin/time report as the process's peak.
func processUsage() (cpu float64, rss, peak int64) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		cpu = float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
		peak = int64(ru.Maxrss) * 1024 // kilobytes on Linux
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return cpu, peak, peak
	}
	rss, _ = statusField(status, "VmRSS")
	if hwm, ok := statusField(status, "VmHWM"); ok && hwm > 0 {
		peak = hwm
	}
	return cpu, rss, peak
}
