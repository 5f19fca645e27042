package audit

import (
	"context"
	"fmt"
	"io"
	"math"

	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/hdpmf"
	"github.com/privrec/privrec/ldpop"
	"github.com/privrec/privrec/protocol"
)

// shapeMargin is the slack over each bound of the shape attack.
const shapeMargin = 0.02

func init() {
	register(&Attack{
		Name:  "shape",
		Title: "Existence inference from the shape of uploads (which items receive contributions, message sizes)",
		Doc: "The server ignores the values and looks only at which items each user's uploads name, round after round, and how many. " +
			"Membership: the Bayes guess of each rated-bit from how often the item appears (balanced set per user, as in the average " +
			"attack), bounded by e^ε∞/(1+e^ε∞) + margin with ε∞ SDMF's PRR bound. Size: guessing whether a user rated more items than " +
			"the median user from its mean message size, bounded by 1/2 + margin for SDMF, whose eq. (12) makes every user's expected " +
			"upload the same z. LDP-OP (Alg. 2, secure aggregation by default): every user answers the same named positions; bounds " +
			"e^ε/(1+e^ε) + margin and 1/2 + margin. Control: plain federated MF, whose uploads name exactly the rated items. SDMF is sdcf.Train at its defaults " +
			"(ε_I = 1, ε_P = 2ε_I, z = |R|/|U|), observed through its transcript. Findings: DPMF with and without secure aggregation (its claim covers values, not " +
			"existence; with secure aggregation the server sees no per-user shape at all).",
		cases: func(e *env) []testCase {
			return []testCase{
				{method: "fedmf", role: Control, run: shapeRun("fedmf", false)},
				{method: "fedmf", role: Control, run: shapeRun("fedmf", true)},
				{method: "sdmf", role: Protected, run: shapeRun("sdmf", false)},
				{method: "sdmf", role: Protected, run: shapeRun("sdmf", true)},
				{method: sdfmTarget, role: Protected, run: shapeRun(sdfmTarget, false)},
				{method: "ldp-op", role: Protected, run: shapeRun("ldp-op", false)},
				{method: "ldp-op", role: Protected, run: shapeRun("ldp-op", true)},
				{method: "dpmf", role: Finding, run: shapeRun("dpmf", false)},
				{method: "dpmf", role: Finding, run: shapeRun("dpmf-no-secagg", false)},
			}
		},
	})
}

// shapeObs is one observed run of the shape attack.
type shapeObs struct {
	x         *existence
	setting   string
	bound     func(u int) float64 // each user's bound; nil: the model's own
	boundText string
	label     string
	// onHeader, when x is nil, builds x from the transcript header (the
	// public parameters of the run).
	onHeader func(h protocol.TranscriptHeader) error
}

// shapeObserve runs (once per env) the target and counts its shapes.
func shapeObserve(ctx context.Context, e *env, target string) (*shapeObs, error) {
	if o, ok := e.cache["shape/"+target].(*shapeObs); ok {
		return o, nil
	}
	d := e.data
	o := &shapeObs{}
	var produce func(w io.Writer) error
	switch target {
	case "fedmf", "dpmf", "dpmf-no-secagg":
		v := hdpmf.Plain
		if target != "fedmf" {
			v = hdpmf.DPMF
		}
		cfg := fedConfig(v)
		cfg.Rounds, cfg.Seed, cfg.Workers = 2, e.cfg.Seed, e.cfg.Workers
		if target == "dpmf-no-secagg" {
			cfg.Aggregation = protocol.AggOff
			o.label = "secagg off"
		} else if target == "dpmf" {
			o.label = "secagg"
		}
		produce = func(w io.Writer) error {
			c := cfg
			c.Transcript = w
			_, _, err := hdpmf.Train(ctx, d, c)
			return err
		}
		plain := existenceModel{p: 0, q: 1}
		o.x = newExistence(d, e.cfg.Seed, 0, func(int) (existenceModel, bool) { return plain, true })
		view := "per-user uploads"
		if cfg.Aggregation.Secure() {
			view = "secure aggregation"
		}
		o.setting = fmt.Sprintf("%s, %d rounds, %s", v, cfg.Rounds, view)
		// The line is SDMF's bound for the same users (the control must beat
		// what SDMF promises).
		epsP := sdcfConfig(true).EffectiveEpsP()
		byUser := d.ByUser()
		o.boundText = fmt.Sprintf("SDMF's item-weighted mean of e^ε∞/(1+e^ε∞) for these users at ε_P = %g", epsP)
		o.bound = func(u int) float64 {
			f, err := dp.SolvePRR(epsP, byUser.RowLen(u))
			if err != nil {
				return 1
			}
			return 1 - f/2
		}
	case "sdmf", sdfmTarget:
		cfg := sdmfShapeConfig(e, e.shapeRounds)
		produce = sdcfProducer(ctx, target, d, cfg)
		o.onHeader = func(h protocol.TranscriptHeader) error {
			var err error
			o.x, err = sdmfExistence(d, h, e.cfg.Seed, 0)
			return err
		}
		o.setting = fmt.Sprintf("%s %s send sets, ε_I = %g, ε_P = %g, ε_g = %g, z = |R|/|U|, K = %d (the send sets do not depend on K), %d rounds",
			runName(target), target, cfg.EpsI, cfg.EffectiveEpsP(), cfg.EpsG, cfg.Dim, cfg.Rounds)
		o.boundText = "item-weighted mean of e^ε∞/(1+e^ε∞), ε∞ the PRR bound"
	case "ldp-op":
		cfg := ldpopConfig(ldpop.LDPOP)
		cfg.Rounds, cfg.Seed, cfg.Workers = e.shapeRounds, e.cfg.Seed, e.cfg.Workers
		produce = func(w io.Writer) error {
			c := cfg
			c.Transcript = w
			_, _, err := ldpop.Train(ctx, d, c)
			return err
		}
		// Every user answers the same named positions: no model of the
		// mechanism applies; the attacker calls an item rated when it is
		// named more often than half the rounds.
		o.x = newExistence(d, e.cfg.Seed, 0, func(int) (existenceModel, bool) { return existenceModel{p: 0.25, q: 0.75}, true })
		view := "per-user uploads"
		if cfg.Aggregation.Secure() {
			view = "secure aggregation"
		}
		o.setting = fmt.Sprintf("LDP-OP Alg. 2, d = %d, %d rounds, ε = %g, %s", cfg.Dim, cfg.Rounds, cfg.Eps, view)
		ldp := 1 / (1 + math.Exp(-cfg.Eps))
		o.bound = func(int) float64 { return ldp }
		o.boundText = "e^ε/(1+e^ε) at LDP-OP's per-position ε"
	default:
		return nil, fmt.Errorf("%w: shape attack has no target %q", ErrUsage, target)
	}
	err := observe(ctx, produce, func(h protocol.TranscriptHeader, rec *protocol.Record) error {
		if o.x == nil {
			if err := o.onHeader(h); err != nil {
				return err
			}
		}
		o.x.observe(rec)
		return nil
	})
	if err != nil {
		return nil, err
	}
	e.cache["shape/"+target] = o
	return o, nil
}

// shapeRun scores the membership (size false) or the size attack.
func shapeRun(target string, size bool) func(context.Context, *env) (Result, error) {
	return func(ctx context.Context, e *env) (Result, error) {
		o, err := shapeObserve(ctx, e, target)
		if err != nil {
			return Result{}, err
		}
		if !size {
			x := o.x
			x.bnd = o.bound
			acc, bound := x.score(false)
			v, lo, hi := acc.value()
			return Result{
				Case:   o.label,
				Metric: "balanced accuracy (membership)", Value: v, Lo: lo, Hi: hi, N: acc.n, Baseline: 0.5,
				Bound: min(1, bound+shapeMargin), HigherLeaks: true, Setting: o.setting,
				Note: fmt.Sprintf("bound: %s, %.4f, plus margin %.2f", o.boundText, bound, shapeMargin),
			}, nil
		}
		acc := sizeAttack(o.x)
		v, lo, hi := acc.value()
		return Result{
			Case:   o.label,
			Metric: "balanced accuracy (h > median from size)", Value: v, Lo: lo, Hi: hi, N: acc.n, Baseline: 0.5,
			Bound: 0.5 + shapeMargin, HigherLeaks: true, Setting: o.setting,
			Note: fmt.Sprintf("users guessed to have rated more than the median user when their mean upload is larger than the median one; bound 1/2 plus margin %.2f", shapeMargin),
		}, nil
	}
}

// sizeAttack guesses, for every scored user, whether it rated more
// items than the median user, from whether its mean upload size exceeds
// the median mean size (or falls below it, whichever guesses better).
func sizeAttack(x *existence) accuracy {
	type us struct {
		h    int
		size float64
	}
	var all []us
	for _, u := range x.order {
		z := x.sizes[u]
		size := 0.0 // never seen alone (secure aggregation): every user alike
		if z.n > 0 {
			size = z.sum / z.n
		}
		all = append(all, us{x.users[u].h, size})
	}
	var acc accuracy
	if len(all) < 2 {
		return acc
	}
	hs := make([]float64, len(all))
	ss := make([]float64, len(all))
	for k, a := range all {
		hs[k], ss[k] = float64(a.h), a.size
	}
	mh, ms := median(hs), median(ss)
	tie := false
	for _, a := range all {
		truth := float64(a.h) > mh
		g := a.size > ms
		if a.size == ms {
			g, tie = tie, !tie
		}
		acc.add(g == truth)
	}
	// The attacker takes whichever direction works: larger uploads for
	// heavier users, or the reverse.
	if 2*acc.ok < acc.n {
		acc.ok = acc.n - acc.ok
	}
	return acc
}
