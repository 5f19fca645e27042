package method_test

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestMain keeps the package's tests within 1 GB: they fit every
// registered method, some on dense per-user state (LDP-OP Basic, dp-als's
// uploads over the catalog), and with the default GC pacing the heap of
// one fit was still held when the next began (949 MB peak RSS for the
// package). A soft limit of 768 MiB makes the collector run earlier; a
// GOMEMLIMIT in the environment wins.
func TestMain(m *testing.M) {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(768 << 20)
	}
	os.Exit(m.Run())
}
