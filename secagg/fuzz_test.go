package secagg

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"testing/cryptotest"
)

// The fuzz targets feed a client and a server messages decoded from the
// fuzzer's bytes in a small format of their own (fuzzReader): they may be
// refused, never cause a panic. The seeds are the messages of an honest
// round with fixed randomness, so that the fuzzer starts from inputs that
// pass every check and mutates them one field at a time.

var fuzzParams = Params{N: 5, K: 4, T: 3, Bits: 16, Len: 4, Seed: [32]byte{7}}

// fuzzReader decodes the fuzz input: integers little-endian, byte strings
// and lists prefixed by a one-byte length. Past the end it reads zeros.
type fuzzReader struct{ b []byte }

func (r *fuzzReader) u8() byte {
	if len(r.b) == 0 {
		return 0
	}
	x := r.b[0]
	r.b = r.b[1:]
	return x
}

func (r *fuzzReader) u32() uint32 {
	var x [4]byte
	n := copy(x[:], r.b)
	r.b = r.b[n:]
	return binary.LittleEndian.Uint32(x[:])
}

func (r *fuzzReader) bytes() []byte {
	n := min(int(r.u8()), len(r.b))
	x := r.b[:n:n]
	r.b = r.b[n:]
	return x
}

func (r *fuzzReader) u32s() []uint32 {
	out := make([]uint32, r.u8())
	for k := range out {
		out[k] = r.u32()
	}
	return out
}

func (r *fuzzReader) keysBroadcast() *KeysBroadcast {
	m := &KeysBroadcast{To: r.u32()}
	for range r.u8() {
		m.Keys = append(m.Keys, r.advertise())
	}
	return m
}

func (r *fuzzReader) advertise() AdvertiseKeys {
	return AdvertiseKeys{From: r.u32(), MaskKey: r.bytes(), EncKey: r.bytes()}
}

func (r *fuzzReader) shares() []EncryptedShare {
	var out []EncryptedShare
	for range r.u8() {
		out = append(out, EncryptedShare{From: r.u32(), To: r.u32(), Ciphertext: r.bytes()})
	}
	return out
}

func (r *fuzzReader) revealed() []RevealedShare {
	var out []RevealedShare
	for range r.u8() {
		out = append(out, RevealedShare{Owner: r.u32(), Share: r.bytes()})
	}
	return out
}

// fuzzWriter encodes what fuzzReader decodes, for the seeds.
type fuzzWriter struct{ b []byte }

func (w *fuzzWriter) u8(x int)     { w.b = append(w.b, byte(x)) }
func (w *fuzzWriter) u32(x uint32) { w.b = binary.LittleEndian.AppendUint32(w.b, x) }
func (w *fuzzWriter) bytes(x []byte) {
	w.u8(len(x))
	w.b = append(w.b, x...)
}
func (w *fuzzWriter) u32s(x []uint32) {
	w.u8(len(x))
	for _, v := range x {
		w.u32(v)
	}
}
func (w *fuzzWriter) keysBroadcast(m *KeysBroadcast) {
	w.u32(m.To)
	w.u8(len(m.Keys))
	for _, k := range m.Keys {
		w.advertise(&k)
	}
}
func (w *fuzzWriter) advertise(k *AdvertiseKeys) {
	w.u32(k.From)
	w.bytes(k.MaskKey)
	w.bytes(k.EncKey)
}
func (w *fuzzWriter) shares(s []EncryptedShare) {
	w.u8(len(s))
	for _, e := range s {
		w.u32(e.From)
		w.u32(e.To)
		w.bytes(e.Ciphertext)
	}
}
func (w *fuzzWriter) revealed(s []RevealedShare) {
	w.u8(len(s))
	for _, e := range s {
		w.u32(e.Owner)
		w.bytes(e.Share)
	}
}

// honestRound is the transcript of one round of fuzzParams in which every
// client stays, with client u drawing from testRand(100+u).
type honestRound struct {
	inputs [][]uint32
	keys   []*AdvertiseKeys
	kb     []*KeysBroadcast // by client
	sk     []*ShareKeys
	sd     []*SharesDelivery // by client
	mi     []*MaskedInput
	ur     []*UnmaskRequest // by client
	un     []*UnmaskResponse
}

func fuzzClient(u uint32) *Client {
	c, err := NewClient(u, fuzzParams, testRand(100+uint64(u)))
	if err != nil {
		panic(err)
	}
	return c
}

// runHonest runs the honest round. Since Go 1.26 the X25519 keys come
// from crypto/rand whatever reader a client is given; with t, the round
// runs on cryptotest's deterministic source, reset just before client 0
// draws its keys, as FuzzClient resets it, so that the shares the
// neighbours encrypt to client 0 open in every fuzz iteration. Without t
// (in a FuzzServer seed) the keys are random and the transcript is
// consistent all the same.
func runHonest(t *testing.T) (*honestRound, error) {
	p := fuzzParams
	h := &honestRound{}
	srv, err := NewServer(p)
	if err != nil {
		return nil, err
	}
	cls := make([]*Client, p.N)
	if t != nil {
		cryptotest.SetGlobalRandom(t, 1)
	}
	for u := range cls {
		cls[u] = fuzzClient(uint32(u))
		k, err := cls[u].AdvertiseKeys()
		if err != nil {
			return nil, err
		}
		if err := srv.AddKeys(k); err != nil {
			return nil, err
		}
		h.keys = append(h.keys, k)
		h.inputs = append(h.inputs, []uint32{uint32(u), 1, 2, 0xffff})
	}
	if h.kb, err = srv.FinishKeys(); err != nil {
		return nil, err
	}
	for u, c := range cls {
		m, err := c.ShareKeys(h.kb[u])
		if err != nil {
			return nil, err
		}
		if err := srv.AddShares(m); err != nil {
			return nil, err
		}
		h.sk = append(h.sk, m)
	}
	if h.sd, err = srv.FinishShares(); err != nil {
		return nil, err
	}
	for u, c := range cls {
		m, err := c.MaskedInput(h.sd[u], h.inputs[u])
		if err != nil {
			return nil, err
		}
		if err := srv.AddMaskedInput(m); err != nil {
			return nil, err
		}
		h.mi = append(h.mi, m)
	}
	if h.ur, err = srv.FinishMaskedInput(); err != nil {
		return nil, err
	}
	for u, c := range cls {
		m, err := c.Unmask(h.ur[u])
		if err != nil {
			return nil, err
		}
		if err := srv.AddUnmask(m); err != nil {
			return nil, err
		}
		h.un = append(h.un, m)
	}
	_, err = srv.Result()
	return h, err
}

// clientSeed encodes client 0's part of h as FuzzClient reads it.
func clientSeed(h *honestRound, spoil func(w *fuzzWriter, step int) bool) []byte {
	var w fuzzWriter
	if spoil == nil || !spoil(&w, 0) {
		w.keysBroadcast(h.kb[0])
	}
	if spoil == nil || !spoil(&w, 1) {
		w.u32(h.sd[0].To)
		w.shares(h.sd[0].Shares)
		w.u32s(h.inputs[0])
	}
	if spoil == nil || !spoil(&w, 2) {
		w.u32(h.ur[0].To)
		w.u32s(h.ur[0].Survivors)
		w.u32s(h.ur[0].Dropped)
	}
	return w.b
}

// FuzzClient feeds client 0 of fuzzParams, after its honest
// AdvertiseKeys, a KeysBroadcast, a SharesDelivery with an input, and an
// UnmaskRequest decoded from the fuzz input, each step as far as the
// client accepts the previous one.
func FuzzClient(f *testing.F) {
	// The seeds, under testdata/fuzz/FuzzClient, are clientSeedFiles'
	// (TestFuzzSeedsHonest writes them with PRIVREC_WRITE_CORPUS=1):
	// they need client 0's keys from the deterministic source.
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &fuzzReader{b: data}
		cryptotest.SetGlobalRandom(t, 1)
		c := fuzzClient(0)
		if _, err := c.AdvertiseKeys(); err != nil {
			t.Fatal(err)
		}
		if _, err := c.ShareKeys(r.keysBroadcast()); err != nil {
			return
		}
		d := &SharesDelivery{To: r.u32(), Shares: r.shares()}
		c.CheckShares(d) // reads no bytes: older seeds decode alike
		x := r.u32s()
		if _, err := c.MaskedInput(d, x); err != nil {
			return
		}
		c.Unmask(&UnmaskRequest{To: r.u32(), Survivors: r.u32s(), Dropped: r.u32s()})
	})
}

// clientSeedFiles returns FuzzClient's seeds: the honest messages to
// client 0, a low-order point as a neighbour's keys, a request for both
// shares of the neighbours.
func clientSeedFiles(h *honestRound) map[string][]byte {
	kb := *h.kb[0]
	kb.Keys = append([]AdvertiseKeys(nil), kb.Keys...)
	kb.Keys[0].MaskKey, kb.Keys[0].EncKey = make([]byte, 32), make([]byte, 32)
	return map[string][]byte{
		"honest": clientSeed(h, nil),
		"low-order-key": clientSeed(h, func(w *fuzzWriter, step int) bool {
			if step == 0 {
				w.keysBroadcast(&kb)
			}
			return step == 0
		}),
		"both-shares": clientSeed(h, func(w *fuzzWriter, step int) bool {
			if step == 2 {
				w.u32(0)
				w.u32s(h.ur[0].Survivors)
				w.u32s(h.ur[0].Survivors)
			}
			return step == 2
		}),
	}
}

// Server operations of FuzzServer, one byte each, then the message.
const (
	opKeys = iota
	opFinishKeys
	opShares
	opFinishShares
	opMasked
	opFinishMasked
	opUnmask
	opResult
	opCheck // the check round; appended so that older seeds decode alike
	opFinishCheck
	numOps
)

// serverSeed encodes the honest round as FuzzServer reads it; drop, when
// not nil, leaves out the messages of the clients it names after the
// given op.
func serverSeed(h *honestRound, drop func(op int, u int) bool) []byte {
	var w fuzzWriter
	keep := func(op, u int) bool { return drop == nil || !drop(op, u) }
	for u, k := range h.keys {
		if keep(opKeys, u) {
			w.u8(opKeys)
			w.advertise(k)
		}
	}
	w.u8(opFinishKeys)
	for u, m := range h.sk {
		if keep(opShares, u) {
			w.u8(opShares)
			w.u32(m.From)
			w.shares(m.Shares)
		}
	}
	w.u8(opFinishShares)
	for u, m := range h.mi {
		if keep(opMasked, u) {
			w.u8(opMasked)
			w.u32(m.From)
			w.u32s(m.Y)
		}
	}
	w.u8(opFinishMasked)
	for u, m := range h.un {
		if keep(opUnmask, u) {
			w.u8(opUnmask)
			w.u32(m.From)
			w.revealed(m.SelfShares)
			w.revealed(m.MaskShares)
		}
	}
	w.u8(opResult)
	return w.b
}

// FuzzServer runs a server of fuzzParams on a sequence of operations
// decoded from the fuzz input: messages of every step (AddKeys,
// AddShares, AddMaskedInput, AddUnmask) and the Finish* calls and Result,
// in any order. Out-of-order and malformed calls may fail, never panic.
func FuzzServer(f *testing.F) {
	h, err := runHonest(nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(serverSeed(h, nil))
	// Client 4 drops after sharing: its mask key is recovered.
	f.Add(serverSeed(h, func(op, u int) bool { return u == 4 && op >= opMasked }))
	// Client 3 drops after its masked input.
	f.Add(serverSeed(h, func(op, u int) bool { return u == 3 && op == opUnmask }))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := NewServer(fuzzParams)
		if err != nil {
			t.Fatal(err)
		}
		r := &fuzzReader{b: data}
		for n := 0; len(r.b) > 0 && n < 256; n++ {
			switch r.u8() % numOps {
			case opKeys:
				k := r.advertise()
				s.AddKeys(&k)
			case opFinishKeys:
				s.FinishKeys()
			case opShares:
				s.AddShares(&ShareKeys{From: r.u32(), Shares: r.shares()})
			case opFinishShares:
				s.FinishShares()
			case opMasked:
				s.AddMaskedInput(&MaskedInput{From: r.u32(), Y: r.u32s()})
			case opFinishMasked:
				s.FinishMaskedInput()
			case opUnmask:
				s.AddUnmask(&UnmaskResponse{From: r.u32(), SelfShares: r.revealed(), MaskShares: r.revealed()})
			case opResult:
				s.Result()
			case opCheck:
				s.AddCheck(&ShareCheck{From: r.u32(), Reported: r.u32s()})
			case opFinishCheck:
				s.FinishCheck()
				s.Ready()
			}
		}
	})
}

// TestFuzzSeedsHonest: the honest seeds decode to the honest round, so
// that the fuzzers start from inputs that pass every check: the server
// fed serverSeed returns the sum of the inputs.
func TestFuzzSeedsHonest(t *testing.T) {
	h, err := runHonest(t)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewServer(fuzzParams)
	if err != nil {
		t.Fatal(err)
	}
	r := &fuzzReader{b: serverSeed(h, nil)}
	var got []uint32
	for len(r.b) > 0 {
		switch r.u8() {
		case opKeys:
			k := r.advertise()
			err = s.AddKeys(&k)
		case opFinishKeys:
			_, err = s.FinishKeys()
		case opShares:
			err = s.AddShares(&ShareKeys{From: r.u32(), Shares: r.shares()})
		case opFinishShares:
			_, err = s.FinishShares()
		case opMasked:
			err = s.AddMaskedInput(&MaskedInput{From: r.u32(), Y: r.u32s()})
		case opFinishMasked:
			_, err = s.FinishMaskedInput()
		case opUnmask:
			err = s.AddUnmask(&UnmaskResponse{From: r.u32(), SelfShares: r.revealed(), MaskShares: r.revealed()})
		case opResult:
			got, err = s.Result()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	want := make([]uint32, fuzzParams.Len)
	for _, x := range h.inputs {
		for i, v := range x {
			want[i] = (want[i] + v) & fuzzParams.mask()
		}
	}
	for i := range want {
		if got == nil || got[i] != want[i] {
			t.Fatalf("sum %v, want %v", got, want)
		}
	}
	// Client 0 fed clientSeed answers every step, with its keys drawn as
	// FuzzClient draws them.
	seeds := clientSeedFiles(h)
	if os.Getenv("PRIVREC_WRITE_CORPUS") != "" {
		writeCorpus(t, "FuzzClient", seeds)
		writeCorpus(t, "FuzzServer", map[string][]byte{"honest": serverSeed(h, nil)})
	}
	cryptotest.SetGlobalRandom(t, 1)
	c := fuzzClient(0)
	if _, err := c.AdvertiseKeys(); err != nil {
		t.Fatal(err)
	}
	cr := &fuzzReader{b: seeds["honest"]}
	if _, err := c.ShareKeys(cr.keysBroadcast()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.MaskedInput(&SharesDelivery{To: cr.u32(), Shares: cr.shares()}, cr.u32s()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Unmask(&UnmaskRequest{To: cr.u32(), Survivors: cr.u32s(), Dropped: cr.u32s()}); err != nil {
		t.Fatal(err)
	}
}

// writeCorpus writes seeds as files of testdata/fuzz/name, in the format
// of go test's corpus.
func writeCorpus(t *testing.T, name string, seeds map[string][]byte) {
	dir := filepath.Join("testdata", "fuzz", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for file, data := range seeds {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
		if err := os.WriteFile(filepath.Join(dir, file), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
