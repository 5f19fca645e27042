package dpease

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

// TestSnapshotResume: a server restored from its snapshot after the first
// round finishes the run with the same factors and ledger (test mode).
func TestSnapshotResume(t *testing.T) {
	d := synth(40, 30, 5)
	cfg := DefaultConfig()
	cfg.TopItems, cfg.Cap, cfg.Seeded = 10, 4, true
	full, err := NewServer(cfg, ratings.AnonymousItems(30, ratings.Scale{}), 2)
	if err != nil {
		t.Fatal(err)
	}
	cl := mustClients(t, d, cfg)
	for r := range 2 {
		b, _ := full.Broadcast(r)
		round(t, full, cl, r, b)
	}
	if !full.Done() {
		t.Fatal("not done after two rounds")
	}
	a, _ := NewServer(cfg, ratings.AnonymousItems(30, ratings.Scale{}), 2)
	b, _ := a.Broadcast(0)
	round(t, a, cl, 0, b)
	snap, err := a.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	// The restored server draws the second round's noise from the same
	// position of the seeded stream only if it skips the first round's
	// draws: replay them.
	r, _ := NewServer(cfg, ratings.AnonymousItems(30, ratings.Scale{}), 2)
	for range 30 {
		r.noise.NormFloat64()
	}
	if err := r.UnmarshalBinary(snap); err != nil {
		t.Fatal(err)
	}
	if r.Round() != 1 {
		t.Fatalf("restored round %d, want 1", r.Round())
	}
	b, _ = r.Broadcast(1)
	round(t, r, cl, 1, b)
	v1, _ := full.Factors()
	v2, _ := r.Factors()
	if !slices.Equal(v1, v2) {
		t.Error("the resumed run's factors differ")
	}
	if len(r.Ledger().Releases()) != 2 {
		t.Errorf("resumed ledger has %d releases, want 2", len(r.Ledger().Releases()))
	}
	if err := r.UnmarshalBinary([]byte{9}); err == nil {
		t.Error("a foreign snapshot was accepted")
	}
}

// TestTrain: the in-process run recommends the co-rated item and spends
// exactly the configured ε.
func TestTrain(t *testing.T) {
	d := synth(200, 30, 7)
	cfg := DefaultConfig()
	cfg.Eps, cfg.TopItems, cfg.Seeded = 5, 20, true
	m, rep, err := Train(context.Background(), d, cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if d := rep.Eps - cfg.Eps; d > 1e-6 || d < -1e-3 {
		t.Errorf("ε spent %.6f, want %.6f", rep.Eps, cfg.Eps)
	}
	if len(rep.Ledger.Releases()) != 2 || !m.Ranking || m.Dim != 21 {
		t.Errorf("releases %d, ranking %v, dim %d", len(rep.Ledger.Releases()), m.Ranking, m.Dim)
	}
	var _ protocol.Stateful = (*Server)(nil)
}

func TestByEps(t *testing.T) {
	for _, tc := range []struct {
		eps    float64
		m      int
		ln, pw float64
	}{
		{0.1, 300, 6, 0.12},
		{1, 300, 6, 0.12},
		{3, 533, 5.523, 0.071},
		{10, 1000, 5, 0.04},
		{100, 1000, 5, 0.04},
	} {
		m, ln, pw := ByEps(tc.eps)
		if m != tc.m || math.Abs(ln-tc.ln) > 1e-3 || math.Abs(pw-tc.pw) > 1e-3 {
			t.Errorf("ByEps(%g) = %d, %.4f, %.4f; want %d, %.4f, %.4f", tc.eps, m, ln, pw, tc.m, tc.ln, tc.pw)
		}
	}
	// More budget never shrinks the model or raises the popularity weight.
	pm, pln, ppw := ByEps(0.5)
	for e := 0.6; e < 20; e *= 1.2 {
		m, ln, pw := ByEps(e)
		if m < pm || ln > pln || pw > ppw {
			t.Fatalf("ByEps(%g) = %d, %g, %g after %d, %g, %g", e, m, ln, pw, pm, pln, ppw)
		}
		pm, pln, ppw = m, ln, pw
	}
}

func TestResolve(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Eps = 10
	r := cfg.Resolve()
	if r.TopItems != 1000 || r.LambdaNoise != 5 || math.Abs(r.PopWeight-0.04) > 1e-9 {
		t.Errorf("defaults at ε 10 resolve to %+v", r)
	}
	cfg.TopItems, cfg.LambdaNoise, cfg.PopWeight = 50, 2, 0
	if r := cfg.Resolve(); r.TopItems != 50 || r.LambdaNoise != 2 || r.PopWeight != 0 {
		t.Errorf("explicit settings changed: %+v", r)
	}
	cfg.TopItems = -1
	if err := cfg.Validate(); err == nil {
		t.Error("top-items -1 validated")
	}
	srv, err := NewServer(DefaultConfig(), ratings.AnonymousItems(5000, ratings.Scale{}), 1)
	if err != nil {
		t.Fatal(err)
	}
	if st := srv.PlannedReport().Stats; st["top_items"] != 300 || st["pop_weight"] != 0.12 {
		t.Errorf("server at ε 1 reports %v", st)
	}
}

// TestEmptyHistoryGetsPopularity: a user without training items (one
// more user ID in the catalog) is scored by the popularity coordinate,
// the last column of the item factors, not left unknown (whose scores
// would all be 0, the catalog's index order).
func TestEmptyHistoryGetsPopularity(t *testing.T) {
	d, _ := withCanary(synth(200, 30, 7), nil)
	cfg := DefaultConfig()
	cfg.Eps, cfg.TopItems, cfg.Seeded = 5, 20, true
	m, _, err := Train(context.Background(), d, cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	empty := int32(d.NumUsers() - 1)
	got := m.ScoreItems(empty, nil)
	for j, s := range got {
		if want := m.V[j*m.Dim+m.Dim-1]; s != want {
			t.Fatalf("item %d: the empty history scores %v, want the popularity coordinate %v", j, s, want)
		}
	}
	if slices.Max(got) == slices.Min(got) {
		t.Fatalf("the empty history's scores are all %v", got[0])
	}
}

// TestPopularityMode: the budget split follows the public roster (and
// only with the rule on): a roster below RosterRidge times the ridge the
// Gram would get puts the run in popularity mode, PopularityFrac of ρ on
// the counts and no item-item weight; otherwise PersonalFrac.
func TestPopularityMode(t *testing.T) {
	d := synth(200, 30, 7)
	for _, tc := range []struct {
		name    string
		roster  int
		shrink  bool
		popMode bool
	}{
		{"small roster", 200, true, true},
		{"large roster", 1_000_000, true, false},
		{"rule off", 200, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			// At ε 1 and M 20 the ridge is λ = 1 + 6·σ_g·√20 ≈ 96.
			cfg.Eps, cfg.TopItems, cfg.Seeded, cfg.Roster, cfg.Shrink = 1, 20, true, tc.roster, tc.shrink
			srv, err := NewServer(cfg, d.Public(), 1)
			if err != nil {
				t.Fatal(err)
			}
			want := PersonalFrac
			if tc.popMode {
				want = PopularityFrac
			}
			if srv.PopularityMode() != tc.popMode || srv.cfg.FracCounts != want || cfg.Resolve().FracCounts != want {
				t.Fatalf("popularity mode %v, split %v (Resolve %v); want %v, %v", srv.PopularityMode(), srv.cfg.FracCounts, cfg.Resolve().FracCounts, tc.popMode, want)
			}
			m, _, err := Train(context.Background(), d, cfg, 1)
			if err != nil {
				t.Fatal(err)
			}
			if tc.popMode && Personal(m.V, m.Dim) {
				t.Error("popularity mode released item-item weights")
			}
		})
	}
}

// TestPersonalWeight: on a released Gram of pure noise (σ = 1) the weight
// is 0 (the list is DP popularity); it grows with the co-occurrence
// signal (blocks of related items at 1σ, 10σ) toward 1, and History reads
// the release's typical history.
func TestPersonalWeight(t *testing.T) {
	const m = 60
	r := rng.New(3, 1)
	gram := func(signal float64) []float64 {
		g := make([]float64, pairs(m))
		for i := range m {
			for j := i; j < m; j++ {
				x := r.NormFloat64()
				if i == j {
					x += 50
				} else if i/10 == j/10 { // six blocks of related items
					x += signal
				}
				g[pairIndex(i, j, m)] = x
			}
		}
		return g
	}
	prev := -1.0
	for _, tc := range []struct {
		signal   float64
		min, max float64
	}{
		{0, 0, 0},
		{1, 0.01, 0.5},
		{10, 0.9, 1},
	} {
		b := PersonalWeight(gram(tc.signal), m, 1)
		if b.Weight < tc.min || b.Weight > tc.max || b.Weight < prev {
			t.Errorf("signal %v: weight %v (snr %v, history %v), want in [%v, %v], at least %v", tc.signal, b.Weight, b.EntrySNR, b.History, tc.min, tc.max, prev)
		}
		prev = b.Weight
		// History = 1 + 2·off/diag: 6 blocks of 45 pairs at the signal
		// over 60 diagonal entries of 50, within the noise's sum.
		if want := 1 + 2*6*45*tc.signal/(60*50); tc.signal > 0 && math.Abs(b.History-want) > 0.1*want {
			t.Errorf("signal %v: history %v, want %v", tc.signal, b.History, want)
		}
	}
}

// mustClients is NewClients for a test.
func mustClients(t testing.TB, train *ratings.Dataset, cfg Config) *Clients {
	t.Helper()
	cl, err := NewClients(train, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}
