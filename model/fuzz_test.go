package model

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// FuzzReadModelFramed reads the input as a model file with its header's
// payload length and its checksum fixed, so that the fuzzer reaches the
// decoder past the SHA-256 (FuzzReadModel, on the raw bytes, rarely
// does): it may refuse the file, never panic. A file it accepts writes
// back and reads again to the same bytes, and the model answers
// predictions and recommendations for any user and item index.
func FuzzReadModelFramed(f *testing.F) {
	for _, name := range []string{"v1.privrecmf", "v2.privrecmf"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < headerLen {
			return
		}
		// The same bytes with the header's length and the checksum fixed.
		v := binary.LittleEndian.Uint16(data[len(magic):])%version + 1
		payload := data[headerLen:]
		if len(payload) >= sha256.Size {
			payload = payload[:len(payload)-sha256.Size]
		}
		framed := []byte(magic)
		framed = binary.LittleEndian.AppendUint16(framed, v)
		framed = binary.LittleEndian.AppendUint64(framed, uint64(len(payload)))
		framed = append(framed, payload...)
		sum := sha256.Sum256(framed)
		framed = append(framed, sum[:]...)
		m, err := ReadModel(bytes.NewReader(framed))
		if err != nil {
			return
		}
		var out bytes.Buffer
		if _, err := m.WriteTo(&out); err != nil {
			t.Fatalf("a model read from a file does not write: %v", err)
		}
		m2, err := ReadModel(bytes.NewReader(out.Bytes()))
		if err != nil {
			t.Fatalf("a model written does not read back: %v", err)
		}
		var out2 bytes.Buffer
		m2.WriteTo(&out2)
		if !bytes.Equal(out.Bytes(), out2.Bytes()) {
			t.Fatal("write, read, write differs")
		}
		for _, u := range []int32{-1, 0, int32(m.NumUsers) - 1, int32(m.NumUsers)} {
			for _, i := range []int32{-1, 0, int32(m.NumItems) - 1, int32(m.NumItems)} {
				m.Predict(u, i)
			}
			m.Recommend(u, 3, []int32{-5, 0, 1 << 30})
		}
	})
}
