package audit

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/privrec/privrec/accountant/rdp"
	"github.com/privrec/privrec/dpals"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
)

// dpalsMeanRelease runs dp-als's first release (the noised global mean
// and count, round 0 of the Gaussian path under ideal aggregation) on d
// with cfg and seed, and returns the released mean the server computes
// from the noised sum and count.
func dpalsMeanRelease(ctx context.Context, d *ratings.Dataset, cfg dpals.Config, seed uint64) (float64, error) {
	srv, err := dpals.NewServer(cfg, d, seed)
	if err != nil {
		return 0, err
	}
	cl, err := dpals.NewClients(d, cfg)
	if err != nil {
		return 0, err
	}
	stop := errors.New("stop after the mean release")
	opt := protocol.RunOptions{Seed: seed, Workers: 1, OnRound: func(protocol.RoundInfo) error { return stop }}
	if err := protocol.Run(ctx, srv, cl.List, opt); err != nil && !errors.Is(err, stop) {
		return 0, err
	}
	// The next broadcast carries the released mean (parameter "mu").
	b, err := srv.Broadcast(1)
	if err != nil {
		return 0, err
	}
	mu := b.Param("mu", math.NaN())
	if math.IsNaN(mu) {
		return 0, fmt.Errorf("dp-als broadcast 1 carries no global mean")
	}
	return mu, nil
}

// without returns d with user u's ratings removed (the index spaces kept).
func without(d *ratings.Dataset, u int32) *ratings.Dataset {
	c := &ratings.Dataset{Name: d.Name, Scale: d.Scale, UserIDs: d.UserIDs, ItemIDs: d.ItemIDs, ItemTitles: d.ItemTitles}
	for k := range d.Values {
		if d.Users[k] != u {
			c.Users, c.Items, c.Values = append(c.Users, d.Users[k]), append(c.Items, d.Items[k]), append(c.Values, d.Values[k])
		}
	}
	return c
}

// dpalsDiff is the difference attack on dp-als's global mean and count
// release: the server knows every user but a target, whose presence it
// tests by comparing the released mean with the noiseless means of the
// data with and without the target (nearest wins). Trials alternate
// between the two data sets, each with a fresh server seed. noiseOff (the
// control) runs at ε = 10⁹, where the ledger's σ is negligible.
func dpalsDiff(noiseOff bool) func(context.Context, *env) (Result, error) {
	return func(ctx context.Context, e *env) (Result, error) {
		d := e.data
		// The target: the user whose mean rating is farthest from the
		// others', so that its presence moves the mean most.
		sum, cnt := make([]float64, d.NumUsers()), make([]float64, d.NumUsers())
		for k, u := range d.Users {
			sum[u] += float64(d.Values[k])
			cnt[u]++
		}
		target, far := int32(0), -1.0
		for u := range sum {
			if cnt[u] > 0 && math.Abs(sum[u]/cnt[u]-3) > far {
				target, far = int32(u), math.Abs(sum[u]/cnt[u]-3)
			}
		}
		in, out := d, without(d, target)
		cfg := dpals.BiasesConfig()
		cfg.Aggregation = protocol.AggIdeal
		if noiseOff {
			cfg.Eps = 1e9
		}
		ref := func(x *ratings.Dataset) (float64, error) {
			c := cfg
			c.Eps = 1e12
			return dpalsMeanRelease(ctx, x, c, e.cfg.Seed)
		}
		muIn, err := ref(in)
		if err != nil {
			return Result{}, err
		}
		muOut, err := ref(out)
		if err != nil {
			return Result{}, err
		}
		trials := 400
		if e.cfg.Quick {
			trials = 120
		}
		var acc accuracy
		for t := range trials {
			present := t%2 == 0
			x := out
			if present {
				x = in
			}
			mu, err := dpalsMeanRelease(ctx, x, cfg, e.cfg.Seed+uint64(t)+1)
			if err != nil {
				return Result{}, err
			}
			acc.add((math.Abs(mu-muIn) < math.Abs(mu-muOut)) == present)
		}
		val, lo, hi := acc.value()
		// The ledger's bound for the one release observed: the global mean
		// gets FracMean of the run's ρ (add/remove one user).
		_, rep, err := dpals.Train(ctx, in, dpals.BiasesConfig(), e.cfg.Seed)
		if err != nil {
			return Result{}, err
		}
		rhoMean := cfg.FracMean * rep.Rho
		eps := rdp.ZCDPToDP(rhoMean, cfg.Delta)
		bound := 1/(1+math.Exp(-eps)) + cfg.Delta
		cs := "global mean and count"
		if noiseOff {
			cs = "noise off (ε = 1e9)"
		}
		return Result{
			Case:   cs,
			Metric: "balanced accuracy", Value: val, Lo: lo, Hi: hi, N: acc.n, Baseline: 0.5,
			Bound: bound + diffMargin, HigherLeaks: true,
			Setting: fmt.Sprintf("dp-als biases-only defaults, ε = %g, δ = %g, the server sees the noised global sum and count "+
				"(ideal aggregation) of the data with and without user %d", cfg.Eps, cfg.Delta, target),
			Note: fmt.Sprintf("bound: e^ε/(1+e^ε) + δ with ε = %.4g the (ε, δ) of the mean release's zCDP share ρ = %.4g "+
				"(FracMean %.2f of the run's ρ at ε = 1), plus margin %.2f; noiseless means %.5f with and %.5f without the target",
				eps, rhoMean, cfg.FracMean, diffMargin, muIn, muOut),
		}, nil
	}
}
