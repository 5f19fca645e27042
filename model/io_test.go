package model

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

// full returns a model with every optional part set, random factors, IDs,
// titles and metadata.
func full() *Model {
	const nu, ni, k = 30, 20, 3
	r := rng.New(1, 2)
	f := func(n int) []float32 {
		xs := make([]float32, n)
		for j := range xs {
			xs[j] = float32(r.NormFloat64())
		}
		return xs
	}
	m := &Model{
		Dim: k, NumUsers: nu, NumItems: ni, U: f(nu * k), V: f(ni * k),
		Mean: 3.25, BU: f(nu), BI: f(ni), Offset: f(nu), UserWeight: f(nu), ItemWeight: f(ni),
		Rated: make([]bool, nu), Default: 3, Ranking: true, Scale: ratings.HalfStars5,
		UserIDs: make([]string, nu), ItemIDs: make([]string, ni), ItemTitles: make([]string, ni),
		Method: "hdpmf", Config: json.RawMessage(`{"dim":3,"eps":0.5,"note":"<&>"}`),
		Privacy: Privacy{Unit: "rating value", Trusted: "nobody", EpsRound: 0.5, EpsTotal: math.Inf(1), Delta: 1e-6, Note: "basic composition"},
	}
	for u := range nu {
		m.Rated[u] = u%3 != 0
		m.UserIDs[u] = "u" + strconv.Itoa(u)
	}
	for i := range ni {
		m.ItemIDs[i] = strconv.Itoa(100 + i)
		m.ItemTitles[i] = "Film " + m.ItemIDs[i] + " (1999) – é"
	}
	return m
}

// saved returns the models the round-trip tests save.
func saved() map[string]*Model {
	ms := variants()
	ms["full"] = full()
	noIDs := handModel(false)
	noIDs.UserIDs, noIDs.ItemIDs = nil, nil
	ms["no IDs"] = noIDs
	nan := handModel(true)
	nan.Privacy.EpsTotal, nan.Privacy.EpsRound = math.Inf(-1), 2
	nan.Method = "mf"
	ms["negative inf"] = nan
	user := handModel(false)
	user.Method = "dp-als"
	user.Privacy = Privacy{Unit: "user", Trusted: "nobody", EpsRound: 1, EpsTotal: 1, Delta: 1e-6,
		Neighbouring: "add/remove one user", EpsReplace: 2.112}
	ms["neighbouring relation"] = user
	ind := handModel(false)
	ind.Method, ind.Ranking = "dp-ease", true
	ind.UserItems = make([]int32, ind.Dim-1)
	for k := range ind.UserItems {
		ind.UserItems[k] = int32(ind.NumItems - 1 - k)
	}
	ms["user items"] = ind
	rel := handModel(false)
	rel.Release = &Release{Round: 7, Users: 2000}
	ms["interim release"] = rel
	return ms
}

func TestSaveLoadRoundTrip(t *testing.T) {
	for name, m := range saved() {
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

func TestConfigCompacted(t *testing.T) {
	m := handModel(false)
	m.Config = json.RawMessage("{ \"dim\" : 3 }")
	var buf bytes.Buffer
	if _, err := m.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	got, err := ReadModel(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Config) != `{"dim":3}` {
		t.Errorf("Config = %s, want it compacted", got.Config)
	}
}

func TestReadModelStream(t *testing.T) {
	var buf bytes.Buffer
	a, b := handModel(true), full()
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

func TestWriteInvalid(t *testing.T) {
	tests := []struct {
		name string
		edit func(m *Model)
		want string
	}{
		{"inconsistent", func(m *Model) { m.BI = m.BI[:2] }, "item biases"},
		{"NaN factor", func(m *Model) { m.V[3] = float32(math.NaN()) }, "V[3] is NaN"},
		{"infinite mean", func(m *Model) { m.Mean = float32(math.Inf(1)) }, "Mean"},
		{"bad config", func(m *Model) { m.Config = json.RawMessage("3") }, "Config"},
		{"user items for another Dim", func(m *Model) { m.UserItems = []int32{0, 1} }, "user items for Dim"},
		{"user item outside the catalog", func(m *Model) { m.UserItems = []int32{4} }, "user item 4 outside"},
		{"release of negative users", func(m *Model) { m.Release = &Release{Round: 3, Users: -1} }, "negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := handModel(true)
			tc.edit(m)
			var buf bytes.Buffer
			if _, err := m.WriteTo(&buf); err == nil || !strings.Contains(err.Error(), tc.want) || buf.Len() > 0 {
				t.Errorf("WriteTo = %v with %d bytes written, want an error about %s and nothing written", err, buf.Len(), tc.want)
			}
			path := filepath.Join(t.TempDir(), "m")
			if err := m.Save(path); err == nil {
				t.Error("Save accepted an invalid model")
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Errorf("failed Save left a file at %s", path)
			}
		})
	}
}

// encoded returns the bytes of handModel(true).
func encoded(t testing.TB) []byte {
	var buf bytes.Buffer
	if _, err := handModel(true).WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Offsets in the encoding of handModel(true).
const (
	offFlags = headerLen
	offDim   = headerLen + 4
	offUsers = headerLen + 8
	offItems = headerLen + 12
	offU     = headerLen + 4*4 + 5*4
)

// metaAt returns the offset of the metadata length in an encoding.
func metaAt(b []byte) int {
	// The metadata is last: find its length field by scanning back from
	// the checksum for the length that ends exactly there.
	end := len(b) - sha256.Size
	for off := end - 4; off >= headerLen; off-- {
		if int(binary.LittleEndian.Uint32(b[off:])) == end-off-4 {
			return off
		}
	}
	return -1
}

// withMeta replaces the metadata of an encoding, fixing the lengths and
// the checksum.
func withMeta(b []byte, meta string) []byte {
	off := metaAt(b)
	out := bytes.Clone(b[:off])
	out = binary.LittleEndian.AppendUint32(out, uint32(len(meta)))
	out = append(out, meta...)
	binary.LittleEndian.PutUint64(out[len(magic)+2:], uint64(len(out)-headerLen))
	sum := sha256.Sum256(out)
	return append(out, sum[:]...)
}

func TestLoadCorrupt(t *testing.T) {
	good := encoded(t)
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	put32 := func(off int, v uint32) []byte {
		return resum(edit(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[off:], v); return b }))
	}
	version := func(v uint16) []byte {
		return edit(func(b []byte) []byte { binary.LittleEndian.PutUint16(b[len(magic):], v); return b })
	}
	tests := []struct {
		name string
		data []byte
		want error
		msg  string // in the error, if set
	}{
		{"empty", nil, ErrTruncated, ""},
		{"wrong magic", edit(func(b []byte) []byte { b[0] = 'X'; return b }), ErrMagic, ""},
		{"other file", []byte("user\titem\trating\n1\t2\t3\n"), ErrMagic, ""},
		{"short other file", []byte("hi"), ErrMagic, ""},
		{"magic only", good[:len(magic)], ErrTruncated, ""},
		{"newer version", version(3), ErrVersion, "the file has version 3, this build reads versions 1 to 2"},
		{"version 0", version(0), ErrVersion, "version 0"},
		{"truncated payload", good[:len(good)/2], ErrTruncated, ""},
		{"truncated checksum", good[:len(good)-1], ErrTruncated, ""},
		{"flipped data byte", edit(func(b []byte) []byte { b[headerLen+40] ^= 0x10; return b }), ErrChecksum, ""},
		{"flipped checksum byte", edit(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), ErrChecksum, ""},
		{"trailing data", append(bytes.Clone(good), 0), ErrCorrupt, "after the checksum"},
		{"huge length", edit(func(b []byte) []byte { binary.LittleEndian.PutUint64(b[len(magic)+2:], 1<<62); return b }), ErrCorrupt, ""},
		{"inconsistent sizes", put32(offUsers, 1000), ErrCorrupt, "do not fit"},
		{"huge dim", put32(offDim, 1<<30), ErrCorrupt, "dim"},
		{"unknown flag", put32(offFlags, 1<<20|flagBU|flagBI), ErrCorrupt, "unknown flags"},
		{"NaN factor", put32(offU, 0x7fc00000), ErrCorrupt, "U[0]"},
		{"bad metadata JSON", withMeta(good, `{"privacy":`), ErrCorrupt, "metadata"},
		{"unknown metadata field", withMeta(good, `{"privacy":{"unit":"","trusted":"","eps_round":0,"eps_total":0,"delta":0},"extra":1}`), ErrCorrupt, "metadata"},
		{"metadata not canonical", withMeta(good, `{"privacy": {"unit":"","trusted":"","eps_round":0,"eps_total":0,"delta":0}}`), ErrCorrupt, "canonical"},
		{"config not an object", withMeta(good, `{"config":[1],"privacy":{"unit":"","trusted":"","eps_round":0,"eps_total":0,"delta":0}}`), ErrCorrupt, "Config"},
		{"metadata too long", resum(edit(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[metaAt(b):], 1<<31); return b })), ErrCorrupt, "metadata"},
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
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not name the file or say %q", err, tc.msg)
			}
		})
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// TestRatedByte checks that a Rated byte other than 0 or 1 is corrupt.
func TestRatedByte(t *testing.T) {
	m := handModel(false)
	m.Rated = []bool{true, false}
	var buf bytes.Buffer
	if _, err := m.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	b[offU+4*(len(m.U)+len(m.V))] = 2
	if _, err := ReadModel(bytes.NewReader(resum(b))); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "Rated[0] is 2") {
		t.Errorf("ReadModel = %v, want ErrCorrupt about Rated[0]", err)
	}
}

// resum recomputes the checksum of an edited encoding.
func resum(b []byte) []byte {
	out := bytes.Clone(b[:len(b)-sha256.Size])
	sum := sha256.Sum256(out)
	return append(out, sum[:]...)
}

func FuzzReadModel(f *testing.F) {
	for _, m := range []*Model{handModel(true), handModel(false), full(), variants()["itemmean"]} {
		var buf bytes.Buffer
		m.WriteTo(&buf)
		f.Add(buf.Bytes())
	}
	f.Add([]byte(magic))
	for _, name := range []string{"v1.privrecmf", "v2.privrecmf"} {
		if b, err := os.ReadFile(filepath.Join("testdata", name)); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ReadModel(bytes.NewReader(data))
		if err != nil {
			return
		}
		// A model that reads back must be usable and re-encode to the same
		// bytes (a version-1 file re-encodes as version 2).
		m.Predict(0, 0)
		m.Recommend(0, 3, nil)
		var out bytes.Buffer
		if _, err := m.WriteTo(&out); err != nil {
			t.Fatalf("re-encoding a decoded model: %v", err)
		}
		if binary.LittleEndian.Uint16(data[len(magic):]) == version && !bytes.Equal(out.Bytes(), data[:out.Len()]) {
			t.Fatalf("re-encoding differs")
		}
	})
}

var updateGolden = flag.Bool("update", false, "rewrite testdata/v2.privrecmf")

// golden is the model of testdata/v2.privrecmf.
func golden() *Model {
	m := handModel(true)
	m.ItemTitles = []string{"Alpha (1990)", "Beta", "Gamma: é", ""}
	m.Offset = []float32{0.5, 0}
	m.UserWeight, m.ItemWeight = []float32{1, 2}, []float32{1, 1, 0.5, 4}
	m.Rated = []bool{true, false}
	m.Method, m.Config = "mf", json.RawMessage(`{"dim":2}`)
	m.Privacy = Privacy{Unit: "none", Trusted: "the recommender", Note: "golden"}
	return m
}

// TestGoldenFiles checks that the checked-in files still load: version 1
// (written by package mf's Save) and version 2, so that format changes
// that break saved models are noticed.
func TestGoldenFiles(t *testing.T) {
	v1 := handModel(true)
	v1.ItemTitles = []string{"Alpha (1990)", "Beta", "Gamma: é", ""}
	v1u := handModel(false) // an unbiased version-1 model: its mean is only the default
	v1u.ItemTitles = v1.ItemTitles
	if *updateGolden {
		if err := golden().Save(filepath.Join("testdata", "v2.privrecmf")); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		file string
		want *Model
		data []byte
	}{
		{"v1.privrecmf", v1, nil},
		{"v1 unbiased", v1u, v1Unbiased(t)},
		{"v2.privrecmf", golden(), nil},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			var got *Model
			var err error
			if tc.data != nil {
				got, err = ReadModel(bytes.NewReader(tc.data))
			} else {
				got, err = Load(filepath.Join("testdata", tc.file))
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// v1Unbiased returns testdata/v1.privrecmf with the biases taken out, as
// the old unbiased Save wrote it.
func v1Unbiased(t *testing.T) []byte {
	b, err := os.ReadFile(filepath.Join("testdata", "v1.privrecmf"))
	if err != nil {
		t.Fatal(err)
	}
	const offBias = headerLen + 4*4 + 4*4 + 4*(2*2+4*2) // after flags, sizes, mean, scale, U, V
	out := bytes.Clone(b[:offBias])
	out = append(out, b[offBias+4*(2+4):len(b)-sha256.Size]...)
	binary.LittleEndian.PutUint32(out[headerLen:], v1Titles)
	binary.LittleEndian.PutUint64(out[len(magic)+2:], uint64(len(out)-headerLen))
	sum := sha256.Sum256(out)
	return append(out, sum[:]...)
}
