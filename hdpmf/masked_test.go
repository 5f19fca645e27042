package hdpmf

import (
	"context"
	"math"
	"testing"

	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
)

// runHalves runs cfg's server and clients over the in-process transport
// with the given options and returns the final V and the clients' report.
func runHalves(t *testing.T, train *ratings.Dataset, cfg Config, opt protocol.RunOptions) ([]float32, *Clients) {
	t.Helper()
	srv, err := NewServer(cfg, train.NumItems(), train.Scale)
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
	masked, _ := runHalves(t, train, cfg, protocol.RunOptions{Seed: 5, Aggregation: protocol.AggMasked, MaskProtocol: true})
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
