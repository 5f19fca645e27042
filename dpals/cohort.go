package dpals

import (
	"github.com/privrec/privrec/accountant/rdp"
	"github.com/privrec/privrec/protocol"
)

// Cohorts (issue 45). With Config.Cohort, RoundsPerUser and MinGap, a
// run's training rounds (the global mean, the bias rounds, the warm start
// and the factor rounds; not the integer path's setup round nor the final
// round, which reads no data into a release) each ask a cohort of the
// population, and each device answers at most RoundsPerUser of them, two
// at least MinGap apart (protocol.Limited enforces it in process, a
// deployment's client with its durable memory).
//
// The server may pick the cohorts however it likes, adaptively and
// adversarially, so no amplification by sampling is assumed. A round a
// user does not answer does not read the user's data, so for the
// zero-out neighbouring relation (one user's ratings emptied, the user's
// participation in each round the same) it costs that user nothing; a
// round the user answers costs its ρ_t, whatever the cohort's size. A
// user's total is therefore at most the largest Σ ρ_t over the sets of
// rounds the limits allow, and this bound holds when the server chooses
// the set adaptively from earlier releases: the costs ρ_t are fixed by
// the config before the run, and the fully adaptive composition of
// Rényi/zCDP mechanisms whose costs sum to at most a fixed bound on every
// path has that bound (the Rényi filter, Feldman and Zrnic, NeurIPS
// 2021). userRho computes the largest allowed Σ ρ_t exactly; schedule
// scales the config's proportions so that it equals the ρ the target
// (ε, δ) allows.

// userRho returns the largest total ρ one user can be charged over the
// rounds of steps (numbered by their index, as the protocol numbers them)
// under p, and the rounds of a set that reaches it: the largest Σ ρ_t over
// sets of rounds with ρ_t > 0 that p's Allows admits one round after the
// other (at most p.MaxRounds of them, consecutive ones at least p.MinGap
// apart). Every round with ρ_t > 0 is a training round (PhaseTrain).
func userRho(steps []step, p protocol.Participation) (float64, []int) {
	cost := make([]float64, len(steps))
	for t, st := range steps {
		cost[t] = st.rho
	}
	return worstSet(cost, p)
}

// worstSet returns the largest Σ cost[t] over the sets of rounds t with
// cost[t] > 0 that p's Allows admits one after the other, and such a set
// (exactly, by dynamic programming over the last round and the set's
// size).
func worstSet(cost []float64, p protocol.Participation) (float64, []int) {
	var idx []int
	for t, c := range cost {
		if c > 0 {
			idx = append(idx, t)
		}
	}
	n := len(idx)
	k := n
	if p.MaxRounds > 0 {
		k = min(k, p.MaxRounds)
	}
	if n == 0 || k == 0 {
		return 0, nil
	}
	gap := max(p.MinGap, 1)
	// best[c][j]: the largest sum of a set of c+1 rounds ending at idx[j];
	// prev[c][j] the index of the round before it in that set.
	best := make([][]float64, k)
	prev := make([][]int, k)
	for c := range k {
		best[c] = make([]float64, n)
		prev[c] = make([]int, n)
		for j := range n {
			best[c][j], prev[c][j] = -1, -1
			if c == 0 {
				best[c][j] = cost[idx[j]]
				continue
			}
			for i := range j {
				if idx[j]-idx[i] >= gap && best[c-1][i] >= 0 && best[c-1][i]+cost[idx[j]] > best[c][j] {
					best[c][j], prev[c][j] = best[c-1][i]+cost[idx[j]], i
				}
			}
		}
	}
	top, tc, tj := -1.0, 0, 0
	for c := range k {
		for j := range n {
			if best[c][j] > top {
				top, tc, tj = best[c][j], c, j
			}
		}
	}
	rounds := make([]int, tc+1)
	for c, j := tc, tj; c >= 0; c-- {
		rounds[c] = idx[j]
		j = prev[c][j]
	}
	return top, rounds
}

// envelope returns, at every order of rdp.Orders, the largest Σ of the
// rounds' Rényi curves (nil: a round without a release) over the sets of
// rounds p allows: a curve above every allowed set's composed curve, so
// its (ε, δ) bounds every user's (the costliest set may differ from one
// order to the next, which only loosens the bound).
func envelope(curves []rdp.Curve, p protocol.Participation) rdp.Curve {
	out := rdp.Compose()
	cost := make([]float64, len(curves))
	for i := range out {
		for t, c := range curves {
			cost[t] = 0
			if c != nil {
				// A release's curve is positive at every order; keep
				// the round a training round even where it rounds to 0.
				cost[t] = max(c[i], 1e-300)
			}
		}
		out[i], _ = worstSet(cost, p)
	}
	return out
}

// scaleForLimits scales the ρ of steps (the config's proportions at total
// rho) so that the costliest set of rounds cfg's limits let one user
// answer spends rho: a roster run is left as it is.
func scaleForLimits(cfg Config, steps []step, rho float64) {
	if !cfg.limited() {
		return
	}
	w, _ := userRho(steps, cfg.Participation())
	if !(w > 0) {
		return
	}
	f := rho / w
	for t := range steps {
		steps[t].rho *= f
	}
}

// spentRho returns the zCDP ρ one user has been charged at most by the
// first rounds of steps: the ledger's total in a roster run, the
// costliest allowed set of those rounds under limits.
func spentRho(cfg Config, steps []step, l *rdp.Ledger) float64 {
	if !cfg.limited() {
		return l.Rho()
	}
	r, _ := userRho(steps, cfg.Participation())
	return r
}
