package topn

import (
	"context"
	"math"
	"testing"

	"github.com/privrec/privrec/dpease"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

// tiny returns 4 users × 5 items: users 0, 1 like items 0, 1, 2; users
// 2, 3 like items 3, 4; item 0 is the most popular.
func tiny() *ratings.Dataset {
	b := ratings.NewBuilder("tiny", ratings.Scale{Min: 1, Max: 5, Step: 1})
	add := func(u, i string) { b.Add(u, i, 5) }
	for _, u := range []string{"a", "b"} {
		add(u, "i0")
		add(u, "i1")
	}
	add("a", "i2")
	add("c", "i3")
	add("c", "i4")
	add("d", "i3")
	add("d", "i0")
	return b.Dataset()
}

func TestPopAndDPPop(t *testing.T) {
	d := tiny()
	m := Pop(d)
	const i0, i2 = 0, 2 // the builder indexes in order of appearance
	if m.BI[i0] != 3 || m.BI[i2] != 1 || !m.Ranking {
		t.Fatalf("pop scores %v", m.BI)
	}
	dm, l, err := DPPop(d, DPPopConfig{Eps: 1e6, Delta: 1e-6}, rng.New(1, 2))
	if err != nil {
		t.Fatal(err)
	}
	// With a huge ε the noise is negligible: user d weighs 1/sqrt(2).
	want := 1/math.Sqrt(3) + 1/math.Sqrt(2) + 1/math.Sqrt(2)
	if math.Abs(float64(dm.BI[i0])-want) > 1e-3 {
		t.Errorf("dp-pop score of i0 = %v, want %v", dm.BI[i0], want)
	}
	if len(l.Releases()) != 1 || l.Epsilon(1e-6) > 1e6*1.0001 {
		t.Errorf("ledger %v", l.Releases())
	}
}

func TestEASEAndIALSRankCoRatedItems(t *testing.T) {
	d := tiny()
	for name, fit := range map[string]func() (scoresOf func(u int32) []float32, err error){
		"ease": func() (func(int32) []float32, error) {
			m, err := EASE(context.Background(), d, 0.5)
			return func(u int32) []float32 { return m.ScoreItems(u, nil) }, err
		},
		"ials": func() (func(int32) []float32, error) {
			c := DefaultIALSConfig()
			c.Dim, c.Reg = 4, 0.01
			m, err := IALS(context.Background(), d, c, rng.New(1, 3))
			return func(u int32) []float32 { return m.ScoreItems(u, nil) }, err
		},
	} {
		sc, err := fit()
		if err != nil {
			t.Fatal(name, err)
		}
		// User b (items 0, 1) should prefer item 2 (co-rated with 0, 1
		// by a) over item 4.
		const ub, i2, i4 = 1, 2, 4
		s := sc(ub)
		if !(s[i2] > s[i4]) {
			t.Errorf("%s: user b scores i2 %v, i4 %v", name, s[i2], s[i4])
		}
	}
}

// TestEASEHistoryMatchesModel checks that EASE's fold-in of a training
// user's own items reproduces the model's scores.
func TestEASEHistoryMatchesModel(t *testing.T) {
	d := tiny()
	m, err := EASE(context.Background(), d, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	m.Method = "ease"
	h, err := History(m)
	if err != nil {
		t.Fatal(err)
	}
	rows := binaryRows(d.ByUser())
	for u, r := range rows {
		want := m.ScoreItems(int32(u), nil)
		got := h.ScoreHistory(r, make([]float32, 0, 5))
		for i := range want {
			if math.Abs(float64(got[i]-want[i])) > 1e-5 {
				t.Fatalf("user %d item %d: fold-in %v, model %v", u, i, got[i], want[i])
			}
		}
	}
	m.Method = "mf"
	if _, err := History(m); err == nil {
		t.Error("History of mf: no error")
	}
}

// TestIALSProgress: IALSProgress reports every epoch once, in order, and
// fits the model IALS fits from the same seed.
func TestIALSProgress(t *testing.T) {
	d := tiny()
	for _, epochs := range []int{1, 3} {
		c := DefaultIALSConfig()
		c.Dim, c.Epochs = 4, epochs
		var seen []int
		m, err := IALSProgress(context.Background(), d, c, rng.New(1, 3), func(e int) { seen = append(seen, e) })
		if err != nil {
			t.Fatal(err)
		}
		if len(seen) != epochs || seen[0] != 1 || seen[len(seen)-1] != epochs {
			t.Errorf("%d epochs: progress %v", epochs, seen)
		}
		ref, err := IALS(context.Background(), d, c, rng.New(1, 3))
		if err != nil {
			t.Fatal(err)
		}
		for k := range ref.V {
			if ref.V[k] != m.V[k] {
				t.Fatalf("%d epochs: V[%d] = %v with progress, %v without", epochs, k, m.V[k], ref.V[k])
			}
		}
	}
}

// TestIndicatorHistoryMatchesModel checks that the fold-in of a model
// with user items (dp-ease's) reproduces a training user's scores from
// their history alone, and refuses a model whose rows do not fit them.
func TestIndicatorHistoryMatchesModel(t *testing.T) {
	d := tiny()
	cfg := dpease.DefaultConfig()
	cfg.TopItems, cfg.Seeded, cfg.Eps = 3, true, 50
	m, _, err := dpease.Train(context.Background(), d, cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.UserItems) != 3 {
		t.Fatalf("dp-ease model with %d user items, want 3", len(m.UserItems))
	}
	h, err := History(m)
	if err != nil {
		t.Fatal(err)
	}
	for u, r := range binaryRows(d.ByUser()) {
		want := m.ScoreItems(int32(u), nil)
		got := h.ScoreHistory(r, nil)
		for i := range want {
			if math.Abs(float64(got[i]-want[i])) > 1e-5 {
				t.Fatalf("user %d item %d: fold-in %v, model %v", u, i, got[i], want[i])
			}
		}
	}
	m.UserItems = m.UserItems[:1]
	if _, err := History(m); err == nil {
		t.Error("History of a model with too few user items: no error")
	}
}
