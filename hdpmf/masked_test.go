package hdpmf

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/privrec/privrec/accountant/rdp"
	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/secagg"
)

// runHalves runs cfg's server and clients over the in-process transport
// with the given options and returns the final V and the clients' report.
func runHalves(t *testing.T, train *ratings.Dataset, cfg Config, opt protocol.RunOptions) ([]float32, *Clients) {
	t.Helper()
	srv, err := NewServer(cfg, train.Public(), cfg.Seed)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := NewClients(train, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := protocol.Run(context.Background(), srv, cl.List, opt); err != nil {
		t.Fatal(err)
	}
	v, _ := srv.Factors()
	return v, cl
}

// TestMaskedProtocolGivesTheSameModel: running the SecAgg+ protocol in
// process (keys, encrypted Shamir shares, masked uploads, unmasking)
// gives the same V, bit for bit, as adding the integer uploads directly:
// secure aggregation of the integer path costs no accuracy at all.
func TestMaskedProtocolGivesTheSameModel(t *testing.T) {
	cfg := DefaultConfig(HDPMF)
	cfg.Rounds, cfg.Aggregation, cfg.Seed = 3, protocol.AggMasked, 5
	train := tiny(t, 60)
	direct, _ := runHalves(t, train, cfg, protocol.RunOptions{Seed: 5, Aggregation: protocol.AggMasked})
	masked, _ := runHalves(t, train, cfg, protocol.RunOptions{Seed: 5, Aggregation: protocol.AggMasked, MaskProtocol: secagg.SimulateSum})
	for k := range direct {
		if math.Float32bits(direct[k]) != math.Float32bits(masked[k]) {
			t.Fatalf("V[%d] = %v with the protocol, %v by direct sums", k, masked[k], direct[k])
		}
	}
}

// TestIntegerPath: the masked run reports Skellam noise whose rounds
// compose to the proven T·C·ε at δ (user level, the clip's sensitivity), learns (test RMSE well below the global mean's,
// within reach of the float path), and its quantization alone (no noise,
// the Plain variant) changes V only by rounding.
func TestIntegerPath(t *testing.T) {
	train, test := small(t)
	cfg := DefaultConfig(HDPMF)
	cfg.Rounds, cfg.Seed = 20, 3
	cfg.Aggregation = protocol.AggMasked
	m, rep, err := Train(context.Background(), train, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Noise != "skellam" || rep.Aggregation != "masked" || rep.Delta != DefaultDelta {
		t.Fatalf("report: noise %q, aggregation %q, δ %v", rep.Noise, rep.Aggregation, rep.Delta)
	}
	if want := float64(cfg.Rounds) * cfg.UserClip * cfg.Eps; math.Abs(rep.UserEpsTotal-want) > 1e-6*want || rep.UserEpsRound >= want ||
		rep.UserDelta != DefaultDelta {
		t.Fatalf("proven ε total %v (want T·C·ε = %v), per round %v, δ %v", rep.UserEpsTotal, want, rep.UserEpsRound, rep.UserDelta)
	}
	if rep.EpsTotal > float64(cfg.Rounds)*cfg.Eps {
		t.Fatalf("the paper's per-rating total %v above T·ε at the user-level calibration", rep.EpsTotal)
	}
	cfg.Aggregation = protocol.AggIdeal
	fm, _, err := Train(context.Background(), train, cfg)
	if err != nil {
		t.Fatal(err)
	}
	got, ref := eval.Rating(m, test).RMSE, eval.Rating(fm, test).RMSE
	if math.IsNaN(got) || got > ref+0.1 {
		t.Fatalf("integer path test RMSE %.4f, float path %.4f", got, ref)
	}
	t.Logf("test RMSE at proven T·C·ε = %v: integer path (Skellam, RDP) %.4f, float path (gamma shares, basic composition) %.4f", rep.UserEpsTotal, got, ref)

	// Quantization alone: Plain (no noise) over the integer path and over
	// the float sums.
	p := DefaultConfig(Plain)
	p.Rounds, p.Seed = 10, 3
	p.Aggregation = protocol.AggMasked
	vi, _ := runHalves(t, train, p, protocol.RunOptions{Seed: 3, Aggregation: protocol.AggMasked})
	p.Aggregation = protocol.AggIdeal
	vf, _ := runHalves(t, train, p, protocol.RunOptions{Seed: 3, Aggregation: protocol.AggIdeal})
	var worst float64
	for k := range vi {
		worst = math.Max(worst, math.Abs(float64(vi[k]-vf[k])))
	}
	if worst == 0 || worst > 0.05 {
		t.Fatalf("quantization moved V by up to %v (want a rounding-sized change)", worst)
	}
	t.Logf("quantization alone moves V by at most %.4g after %d rounds", worst, p.Rounds)
}

// TestRosterNoiseIgnoresCounts mounts issue 31's noise attack on a real
// client: a server that lies announces inflated rater counts n_j, and on
// the count-calibrated path each share, Skellam(μ/⌊ρ·n_j⌋), shrinks with
// them (the control: mean |word| falls more than tenfold at n_j = 2^30).
// Under a roster calibration (protocol.ParamRoster R) the client draws
// every share for ⌊ρ·R⌋ clients whatever the counts say: its words are
// the same, bit for bit, at n_j = 1, R and 2^30, and every item carries
// a share, rated or not.
func TestRosterNoiseIgnoresCounts(t *testing.T) {
	train := tiny(t, 60)
	cfg := DefaultConfig(HDPMF)
	cfg.Rounds, cfg.Aggregation, cfg.Seed = 2, protocol.AggMasked, 5
	cl, err := NewClients(train, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := cl.List[0].(*client)
	if _, err := c.Round(&protocol.Broadcast{Round: 0, Phase: protocol.PhaseSetup, Dim: cfg.Dim, NumItems: train.NumItems(),
		Words: train.NumItems(), Bits: 32}, rand.New(rand.NewPCG(1, 2))); err != nil {
		t.Fatal(err)
	}
	m, k := train.NumItems(), cfg.Dim
	const roster = 100
	words := func(nj int32, roster int) []uint32 {
		counts := make([]int32, m)
		for j := range counts {
			counts[j] = nj
		}
		v := make([]float32, m*k)
		for d := range v {
			v[d] = 0.1
		}
		params := map[string]float64{"lr": 0.01, "lambda": 0.01, protocol.ParamMinShare: 0.9}
		if roster > 0 {
			params[protocol.ParamRoster] = float64(roster)
		}
		b := &protocol.Broadcast{Round: 1, Phase: protocol.PhaseTrain, Dim: k, NumItems: m, V: v, Counts: counts,
			Words: m * (k + 1), Bits: 32, Params: params}
		c.tabs, c.rtab = nil, nil // the cached samplers assume fixed counts
		up, err := c.Round(b, rand.New(rand.NewPCG(3, 4)))
		if err != nil {
			t.Fatal(err)
		}
		return slices.Clone(up.DenseWords(b))
	}
	// meanAbs is the mean |word| over the K coordinates of the client's
	// rated items (rated) or of the others.
	meanAbs := func(w []uint32, rated bool) float64 {
		var s float64
		n := 0
		for j := range m {
			if _, ok := slices.BinarySearch(c.items, int32(j)); ok != rated {
				continue
			}
			for _, x := range w[j*(k+1) : j*(k+1)+k] {
				s += math.Abs(float64(int32(x)))
				n++
			}
		}
		return s / float64(n)
	}
	honest, lying := meanAbs(words(1, 0), true), meanAbs(words(1<<30, 0), true)
	t.Logf("count-calibrated path: mean |word| %.1f at n_j = 1, %.1f at n_j = 2^30", honest, lying)
	if lying > honest/10 {
		t.Fatalf("control: inflated counts did not shrink the count-calibrated share (%.1f vs %.1f)", lying, honest)
	}
	ref := words(1, roster)
	for _, nj := range []int32{roster, 1 << 30} {
		if w := words(nj, roster); !slices.Equal(w, ref) {
			t.Fatalf("roster calibration: the words at n_j = %d differ from those at n_j = 1", nj)
		}
	}
	// The share is Skellam(μ/⌊0.9·R⌋) on every item: its mean |x| is
	// about √(2·share/π) (share = a Skellam's half variance).
	share := c.sh.mask.mu / math.Floor(0.9*roster)
	want := math.Sqrt(4 * share / math.Pi)
	got := meanAbs(ref, false)
	t.Logf("roster calibration (R = %d, ρ = 0.9): mean |word| %.1f on unrated items (≈ %.1f expected), %.1f on rated ones, at any n_j",
		roster, got, want, meanAbs(ref, true))
	if got < 0.8*want || got > 1.2*want {
		t.Fatalf("roster calibration: unrated items' mean |word| %.1f, want ≈ %.1f", got, want)
	}
}

// TestRosterFloorCost computes what a server that lies can still do to
// the noise under a roster calibration: drop honest clients down to the
// survivor floor the clients pin (ρ of the certified roster R), with up
// to γ·R corrupt clients in the sum withholding their shares. Every
// honest share is drawn for ⌊ρ·R⌋ clients, so at least (ρ−γ)·R of them
// leave f = 1 − γ/ρ of μ per coordinate. It logs the total ε at f
// (HDPMF, rating range 4, ε = 1 a round, 20 rounds, user clip 1, δ =
// 10⁻⁶) and checks that less noise costs more ε and none is unbounded.
func TestRosterFloorCost(t *testing.T) {
	cfg := DefaultConfig(HDPMF)
	cfg.Rounds, cfg.Eps, cfg.UserClip = 20, 1, 1
	m, err := newMasking(cfg, cfg.Eps, 4)
	if err != nil {
		t.Fatal(err)
	}
	prev := 0.0
	for _, c := range []struct{ rho, gamma float64 }{{1, 0}, {0.9, 0.05}, {0.9, 0.1}, {0.8, 0.1}, {0.5, 0.1}, {0.2, 0.1}} {
		f := 1 - c.gamma/c.rho
		eps := m.userEps(cfg.Rounds)
		if f < 1 {
			eps = rdp.SkellamEpsilon(f*m.mu, cfg.Rounds, m.ul1, m.ul2, m.delta)
		}
		t.Logf("ρ = %.2f, γ = %.2f: f = %.3f, total ε %.2f at δ = %g", c.rho, c.gamma, f, eps, m.delta)
		if math.IsInf(eps, 1) || eps < prev {
			t.Fatalf("ρ = %v, γ = %v: ε %v after %v", c.rho, c.gamma, eps, prev)
		}
		prev = eps
	}
}
