package deploy

import (
	"bytes"
	"strconv"
)

// statusField returns the field named key of a /proc/self/status file
// (VmRSS, VmHWM: given in kB) in bytes, and whether it is there.
func statusField(status []byte, key string) (int64, bool) {
	for line := range bytes.SplitSeq(status, []byte("\n")) {
		rest, ok := bytes.CutPrefix(line, []byte(key+":"))
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(string(bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(rest), []byte("kB")))), 10, 64)
		return kb << 10, err == nil
	}
	return 0, false
}
