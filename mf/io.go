package mf

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/privrec/privrec/internal/atomicfile"
	"io"
	"math"
	"os"
)

// The model file format, version 1. All integers and floats are
// little-endian.
//
//	magic      9 bytes  "PRIVRECMF"
//	version    uint16   1
//	length     uint64   number of payload bytes that follow
//	payload:
//	  flags      uint32  bit 0: biased, bit 1: item titles present
//	  dim        uint32
//	  numUsers   uint32
//	  numItems   uint32
//	  mean       float32
//	  scale      3 × float32  Min, Max, Step
//	  U          numUsers·dim float32
//	  V          numItems·dim float32
//	  BU, BI     numUsers + numItems float32, only if biased
//	  UserIDs    uint32 count (0 or numUsers), then per string a uvarint length and the bytes
//	  ItemIDs    likewise (0 or numItems)
//	  ItemTitles likewise (numItems, only if titles present)
//	checksum   32 bytes SHA-256 of everything before it
const (
	magic   = "PRIVRECMF"
	version = 1
	// headerLen is the length of magic, version and length.
	headerLen = len(magic) + 2 + 8
	// maxPayload bounds the payload length a reader accepts (64 GiB).
	maxPayload = 1 << 36
)

// Errors of ReadModel and Load, wrapped with details.
var (
	ErrMagic     = errors.New("mf: not a privrec model file (bad magic)")
	ErrVersion   = errors.New("mf: unsupported model file version")
	ErrTruncated = errors.New("mf: model file truncated")
	ErrChecksum  = errors.New("mf: model file checksum mismatch")
	ErrCorrupt   = errors.New("mf: model file inconsistent")
)

const (
	flagBiased = 1 << iota
	flagTitles
)

// check reports whether m's fields are mutually consistent.
func (m *Model) check() error {
	switch {
	case m.Dim < 1 || m.Dim > MaxDim:
		return fmt.Errorf("Dim %d outside 1..%d", m.Dim, MaxDim)
	case m.NumUsers < 0 || m.NumItems < 0 || int64(m.NumUsers) > math.MaxUint32 || int64(m.NumItems) > math.MaxUint32:
		return fmt.Errorf("NumUsers %d, NumItems %d out of range", m.NumUsers, m.NumItems)
	case len(m.U) != m.NumUsers*m.Dim:
		return fmt.Errorf("len(U) = %d, want NumUsers×Dim = %d", len(m.U), m.NumUsers*m.Dim)
	case len(m.V) != m.NumItems*m.Dim:
		return fmt.Errorf("len(V) = %d, want NumItems×Dim = %d", len(m.V), m.NumItems*m.Dim)
	case m.Biased && (len(m.BU) != m.NumUsers || len(m.BI) != m.NumItems):
		return fmt.Errorf("len(BU), len(BI) = %d, %d, want %d, %d", len(m.BU), len(m.BI), m.NumUsers, m.NumItems)
	case !m.Biased && (m.BU != nil || m.BI != nil):
		return errors.New("biases set in an unbiased model")
	case m.UserIDs != nil && len(m.UserIDs) != m.NumUsers:
		return fmt.Errorf("%d user IDs for %d users", len(m.UserIDs), m.NumUsers)
	case m.ItemIDs != nil && len(m.ItemIDs) != m.NumItems:
		return fmt.Errorf("%d item IDs for %d items", len(m.ItemIDs), m.NumItems)
	case m.ItemTitles != nil && len(m.ItemTitles) != m.NumItems:
		return fmt.Errorf("%d item titles for %d items", len(m.ItemTitles), m.NumItems)
	}
	return nil
}

// WriteTo writes m to w in the model file format. It fails without
// writing if m is inconsistent.
func (m *Model) WriteTo(w io.Writer) (int64, error) {
	if err := m.check(); err != nil {
		return 0, fmt.Errorf("mf: cannot write model: %v", err)
	}
	var flags uint32
	if m.Biased {
		flags |= flagBiased
	}
	if m.ItemTitles != nil {
		flags |= flagTitles
	}
	n := 4*4 + 4*4 + 4*(len(m.U)+len(m.V)+len(m.BU)+len(m.BI))
	b := make([]byte, headerLen, headerLen+n+32)
	copy(b, magic)
	binary.LittleEndian.PutUint16(b[len(magic):], version)
	b = binary.LittleEndian.AppendUint32(b, flags)
	for _, x := range []int{m.Dim, m.NumUsers, m.NumItems} {
		b = binary.LittleEndian.AppendUint32(b, uint32(x))
	}
	for _, x := range []float32{m.Mean, m.Scale.Min, m.Scale.Max, m.Scale.Step} {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	for _, xs := range [][]float32{m.U, m.V, m.BU, m.BI} {
		for _, x := range xs {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
		}
	}
	for _, ss := range [][]string{m.UserIDs, m.ItemIDs} {
		b = appendStrings(b, ss)
	}
	if m.ItemTitles != nil {
		b = appendStrings(b, m.ItemTitles)
	}
	binary.LittleEndian.PutUint64(b[len(magic)+2:], uint64(len(b)-headerLen))
	sum := sha256.Sum256(b)
	b = append(b, sum[:]...)
	k, err := w.Write(b)
	return int64(k), err
}

func appendStrings(b []byte, ss []string) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(ss)))
	for _, s := range ss {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

// ReadModel reads one model in the model file format from r, reading no
// further than its end. It returns an error wrapping ErrMagic, ErrVersion,
// ErrTruncated, ErrChecksum or ErrCorrupt for a bad stream, and never
// panics.
func ReadModel(r io.Reader) (*Model, error) {
	hdr := make([]byte, headerLen)
	if n, err := io.ReadFull(r, hdr); err != nil {
		if n >= len(magic) && string(hdr[:len(magic)]) != magic || n < len(magic) && !bytes.HasPrefix([]byte(magic), hdr[:n]) {
			return nil, ErrMagic
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, fmt.Errorf("%w: header has %d of %d bytes", ErrTruncated, n, headerLen)
		}
		return nil, err
	}
	if string(hdr[:len(magic)]) != magic {
		return nil, ErrMagic
	}
	if v := binary.LittleEndian.Uint16(hdr[len(magic):]); v != version {
		return nil, fmt.Errorf("%w %d (this build reads version %d)", ErrVersion, v, version)
	}
	plen := binary.LittleEndian.Uint64(hdr[len(magic)+2:])
	if plen > maxPayload {
		return nil, fmt.Errorf("%w: payload length %d exceeds %d", ErrCorrupt, plen, uint64(maxPayload))
	}
	// Read at most what the header announces, growing the buffer as data
	// arrives, so a lying header cannot force a huge allocation.
	var buf bytes.Buffer
	buf.Write(hdr)
	want := int64(plen) + sha256.Size
	n, err := io.Copy(&buf, io.LimitReader(r, want))
	if err != nil {
		return nil, err
	}
	if n < want {
		return nil, fmt.Errorf("%w: header announces %d payload and %d checksum bytes, found %d", ErrTruncated, plen, sha256.Size, n)
	}
	b := buf.Bytes()
	body, sum := b[:len(b)-sha256.Size], b[len(b)-sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil, ErrChecksum
	}
	m, err := decode(body[headerLen:])
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return m, nil
}

// decoder reads little-endian values from a payload, remembering the
// first error.
type decoder struct {
	b   []byte
	off int
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("payload offset %d: %s", d.off, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) take(n int, what string) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b)-d.off {
		d.fail("%s needs %d bytes, %d left", what, n, len(d.b)-d.off)
		return nil
	}
	p := d.b[d.off : d.off+n]
	d.off += n
	return p
}

func (d *decoder) u32(what string) uint32 {
	p := d.take(4, what)
	if p == nil {
		return 0
	}
	return binary.LittleEndian.Uint32(p)
}

func (d *decoder) f32s(n int, what string) []float32 {
	if d.err != nil || n == 0 {
		return []float32{}
	}
	if n > (len(d.b)-d.off)/4 {
		d.fail("%s needs %d floats, %d bytes left", what, n, len(d.b)-d.off)
		return nil
	}
	p := d.take(4*n, what)
	xs := make([]float32, n)
	for j := range xs {
		x := math.Float32frombits(binary.LittleEndian.Uint32(p[4*j:]))
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			d.fail("%s[%d] is %g", what, j, x)
			return nil
		}
		xs[j] = x
	}
	return xs
}

func (d *decoder) strings(want int, what string) []string {
	n := int(d.u32(what + " count"))
	if d.err != nil || n == 0 {
		return nil
	}
	if n != want {
		d.fail("%d %s for %d rows", n, what, want)
		return nil
	}
	if n > len(d.b)-d.off { // each string takes at least one byte
		d.fail("%d %s but %d bytes left", n, what, len(d.b)-d.off)
		return nil
	}
	ss := make([]string, n)
	for j := range ss {
		l, k := binary.Uvarint(d.b[d.off:])
		if k <= 0 || l > uint64(len(d.b)-d.off-k) {
			d.fail("%s[%d]: bad length", what, j)
			return nil
		}
		d.off += k
		ss[j] = string(d.take(int(l), what))
	}
	return ss
}

// decode parses a checksummed payload.
func decode(b []byte) (*Model, error) {
	d := &decoder{b: b}
	flags := d.u32("flags")
	dim, nu, ni := d.u32("dim"), d.u32("numUsers"), d.u32("numItems")
	var f [4]float32
	for j := range f {
		f[j] = math.Float32frombits(d.u32("mean and scale"))
	}
	if d.err != nil {
		return nil, d.err
	}
	if flags&^(flagBiased|flagTitles) != 0 {
		return nil, fmt.Errorf("unknown flags %#x", flags)
	}
	if dim < 1 || dim > MaxDim {
		return nil, fmt.Errorf("dim %d outside 1..%d", dim, MaxDim)
	}
	for _, x := range f {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil, fmt.Errorf("mean or scale not finite: %v", f)
		}
	}
	if !(f[1] <= f[2]) || f[3] < 0 {
		return nil, fmt.Errorf("bad scale %g..%g step %g", f[1], f[2], f[3])
	}
	m := &Model{
		Dim: int(dim), NumUsers: int(nu), NumItems: int(ni),
		Mean:   f[0],
		Biased: flags&flagBiased != 0,
	}
	m.Scale.Min, m.Scale.Max, m.Scale.Step = f[1], f[2], f[3]
	// Bound the sizes by the bytes present before multiplying.
	if uint64(nu)*uint64(dim) > uint64(len(b)) || uint64(ni)*uint64(dim) > uint64(len(b)) {
		return nil, fmt.Errorf("%d users and %d items of dimension %d do not fit in %d bytes", nu, ni, dim, len(b))
	}
	m.U = d.f32s(m.NumUsers*m.Dim, "U")
	m.V = d.f32s(m.NumItems*m.Dim, "V")
	if m.Biased {
		m.BU = d.f32s(m.NumUsers, "BU")
		m.BI = d.f32s(m.NumItems, "BI")
	}
	m.UserIDs = d.strings(m.NumUsers, "user IDs")
	m.ItemIDs = d.strings(m.NumItems, "item IDs")
	if flags&flagTitles != 0 {
		m.ItemTitles = d.strings(m.NumItems, "item titles")
		if m.ItemTitles == nil && d.err == nil {
			if m.NumItems > 0 {
				d.fail("titles flagged but absent")
			} else {
				m.ItemTitles = []string{}
			}
		}
	}
	if d.err != nil {
		return nil, d.err
	}
	if d.off != len(b) {
		return nil, fmt.Errorf("%d bytes after the last field", len(b)-d.off)
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	return m, nil
}

// Save writes m to path in the model file format. It writes a temporary
// file in the same directory and renames it, so path never holds a
// partly written model.
func (m *Model) Save(path string) error {
	err := atomicfile.Write(path, func(f *os.File) error {
		_, err := m.WriteTo(f)
		return err
	})
	if err != nil {
		return fmt.Errorf("mf: save %s: %w", path, err)
	}
	return nil
}

// Load reads a model saved by Save. Errors name path and wrap ErrMagic,
// ErrVersion, ErrTruncated, ErrChecksum or ErrCorrupt when the file is
// not a valid model.
func Load(path string) (*Model, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("mf: load: %w", err)
	}
	defer f.Close()
	m, err := ReadModel(f)
	if err != nil {
		return nil, fmt.Errorf("mf: load %s: %w", path, err)
	}
	var extra [1]byte
	if n, _ := f.Read(extra[:]); n > 0 {
		return nil, fmt.Errorf("mf: load %s: %w: data after the checksum", path, ErrCorrupt)
	}
	return m, nil
}
