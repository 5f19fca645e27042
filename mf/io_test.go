package mf

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestSaveLoadRoundTrip(t *testing.T) {
	trained, err := Train(context.Background(), synthetic(30, 20, 0.3, 1), Config{
		Dim: 3, Epochs: 2, LearnRate: 0.01, Schedule: Constant, Reg: 0.05, InitScale: 0.1, Biased: true,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	trained.ItemTitles = make([]string, trained.NumItems)
	for i := range trained.ItemTitles {
		trained.ItemTitles[i] = "Film " + trained.ItemIDs[i] + " (1999) – é"
	}
	noIDs := handModel(false)
	noIDs.UserIDs, noIDs.ItemIDs = nil, nil
	for name, m := range map[string]*Model{"trained": trained, "biased": handModel(true), "unbiased": handModel(false), "no IDs": noIDs} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.privrecmf")
			if err := m.Save(path); err != nil {
				t.Fatal(err)
			}
			got, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, m) {
				t.Errorf("Load(Save(m)) = %+v, want %+v", got, m)
			}
			// No temporary files are left behind.
			ents, _ := os.ReadDir(filepath.Dir(path))
			if len(ents) != 1 {
				t.Errorf("directory holds %d entries after Save, want 1", len(ents))
			}
		})
	}
}

func TestReadModelStream(t *testing.T) {
	var buf bytes.Buffer
	a, b := handModel(true), handModel(false)
	if _, err := a.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	n, err := b.WriteTo(&buf)
	if err != nil || n == 0 {
		t.Fatal(n, err)
	}
	// ReadModel stops at the end of each model.
	for _, want := range []*Model{a, b} {
		got, err := ReadModel(&buf)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got %+v, want %+v", got, want)
		}
	}
}

func TestWriteInconsistent(t *testing.T) {
	m := handModel(true)
	m.BI = m.BI[:2]
	if _, err := m.WriteTo(&bytes.Buffer{}); err == nil {
		t.Error("WriteTo accepted a model with 2 item biases for 4 items")
	}
	path := filepath.Join(t.TempDir(), "m")
	if err := m.Save(path); err == nil {
		t.Error("Save accepted an inconsistent model")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("failed Save left a file at %s", path)
	}
}

// encoded returns the bytes of handModel(true).
func encoded(t *testing.T) []byte {
	var buf bytes.Buffer
	if _, err := handModel(true).WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestLoadCorrupt(t *testing.T) {
	good := encoded(t)
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	tests := []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"wrong magic", edit(func(b []byte) []byte { b[0] = 'X'; return b }), ErrMagic},
		{"other file", []byte("user\titem\trating\n1\t2\t3\n"), ErrMagic},
		{"short other file", []byte("hi"), ErrMagic},
		{"magic only", good[:len(magic)], ErrTruncated},
		{"version 2", edit(func(b []byte) []byte { binary.LittleEndian.PutUint16(b[len(magic):], 2); return b }), ErrVersion},
		{"truncated payload", good[:len(good)/2], ErrTruncated},
		{"truncated checksum", good[:len(good)-1], ErrTruncated},
		{"flipped data byte", edit(func(b []byte) []byte { b[headerLen+40] ^= 0x10; return b }), ErrChecksum},
		{"flipped checksum byte", edit(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), ErrChecksum},
		{"trailing data", append(bytes.Clone(good), 0), ErrCorrupt},
		{"huge length", edit(func(b []byte) []byte { binary.LittleEndian.PutUint64(b[len(magic)+2:], 1<<62); return b }), ErrCorrupt},
		{"inconsistent sizes", resum(edit(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[headerLen+8:], 1000); return b })), ErrCorrupt},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.model")
			if err := os.WriteFile(path, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			m, err := Load(path)
			if !errors.Is(err, tc.want) || m != nil {
				t.Fatalf("Load = %v, %v; want error %v", m, err, tc.want)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// resum recomputes the checksum of an edited encoding.
func resum(b []byte) []byte {
	var m bytes.Buffer
	m.Write(b[:len(b)-32])
	sum := sha256Sum(b[:len(b)-32])
	return append(m.Bytes(), sum[:]...)
}

func FuzzReadModel(f *testing.F) {
	var buf bytes.Buffer
	handModel(true).WriteTo(&buf)
	f.Add(buf.Bytes())
	buf.Reset()
	handModel(false).WriteTo(&buf)
	f.Add(buf.Bytes())
	f.Add([]byte(magic))
	if b, err := os.ReadFile(filepath.Join("testdata", "tiny.privrecmf")); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ReadModel(bytes.NewReader(data))
		if err != nil {
			return
		}
		// A model that reads back must be usable and re-encode to the same bytes.
		m.Predict(0, 0)
		m.Recommend(0, 3, nil)
		var out bytes.Buffer
		if _, err := m.WriteTo(&out); err != nil {
			t.Fatalf("re-encoding a decoded model: %v", err)
		}
		if !bytes.Equal(out.Bytes(), data[:out.Len()]) {
			t.Fatalf("re-encoding differs")
		}
	})
}

func sha256Sum(b []byte) [32]byte { return sha256.Sum256(b) }

var updateGolden = flag.Bool("update", false, "rewrite testdata/tiny.privrecmf")

// TestGoldenFile checks that the checked-in version-1 file still loads, so
// that format changes that break saved models are noticed.
func TestGoldenFile(t *testing.T) {
	want := handModel(true)
	want.ItemTitles = []string{"Alpha (1990)", "Beta", "Gamma: é", ""}
	path := filepath.Join("testdata", "tiny.privrecmf")
	if *updateGolden {
		if err := want.Save(path); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Load(%s) = %+v, want %+v", path, got, want)
	}
}
