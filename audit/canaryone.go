package audit

import (
	"context"
	"fmt"
	"math"

	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/dpease"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
	"github.com/privrec/privrec/sdcf"
	"github.com/privrec/privrec/topn"
)

// The canary's rows for the user-level Gaussian methods dp-ease and
// dp-pop: their neighbours are one user's ratings all removed (dp-ease's
// zero-out: the canary's device stays, with an empty history; dp-pop's
// curator sees the ratings only). Each release is compared in L2 with the
// sensitivity its zCDP ledger charges (Gaussian noise: no L1 charge).

// dpeaseCanary returns a row of dp-ease on the ideal path: the server is
// built once, its broadcasts (the top items come from side A's noisy
// counts) go to both sides' devices, and each release (the counts, then
// the Gram triangle of the top items) is compared with its charge: L2 1
// for the counts, dpease.GramL2(c) for the Gram, times scale.
func dpeaseCanary(scale float64) func(ctx context.Context, e *env) (Result, error) {
	return func(ctx context.Context, e *env) (Result, error) {
		d, err := canaryData(e)
		if err != nil {
			return Result{}, err
		}
		cfg := dpease.DefaultConfig()
		cfg.Aggregation, cfg.Seeded, cfg.Workers = protocol.AggIdeal, true, 1
		srv, err := dpease.NewServer(cfg, d.Public(), e.cfg.Seed)
		if err != nil {
			return Result{}, err
		}
		a, err := dpease.NewClients(d, cfg)
		if err != nil {
			return Result{}, err
		}
		b, err := dpease.NewClients(removeUser(d), cfg)
		if err != nil {
			return Result{}, err
		}
		n := d.NumItems()
		size := n * (n + 1) / 2 // the Gram's pairs for M up to the catalog
		gram := dpease.GramL2(cfg.Cap)
		charge := func(bc *protocol.Broadcast) (float64, float64) {
			if len(bc.Items) > 0 { // the Gram round names the top items
				return math.Inf(1), scale * gram
			}
			return math.Inf(1), scale
		}
		o, err := replay(ctx, srv, a.List, b.List, size, 1, e.cfg.Seed, charge)
		if err != nil {
			return Result{}, err
		}
		setting := fmt.Sprintf("dp-ease, ε = %g, δ = %g, cap c = %d, ideal aggregation; canary data: %d users, %d items, "+
			"the canary rates %d of them", cfg.Eps, cfg.Delta, cfg.Cap, d.NumUsers(), n, n/2)
		charged := fmt.Sprintf("L2 %g (counts), %.4g (Gram)", scale, scale*gram)
		return canaryResult(o, "user's ratings, all removed (zero-out)", setting, charged), nil
	}
}

// dpPopEps is the ε of dp-pop's canary rows: so large that the noise,
// drawn alike on both sides anyway, is below the float32 scores'
// rounding; the sensitivity does not depend on ε.
const dpPopEps = 1e6

// dpPopCanary returns a row of dp-pop: its one release, the item
// popularity vector, computed on both sides with the same noise stream,
// against the L2 sensitivity 1 its ledger charges, times scale.
func dpPopCanary(scale float64) func(ctx context.Context, e *env) (Result, error) {
	return func(ctx context.Context, e *env) (Result, error) {
		d, err := canaryData(e)
		if err != nil {
			return Result{}, err
		}
		cfg := topn.DPPopConfig{Eps: dpPopEps, Delta: 1e-6}
		release := func(d *ratings.Dataset) ([]float32, float64, error) {
			m, l, err := topn.DPPop(d, cfg, rng.New(e.cfg.Seed, 1))
			if err != nil {
				return nil, 0, err
			}
			rs := l.Releases()
			if len(rs) != 1 {
				return nil, 0, fmt.Errorf("dp-pop: %d releases, want 1", len(rs))
			}
			return m.BI, rs[0].L2, nil
		}
		x, sens, err := release(d)
		if err != nil {
			return Result{}, err
		}
		y, _, err := release(removeUser(d))
		if err != nil {
			return Result{}, err
		}
		ch := scale * sens
		o := oneRelease(f32s(x), f32s(y), math.Inf(1), ch)
		setting := fmt.Sprintf("dp-pop, ε = %g (the noise drawn alike on both sides), δ = %g; canary data: %d users, %d items, "+
			"the canary rates %d of them", cfg.Eps, cfg.Delta, d.NumUsers(), d.NumItems(), d.NumItems()/2)
		return canaryResult(o, "user's ratings, all removed", setting, fmt.Sprintf("L2 %g", ch)), nil
	}
}

// oneRelease compares a single release on both sides, x and y, with its
// charged L1 and L2 sensitivities.
func oneRelease(x, y []float64, chL1, chL2 float64) canaryOutcome {
	var l1, l2 float64
	for j := range x {
		v := math.Abs(x[j] - y[j])
		l1 += v
		l2 += v * v
	}
	l2 = math.Sqrt(l2)
	r := math.Max(ratioOf(l1, chL1), ratioOf(l2, chL2))
	o := canaryOutcome{ratio: r, l1: l1, l2: l2, chL1: chL1, chL2: chL2, rounds: 1, firstOver: -1}
	if r > 1+canarySlack {
		o.overCount, o.firstOver = 1, 0
	}
	return o
}

// f32s returns x as float64s.
func f32s(x []float32) []float64 {
	out := make([]float64, len(x))
	for k, v := range x {
		out[k] = float64(v)
	}
	return out
}

// oneEps is the ε of the Laplace rows' runs: so large that the noise,
// drawn alike on both sides anyway, cannot reach the clamp to the scale
// that follows it; the sensitivity does not depend on ε.
const oneEps = 1e6

// isgldCanary returns a row of isgld: its one release, every rating
// perturbed on the device (sdcf.PerturbRatings, the same stream on both
// sides), with the canary's rating changed 1→5, against the L1
// sensitivity of one rating value the Laplace scale is set for (the
// scale's range), times scale.
func isgldCanary(scale float64) func(ctx context.Context, e *env) (Result, error) {
	return func(ctx context.Context, e *env) (Result, error) {
		d, err := canaryData(e)
		if err != nil {
			return Result{}, err
		}
		release := func(d *ratings.Dataset) ([]float64, error) {
			p, err := sdcf.PerturbRatings(rng.New(e.cfg.Seed, 2), d, oneEps)
			if err != nil {
				return nil, err
			}
			return f32s(p.Values), nil
		}
		return changedRatingRow(d, release, scale, "isgld's input perturbation")
	}
}

// changedRatingRow compares a Laplace release on the canary data d with
// the same release after the canary's rating changed 1→5, against the L1
// sensitivity of one rating value (the scale's range), times scale; what
// names the release in the row's setting.
func changedRatingRow(d *ratings.Dataset, release func(*ratings.Dataset) ([]float64, error), scale float64, what string) (Result, error) {
	x, err := release(d)
	if err != nil {
		return Result{}, err
	}
	y, err := release(changeRating(d))
	if err != nil {
		return Result{}, err
	}
	ch := scale * float64(d.Scale.Range())
	o := oneRelease(x, y, ch, math.Inf(1))
	setting := fmt.Sprintf("%s, ε = %g (the noise drawn alike on both sides); canary data: %d users, %d items",
		what, float64(oneEps), d.NumUsers(), d.NumItems())
	return canaryResult(o, "rating value, changed 1→5", setting, fmt.Sprintf("L1 %g", ch)), nil
}

// dpItemAvgCanary returns a row of dp-itemavg: its release of the items'
// centred rating sums (dp.DPItemAverages, the same stream on both sides,
// read back as (average − midpoint)·n_j from its averages, n_j the item's
// raters, which a changed value leaves alone), with the canary's rating
// changed 1→5, against the L1 sensitivity its Laplace noise is set for
// (the scale's range: parallel over items), times scale.
func dpItemAvgCanary(scale float64) func(ctx context.Context, e *env) (Result, error) {
	return func(ctx context.Context, e *env) (Result, error) {
		d, err := canaryData(e)
		if err != nil {
			return Result{}, err
		}
		n := make([]float64, d.NumItems())
		for _, j := range d.Items {
			n[j]++
		}
		mid := float64(d.Scale.Min+d.Scale.Max) / 2
		release := func(d *ratings.Dataset) ([]float64, error) {
			avg, err := dp.DPItemAverages(rng.New(e.cfg.Seed, 3), d, oneEps, nil)
			if err != nil {
				return nil, err
			}
			for j := range avg {
				avg[j] = (avg[j] - mid) * n[j]
			}
			return avg, nil
		}
		return changedRatingRow(d, release, scale, "dp-itemavg")
	}
}

// dpGlobalAvgCanary returns a row of dp-globalavg: its release of the
// centred sum of all ratings (dp.DPAverage, the same stream on both sides,
// read back as (average − midpoint)·n from the average, n the number of
// ratings, which a changed value leaves alone), with the canary's rating
// changed 1→5, against the L1 sensitivity its Laplace noise is set for
// (the scale's range), times scale.
func dpGlobalAvgCanary(scale float64) func(ctx context.Context, e *env) (Result, error) {
	return func(ctx context.Context, e *env) (Result, error) {
		d, err := canaryData(e)
		if err != nil {
			return Result{}, err
		}
		lo, hi := float64(d.Scale.Min), float64(d.Scale.Max)
		release := func(d *ratings.Dataset) []float64 {
			avg := dp.DPAverage(rng.New(e.cfg.Seed, 4), d.Values, lo, hi, oneEps)
			return []float64{(avg - (lo+hi)/2) * float64(d.Len())}
		}
		ch := scale * (hi - lo)
		o := oneRelease(release(d), release(changeRating(d)), ch, math.Inf(1))
		setting := fmt.Sprintf("dp-globalavg, ε = %g (the noise drawn alike on both sides); canary data: %d users, %d items, %d ratings",
			float64(oneEps), d.NumUsers(), d.NumItems(), d.Len())
		return canaryResult(o, "rating value, changed 1→5", setting, fmt.Sprintf("L1 %g", ch)), nil
	}
}
