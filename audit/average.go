package audit

import (
	"context"
	"fmt"
	"io"

	"github.com/privrec/privrec/protocol"
)

// The average attack's budgets: far above SDCF's grid {4, 1, 0.25,
// 0.0625}, so that the PRR bound e^ε∞/(1+e^ε∞), ε∞ = ε_P/(2h) per rated
// bit, stands well clear of a coin flip and a leak past B' would show.
const (
	avgEpsI   = 32.0
	avgEpsP   = 2 * avgEpsI
	avgMargin = 0.02
)

func init() {
	register(&Attack{
		Name:  "average",
		Title: "Average attack on randomized response: which items did the user rate?",
		Doc: "Each round an SDMF client uploads gradients for a send set drawn by randomized response from its rated-bit vector. " +
			"The server counts, over all rounds it observes, how often each item is in a user's send set, and guesses the bit by the " +
			"Bayes rule for the mechanism (given each user's exact parameters, which only helps it). Control: fresh per-round RR with " +
			"the same per-round send probabilities p*, q* (SDMF without its permanent stage): averaging recovers the rated set as the " +
			"rounds grow. SDMF draws B' once (PRR, from a per-user secret through dp.PRRSource), so averaging recovers B' at best: " +
			"balanced accuracy at most e^ε∞/(1+e^ε∞) = 1 − f/2 per bit, ε∞ the PRR bound. Across restarts: a client that forgets its " +
			"PRR state redraws B' at each restart (control, the attacker treats each restart as a new draw); SDMF rebuilds the same B' " +
			"from its kept secret. Scored on a balanced set per user (its rated items and as many unrated ones).",
		cases: func(e *env) []testCase {
			return []testCase{
				{method: "fresh-rr", role: Control, run: averageRun(sdmfFresh, false, false)},
				{method: "prr-redrawn", role: Control, run: averageRun(sdmfPRR, true, true)},
				{method: "sdmf", role: Protected, run: averageRun(sdmfPRR, false, false)},
				{method: "sdmf", role: Protected, run: averageRun(sdmfPRR, true, false)},
			}
		},
	})
}

// averageRun observes a shape-only SDMF simulation and scores the
// average attack on it.
func averageRun(mode sdmfMode, restart, forget bool) func(context.Context, *env) (Result, error) {
	return func(ctx context.Context, e *env) (Result, error) {
		cfg := defaultSDMF()
		cfg.mode, cfg.dim, cfg.rounds = mode, 0, e.avgRounds
		cfg.epsI, cfg.epsP = avgEpsI, avgEpsP
		cfg.seed, cfg.workers = e.cfg.Seed, e.cfg.Workers
		if restart {
			cfg.restartEvery, cfg.forgetSecret = e.restartEvery, forget
		}
		sim, err := newSDMFSim(e.data, cfg)
		if err != nil {
			return Result{}, err
		}
		model := func(u int) (existenceModel, bool) {
			c := sim.byUser[u]
			if c == nil {
				return existenceModel{}, false
			}
			if mode == sdmfFresh {
				ps, qs := c.rr.SendProbs()
				return existenceModel{p: ps, q: qs}, true
			}
			return existenceModel{f: c.rr.F, p: c.rr.P, q: c.rr.Q}, true
		}
		x := newExistence(e.data, e.cfg.Seed, cfg.restartEvery, model)
		x.bnd = func(u int) float64 { return 1 - sim.byUser[u].rr.F/2 }
		perEpoch := restart
		var curve []Point
		err = observe(ctx, func(w io.Writer) error { return sim.run(ctx, w) }, func(_ protocol.TranscriptHeader, rec *protocol.Record) error {
			x.observe(rec)
			if t := rec.Round + 1; isCheckpoint(t) || t == cfg.rounds {
				a, _ := x.score(perEpoch)
				v, lo, hi := a.value()
				curve = append(curve, Point{X: float64(t), Value: v, Lo: lo, Hi: hi})
			}
			return nil
		})
		if err != nil {
			return Result{}, err
		}
		acc, bound := x.score(perEpoch)
		note := ""
		if restart && !forget {
			// Against a client that keeps B', one draw for the whole run is
			// the right model: report the stronger of the two attackers.
			if a2, _ := x.score(false); a2.ok > acc.ok {
				acc = a2
			}
			note = "stronger of the per-restart and whole-run attackers; "
		}
		v, lo, hi := acc.value()
		res := Result{
			Case:   map[bool]string{true: "restarts", false: ""}[restart && !forget],
			Metric: "balanced accuracy", Value: v, Lo: lo, Hi: hi, N: acc.n, Baseline: 0.5,
			Bound: bound + avgMargin, HigherLeaks: true, Curve: curve, CurveX: "rounds observed",
		}
		set := fmt.Sprintf("ε_I = %g, ε_P = %g, z = |R|/|U|, %d rounds", cfg.epsI, cfg.epsP, cfg.rounds)
		switch {
		case mode == sdmfFresh:
			set = fmt.Sprintf("fresh RR at SDMF's per-round p*, q*; ε_I = %g per round, %d rounds", cfg.epsI, cfg.rounds)
		case restart && forget:
			set = fmt.Sprintf("PRR redrawn at each restart (every %d rounds); ε_I = %g, ε_P = %g, %d rounds", cfg.restartEvery, cfg.epsI, cfg.epsP, cfg.rounds)
		case restart:
			set = fmt.Sprintf("restart every %d rounds, B' rebuilt from the kept secret; ε_I = %g, ε_P = %g, %d rounds", cfg.restartEvery, cfg.epsI, cfg.epsP, cfg.rounds)
		}
		res.Setting = set + "; audit simulation of sdcf's send sets"
		res.Note = note + fmt.Sprintf("bound: item-weighted mean of 1 − f_u/2 = e^ε∞/(1+e^ε∞) (ε∞ = ε_P/2h per bit) = %.4f, plus margin %.2f", bound, avgMargin)
		if sim.skipped > 0 {
			res.Note += fmt.Sprintf("; %d users without feasible RR parameters left out", sim.skipped)
		}
		return res, nil
	}
}

// isCheckpoint reports whether a curve shows the attack after t rounds:
// 10, 30, 100, 300, 1000, ...
func isCheckpoint(t int) bool {
	for c := 10; c <= t; c *= 10 {
		if t == c || t == 3*c {
			return true
		}
	}
	return false
}
