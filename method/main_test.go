package method_test

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestMain keeps the package's tests within half a gigabyte: they fit
// every registered method, some on dense per-user state (LDP-OP Basic
// holds every user's m·d noise and upload, 480 MB live on
// ml-latest-small; dp-als's uploads over the catalog, 270 MB), and with
// the default GC pacing the heap of one fit was still held when the next
// began (949 MB peak RSS for the package). A soft limit makes the
// collector run earlier: 768 MiB gave a 756 MB peak, 448 MiB gives
// 498 MB (about LDP-OP Basic's live heap, which no limit goes under) for
// no measurable CPU (62.0 s user against 63.3 s). A GOMEMLIMIT in the
// environment wins.
func TestMain(m *testing.M) {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(448 << 20)
	}
	os.Exit(m.Run())
}
