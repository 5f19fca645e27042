//go:build unix

package deploy

import (
	"bytes"
	"os"
	"strconv"
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
	rss, hwm := statusKB(status, "VmRSS:"), statusKB(status, "VmHWM:")
	if hwm > 0 {
		peak = hwm
	}
	return cpu, rss, peak
}

// statusKB returns the field of /proc/self/status named key (in kB) in
// bytes, 0 when it is missing.
func statusKB(status []byte, key string) int64 {
	i := bytes.Index(status, []byte(key))
	if i < 0 {
		return 0
	}
	line := status[i+len(key):]
	if j := bytes.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	f := bytes.Fields(line)
	if len(f) == 0 {
		return 0
	}
	n, err := strconv.ParseInt(string(f[0]), 10, 64)
	if err != nil {
		return 0
	}
	return n * 1024
}
