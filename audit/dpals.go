package audit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

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

// rawSpy passes uploads through and hands every float upload of a train
// round to keep (what a server without aggregation reads).
type rawSpy struct {
	inner protocol.Transport
	keep  func(b *protocol.Broadcast, u *protocol.Upload)
}

func (s *rawSpy) NumClients() int { return s.inner.NumClients() }
func (s *rawSpy) Close() error    { return nil }
func (s *rawSpy) Exchange(ctx context.Context, b *protocol.Broadcast) ([]*protocol.Upload, error) {
	ups, err := s.inner.Exchange(ctx, b)
	if err == nil {
		for _, u := range ups {
			if u != nil {
				s.keep(b, u)
			}
		}
	}
	return ups, err
}

// dpalsInversion attacks the first bias round of dp-als (the per-item
// weighted counts and residual sums a client uploads, over every item):
// for every client, it guesses which items the client rated, flagging an
// item when its count coordinate's magnitude exceeds the median over the
// catalog, scored on a balanced set (every rated item, as many unrated
// ones). masked false (the control): the float upload of the path without
// aggregation; masked true: the masked words the server receives under
// secagg=masked, read as signed integers.
func dpalsInversion(masked bool) func(context.Context, *env) (Result, error) {
	return func(ctx context.Context, e *env) (Result, error) {
		d := e.data
		if e.cfg.Quick || d.NumUsers() > 60 {
			d = firstUsers(d, 60)
		}
		cfg := dpals.BiasesConfig()
		cfg.BiasRounds = 1
		cfg.Aggregation = protocol.AggOff
		if masked {
			cfg.Aggregation = protocol.AggMasked
		}
		ni := d.NumItems()
		rated := make([]map[int32]bool, d.NumUsers())
		for k, u := range d.Users {
			if rated[u] == nil {
				rated[u] = map[int32]bool{}
			}
			rated[u][d.Items[k]] = true
		}
		var acc accuracy
		score := func(client int, count []float64) {
			if client < 0 || client >= len(rated) || len(rated[client]) == 0 {
				return
			}
			mags := make([]float64, len(count))
			for j, x := range count {
				mags[j] = math.Abs(x)
			}
			med := append([]float64(nil), mags...)
			slices.Sort(med)
			m := med[len(med)/2]
			unrated := 0
			for j := range ni {
				r := rated[client][int32(j)]
				if !r {
					if unrated >= len(rated[client]) {
						continue
					}
					unrated++
				}
				acc.add((mags[j] > m) == r)
			}
		}
		srv, err := dpals.NewServer(cfg, d, e.cfg.Seed)
		if err != nil {
			return Result{}, err
		}
		cl, err := dpals.NewClients(d, cfg)
		if err != nil {
			return Result{}, err
		}
		inner, err := protocol.NewInMem(cl.List, 1, e.cfg.Seed)
		if err != nil {
			return Result{}, err
		}
		defer inner.Close()
		isBias := func(b *protocol.Broadcast) bool { return b.Param("kind", -1) == 1 }
		var tr protocol.Transport
		if masked {
			spy := &maskSpy{inner: inner}
			spy.keep = func(b *protocol.Broadcast, u *protocol.Upload, _, mw []uint32) {
				if !isBias(b) {
					return
				}
				c := make([]float64, ni)
				for j := range ni {
					c[j] = float64(int32(mw[j]))
				}
				score(u.Client, c)
			}
			spy.sum = protocol.NewMaskedSum(&spy.fixed, e.cfg.Seed)
			tr = spy
		} else {
			tr = &rawSpy{inner: inner, keep: func(b *protocol.Broadcast, u *protocol.Upload) {
				if isBias(b) && len(u.Scalars) >= ni {
					score(u.Client, u.Scalars[:ni])
				}
			}}
		}
		if err := protocol.RunTransport(ctx, srv, tr, protocol.RunOptions{Seed: e.cfg.Seed}); err != nil {
			return Result{}, err
		}
		val, lo, hi := acc.value()
		view := map[bool]string{true: "masked words (SecAgg+)", false: "float per-client uploads (no aggregation)"}[masked]
		return Result{
			Case:   map[bool]string{true: "masked", false: "float, unaggregated"}[masked],
			Metric: "balanced accuracy", Value: val, Lo: lo, Hi: hi, N: acc.n, Baseline: 0.5,
			Bound: 0.5 + diffMargin, HigherLeaks: true,
			Setting: fmt.Sprintf("dp-biases defaults with one bias round, %d users × %d items, the server reads the first bias round's %s", d.NumUsers(), ni, view),
			Note:    fmt.Sprintf("rated-item recovery from one client's per-item weighted counts; bound: chance 0.5 plus margin %.2f", diffMargin),
		}, nil
	}
}

// firstUsers returns d's ratings by its first n users (index spaces kept).
func firstUsers(d *ratings.Dataset, n int) *ratings.Dataset {
	c := &ratings.Dataset{Name: d.Name, Scale: d.Scale, UserIDs: d.UserIDs[:min(n, d.NumUsers())], ItemIDs: d.ItemIDs, ItemTitles: d.ItemTitles}
	for k := range d.Values {
		if int(d.Users[k]) < n {
			c.Users, c.Items, c.Values = append(c.Users, d.Users[k]), append(c.Items, d.Items[k]), append(c.Values, d.Values[k])
		}
	}
	return c
}
