package deploy

import "testing"

// TestStatusField: the fields of /proc/self/status the ledger and the
// tests read, in bytes, and a missing or malformed one reported so.
func TestStatusField(t *testing.T) {
	status := []byte("Name:\tprivrec\nVmHWM:\t  123456 kB\nVmRSS:\t   65432 kB\nThreads:\t9\nVmBad:\tlots kB\n")
	tests := []struct {
		key  string
		want int64
		ok   bool
	}{
		{"VmHWM", 123456 << 10, true},
		{"VmRSS", 65432 << 10, true},
		{"VmSwap", 0, false},
		{"VmBad", 0, false},
		{"Vm", 0, false},
	}
	for _, tt := range tests {
		if got, ok := statusField(status, tt.key); got != tt.want || ok != tt.ok {
			t.Errorf("statusField(%q) = %d, %v; want %d, %v", tt.key, got, ok, tt.want, tt.ok)
		}
	}
}
