package secagg

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestMaskStreams runs one round on two servers fed the same messages:
// one sums the masked inputs (Result), the other only records them
// (RecordMaskedInput) and returns the mask streams, which removed from
// the plain sum of the masked inputs must give Result bit for bit.
func TestMaskStreams(t *testing.T) {
	p := testParams(12, 10, 5, 20, 301)
	r := rand.New(rand.NewPCG(1, 2))
	in := randomInputs(r, p)
	drop := map[uint32]Phase{2: DropBeforeInput, 7: DropBeforeInput, 9: DropBeforeUnmask}
	ref, err := NewServer(p)
	if err != nil {
		t.Fatal(err)
	}
	ext, err := NewServer(p)
	if err != nil {
		t.Fatal(err)
	}
	both := func(f func(*Server) error) {
		t.Helper()
		for _, s := range []*Server{ref, ext} {
			if err := f(s); err != nil {
				t.Fatal(err)
			}
		}
	}
	rnd := testRand(5)
	cs := make([]*Client, p.N)
	for u := range cs {
		cs[u], _ = NewClient(uint32(u), p, rnd)
		m, err := cs[u].AdvertiseKeys()
		if err != nil {
			t.Fatal(err)
		}
		both(func(s *Server) error { return s.AddKeys(m) })
	}
	kb, _ := ref.FinishKeys()
	if _, err := ext.FinishKeys(); err != nil {
		t.Fatal(err)
	}
	for _, b := range kb {
		m, err := cs[b.To].ShareKeys(b)
		if err != nil {
			t.Fatal(err)
		}
		both(func(s *Server) error { return s.AddShares(m) })
	}
	sd, _ := ref.FinishShares()
	if _, err := ext.FinishShares(); err != nil {
		t.Fatal(err)
	}
	masked := make([]uint32, p.Len)
	for _, d := range sd {
		if drop[d.To] == DropBeforeInput {
			continue
		}
		m, err := cs[d.To].MaskedInput(d, in[d.To])
		if err != nil {
			t.Fatal(err)
		}
		for i, y := range m.Y {
			masked[i] += y
		}
		if err := ref.AddMaskedInput(m); err != nil {
			t.Fatal(err)
		}
		if err := ext.RecordMaskedInput(m.From); err != nil {
			t.Fatal(err)
		}
	}
	if err := ext.RecordMaskedInput(0); !errors.Is(err, ErrMessage) {
		t.Errorf("second RecordMaskedInput of 0: %v, want ErrMessage", err)
	}
	ur, _ := ref.FinishMaskedInput()
	if _, err := ext.FinishMaskedInput(); err != nil {
		t.Fatal(err)
	}
	for _, q := range ur {
		if drop[q.To] == DropBeforeUnmask {
			continue
		}
		m, err := cs[q.To].Unmask(q)
		if err != nil {
			t.Fatal(err)
		}
		both(func(s *Server) error { return s.AddUnmask(m) })
	}
	want, err := ref.Result()
	if err != nil {
		t.Fatal(err)
	}
	streams, err := ext.MaskStreams()
	if err != nil {
		t.Fatal(err)
	}
	// 10 self masks, and the pairwise masks of the 2 dropped clients
	// with their surviving neighbours.
	if len(streams) <= 10 {
		t.Fatalf("%d mask streams, want more than the 10 self masks", len(streams))
	}
	var e expander
	for _, s := range streams {
		e.add(masked, &s.Key, s.Sub)
	}
	for i := range masked {
		masked[i] &= p.mask()
	}
	if !slices.Equal(masked, want) {
		t.Fatal("masked sum minus the mask streams differs from Result")
	}
	if !slices.Equal(want, plainSum(p, in, phases(p.N, drop))) {
		t.Fatal("Result differs from the plain sum")
	}
}

func phases(n int, m map[uint32]Phase) []Phase {
	d := make([]Phase, n)
	for u, ph := range m {
		d[u] = ph
	}
	return d
}
