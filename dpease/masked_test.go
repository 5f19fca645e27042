package dpease

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
)

// maskedRun runs cfg masked in process on d (test mode, seed) with the
// clients cl, and returns the server and the rounds' infos.
func maskedRun(t *testing.T, d *ratings.Dataset, cfg Config, list []protocol.Client, seed uint64) (*Server, []protocol.RoundInfo) {
	t.Helper()
	srv, infos, err := tryMasked(t, d, cfg, list, seed)
	if err != nil {
		t.Fatal(err)
	}
	return srv, infos
}

// tryMasked is maskedRun returning the run's error.
func tryMasked(t *testing.T, d *ratings.Dataset, cfg Config, list []protocol.Client, seed uint64) (*Server, []protocol.RoundInfo, error) {
	t.Helper()
	cfg.Aggregation, cfg.Seeded = protocol.AggMasked, true
	srv, err := NewServer(cfg, d.Public(), seed)
	if err != nil {
		t.Fatal(err)
	}
	var infos []protocol.RoundInfo
	err = protocol.Run(context.Background(), srv, list, protocol.RunOptions{Seed: seed, Aggregation: protocol.AggMasked, MaxRounds: 4,
		OnRound: func(i protocol.RoundInfo) error { infos = append(infos, i); return nil }})
	return srv, infos, err
}

// exactSums returns the noise-free sums of both releases the ideal path's
// devices upload, the Gram on the given top items.
func exactSums(d *ratings.Dataset, cfg Config, top []int32) (counts, gram []float64) {
	counts = make([]float64, d.NumItems())
	gram = make([]float64, pairs(len(top)))
	by := d.ByUser()
	for u := range d.NumUsers() {
		items, _ := by.Row(u)
		if len(items) == 0 {
			continue
		}
		for _, j := range items {
			counts[j] += 1 / math.Sqrt(float64(len(items)))
		}
		if up := GramUpload(u, items, top, cfg.Cap); up != nil {
			for k, p := range up.Items {
				gram[p] += float64(up.Values[k])
			}
		}
	}
	return counts, gram
}

// TestMaskedMatchesIdealSums: without noise shares (Clients.Noiseless),
// the integer path's decoded releases equal the ideal path's noise-free
// sums up to quantization: each device's stochastic rounding moves each
// coordinate by less than one integer unit, σ_t/γ_t = Δ_t/G in float
// units, so the tolerance per coordinate is (devices)·Δ_t/G — 4.6e-3 for
// the counts and 3.6e-3 for the Gram here (150 devices, G = 2^15). With
// the same sums and the same λ, the item factors then agree to 1e-3 (an
// empirical margin: the solve is well conditioned at λ ≥ 1).
func TestMaskedMatchesIdealSums(t *testing.T) {
	d := synth(150, 60, 11)
	cfg := DefaultConfig()
	cfg.Eps, cfg.TopItems, cfg.Cap = 2, 20, 4
	cl := mustClients(t, d, cfg)
	cl.Noiseless()
	srv, infos := maskedRun(t, d, cfg, cl.List, 3)
	if len(infos) != 3 || infos[0].Phase != protocol.PhaseSetup || srv.st.Clients != len(cl.List) {
		t.Fatalf("%d rounds (first %q), %d clients counted for %d", len(infos), infos[0].Phase, srv.st.Clients, len(cl.List))
	}
	counts, gram := exactSums(d, cfg, srv.st.Top)
	n := float64(len(cl.List))
	tolC, tolG := n/32768, n*GramL2(cfg.Cap)/32768
	for j, c := range counts {
		if math.Abs(srv.st.Counts[j]-c) > tolC {
			t.Fatalf("count %d: masked %.6f, exact %.6f (tolerance %.2g)", j, srv.st.Counts[j], c, tolC)
		}
	}
	for p, g := range gram {
		if math.Abs(srv.gram[p]-g) > tolG {
			t.Fatalf("Gram entry %d: masked %.6f, exact %.6f (tolerance %.2g)", p, srv.gram[p], g, tolG)
		}
	}
	if !slices.Equal(srv.st.Top, TopItems(srv.st.Counts, srv.m)) {
		t.Error("the broadcast top items are not the released counts' top")
	}
	// The ideal server's solve on the exact sums and the same top items.
	ideal, err := NewServer(cfg, d.Public(), 3)
	if err != nil {
		t.Fatal(err)
	}
	ideal.st.Counts, ideal.st.Top = counts, srv.st.Top
	v, err := ideal.solve(gram)
	if err != nil {
		t.Fatal(err)
	}
	mv, _ := srv.Factors()
	for k := range v {
		if math.Abs(float64(v[k]-mv[k])) > 1e-3 {
			t.Fatalf("factor %d: masked %.6f, ideal %.6f", k, mv[k], v[k])
		}
	}
}

// TestMaskedNoiseAndLedger: with the Skellam shares (test mode), each
// release's decoded noise has the calibrated standard deviation
// (maskplan.Step.NoiseSigma, a little above the Gaussian plan's σ) to
// within 20% — four standard errors of a standard deviation estimated
// from ≥ 200 coordinates — the ledger lists both releases, the reported ε
// is the target's (Skellam accounting: at most ε, within 1%), and Spent,
// every share having arrived, says the same.
func TestMaskedNoiseAndLedger(t *testing.T) {
	d := synth(120, 240, 5)
	cfg := DefaultConfig()
	cfg.Eps, cfg.TopItems, cfg.Cap = 1, 25, 4
	cl := mustClients(t, d, cfg)
	srv, _ := maskedRun(t, d, cfg, cl.List, 8)
	counts, gram := exactSums(d, cfg, srv.st.Top)
	sd := func(got, want []float64) float64 {
		var s float64
		for k := range got {
			s += (got[k] - want[k]) * (got[k] - want[k])
		}
		return math.Sqrt(s / float64(len(got)))
	}
	for name, c := range map[string]struct {
		got, want []float64
		plan, eff float64
	}{
		"counts": {srv.st.Counts, counts, srv.sigmaC, srv.mask.Steps[0].NoiseSigma(0)},
		"Gram":   {srv.gram, gram, srv.sigmaG, srv.mask.Steps[1].NoiseSigma(0)},
	} {
		got := sd(c.got, c.want)
		if math.Abs(got/c.eff-1) > 0.2 || c.eff < c.plan {
			t.Errorf("%s: noise sd %.4g, calibrated %.4g (Gaussian plan %.4g)", name, got, c.eff, c.plan)
		}
		t.Logf("%s: noise sd %.4g, calibrated %.4g, Gaussian plan %.4g", name, got, c.eff, c.plan)
	}
	rep := srv.Report()
	if rep.Eps > cfg.Eps || rep.Eps < 0.99*cfg.Eps || rep.EpsReplace <= rep.Eps {
		t.Errorf("reported ε %.6f (replace-one %.4f), target %g", rep.Eps, rep.EpsReplace, cfg.Eps)
	}
	if n := len(rep.Ledger.Releases()); n != 2 {
		t.Errorf("%d releases in the ledger, want 2", n)
	}
	if e, _, _ := srv.Spent(); math.Abs(e-rep.Eps) > 1e-9 || math.Abs(rep.Stats["eps_spent"]-e) > 1e-12 {
		t.Errorf("Spent %.6f, eps_spent %.6f, report %.6f", e, rep.Stats["eps_spent"], rep.Eps)
	}
	if cov, e, ok := srv.NoiseCoverage(1); !ok || cov != 1 || !(e > 0 && e < rep.Eps) {
		t.Errorf("noise coverage %v, round ε %v, ok %v", cov, e, ok)
	}
	if !(rep.Stats["skellam_eta"] >= 0 && rep.Stats["skellam_eta"] < 0.05) {
		t.Errorf("η = %v", rep.Stats["skellam_eta"])
	}
}

// tamperer wraps a device whose masked words of one round it changes.
type tamperer struct {
	protocol.Client
	round  int
	tamper func([]uint32)
}

func (c tamperer) Round(b *protocol.Broadcast, r *rand.Rand) (*protocol.Upload, error) {
	up, err := c.Client.Round(b, r)
	if err == nil && up != nil && b.Round == c.round {
		w := slices.Clone(up.Words)
		c.tamper(w)
		up = &protocol.Upload{Client: up.Client, Round: up.Round, Words: w}
	}
	return up, err
}

// TestMaskedTamperedSumRefused: a device adding 2^24 to one word of a
// release, or sending an arrival word that takes the sum above the
// inputs, makes the server refuse that round's sum (ErrOutOfBounds: the
// release is zeros and its privacy is still spent); a refused setup count
// stops the run (no share could be calibrated); honest runs pass every
// check.
func TestMaskedTamperedSumRefused(t *testing.T) {
	d := synth(80, 50, 2)
	cfg := DefaultConfig()
	cfg.TopItems, cfg.Cap = 15, 4
	cases := []struct {
		name   string
		round  int
		tamper func([]uint32)
	}{
		{"honest", -1, nil},
		{"counts word", 1, func(w []uint32) { w[3] += 1 << 24 }},
		{"Gram word", 2, func(w []uint32) { w[7] -= 1 << 24 }},
		{"arrivals", 1, func(w []uint32) { w[len(w)-1] = 1 << 20 }},
		{"setup count", 0, func(w []uint32) { w[0] = 1 << 20 }},
	}
	for _, tc := range cases {
		cl := mustClients(t, d, cfg)
		if tc.tamper != nil {
			cl.List[0] = tamperer{cl.List[0], tc.round, tc.tamper}
		}
		srv, infos, err := tryMasked(t, d, cfg, cl.List, 4)
		if tc.round == 0 {
			// Without the count, no share can be calibrated: the run stops.
			if err == nil || len(infos) != 0 || srv.st.Round != 0 {
				t.Errorf("%s: run went on (%v, %d rounds)", tc.name, err, len(infos))
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for _, i := range infos {
			switch {
			case i.Round == tc.round && !errors.Is(i.Rejected, protocol.ErrOutOfBounds):
				t.Errorf("%s: round %d not refused (%v)", tc.name, i.Round, i.Rejected)
			case i.Round != tc.round && i.Rejected != nil:
				t.Errorf("%s: round %d refused: %v", tc.name, i.Round, i.Rejected)
			}
		}
		if tc.round >= 1 {
			if srv.st.ArrA[tc.round-1] != 0 {
				t.Errorf("%s: a refused release counted %d arrivals", tc.name, srv.st.ArrA[tc.round-1])
			}
			if n := len(srv.Ledger().Releases()); n != 2 {
				t.Errorf("%s: %d releases in the ledger, want 2 (a refused round is spent)", tc.name, n)
			}
		}
	}
}

// TestMaskedSnapshotResume: a masked server restored from its snapshot
// after the counts round finishes with the factors and accounting of the
// uninterrupted run (the noise is the devices', from the run's streams).
func TestMaskedSnapshotResume(t *testing.T) {
	d := synth(60, 40, 9)
	cfg := DefaultConfig()
	cfg.TopItems, cfg.Cap, cfg.Aggregation, cfg.Seeded = 12, 4, protocol.AggMasked, true
	full, _ := maskedRun(t, d, cfg, mustClients(t, d, cfg).List, 6)
	cl := mustClients(t, d, cfg)
	a, err := NewServer(cfg, d.Public(), 6)
	if err != nil {
		t.Fatal(err)
	}
	opt := protocol.RunOptions{Seed: 6, Aggregation: protocol.AggMasked, MaxRounds: 2}
	if err := protocol.Run(context.Background(), a, cl.List, opt); !errors.Is(err, protocol.ErrRounds) {
		t.Fatalf("stopped run: %v", err)
	}
	snap, err := a.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	r, _ := NewServer(cfg, d.Public(), 6)
	if err := r.UnmarshalBinary(snap); err != nil {
		t.Fatal(err)
	}
	opt.MaxRounds, opt.StartRound = 0, r.Round()
	if err := protocol.Run(context.Background(), r, cl.List, opt); err != nil {
		t.Fatal(err)
	}
	v1, _ := full.Factors()
	v2, _ := r.Factors()
	e1, _, _ := full.Spent()
	e2, _, _ := r.Spent()
	if !slices.Equal(v1, v2) || e1 != e2 {
		t.Errorf("resumed run: factors equal %v, ε %v against %v", slices.Equal(v1, v2), e2, e1)
	}
	ideal := cfg
	ideal.Aggregation = protocol.AggIdeal
	si, _ := NewServer(ideal, d.Public(), 6)
	if err := si.UnmarshalBinary(snap); err == nil {
		t.Error("an ideal-path server accepted a masked snapshot")
	}
}

// TestMaskedTakesBroadcastSplit: the server resolves popularity mode from
// its roster (PopularityFrac of ρ on the counts); devices configured
// without a roster (they would resolve PersonalFrac) take the split from
// the broadcast, so the noise-free decoded counts are still the exact
// sums, and the factors carry no item-item weight.
func TestMaskedTakesBroadcastSplit(t *testing.T) {
	d := synth(150, 60, 11)
	cfg := DefaultConfig()
	cfg.Eps, cfg.TopItems, cfg.Cap = 2, 20, 4
	cl := mustClients(t, d, cfg)
	cl.Noiseless()
	scfg := cfg
	scfg.Roster = d.NumUsers()
	srv, _ := maskedRun(t, d, scfg, cl.List, 3)
	if !srv.PopularityMode() || srv.cfg.FracCounts != PopularityFrac || cl.Frac() != PopularityFrac {
		t.Fatalf("popularity mode %v, server split %v, devices saw %v", srv.PopularityMode(), srv.cfg.FracCounts, cl.Frac())
	}
	counts, _ := exactSums(d, cfg, srv.st.Top)
	tol := float64(len(cl.List)) / 32768
	for j, c := range counts {
		if math.Abs(srv.st.Counts[j]-c) > tol {
			t.Fatalf("count %d: masked %.6f, exact %.6f (tolerance %.2g)", j, srv.st.Counts[j], c, tol)
		}
	}
	if v, dim := srv.Factors(); Personal(v, dim) {
		t.Error("popularity mode released item-item weights")
	}
}
