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
			"from its kept secret. SDMF is sdcf.Train observed through its transcript, the attacker's parameters recomputed by " +
			"dp.SolveTwoStageRR from the header's ε_P, ε_I, z and each user's h; the controls are simulated send sets. " +
			"Scored on a balanced set per user (its rated items and as many unrated ones).",
		cases: func(e *env) []testCase {
			return []testCase{
				{method: "fresh-rr", role: Control, run: averageRun("fresh-rr", false)},
				{method: "prr-redrawn", role: Control, run: averageRun("prr-redrawn", false)},
				{method: "sdmf", role: Protected, run: averageRun("sdmf", false)},
				{method: "sdmf", role: Protected, run: averageRun("sdmf", true)},
				{method: sdfmTarget, role: Protected, run: averageRun(sdfmTarget, false)},
			}
		},
	})
}

// avgObs is one observed run of the average attack: the attacker's counts
// and the curves of its two models.
type avgObs struct {
	x            *existence
	rounds       int
	wholeRun     []Point // B' one draw for the whole run
	perEpoch     []Point // each epoch's B' a new draw
	setting      string
	restartEvery int
}

// averageObserve runs (once per env and target) the target and counts the
// items of every upload, with epochs of e.restartEvery rounds.
func averageObserve(ctx context.Context, e *env, target string) (*avgObs, error) {
	if o, ok := e.cache["average/"+target].(*avgObs); ok {
		return o, nil
	}
	o := &avgObs{rounds: e.avgRounds, restartEvery: e.restartEvery}
	var produce func(w io.Writer) error
	switch target {
	case "fresh-rr", "prr-redrawn":
		mode, every := rrFresh, 0
		if target == "prr-redrawn" {
			mode, every = rrRedrawn, e.restartEvery
		}
		sim, err := newSendSim(e.data, mode, e.avgRounds, every, avgEpsI, avgEpsP, e.cfg.Seed, e.cfg.Workers)
		if err != nil {
			return nil, err
		}
		produce = func(w io.Writer) error { return sim.run(ctx, w) }
		o.x = newExistence(e.data, e.cfg.Seed, e.restartEvery, func(u int) (existenceModel, bool) {
			c := sim.byUser[u]
			if c == nil {
				return existenceModel{}, false
			}
			return c.model(), true
		})
		if mode == rrFresh { // no B' in the mechanism: the line is SDMF's bound for the same users
			o.x.bnd = func(u int) float64 { return 1 - sim.byUser[u].rr.F/2 }
		}
		o.setting = fmt.Sprintf("fresh RR at SDMF's per-round p*, q*; ε_I = %g per round, %d rounds", avgEpsI, e.avgRounds)
		if mode == rrRedrawn {
			o.setting = fmt.Sprintf("PRR redrawn at each restart (every %d rounds); ε_I = %g, ε_P = %g, %d rounds", e.restartEvery, avgEpsI, avgEpsP, e.avgRounds)
		}
		o.setting += "; audit simulation of the send sets (a naive variant, not sdcf)"
	case "sdmf", sdfmTarget:
		cfg := sdmfShapeConfig(e, e.avgRounds)
		cfg.EpsI, cfg.EpsP = avgEpsI, avgEpsP
		produce = sdcfProducer(ctx, target, e.data, cfg)
		o.setting = fmt.Sprintf("%s %s, ε_I = %g, ε_P = %g, ε_g = %g, z = |R|/|U|, K = %d (the send sets do not depend on K), %d rounds",
			runName(target), target, cfg.EpsI, cfg.EpsP, cfg.EpsG, cfg.Dim, cfg.Rounds)
	default:
		return nil, fmt.Errorf("%w: average attack has no target %q", ErrUsage, target)
	}
	err := observe(ctx, produce, func(h protocol.TranscriptHeader, rec *protocol.Record) error {
		if o.x == nil { // sdmf: the attacker's model from the header's public parameters
			var err error
			if o.x, err = sdmfExistence(e.data, h, e.cfg.Seed, e.restartEvery); err != nil {
				return err
			}
		}
		o.x.observe(rec)
		if t := rec.Round + 1; isCheckpoint(t) || t == o.rounds {
			for _, per := range []bool{false, true} {
				a, _ := o.x.score(per)
				v, lo, hi := a.value()
				pt := Point{X: float64(t), Value: v, Lo: lo, Hi: hi}
				if per {
					o.perEpoch = append(o.perEpoch, pt)
				} else {
					o.wholeRun = append(o.wholeRun, pt)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	e.cache["average/"+target] = o
	return o, nil
}

// averageRun scores the average attack on target; restarts scores the
// attacker that models client restarts every e.restartEvery rounds.
func averageRun(target string, restarts bool) func(context.Context, *env) (Result, error) {
	return func(ctx context.Context, e *env) (Result, error) {
		o, err := averageObserve(ctx, e, target)
		if err != nil {
			return Result{}, err
		}
		// The control that redraws B' is attacked per restart, as its
		// mechanism is; fresh RR and SDMF without restarts over the run.
		perEpoch := target == "prr-redrawn" || restarts
		acc, bound := o.x.score(perEpoch)
		curve := o.wholeRun
		if perEpoch {
			curve = o.perEpoch
		}
		note, setting := "", o.setting
		if restarts {
			// Against a client that keeps B', one draw for the whole run is
			// the right model: report the stronger of the two attackers.
			if a2, _ := o.x.score(false); a2.ok > acc.ok {
				acc = a2
			}
			note = "stronger of the per-restart and whole-run attackers; "
			setting = fmt.Sprintf("restart every %d rounds, B' rebuilt from the kept secret: sdcf derives B' once from the user's secret "+
				"through dp.PRRSource, a pure function of (secret, item, bit), so a restarted client sends from the same B' and its "+
				"transcript is this run's; ", o.restartEvery) + setting
		}
		v, lo, hi := acc.value()
		res := Result{
			Case:   map[bool]string{true: "restarts", false: ""}[restarts],
			Metric: "balanced accuracy", Value: v, Lo: lo, Hi: hi, N: acc.n, Baseline: 0.5,
			Bound: bound + avgMargin, HigherLeaks: true, Curve: curve, CurveX: "rounds observed", Setting: setting,
		}
		res.Note = note + fmt.Sprintf("bound: item-weighted mean of 1 − f_u/2 = e^ε∞/(1+e^ε∞) (ε∞ = ε_P/2h per bit) = %.4f, plus margin %.2f", bound, avgMargin)
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
