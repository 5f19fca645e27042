package audit

import (
	"context"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/privrec/privrec/budget"
	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/hdpmf"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
)

// serverHRaters is the number of other raters of every item in the
// server-knows-h audit (the target user makes one more).
const serverHRaters = 5

func init() {
	register(&Attack{
		Name:  "server-h",
		Title: "Server-knows-h audit of distributed Laplace noise (mixture shares versus gamma shares)",
		Doc: "The server's view of one training round of federated DPMF under secure aggregation, on two neighbouring data sets: " +
			"a target user rates every item 1 in one and 5 in the other; five other users rate every item 3. With K = 1, no " +
			"initial noise and uniform weights, every item's summed gradient is the same constant plus the item's noise, so each item " +
			"is one independent sample of the mechanism, and the neighbours shift it by 2Δ = 8, the noise scale b = 2√KΔ/ε with ε = 1. " +
			"Construction (a), the papers' mixture shares (HDPMF Thm 3, LDP-OP Lemma 1), has the server draw h ~ Exp(1) and send it to " +
			"the clients: conditioned on h the sum is Gaussian, and the empirical audit conditioned on h (auditCond) finds the " +
			"hockey-stick divergence δ̂ at ε far above what sampling explains (exact value dp.MixtureServerDelta ≈ 0.19; control: " +
			"leaks). The default gamma shares are server-blind: the sum is exactly Laplace(b) and no h exists (auditSamples must " +
			"pass: δ̂ within the sampling tolerance and the lower confidence bound of the largest log-ratio at most ε).",
		cases: func(e *env) []testCase {
			return []testCase{
				{method: "mixture", role: Control, run: serverHRun(dp.MixtureShares)},
				{method: "gamma", role: Protected, run: serverHRun(dp.GammaShares)},
			}
		},
	})
}

// neighbours returns the audit's data set: items items, serverHRaters
// users rating each 3 and one target user rating each target.
func neighbours(items int, target float32) *ratings.Dataset {
	d := &ratings.Dataset{Name: "server-h", Scale: ratings.Stars5}
	users := serverHRaters + 1
	d.UserIDs = make([]string, users)
	for u := range users {
		d.UserIDs[u] = strconv.Itoa(u + 1)
	}
	d.ItemIDs = make([]string, items)
	for j := range items {
		d.ItemIDs[j] = strconv.Itoa(j + 1)
	}
	n := users * items
	d.Users, d.Items, d.Values = make([]int32, 0, n), make([]int32, 0, n), make([]float32, 0, n)
	for u := range users {
		v := float32(3)
		if u == serverHRaters {
			v = target
		}
		for j := range items {
			d.Users = append(d.Users, int32(u))
			d.Items = append(d.Items, int32(j))
			d.Values = append(d.Values, v)
		}
	}
	return d
}

// serverView runs one DPMF round on d and returns, per item, the
// coordinate the server receives and the h it sent (NaN without h).
func serverView(ctx context.Context, d *ratings.Dataset, scheme dp.ShareScheme, seed uint64, workers int) (x, h []float64, b float64, err error) {
	cfg := fedConfig(hdpmf.DPMF)
	cfg.Dim, cfg.Rounds, cfg.InitScale, cfg.Noise, cfg.Seed, cfg.Workers = 1, 1, 0, scheme, seed, workers
	// No user clip: the audit tests the noise construction against the
	// per-item shift 2Δ of the neighbours, which the clip would shrink
	// (the target rates every item).
	cfg.UserClip = 0
	ones := func(n int) []float64 {
		w := make([]float64, n)
		for k := range w {
			w[k] = 1
		}
		return w
	}
	cfg.Weights = &budget.HDPWeights{User: ones(d.NumUsers()), Item: ones(d.NumItems()), EpsMax: cfg.Eps}
	nI := d.NumItems()
	err = observe(ctx, func(w io.Writer) error {
		c := cfg
		c.Transcript = w
		_, rep, err := hdpmf.Train(ctx, d, c)
		if err == nil {
			b = rep.NoiseScale
		}
		return err
	}, func(_ protocol.TranscriptHeader, rec *protocol.Record) error {
		if rec.Broadcast.Phase != protocol.PhaseTrain {
			return nil
		}
		if len(rec.Uploads) != 1 || rec.Uploads[0].Client != -1 {
			return fmt.Errorf("round %d: the server sees %d uploads, want one secure sum", rec.Round, len(rec.Uploads))
		}
		up := rec.Uploads[0]
		x, h = make([]float64, nI), make([]float64, nI)
		for k := range h {
			h[k] = math.NaN()
		}
		for k, j := range up.Items {
			x[j] = float64(up.Values[k])
		}
		if rec.Broadcast.Aux != nil {
			for j := range nI {
				h[j] = float64(rec.Broadcast.Aux[j*rec.Broadcast.AuxDim])
			}
		}
		return nil
	})
	return x, h, b, err
}

func serverHRun(scheme dp.ShareScheme) func(context.Context, *env) (Result, error) {
	return func(ctx context.Context, e *env) (Result, error) {
		const eps = 1.0
		n := e.hItems
		x0, h0, b, err := serverView(ctx, neighbours(n, 1), scheme, e.cfg.Seed, e.cfg.Workers)
		if err != nil {
			return Result{}, err
		}
		x1, h1, _, err := serverView(ctx, neighbours(n, 5), scheme, e.cfg.Seed+1, e.cfg.Workers)
		if err != nil {
			return Result{}, err
		}
		sens := 2 * float64(ratings.Stars5.Range()) // the neighbours' shift of the summed coordinate
		claim := sens / b                           // the ε the noise scale promises for that shift
		acfg := auditConfig{Bins: 10, CondBins: 5, MinCount: 200}
		var a auditResult
		view := "server knows h: audit conditioned on h"
		if scheme == dp.MixtureShares {
			a = auditCond(x0, h0, x1, h1, claim, acfg)
		} else {
			acfg.Bins = 50
			a = auditSamples(x0, x1, claim, acfg)
			view = "no h exists: unconditioned audit"
		}
		res := Result{
			Metric: "δ̂ at the claimed ε", Value: a.Delta, Lo: a.Delta, Hi: a.Delta, N: 2 * n, Baseline: 0,
			Bound: a.DeltaTol, HigherLeaks: true,
			Setting: fmt.Sprintf("%s shares, one DPMF round, K = 1, %d raters per item, b = %.4g, claimed ε = %.4g; %s",
				scheme, serverHRaters+1, b, claim, view),
			Note: fmt.Sprintf("bound: the δ̂ sampling alone explains at ε (auditResult.DeltaTol); largest bin log-ratio ε̂ = %.3f, "+
				"lower confidence bound %.3f over %d bins", a.Epsilon, a.Lower, a.Bins),
		}
		if scheme == dp.MixtureShares {
			res.Note += fmt.Sprintf("; exact δ against a server that knows h (dp.MixtureServerDelta): %.4f", dp.MixtureServerDelta(claim, sens, b))
		}
		if scheme == dp.GammaShares && a.Lower > claim {
			res.extraFail = fmt.Sprintf("the lower confidence bound %.3f of the largest log-ratio exceeds ε = %.3f", a.Lower, claim)
		}
		return res, nil
	}
}
