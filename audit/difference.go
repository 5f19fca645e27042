package audit

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/privrec/privrec/ldpop"
	"github.com/privrec/privrec/protocol"
)

// diffMargin is the slack over the difference attack's bound.
const diffMargin = 0.02

func init() {
	register(&Attack{
		Name:  "difference",
		Title: "Difference attack on repeated objective noise (LDP-OP basic scheme versus Alg. 2)",
		Doc: "Objective perturbation adds a fixed noise term to a user's gradient. When a user uploads the same gradient element in two " +
			"rounds with the same noise (LDP-OP's basic scheme, Alg. 1), the server subtracts the two uploads: the noise cancels and, " +
			"for an item the user did not rate, exactly λ(v_j^t − v_j^(t−1)) remains, while a rated item leaves 2(u·Δv_j)u. The attack " +
			"flags an item as rated when some difference, less λΔv_j, exceeds the float32 rounding of the uploads. Scored on a " +
			"balanced set per user. Control: the basic scheme (near-perfect recovery of the rated set). LDP-OP Alg. 2 names each " +
			"position at most once per pass, so no two uploads share noise, and it runs under secure aggregation by default: the " +
			"accuracy must stay within e^ε/(1+e^ε) + margin, ε the paper's per-position ε-LDP claim (Thm 1). Finding: Alg. 2 with " +
			"secure aggregation off, the paper's server. dp-als: a server that knows every user but a target tests the target's " +
			"presence from the released global mean (noised sum and count): accuracy within e^ε/(1+e^ε) + δ + margin, ε that of the " +
			"mean release's zCDP share; control: the same release with the noise off (ε = 1e9).",
		cases: func(e *env) []testCase {
			return []testCase{
				{method: "ldp-op-basic", role: Control, run: diffRun(ldpop.Basic, false)},
				{method: "ldp-op", role: Protected, run: diffRun(ldpop.LDPOP, true)},
				{method: "ldp-op", role: Finding, run: diffRun(ldpop.LDPOP, false)},
				{method: "dp-als", role: Control, run: dpalsDiff(true)},
				{method: "dp-als", role: Protected, run: dpalsDiff(false)},
			}
		},
	})
}

// lastUpload is the last upload of one scored (user, item): its row
// (unscaled), the V row it answered and the round.
type lastUpload struct {
	round int
	row   []float64
	v     []float32
}

// vRow returns the V row of item j in broadcast b, or nil if b does not
// carry it.
func vRow(b *protocol.Broadcast, j int32) []float32 {
	k := b.Dim
	if b.V == nil {
		return nil
	}
	if b.Items == nil {
		return b.V[int(j)*k : int(j)*k+k]
	}
	if q, ok := slices.BinarySearch(b.Items, j); ok {
		return b.Row(q)
	}
	return nil
}

func diffRun(v ldpop.Variant, secagg bool) func(context.Context, *env) (Result, error) {
	return func(ctx context.Context, e *env) (Result, error) {
		d := e.data
		cfg := ldpopConfig(v)
		cfg.Seed, cfg.Workers, cfg.Aggregation = e.cfg.Seed, e.cfg.Workers, protocol.SecureIf(secagg)
		if v == ldpop.Basic {
			cfg.Rounds = 2 // dense uploads: one difference is plenty
			if e.cfg.Quick {
				cfg.Dim = 4
			}
		} else {
			cfg.Rounds = e.avgRounds
		}
		x := newExistence(d, e.cfg.Seed, 0, func(int) (existenceModel, bool) { return existenceModel{p: 0, q: 1}, true })
		last := map[int64]*lastUpload{}
		flagged := map[int64]bool{}
		observed := map[int64]bool{}
		var sums, single, pairs int
		err := observe(ctx, func(w io.Writer) error {
			c := cfg
			c.Transcript = w
			_, _, err := ldpop.Train(ctx, d, c)
			return err
		}, func(_ protocol.TranscriptHeader, rec *protocol.Record) error {
			b := rec.Broadcast
			if b.Phase != protocol.PhaseTrain {
				return nil
			}
			k := b.Dim
			scale := b.Param("scale", 1)
			lam := b.Param("lambda", 0)
			for _, up := range rec.Uploads {
				if up.Client < 0 {
					sums++
					continue
				}
				single++
				if up.Client >= d.NumUsers() {
					continue
				}
				base := up.Client * x.nItems
				for m, j := range up.Items {
					if x.pos[base+int(j)] < 0 || up.Values == nil {
						continue
					}
					kk := key(up.Client, j)
					row := make([]float64, k)
					for l := range k {
						row[l] = float64(up.Values[m*k+l]) / scale
					}
					vr := vRow(b, j)
					if prev := last[kk]; prev != nil && vr != nil && prev.v != nil {
						var s2, mag float64
						for l := range k {
							a, c := row[l], prev.row[l]
							if a == 0 || c == 0 { // position not named in both rounds
								continue
							}
							dl := a - c - lam*(float64(vr[l])-float64(prev.v[l]))
							s2 += dl * dl
							mag = math.Max(mag, math.Max(math.Abs(a), math.Abs(c)))
							observed[kk] = true
						}
						pairs++
						// float32 rounding of the uploads: a few ulps of the largest.
						tol := 8 * math.Sqrt(float64(k)) * mag * 0x1p-23
						if math.Sqrt(s2) > tol {
							flagged[kk] = true
						}
					}
					last[kk] = &lastUpload{round: rec.Round, row: row, v: slices.Clone(vr)}
				}
			}
			return nil
		})
		if err != nil {
			return Result{}, err
		}
		var acc accuracy
		tie := false
		for _, u := range x.order {
			s := x.users[u]
			for m, j := range s.items {
				kk := key(u, j)
				g := flagged[kk]
				if !observed[kk] { // no repeated upload: a coin flip
					g, tie = tie, !tie
				}
				acc.add(g == s.rated[m])
			}
		}
		val, lo, hi := acc.value()
		bound := 1 / (1 + math.Exp(-cfg.Eps))
		view := "per-user uploads"
		if secagg {
			view = "secure aggregation"
		}
		cs := map[bool]string{true: "secagg", false: "secagg off"}[secagg]
		if v == ldpop.Basic {
			cs = ""
		}
		return Result{
			Case:   cs,
			Metric: "balanced accuracy", Value: val, Lo: lo, Hi: hi, N: acc.n, Baseline: 0.5,
			Bound: bound + diffMargin, HigherLeaks: true,
			Setting: fmt.Sprintf("%s, d = %d, %d rounds, ε = %g, %s noise, %s", v, cfg.Dim, cfg.Rounds, cfg.Eps, cfg.Noise, view),
			Note: fmt.Sprintf("bound: e^ε/(1+e^ε) = %.4f at the paper's ε, plus margin %.2f; %d single uploads and %d sums seen, "+
				"%d repeated (user, item) uploads compared", bound, diffMargin, single, sums, pairs),
		}, nil
	}
}
