// Package bmf trains Bayesian matrix factorization by Gibbs sampling, the
// non-private model of the multi-vendor thesis (de With & Erkin, App. A.2),
// which ran it as libFM's MCMC learner (Rendle 2012) on user and item
// indicators. The model is
//
//	r(u, i) ~ N(w0 + bu[u] + bi[i] + U[u]·V[i], 1/α)
//
// with Gaussian priors on every user bias, item bias and factor entry, one
// mean and precision per side (users, items) and per dimension (the bias
// counts as one more dimension), and libFM's hyperpriors: α ~ Gamma with
// α0 = γ0 = 1, and a Normal-Gamma prior on each (μ, λ) pair with μ0 = 0,
// γ0 = 1, α_λ = β_λ = 1. The global mean w0 has a flat prior, as libFM's
// default reg0 = 0 gives.
//
// Sampling follows libFM: each parameter is drawn from its exact Gaussian
// conditional one coordinate at a time, with the residuals of the row kept
// up to date, so a sweep costs O(ratings·Dim) rather than the O(ratings·Dim²
// + rows·Dim³) of BPMF's block draws. A sweep draws the user
// hyperparameters, every user row (bias, then dimension 1..Dim), the item
// hyperparameters, every item row, α and w0. Rows are drawn in parallel in
// fixed blocks, each with its own random stream (rng.New of the seed, the
// iteration, the side and the block), so the samples do not depend on the
// number of workers.
//
// Predictions average the samples, as libFM's MCMC does: Train returns an
// model.Model whose factor rows are the kept samples' factors side by side,
// scaled by 1/√S, so that its dot product is the mean over the S samples
// of U[u]·V[i], and whose biases and mean are the samples' means (the
// mean is also the prediction for an unknown user or item).
package bmf

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

// ErrConfig is wrapped by every error about a Config or the training data.
var ErrConfig = errors.New("bmf: bad configuration")

// Config holds the sampler's settings. The thesis's Table 2 sets only
// InitStdev (σ), Dim (d) and Iters (T); the hyperpriors are libFM's.
type Config struct {
	Dim       int     // latent dimension d
	Iters     int     // Gibbs sweeps T
	InitStdev float64 // standard deviation σ of the initial factor entries
	// Burnin is the number of first sweeps whose samples are not averaged
	// (libFM averages all of them: 0).
	Burnin int
	// Keep is the most samples kept for prediction (0: all after Burnin);
	// when fewer are kept they are evenly thinned, always with the last.
	// The model's memory is Keep·Dim floats per user and per item.
	Keep    int
	Workers int    // parallel workers (0: GOMAXPROCS); results do not depend on it
	Seed    uint64 // seed of all random streams
}

// DefaultConfig returns the settings of the thesis's Fig. 4a (σ = 0.1,
// d = 16, T = 100), averaging every sample as libFM does.
func DefaultConfig() Config {
	return Config{Dim: 16, Iters: 100, InitStdev: 0.1}
}

// Validate reports the first invalid setting.
func (c Config) Validate() error {
	switch {
	case c.Dim < 1:
		return fmt.Errorf("%w: Dim = %d, want ≥ 1", ErrConfig, c.Dim)
	case c.Iters < 1:
		return fmt.Errorf("%w: Iters = %d, want ≥ 1", ErrConfig, c.Iters)
	case !(c.InitStdev >= 0) || math.IsInf(c.InitStdev, 1):
		return fmt.Errorf("%w: InitStdev = %g, want finite and ≥ 0", ErrConfig, c.InitStdev)
	case c.Burnin < 0 || c.Burnin >= c.Iters:
		return fmt.Errorf("%w: Burnin = %d, want 0 ≤ Burnin < Iters = %d", ErrConfig, c.Burnin, c.Iters)
	case c.Keep < 0:
		return fmt.Errorf("%w: Keep = %d, want ≥ 0", ErrConfig, c.Keep)
	case c.Workers < 0:
		return fmt.Errorf("%w: Workers = %d, want ≥ 0", ErrConfig, c.Workers)
	}
	return nil
}

// Samples returns the number of samples Train keeps for prediction.
func (c Config) Samples() int {
	n := c.Iters - c.Burnin
	if c.Keep > 0 && n > c.Keep {
		return c.Keep
	}
	return n
}

// thin returns the spacing of kept samples.
func (c Config) thin() int {
	n, s := c.Iters-c.Burnin, c.Samples()
	if s <= 0 {
		return 1
	}
	return (n + s - 1) / s
}

// IterStats describes one finished sweep.
type IterStats struct {
	Iter      int     // sweeps done, 1..Iters
	TrainRMSE float64 // training RMSE of this sweep's sample (not the average)
	Alpha     float64 // sampled noise precision α
	Kept      int     // samples kept so far
}

// libFM's hyperprior constants.
const (
	alpha0  = 1.0 // α ~ Gamma((alpha0+N)/2, (gamma0+Σe²)/2)
	gamma0  = 1.0
	alphaL  = 1.0 // λ ~ Gamma((alphaL+n+1)/2, (betaL+γ0(μ−μ0)²+Σ(x−μ)²)/2)
	betaL   = 1.0
	mu0     = 0.0
	block   = 64          // rows per random stream
	rngBMF  = 0x626d_6667 // "bmfg"
	rngInit = 1
	rngHyp  = 2
	rngRows = 3
	rngGlob = 4
)

// hyper holds one side's prior means and precisions: index 0 is the bias,
// 1..Dim the factor dimensions.
type hyper struct{ mu, lam []float64 }

// side is the state of the users or the items.
type side struct {
	id   uint64
	rows *ratings.CSR
	x    []float64 // rows×Dim factors
	b    []float64 // biases
	h    hyper
	se   []float64 // per row: sum of residuals after its draw
	se2  []float64 // per row: sum of squared residuals
}

type sampler struct {
	cfg     Config
	k       int
	w0, a   float64
	users   side
	items   side
	workers int
	maxRow  int
}

// Train runs the Gibbs sampler on d and returns the model averaging the
// kept samples. hook, when not nil, is called after every sweep. Train
// fails with ErrConfig for a bad config or an empty dataset, and with the
// context's error when ctx is cancelled.
func Train(ctx context.Context, d *ratings.Dataset, cfg Config, hook func(IterStats)) (*model.Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Len() == 0 {
		return nil, fmt.Errorf("%w: dataset %q has no ratings", ErrConfig, d.Name)
	}
	s := newSampler(d, cfg)
	S, thin := cfg.Samples(), cfg.thin()
	k := cfg.Dim
	nu, ni := d.NumUsers(), d.NumItems()
	m := &model.Model{
		Dim: S * k, NumUsers: nu, NumItems: ni,
		U: make([]float32, nu*S*k), V: make([]float32, ni*S*k),
		BU: make([]float32, nu), BI: make([]float32, ni),
		Scale:   d.Scale,
		UserIDs: slices.Clone(d.UserIDs), ItemIDs: slices.Clone(d.ItemIDs), ItemTitles: slices.Clone(d.ItemTitles),
	}
	bu, bi := make([]float64, nu), make([]float64, ni)
	var w0 float64
	kept := 0
	n := float64(d.Len())
	for t := range cfg.Iters {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		s.drawHyper(&s.users, t)
		s.sweep(&s.users, &s.items, t)
		s.drawHyper(&s.items, t)
		s.sweep(&s.items, &s.users, t)
		se, se2 := 0.0, 0.0
		for i := range s.items.se {
			se += s.items.se[i]
			se2 += s.items.se2[i]
		}
		r := rng.New(cfg.Seed, rngBMF, rngGlob, uint64(t))
		s.a = dp.SampleGamma(r, (alpha0+n)/2, 2/(gamma0+se2))
		nw := s.w0 + se/n + r.NormFloat64()/math.Sqrt(s.a*n)
		dw := nw - s.w0
		s.w0 = nw
		se2 += n*dw*dw - 2*dw*se
		if (cfg.Iters-1-t)%thin == 0 && t >= cfg.Burnin && kept < S {
			store(m.U, s.users.x, kept, S, k)
			store(m.V, s.items.x, kept, S, k)
			for u, v := range s.users.b {
				bu[u] += v
			}
			for i, v := range s.items.b {
				bi[i] += v
			}
			w0 += s.w0
			kept++
		}
		if hook != nil {
			hook(IterStats{Iter: t + 1, TrainRMSE: math.Sqrt(max(se2, 0) / n), Alpha: s.a, Kept: kept})
		}
	}
	for u, v := range bu {
		m.BU[u] = float32(v / float64(kept))
	}
	for i, v := range bi {
		m.BI[i] = float32(v / float64(kept))
	}
	m.Mean = float32(w0 / float64(kept))
	m.Default = m.Mean
	return m, nil
}

// store writes sample s of the rows×k factors x into the rows×(S·k) matrix
// dst at columns s·k.., scaled by 1/√S.
func store(dst []float32, x []float64, s, S, k int) {
	c := 1 / math.Sqrt(float64(S))
	rows := len(x) / k
	for r := range rows {
		o := (r*S + s) * k
		for f := range k {
			dst[o+f] = float32(x[r*k+f] * c)
		}
	}
}

func newSampler(d *ratings.Dataset, cfg Config) *sampler {
	k := cfg.Dim
	s := &sampler{cfg: cfg, k: k, w0: d.Mean(), a: 1, workers: cfg.Workers}
	if s.workers <= 0 {
		s.workers = runtime.GOMAXPROCS(0)
	}
	setup := func(sd *side, id uint64, rows *ratings.CSR) {
		n := rows.Rows()
		*sd = side{id: id, rows: rows, x: make([]float64, n*k), b: make([]float64, n),
			h:  hyper{mu: make([]float64, k+1), lam: make([]float64, k+1)},
			se: make([]float64, n), se2: make([]float64, n)}
		r := rng.New(cfg.Seed, rngBMF, rngInit, id)
		for j := range sd.x {
			sd.x[j] = r.NormFloat64() * cfg.InitStdev
		}
		for j := range sd.h.lam {
			sd.h.lam[j] = 1
		}
		for j := range n {
			s.maxRow = max(s.maxRow, rows.RowLen(j))
		}
	}
	setup(&s.users, 0, d.ByUser())
	setup(&s.items, 1, d.ByItem())
	return s
}

// drawHyper draws the side's prior means and precisions from their
// Normal-Gamma conditionals, λ first and then μ, as libFM does. Rows
// without ratings are left out: their parameters are integrated out of
// this draw and then drawn from the prior in the sweep (collapsed Gibbs),
// which keeps the hyperparameters mixing when most rows are empty, as
// for the users of the vendors left out of training.
func (s *sampler) drawHyper(sd *side, t int) {
	r := rng.New(s.cfg.Seed, rngBMF, rngHyp, uint64(t), sd.id)
	n := 0
	k := s.k
	for f := 0; f <= k; f++ {
		mu := sd.h.mu[f]
		var sum, ss float64
		n = 0
		for j := range sd.b {
			if sd.rows.RowLen(j) == 0 {
				continue
			}
			n++
			var x float64
			if f == 0 {
				x = sd.b[j]
			} else {
				x = sd.x[j*k+f-1]
			}
			sum += x
			ss += (x - mu) * (x - mu)
		}
		an := (alphaL + float64(n) + 1) / 2
		bn := (betaL + gamma0*(mu-mu0)*(mu-mu0) + ss) / 2
		lam := dp.SampleGamma(r, an, 1/bn)
		mn := (sum + gamma0*mu0) / (float64(n) + gamma0)
		sd.h.lam[f] = lam
		sd.h.mu[f] = mn + r.NormFloat64()/math.Sqrt((float64(n)+gamma0)*lam)
	}
}

// sweep draws every row of own given other, in parallel over fixed blocks.
func (s *sampler) sweep(own, other *side, t int) {
	rows := own.rows.Rows()
	nb := (rows + block - 1) / block
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(s.workers, nb) {
		wg.Go(func() {
			e := make([]float64, s.maxRow)
			h := make([]float64, s.maxRow*s.k)
			for {
				bl := int(next.Add(1) - 1)
				if bl >= nb {
					return
				}
				r := rng.New(s.cfg.Seed, rngBMF, rngRows, uint64(t), own.id, uint64(bl))
				for row := bl * block; row < min(rows, (bl+1)*block); row++ {
					s.drawRow(own, other, row, r, e, h)
				}
			}
		})
	}
	wg.Wait()
}

// drawRow draws the bias and factors of one row coordinate by coordinate
// from their Gaussian conditionals, keeping the row's residuals e current,
// and records the residual sums. h is scratch for the other side's
// factors, stored dimension-major.
func (s *sampler) drawRow(own, other *side, row int, r *rand.Rand, e, h []float64) {
	k := s.k
	a := s.a
	idx, val := own.rows.Row(row)
	n := len(idx)
	x := own.x[row*k : row*k+k]
	e = e[:n]
	base := s.w0 + own.b[row]
	for c, j := range idx {
		y := other.x[int(j)*k : int(j)*k+k]
		p := base + other.b[j]
		for f, yf := range y {
			p += x[f] * yf
			h[f*n+c] = yf
		}
		e[c] = float64(val[c]) - p
	}
	// Bias: h = 1.
	{
		var sum float64
		for _, v := range e {
			sum += v
		}
		b := own.b[row]
		prec := a*float64(n) + own.h.lam[0]
		mean := (a*(sum+float64(n)*b) + own.h.mu[0]*own.h.lam[0]) / prec
		nb := mean + r.NormFloat64()/math.Sqrt(prec)
		d := nb - b
		for c := range e {
			e[c] -= d
		}
		own.b[row] = nb
	}
	for f := range k {
		hf := h[f*n : f*n+n]
		xf := x[f]
		var shh, seh float64
		for c, hv := range hf {
			shh += hv * hv
			seh += (e[c] + xf*hv) * hv
		}
		lam := own.h.lam[f+1]
		prec := a*shh + lam
		mean := (a*seh + own.h.mu[f+1]*lam) / prec
		nv := mean + r.NormFloat64()/math.Sqrt(prec)
		d := nv - xf
		for c, hv := range hf {
			e[c] -= d * hv
		}
		x[f] = nv
	}
	var se, se2 float64
	for _, v := range e {
		se += v
		se2 += v * v
	}
	own.se[row], own.se2[row] = se, se2
}
