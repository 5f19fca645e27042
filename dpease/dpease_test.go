package dpease

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/privrec/privrec/protocol"
)

// TestSnapshotResume: a server restored from its snapshot after the first
// round finishes the run with the same factors and ledger (test mode).
func TestSnapshotResume(t *testing.T) {
	d := synth(40, 30, 5)
	cfg := DefaultConfig()
	cfg.TopItems, cfg.Cap, cfg.Seeded = 10, 4, true
	full, err := NewServer(cfg, 30, 2)
	if err != nil {
		t.Fatal(err)
	}
	cl := NewClients(d, cfg)
	for r := range 2 {
		b, _ := full.Broadcast(r)
		round(t, full, cl, r, b)
	}
	if !full.Done() {
		t.Fatal("not done after two rounds")
	}
	a, _ := NewServer(cfg, 30, 2)
	b, _ := a.Broadcast(0)
	round(t, a, cl, 0, b)
	snap, err := a.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	// The restored server draws the second round's noise from the same
	// position of the seeded stream only if it skips the first round's
	// draws: replay them.
	r, _ := NewServer(cfg, 30, 2)
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
	srv, err := NewServer(DefaultConfig(), 5000, 1)
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
