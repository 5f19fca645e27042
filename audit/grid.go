package audit

import (
	"context"
	"fmt"
	"math"

	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
)

// gridTol is how close to the rating grid a recovered rating must fall
// for the grid attack to call the item rated.
const gridTol = 0.01

func init() {
	register(&Attack{
		Name:  "grid",
		Title: "Existence from the rating grid of recovered values: which items did the user rate?",
		Doc: "sdcf fixes u[0] = 1 (the item offset), so each upload gives the server the user vector and every row's implied centred " +
			"rating c_j = u·v_j − e_j exactly up to the Langevin noise (the inversion attack's one-round solve). A real upload's c_j plus " +
			"the user's mean lies on the rating grid (scale minimum + k·step); a fake upload's error is drawn from the normal fitted to " +
			"the user's own errors (truncated to [−α, α]), so its recovered value is continuous and lands on the grid only by chance. " +
			fmt.Sprintf("The attacker calls an item rated when any of its recovered values in the observed rounds lies within %g of the grid ", gridTol) +
			"(and within the scale), and unrated otherwise (also when the item was never sent); it is given each user's mean, which a " +
			"server could instead fit as the offset that puts most recovered values on the grid. Scored on a balanced set per user (its " +
			"rated items and as many unrated ones), Wilson interval. Bound: SDMF's existence claim, e^ε∞/(1+e^ε∞) per bit (ε∞ the PRR " +
			"bound at SDMF's shipped ε_P, ε_I and z = |R|/|U|), plus the average attack's margin, as there. Controls: sdcf's SGLD MF at " +
			"temperature 0 (no Langevin noise, no randomized response: it uploads exactly its rated items) and SDMF at temperature 0 " +
			"(fakes present, no Langevin noise: existence is not given away by the send set, only by the grid). SDMF as shipped is a " +
			"finding: its claim covers existence against a server that reads send sets, not one that recovers values. Every run is " +
			"sdcf.Train observed through its transcript, at K = 2 (the smallest with the item-offset coordinate; the one-round solve " +
			"does not need more).",
		cases: func(e *env) []testCase {
			return []testCase{
				{method: "sgld-mf", role: Control, run: gridRun("sgld-mf", false, true)},
				{method: "sdmf", role: Control, run: gridRun("sdmf", true, true)},
				{method: "sdmf", role: Finding, run: gridRun("sdmf", true, false)},
				{method: sdfmTarget, role: Finding, run: gridRun(sdfmTarget, true, false)},
			}
		},
	})
}

// onGrid reports whether rating r lies within tol of a point of sc's grid
// (Min + k·Step, k ≥ 0, at most Max).
func onGrid(sc ratings.Scale, r, tol float64) bool {
	step := float64(sc.Step)
	if !(step > 0) || math.IsNaN(r) {
		return false
	}
	lo, hi := float64(sc.Min), float64(sc.Max)
	k := math.Round((r - lo) / step)
	g := lo + k*step
	return k >= 0 && g <= hi+1e-6 && math.Abs(r-g) <= tol
}

// gridRun observes sdcf.Train (SGLD MF when !private, SDMF when private;
// at temperature 0 when zeroTemp, at the shipped temperature otherwise)
// and scores the grid attack.
func gridRun(target string, private, zeroTemp bool) func(context.Context, *env) (Result, error) {
	return func(ctx context.Context, e *env) (Result, error) {
		d := e.data
		if !(d.Scale.Step > 0) {
			return Result{}, fmt.Errorf("%w: the grid attack needs a rating scale with a step (data scale %+v)", ErrUsage, d.Scale)
		}
		cfg := sdcfConfig(private)
		cfg.Dim, cfg.Rounds, cfg.Seed, cfg.Workers = 2, e.gridRounds, e.cfg.Seed, e.cfg.Workers
		if zeroTemp {
			cfg.Temp = 0
		}
		// The bound is SDMF's claim at its shipped budgets, whatever the
		// target: the controls must beat what SDMF promises.
		ship := sdcfConfig(true)
		means := deviceMeans(d)
		rr, err := twoStageRR(d, ship.EffectiveEpsP(), ship.EpsI, ratingsPerUser(d))
		if err != nil {
			return Result{}, err
		}
		// The model only supplies the bound: the grid attacker's guess does
		// not use the send probabilities.
		x := newExistence(d, e.cfg.Seed, 0, func(u int) (existenceModel, bool) {
			p, ok := rr[u]
			return prrModel(p), ok
		})
		hits := map[int][]bool{}
		for _, u := range x.order {
			hits[u] = make([]bool, len(x.users[u].items))
		}
		var pub *sdcfPublic
		var estimates, onGridReal, real, onGridFake, fake int
		var curve []Point
		score := func() accuracy {
			var acc accuracy
			for _, u := range x.order {
				s := x.users[u]
				for k := range s.items {
					acc.add(hits[u][k] == s.rated[k])
				}
			}
			return acc
		}
		err = observe(ctx, sdcfProducer(ctx, target, d, cfg), func(h protocol.TranscriptHeader, rec *protocol.Record) error {
			if pub == nil {
				p, err := readSDCFPublic(h)
				if err != nil {
					return err
				}
				if !p.itemBias {
					return fmt.Errorf("%w: the grid attack needs sdcf's item-offset coordinate (item_bias)", ErrUsage)
				}
				pub = &p
			}
			if rec.Broadcast.Phase != protocol.PhaseTrain {
				return nil
			}
			for _, up := range rec.Uploads {
				u := up.Client
				if u < 0 || u >= len(means) {
					continue
				}
				base := u * x.nItems
				biasEach(rec.Broadcast, up, pub.lamV, func(j int32, c float64) {
					g := onGrid(d.Scale, c+means[u], gridTol)
					estimates++
					if k := x.pos[base+int(j)]; k >= 0 {
						if g {
							hits[u][k] = true
						}
						// Diagnostics (uses the truth, never the guess).
						if x.users[u].rated[k] {
							real++
							if g {
								onGridReal++
							}
						} else {
							fake++
							if g {
								onGridFake++
							}
						}
					}
				})
			}
			if t := rec.Round + 1; isCheckpoint(t) || t == cfg.Rounds {
				v, lo, hi := score().value()
				curve = append(curve, Point{X: float64(t), Value: v, Lo: lo, Hi: hi})
			}
			return nil
		})
		if err != nil {
			return Result{}, err
		}
		acc, bound := score(), x.meanBound()
		v, lo, hi := acc.value()
		name := "SGLD MF without Langevin noise or RR (temperature 0): uploads exactly the rated items"
		if private {
			name = fmt.Sprintf("SDMF, temperature %g, ε_I = %g, ε_P = %g, ε_g = %g, z = |R|/|U|", cfg.Temp, cfg.EpsI, cfg.EffectiveEpsP(), cfg.EpsG)
			if zeroTemp {
				name += " (fakes present, no Langevin noise)"
			} else {
				name += " (as shipped)"
			}
		}
		frac := func(a, b int) float64 { return float64(a) / float64(max(b, 1)) }
		res := Result{
			Metric: "balanced accuracy", Value: v, Lo: lo, Hi: hi, N: acc.n, Baseline: 0.5,
			Bound: bound + avgMargin, HigherLeaks: true, Curve: curve, CurveX: "rounds observed",
			Setting: fmt.Sprintf("%s %s, K = %d, %d rounds, tolerance %g on a grid of step %g", runName(target), name, cfg.Dim, cfg.Rounds, gridTol, d.Scale.Step),
			Note: fmt.Sprintf("bound: item-weighted mean of 1 − f_u/2 = e^ε∞/(1+e^ε∞) at SDMF's shipped ε_P = %g, ε_I = %g = %.4f, plus margin %.2f "+
				"(as the average attack); %d values recovered; of those for scored items, %.3f of %d real ones and %.3f of %d fake ones on the grid",
				ship.EffectiveEpsP(), ship.EpsI, bound, avgMargin, estimates, frac(onGridReal, real), real, frac(onGridFake, fake), fake),
		}
		if private && zeroTemp {
			res.Case = "temperature 0"
		}
		if private && !zeroTemp {
			res.Note += "; FINDING: SDMF's rating-existence claim fails against a server that recovers values at the shipped temperature: " +
				"u is known exactly (u[0] = 1), so each row's implied rating is recovered up to the Langevin noise, and a real upload's " +
				"lies on the rating grid while a fake's (an error drawn from the user's own error distribution) does not. What would " +
				"fix it (both untested): fakes drawn as grid ratings r̃ from the user's own rating distribution, sent with error r̃ − u·v_j, " +
				"or Langevin noise large enough to hide the grid"
		}
		return res, nil
	}
}
