package dpals

import (
	"context"
	"math"
	"testing"

	"github.com/privrec/privrec/accountant/rdp"
	"github.com/privrec/privrec/protocol"
)

// roundCurves returns, per round of cfg's run over ni items, the Rényi
// curve of its releases (the Gaussian mechanism's, from each release's σ
// and L2 sensitivity, composed) and their ρ = Σ Δ²/(2σ²); nil curves for
// the rounds without a release.
func roundCurves(t *testing.T, cfg Config, ni int) ([]rdp.Curve, []float64) {
	t.Helper()
	srv, err := newServer(cfg, ni, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	curves := make([]rdp.Curve, len(srv.steps))
	rhos := make([]float64, len(srv.steps))
	for r, st := range srv.steps {
		var l rdp.Ledger
		noiseSigmas(cfg, st, &l, nil)
		curves[r] = rdp.Compose()
		for _, rel := range l.Releases() {
			curves[r] = rdp.Compose(curves[r], rdp.GaussianCurve(rel.Sigma, rel.L2))
			rhos[r] += rel.L2 * rel.L2 / (2 * rel.Sigma * rel.Sigma)
		}
		if len(l.Releases()) == 0 {
			curves[r] = nil
		}
	}
	return curves, rhos
}

// worstByEnumeration returns the largest Σ ρ over every set of rounds
// with a release that p.Allows one after the other, and that set's
// composed curve, by enumerating all the sets.
func worstByEnumeration(curves []rdp.Curve, rhos []float64, p protocol.Participation) (float64, rdp.Curve) {
	var train []int
	for r, c := range curves {
		if c != nil {
			train = append(train, r)
		}
	}
	best, bestCurve := 0.0, rdp.Compose()
	for mask := 1; mask < 1<<len(train); mask++ {
		var set []int
		ok := true
		for b, r := range train {
			if mask&(1<<b) == 0 {
				continue
			}
			if !p.Allows(set, r) {
				ok = false
				break
			}
			set = append(set, r)
		}
		if !ok {
			continue
		}
		var rho float64
		var cs []rdp.Curve
		for _, r := range set {
			rho += rhos[r]
			cs = append(cs, curves[r])
		}
		if rho > best {
			best, bestCurve = rho, rdp.Compose(cs...)
		}
	}
	return best, bestCurve
}

// TestCohortAccountingRecomputed recomputes a cohort run's ε from
// scratch: per round the Gaussian Rényi curves of its releases (σ and L2
// as the ledger charges them), the costliest set of rounds a device's
// limits allow found by enumerating every set (protocol.Participation's
// own Allows), composed and converted to (ε, δ) on rdp's grid of orders.
// The method's reported ε must match it (the grid's conversion is a
// little looser than the continuous one), reach the target, and bound
// every user's ε over the rounds the user actually answered in the run,
// under an honest server and under adversarial ones (everyone asked in
// every round; everyone asked in exactly the costliest allowed rounds,
// which reaches the bound). With unequal round costs MinGap changes the
// costliest set: the "expensive mean" cases check that the scaling
// follows it.
func TestCohortAccountingRecomputed(t *testing.T) {
	s := synthetic(t)
	for _, c := range []struct {
		name                string
		cohort, k, gap      int
		bias, dim, rounds   int
		fracMean, eps       float64
		wantRounds          int // rounds in the costliest set
		mustSpendLessThanLd bool
	}{
		{"k=1", 600, 1, 0, 4, 0, 0, 0.02, 1, 1, true},
		{"k=2 b=3", 600, 2, 3, 8, 0, 0, 0.02, 1, 2, true},
		{"k=2 b=3, factors", 500, 2, 3, 4, 2, 3, 0.02, 2, 2, true},
		{"k=3, eps 5", 800, 3, 0, 6, 0, 0, 0.1, 5, 3, true},
		{"gap only, b=4", 1000, 0, 4, 6, 0, 0, 0.02, 1, 2, true},
		{"expensive mean, k=2 no gap", 1000, 2, 0, 2, 0, 0, 0.6, 1, 2, true},
		{"expensive mean, k=2 b=3", 1000, 2, 3, 2, 0, 0, 0.6, 1, 1, true},
		{"limits above the schedule", 1000, 50, 0, 3, 0, 0, 0.02, 1, 4, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Dim, cfg.BiasRounds, cfg.Rounds, cfg.InitItems, cfg.TopItems = c.dim, c.bias, c.rounds, 0, 0
			cfg.FracMean, cfg.Eps = c.fracMean, c.eps
			cfg.Cohort, cfg.RoundsPerUser, cfg.MinGap = c.cohort, c.k, c.gap
			ni := s.Train.NumItems()
			curves, rhos := roundCurves(t, cfg, ni)
			p := cfg.Participation()
			worst, curve := worstByEnumeration(curves, rhos, p)
			epsGrid, _ := rdp.ToDP(curve, cfg.Delta)

			srv, err := NewServer(cfg, s.Train, 1)
			if err != nil {
				t.Fatal(err)
			}
			cl, err := NewClients(s.Train, cfg)
			if err != nil {
				t.Fatal(err)
			}
			tr, err := protocol.NewCohorts(cl.List, p, nil, 0, 1)
			if err != nil {
				t.Fatal(err)
			}
			if err := protocol.RunTransport(context.Background(), srv, protocol.NewSecureSum(tr), protocol.RunOptions{Seed: 1}); err != nil {
				t.Fatal(err)
			}
			v, _ := srv.Factors()
			_, rep, err := cl.Finish(v)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(rep.UserRho-worst) > 1e-9*worst {
				t.Errorf("user ρ %g, recomputed %g", rep.UserRho, worst)
			}
			if len(rep.UserRounds) != c.wantRounds {
				t.Errorf("costliest set %v, want %d rounds", rep.UserRounds, c.wantRounds)
			}
			if math.Abs(rep.Eps-c.eps) > 1e-6*c.eps {
				t.Errorf("ε = %g, want the target %g", rep.Eps, c.eps)
			}
			if want := rdp.ZCDPToDP(worst, cfg.Delta); math.Abs(rep.Eps-want) > 1e-9 {
				t.Errorf("ε = %g, the recomputed ρ converts to %g", rep.Eps, want)
			}
			if epsGrid < rep.Eps-1e-9 || epsGrid > 1.02*rep.Eps {
				t.Errorf("ε = %g, the recomputed Rényi curve on the grid gives %g", rep.Eps, epsGrid)
			}
			if eps, _, _ := srv.(*server).Spent(); math.Abs(eps-rep.Eps) > 1e-9 {
				t.Errorf("server's Spent ε = %g, the report's %g", eps, rep.Eps)
			}
			// Without amplification the ledger's total exceeds a
			// user's when the limits bind.
			if all := rep.Ledger.Rho(); c.mustSpendLessThanLd != (all > worst*(1+1e-9)) {
				t.Errorf("ledger ρ %g, user ρ %g", all, worst)
			}
			maxSeen, users := 0.0, 0
			for _, x := range cl.List {
				var rho float64
				ans := tr.Answered(x.ID())
				for _, r := range ans {
					rho += rhos[r]
				}
				if len(ans) > 0 {
					users++
				}
				maxSeen = max(maxSeen, rho)
				if rho > rep.UserRho*(1+1e-9) {
					t.Errorf("user %d answered rounds %v: ρ %g above the reported %g", x.ID(), ans, rho, rep.UserRho)
				}
			}
			if users == 0 || maxSeen == 0 {
				t.Errorf("no user answered a round")
			}
			t.Logf("rounds %v (ρ %.4g of ledger %.4g), %d users answered, largest realized ρ %.4g, grid ε %.4f",
				rep.UserRounds, rep.UserRho, rep.Ledger.Rho(), users, maxSeen, epsGrid)

			// Adversarial servers: one that asks everyone in every
			// round, and one that asks everyone in exactly the rounds
			// of the costliest allowed set. No user is charged more
			// than the reported ρ, and the second reaches it.
			all := func(_ int, _ []int, _ int) []int {
				out := make([]int, s.Train.NumUsers())
				for k := range out {
					out[k] = k
				}
				return out
			}
			costliest := func(round int, e []int, n int) []int {
				for _, r := range rep.UserRounds {
					if r == round {
						return all(round, e, n)
					}
				}
				return nil
			}
			for name, choose := range map[string]protocol.CohortChooser{"everyone": all, "costliest set": costliest} {
				srv, _ := NewServer(cfg, s.Train, 1)
				cl, _ := NewClients(s.Train, cfg)
				tr, err := protocol.NewCohorts(cl.List, p, choose, 0, 1)
				if err != nil {
					t.Fatal(err)
				}
				if err := protocol.RunTransport(context.Background(), srv, protocol.NewSecureSum(tr), protocol.RunOptions{Seed: 1}); err != nil {
					t.Fatal(err)
				}
				most := 0.0
				for _, x := range cl.List {
					var rho float64
					for _, r := range tr.Answered(x.ID()) {
						rho += rhos[r]
					}
					most = max(most, rho)
				}
				if most > rep.UserRho*(1+1e-9) || (name == "costliest set" && most < rep.UserRho*(1-1e-9)) {
					t.Errorf("%s: the largest charged ρ %g, the reported %g", name, most, rep.UserRho)
				}
			}
		})
	}
}

// TestRosterAccountingUnchanged: without limits the scaling leaves the
// schedule alone, so a roster run's ρ is exactly the ledger's total, as
// before cohorts.
func TestRosterAccountingUnchanged(t *testing.T) {
	cfg := DefaultConfig()
	rho, _ := rdp.ZCDPRhoFor(cfg.Eps, cfg.Delta)
	steps, _ := schedule(cfg, rho)
	var sum float64
	for _, st := range steps {
		sum += st.rho
	}
	if want := cfg.FracMean*rho + cfg.FracBias*rho + (rho - cfg.FracMean*rho - cfg.FracBias*rho); sum != want {
		t.Errorf("Σ ρ_t = %v, want %v", sum, want)
	}
	cfg.Cohort = 500 // a cohort without limits: every round may ask the user
	steps2, _ := schedule(cfg, rho)
	for r := range steps {
		if steps[r].rho != steps2[r].rho {
			t.Errorf("round %d: ρ %v with a cohort, %v without", r, steps2[r].rho, steps[r].rho)
		}
	}
}

// treeVariance returns, for the binary-tree (DP-FTRL) release of the
// prefix sums of t rounds of one statistic, in units of Δ²/(2ρ): its
// squared sensitivity (the largest Σ over complete dyadic nodes of the
// square of the number of a user's participations inside the node, over
// at most k participations at least gap apart: the contributions can be
// equal, a user's weighted count being the same in every round), the
// noise variance of the last prefix sum (its popcount(t) nodes) and of
// the prefix sums on average over rounds 1..t; and the same two
// variances for independent noise per round (each round's σ² = k units).
func treeVariance(t, k, gap int) (sens2, treeLast, treeAvg, indLast, indAvg float64) {
	type node struct{ lo, hi int }
	var nodes []node
	for size := 1; size <= t; size *= 2 {
		for lo := 1; lo+size-1 <= t; lo += size {
			nodes = append(nodes, node{lo, lo + size - 1})
		}
	}
	var walk func(set []int, next int)
	walk = func(set []int, next int) {
		var s float64
		for _, n := range nodes {
			c := 0
			for _, r := range set {
				if r >= n.lo && r <= n.hi {
					c++
				}
			}
			s += float64(c * c)
		}
		sens2 = math.Max(sens2, s)
		if len(set) == k {
			return
		}
		for r := next; r <= t; r++ {
			walk(append(set, r), r+max(gap, 1))
		}
	}
	walk(nil, 1)
	pop := func(x int) float64 {
		c := 0
		for ; x > 0; x &= x - 1 {
			c++
		}
		return float64(c)
	}
	kk := float64(min(k, t))
	for r := 1; r <= t; r++ {
		treeAvg += pop(r) * sens2 / float64(t)
		indAvg += float64(r) * kk / float64(t)
	}
	return sens2, pop(t) * sens2, treeAvg, float64(t) * kk, indAvg
}

// TestTreeAggregationPaysOnlyForLongRuns backs the claim that correlated
// (tree-aggregation, DP-FTRL) noise is not worth it for dp-als over
// cohorts of ML-1M: the pooled bias rounds are the only prefix sums the
// server uses, and at the runs of docs/results/dpals-cohorts.md (4 bias
// rounds with one participation each, 10 with two at least 6 apart) the
// tree's noise on the last pooled sum is at best 25% lower in variance
// and the earlier pooled sums' is higher than independent noise's;
// it pays only from tens of rounds on.
func TestTreeAggregationPaysOnlyForLongRuns(t *testing.T) {
	for _, c := range []struct {
		t, k, gap                  int
		sens2, treeLast, indLast   float64
		treeAvgBelowIndependentAvg bool
	}{
		{4, 1, 0, 3, 3, 4, false},
		{10, 2, 6, 10, 20, 20, false},
		{8, 1, 0, 4, 4, 8, false},
		{64, 2, 32, 16, 16, 128, true},
	} {
		s2, tl, ta, il, ia := treeVariance(c.t, c.k, c.gap)
		t.Logf("%d rounds, k=%d, gap %d: sensitivity² %g; last prefix: tree %g, independent %g; average prefix: tree %.2f, independent %.2f",
			c.t, c.k, c.gap, s2, tl, il, ta, ia)
		if s2 != c.sens2 || tl != c.treeLast || il != c.indLast || (ta < ia) != c.treeAvgBelowIndependentAvg {
			t.Errorf("%d rounds, k=%d, gap %d: got %g %g %g %g %g", c.t, c.k, c.gap, s2, tl, ta, il, ia)
		}
	}
}

// TestCohortMaskedAccounting: the integer path over cohorts (secagg =
// masked, the clients' Skellam shares drawn for the cohort) is calibrated
// on the envelope of the sets of releases a device's limits allow. The
// test recomputes ε by enumerating every allowed set of rounds, composing
// the Skellam Rényi curves of the plan's releases (μ, L1, L2) and
// converting: the largest is at most the reported ε (the envelope is an
// upper bound) and within 2% of it, the reported ε reaches the target,
// and the run's realized ε, with the noise shares that arrived (every
// cohort's, drawn for the cohort), equals the reported one.
func TestCohortMaskedAccounting(t *testing.T) {
	s := synthetic(t)
	for _, c := range []struct {
		name            string
		cohort, k, gap  int
		bias, dim, init int
	}{
		{"k=1", 600, 1, 0, 4, 0, 0},
		{"k=2 b=3, warm start", 500, 2, 3, 6, 2, 30},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Dim, cfg.BiasRounds, cfg.Rounds, cfg.InitItems, cfg.TopItems = c.dim, c.bias, 0, c.init, 0
			cfg.Cohort, cfg.RoundsPerUser, cfg.MinGap = c.cohort, c.k, c.gap
			cfg.Aggregation = protocol.AggMasked
			m, rep, err := Train(context.Background(), s.Train, cfg, 1)
			if err != nil {
				t.Fatal(err)
			}
			plan, err := newMaskPlan(cfg, s.Train.NumItems())
			if err != nil {
				t.Fatal(err)
			}
			p := cfg.Participation()
			var train []int
			for r, st := range plan.Steps {
				if st.Rho > 0 {
					train = append(train, r)
				}
			}
			worst := 0.0
			for mask := 1; mask < 1<<len(train); mask++ {
				var set []int
				var cs []rdp.Curve
				ok := true
				for b, r := range train {
					if mask&(1<<b) == 0 {
						continue
					}
					if ok = p.Allows(set, r); !ok {
						break
					}
					set = append(set, r)
					st := plan.Steps[r]
					cs = append(cs, rdp.SkellamCurve(st.Mu, st.L1, st.L2))
				}
				if ok {
					e, _ := rdp.ToDP(rdp.Compose(cs...), cfg.Delta)
					worst = max(worst, e)
				}
			}
			if worst > rep.Eps+1e-9 || worst < 0.98*rep.Eps {
				t.Errorf("ε = %g, the costliest allowed set's recomputed Skellam ε %g", rep.Eps, worst)
			}
			if rep.Eps > cfg.Eps+1e-9 || rep.Eps < 0.999*cfg.Eps {
				t.Errorf("ε = %g, want the target %g", rep.Eps, cfg.Eps)
			}
			if got := rep.Stats["eps_spent"]; math.Abs(got-rep.Eps) > 1e-6 {
				t.Errorf("realized ε with the shares that arrived %g, planned %g", got, rep.Eps)
			}
			if m == nil || math.IsNaN(rep.Stats["train_rmse"]) {
				t.Errorf("no model: %v", rep.Stats)
			}
			t.Logf("ε %.6f, recomputed over allowed sets %.6f, realized %.6f, η %.3g, train RMSE %.4f",
				rep.Eps, worst, rep.Stats["eps_spent"], rep.Stats["skellam_eta"], rep.Stats["train_rmse"])
		})
	}
}
