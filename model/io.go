package model

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"

	"github.com/privrec/privrec/accountant/rdp"
	"github.com/privrec/privrec/internal/atomicfile"
)

// The model file format, version 2. All integers and floats are
// little-endian.
//
//	magic      9 bytes  "PRIVRECMF"
//	version    uint16   2
//	length     uint64   number of payload bytes that follow
//	payload:
//	  flags      uint32  which optional parts are present (flag* below)
//	  dim        uint32
//	  numUsers   uint32
//	  numItems   uint32
//	  mean       float32
//	  default    float32
//	  scale      3 × float32  Min, Max, Step
//	  U          numUsers·dim float32
//	  V          numItems·dim float32
//	  BU         numUsers float32, if flagBU
//	  BI         numItems float32, if flagBI
//	  Offset     numUsers float32, if flagOffset
//	  UserWeight numUsers float32, then ItemWeight numItems float32, if flagWeights
//	  Rated      numUsers bytes, each 0 or 1, if flagRated
//	  UserIDs    uint32 count (0 or numUsers), then per string a uvarint length and the bytes
//	  ItemIDs    likewise (0 or numItems)
//	  ItemTitles likewise (numItems), if flagTitles
//	  metadata   uint32 length, then that many bytes of JSON:
//	             {"method": ..., "config": {...}, "privacy": {...},
//	             "user_items": [...]} (user_items only when set)
//	             (method and config left out when empty; a non-finite
//	             privacy number is the string "Inf", "-Inf" or "NaN")
//	checksum   32 bytes SHA-256 of everything before it
//
// Every float but the privacy figures is finite. Version 1, written by
// package mf before this package existed, had flags (bit 0: biased, bit 1:
// titles), dim ≥ 1, numUsers, numItems, mean, scale, U, V, BU and BI if
// biased, and the IDs and titles as above; ReadModel still reads it.
const (
	magic   = "PRIVRECMF"
	version = 2
	// headerLen is the length of magic, version and length.
	headerLen = len(magic) + 2 + 8
	// maxPayload bounds the payload length a reader accepts (64 GiB).
	maxPayload = 1 << 36
)

// Errors of ReadModel and Load, wrapped with details.
var (
	ErrMagic     = errors.New("model: not a privrec model file (bad magic)")
	ErrVersion   = errors.New("model: unsupported model file version")
	ErrTruncated = errors.New("model: model file truncated")
	ErrChecksum  = errors.New("model: model file checksum mismatch")
	ErrCorrupt   = errors.New("model: model file inconsistent")
)

// The payload flags of version 2. flagTitles has the same bit as in
// version 1.
const (
	flagBU = 1 << iota
	flagTitles
	flagBI
	flagOffset
	flagWeights
	flagRated
	flagRanking
	flagsAll = flagBU | flagTitles | flagBI | flagOffset | flagWeights | flagRated | flagRanking
)

// The payload flags of version 1.
const (
	v1Biased = 1 << iota
	v1Titles
)

// metadata is the JSON part of a version-2 payload.
type metadata struct {
	Method  string          `json:"method,omitempty"`
	Config  json.RawMessage `json:"config,omitempty"`
	Privacy privacyJSON     `json:"privacy"`
	// UserItems is Model.UserItems (left out when nil).
	UserItems []int32 `json:"user_items,omitempty"`
	// Release is Model.Release (left out when nil).
	Release *Release `json:"release,omitempty"`
}

// privacyJSON is Privacy with JSON-safe numbers.
type privacyJSON struct {
	Unit     string    `json:"unit"`
	Trusted  string    `json:"trusted"`
	EpsRound jsonFloat `json:"eps_round"`
	EpsTotal jsonFloat `json:"eps_total"`
	Delta    jsonFloat `json:"delta"`
	Note     string    `json:"note,omitempty"`
	// Releases is Privacy.Releases (finite numbers only).
	Releases []rdp.Release `json:"releases,omitempty"`
	// Neighbouring and EpsReplace are Privacy's (absent when empty).
	Neighbouring string    `json:"neighbouring,omitempty"`
	EpsReplace   jsonFloat `json:"eps_replace_one,omitempty"`
}

// jsonFloat is a float64 whose non-finite values are the JSON strings
// "Inf", "-Inf" and "NaN".
type jsonFloat float64

func (f jsonFloat) MarshalJSON() ([]byte, error) {
	x := float64(f)
	switch {
	case math.IsNaN(x):
		return []byte(`"NaN"`), nil
	case math.IsInf(x, 1):
		return []byte(`"Inf"`), nil
	case math.IsInf(x, -1):
		return []byte(`"-Inf"`), nil
	}
	return json.Marshal(x)
}

func (f *jsonFloat) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case `"NaN"`:
		*f = jsonFloat(math.NaN())
	case `"Inf"`:
		*f = jsonFloat(math.Inf(1))
	case `"-Inf"`:
		*f = jsonFloat(math.Inf(-1))
	default:
		x, err := strconv.ParseFloat(string(b), 64)
		if err != nil {
			return fmt.Errorf("privacy figure %s is not a number", b)
		}
		*f = jsonFloat(x)
	}
	return nil
}

// encodeMeta returns m's metadata as canonical JSON.
func (m *Model) encodeMeta() ([]byte, error) {
	p := m.Privacy
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(metadata{Method: m.Method, Config: m.Config, Privacy: privacyJSON{
		Unit: p.Unit, Trusted: p.Trusted, EpsRound: jsonFloat(p.EpsRound),
		EpsTotal: jsonFloat(p.EpsTotal), Delta: jsonFloat(p.Delta), Note: p.Note, Releases: p.Releases,
		Neighbouring: p.Neighbouring, EpsReplace: jsonFloat(p.EpsReplace),
	}, UserItems: m.UserItems, Release: m.Release})
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), err
}

// checkFinite reports the first non-finite float of m's numeric parts.
func (m *Model) checkFinite() error {
	for _, x := range []struct {
		name string
		xs   []float32
	}{
		{"Mean", []float32{m.Mean}}, {"Default", []float32{m.Default}},
		{"Scale", []float32{m.Scale.Min, m.Scale.Max, m.Scale.Step}},
		{"U", m.U}, {"V", m.V}, {"BU", m.BU}, {"BI", m.BI}, {"Offset", m.Offset},
		{"UserWeight", m.UserWeight}, {"ItemWeight", m.ItemWeight},
	} {
		for j, v := range x.xs {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("%s[%d] is %g", x.name, j, v)
			}
		}
	}
	return nil
}

// WriteTo writes m to w in the model file format (version 2). It fails
// without writing if m is inconsistent (see Check) or has a non-finite
// parameter. Config is stored compacted.
func (m *Model) WriteTo(w io.Writer) (int64, error) {
	err := m.Check()
	if err == nil {
		err = m.checkFinite()
	}
	var meta []byte
	if err == nil {
		meta, err = m.encodeMeta()
	}
	if err != nil {
		return 0, fmt.Errorf("model: cannot write model: %v", err)
	}
	var flags uint32
	for _, f := range []struct {
		set  bool
		flag uint32
	}{
		{m.BU != nil, flagBU}, {m.ItemTitles != nil, flagTitles}, {m.BI != nil, flagBI},
		{m.Offset != nil, flagOffset}, {m.UserWeight != nil, flagWeights},
		{m.Rated != nil, flagRated}, {m.Ranking, flagRanking},
	} {
		if f.set {
			flags |= f.flag
		}
	}
	floats := len(m.U) + len(m.V) + len(m.BU) + len(m.BI) + len(m.Offset) + len(m.UserWeight) + len(m.ItemWeight)
	n := 4*4 + 5*4 + 4*floats + len(m.Rated) + 4 + len(meta)
	b := make([]byte, headerLen, headerLen+n+32)
	copy(b, magic)
	binary.LittleEndian.PutUint16(b[len(magic):], version)
	b = binary.LittleEndian.AppendUint32(b, flags)
	for _, x := range []int{m.Dim, m.NumUsers, m.NumItems} {
		b = binary.LittleEndian.AppendUint32(b, uint32(x))
	}
	for _, x := range []float32{m.Mean, m.Default, m.Scale.Min, m.Scale.Max, m.Scale.Step} {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	for _, xs := range [][]float32{m.U, m.V, m.BU, m.BI, m.Offset, m.UserWeight, m.ItemWeight} {
		for _, x := range xs {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
		}
	}
	for _, r := range m.Rated {
		var c byte
		if r {
			c = 1
		}
		b = append(b, c)
	}
	for _, ss := range [][]string{m.UserIDs, m.ItemIDs} {
		b = appendStrings(b, ss)
	}
	if m.ItemTitles != nil {
		b = appendStrings(b, m.ItemTitles)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(meta)))
	b = append(b, meta...)
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

// ReadModel reads one model in the model file format (version 1 or 2)
// from r, reading no further than its end. It returns an error wrapping
// ErrMagic, ErrVersion, ErrTruncated, ErrChecksum or ErrCorrupt for a bad
// stream, and never panics.
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
	v := binary.LittleEndian.Uint16(hdr[len(magic):])
	if v < 1 || v > version {
		return nil, fmt.Errorf("%w: the file has version %d, this build reads versions 1 to %d", ErrVersion, v, version)
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
	m, err := decode(body[headerLen:], v)
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

// f32s reads n finite floats.
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

// bools reads n bytes, each 0 or 1.
func (d *decoder) bools(n int, what string) []bool {
	p := d.take(n, what)
	if d.err != nil {
		return nil
	}
	xs := make([]bool, n)
	for j, c := range p {
		if c > 1 {
			d.fail("%s[%d] is %d, want 0 or 1", what, j, c)
			return nil
		}
		xs[j] = c == 1
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

// decode parses a checksummed payload of format version v.
func decode(b []byte, v uint16) (*Model, error) {
	d := &decoder{b: b}
	flags := d.u32("flags")
	dim, nu, ni := d.u32("dim"), d.u32("numUsers"), d.u32("numItems")
	nf := 5 // mean, default, scale
	if v == 1 {
		nf = 4 // mean, scale
	}
	f := make([]float32, nf)
	for j := range f {
		f[j] = math.Float32frombits(d.u32("mean and scale"))
	}
	if d.err != nil {
		return nil, d.err
	}
	if v == 1 {
		f = []float32{f[0], f[0], f[1], f[2], f[3]} // the mean is the default
	}
	known := uint32(flagsAll)
	if v == 1 {
		known = v1Biased | v1Titles
	}
	if flags&^known != 0 {
		return nil, fmt.Errorf("unknown flags %#x", flags&^known)
	}
	minDim := uint32(0)
	if v == 1 {
		minDim = 1 // version 1 held only matrix factorizations
	}
	if dim < minDim || dim > MaxDim {
		return nil, fmt.Errorf("dim %d outside %d..%d", dim, minDim, MaxDim)
	}
	for _, x := range f {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil, fmt.Errorf("mean, default or scale not finite: %v", f)
		}
	}
	if !(f[2] <= f[3]) || f[4] < 0 {
		return nil, fmt.Errorf("bad scale %g..%g step %g", f[2], f[3], f[4])
	}
	m := &Model{Dim: int(dim), NumUsers: int(nu), NumItems: int(ni), Mean: f[0], Default: f[1]}
	m.Scale.Min, m.Scale.Max, m.Scale.Step = f[2], f[3], f[4]
	// Bound the sizes by the bytes present before multiplying.
	if uint64(nu)*uint64(dim) > uint64(len(b)) || uint64(ni)*uint64(dim) > uint64(len(b)) {
		return nil, fmt.Errorf("%d users and %d items of dimension %d do not fit in %d bytes", nu, ni, dim, len(b))
	}
	if n := m.NumUsers * m.Dim; n > 0 {
		m.U = d.f32s(n, "U")
	}
	if n := m.NumItems * m.Dim; n > 0 {
		m.V = d.f32s(n, "V")
	}
	titles := flags&flagTitles != 0 // the same bit in both versions
	if v == 1 {
		if flags&v1Biased != 0 {
			m.BU = d.f32s(m.NumUsers, "BU")
			m.BI = d.f32s(m.NumItems, "BI")
		} else {
			m.Mean = 0 // an unbiased version-1 model used its mean only as the default
		}
	} else {
		if flags&flagBU != 0 {
			m.BU = d.f32s(m.NumUsers, "BU")
		}
		if flags&flagBI != 0 {
			m.BI = d.f32s(m.NumItems, "BI")
		}
		if flags&flagOffset != 0 {
			m.Offset = d.f32s(m.NumUsers, "Offset")
		}
		if flags&flagWeights != 0 {
			m.UserWeight = d.f32s(m.NumUsers, "UserWeight")
			m.ItemWeight = d.f32s(m.NumItems, "ItemWeight")
		}
		if flags&flagRated != 0 {
			m.Rated = d.bools(m.NumUsers, "Rated")
		}
		m.Ranking = flags&flagRanking != 0
	}
	m.UserIDs = d.strings(m.NumUsers, "user IDs")
	m.ItemIDs = d.strings(m.NumItems, "item IDs")
	if titles {
		m.ItemTitles = d.strings(m.NumItems, "item titles")
		if m.ItemTitles == nil && d.err == nil {
			if m.NumItems > 0 {
				d.fail("titles flagged but absent")
			} else {
				m.ItemTitles = []string{}
			}
		}
	}
	if v >= 2 {
		if meta := d.take(int(d.u32("metadata length")), "metadata"); d.err == nil {
			if err := m.decodeMeta(meta); err != nil {
				d.fail("metadata: %v", err)
			}
		}
	}
	if d.err != nil {
		return nil, d.err
	}
	if d.off != len(b) {
		return nil, fmt.Errorf("%d bytes after the last field", len(b)-d.off)
	}
	if err := m.Check(); err != nil {
		return nil, err
	}
	return m, nil
}

// decodeMeta sets m's metadata from JSON, which must be in the canonical
// form WriteTo writes.
func (m *Model) decodeMeta(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var md metadata
	if err := dec.Decode(&md); err != nil {
		return err
	}
	p := md.Privacy
	m.Method, m.Config, m.UserItems, m.Release = md.Method, md.Config, md.UserItems, md.Release
	m.Privacy = Privacy{Unit: p.Unit, Trusted: p.Trusted, EpsRound: float64(p.EpsRound),
		EpsTotal: float64(p.EpsTotal), Delta: float64(p.Delta), Note: p.Note, Releases: p.Releases,
		Neighbouring: p.Neighbouring, EpsReplace: float64(p.EpsReplace)}
	if m.Config != nil {
		m.Config = bytes.Clone(m.Config)
	}
	canon, err := m.encodeMeta()
	if err != nil {
		return err
	}
	if !bytes.Equal(canon, b) {
		return errors.New("not in canonical form")
	}
	return nil
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
		return fmt.Errorf("model: save %s: %w", path, err)
	}
	return nil
}

// Load reads a model saved by Save (or by package mf's version-1 Save).
// Errors name path and wrap ErrMagic, ErrVersion, ErrTruncated,
// ErrChecksum or ErrCorrupt when the file is not a valid model.
func Load(path string) (*Model, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("model: load: %w", err)
	}
	defer f.Close()
	m, err := ReadModel(f)
	if err != nil {
		return nil, fmt.Errorf("model: load %s: %w", path, err)
	}
	var extra [1]byte
	if n, _ := f.Read(extra[:]); n > 0 {
		return nil, fmt.Errorf("model: load %s: %w: data after the checksum", path, ErrCorrupt)
	}
	return m, nil
}

// MarshalJSON writes p with its ε and δ as JSON-safe numbers: a
// non-finite figure (ε +Inf: no guarantee against the server, or none
// proven) is the string "Inf", as in a model file's metadata.
func (p Privacy) MarshalJSON() ([]byte, error) {
	type plain Privacy
	return json.Marshal(struct {
		plain
		EpsRound jsonFloat `json:"eps_round"`
		EpsTotal jsonFloat `json:"eps_total"`
		Delta    jsonFloat `json:"delta"`
	}{plain(p), jsonFloat(p.EpsRound), jsonFloat(p.EpsTotal), jsonFloat(p.Delta)})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (p *Privacy) UnmarshalJSON(b []byte) error {
	type plain Privacy
	var x struct {
		*plain
		EpsRound jsonFloat `json:"eps_round"`
		EpsTotal jsonFloat `json:"eps_total"`
		Delta    jsonFloat `json:"delta"`
	}
	x.plain = (*plain)(p)
	if err := json.Unmarshal(b, &x); err != nil {
		return err
	}
	p.EpsRound, p.EpsTotal, p.Delta = float64(x.EpsRound), float64(x.EpsTotal), float64(x.Delta)
	return nil
}
