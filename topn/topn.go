// Package topn trains the top-N baselines of issue 33: most-popular
// (pop), user-level DP popularity (dp-pop), EASE (Steck, WWW 2019) and
// implicit ALS (Hu, Koren and Volinsky, ICDM 2008, tuned as in Rendle et
// al., 2021). All of them read the training ratings as one-class data: a
// rating of any value is an interaction, and the value is ignored. Their
// models are ranking models (model.Model.Ranking): the scores order items
// and are not ratings.
package topn

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"

	"gonum.org/v1/gonum/mat"

	"github.com/privrec/privrec/accountant/rdp"
	"github.com/privrec/privrec/internal/linalg"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
)

// itemModel is the ranking model that scores every item by score[i] for
// every user.
func itemModel(train *ratings.Dataset, score []float32) *model.Model {
	return &model.Model{
		NumItems: len(score), BI: score, Ranking: true, Scale: train.Scale,
		ItemIDs: slices.Clone(train.ItemIDs), ItemTitles: slices.Clone(train.ItemTitles),
	}
}

// Pop returns the most-popular model: item i scores its number of training
// ratings. It makes no privacy claim.
func Pop(train *ratings.Dataset) *model.Model {
	cnt := make([]float32, train.NumItems())
	for _, i := range train.Items {
		cnt[i]++
	}
	return itemModel(train, cnt)
}

// DPPopConfig holds dp-pop's privacy parameters.
type DPPopConfig struct {
	// Eps and Delta are the user-level (ε, δ) of the one release.
	Eps, Delta float64
	// Reproducible draws the noise from the seeded stream instead of
	// crypto/rand: a test mode, labelled in the privacy note.
	Reproducible bool
}

// DefaultDPPopConfig returns ε = 1, δ = 1e-6, noise from crypto/rand.
func DefaultDPPopConfig() DPPopConfig { return DPPopConfig{Eps: 1, Delta: 1e-6} }

// Validate reports a parameter out of range.
func (c DPPopConfig) Validate() error {
	if !(c.Eps > 0) || math.IsInf(c.Eps, 0) {
		return fmt.Errorf("eps %v: want > 0", c.Eps)
	}
	if !(c.Delta > 0 && c.Delta < 1) {
		return fmt.Errorf("delta %v: want in (0, 1)", c.Delta)
	}
	return nil
}

// DPPop returns user-level (ε, δ)-DP popularity scores: each user u with
// n_u distinct training items adds 1/sqrt(n_u) to each of them, so one
// user's contribution has L2 norm 1 and adding or removing a user (with
// all their ratings) moves the vector of sums by at most 1; one Gaussian
// release with σ calibrated by zCDP (ρ for (ε, δ), σ = 1/sqrt(2ρ)) adds
// noise to every item's sum. The ledger holds that one release. The
// curator who adds the noise sees the raw ratings.
func DPPop(train *ratings.Dataset, cfg DPPopConfig, r *rand.Rand) (*model.Model, *rdp.Ledger, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	rho, err := rdp.ZCDPRhoFor(cfg.Eps, cfg.Delta)
	if err != nil {
		return nil, nil, err
	}
	sigma := rdp.GaussianSigmaFor(rho, 1)
	sum := make([]float64, train.NumItems())
	byU := train.ByUser()
	seen := make(map[int32]bool)
	for u := range byU.Rows() {
		idx, _ := byU.Row(u)
		clear(seen)
		for _, i := range idx {
			seen[i] = true
		}
		if len(seen) == 0 {
			continue
		}
		w := 1 / math.Sqrt(float64(len(seen)))
		for i := range seen {
			sum[i] += w
		}
	}
	score := make([]float32, len(sum))
	for i, s := range sum {
		score[i] = float32(s + sigma*r.NormFloat64())
	}
	var l rdp.Ledger
	l.Gaussian("item popularity (Σ_u x_u/‖x_u‖)", 1, 1, sigma)
	return itemModel(train, score), &l, nil
}

// binaryRows returns each user's distinct training items, sorted.
func binaryRows(c *ratings.CSR) [][]int32 {
	rows := make([][]int32, c.Rows())
	for u := range rows {
		idx, _ := c.Row(u)
		r := slices.Clone(idx)
		slices.Sort(r)
		rows[u] = slices.Compact(r)
	}
	return rows
}

// EASE fits Steck's EASE on the binary user×item matrix X of train: with
// P = (XᵀX + λI)⁻¹, B = I − P·diagMat(1/diag(P)) (zero diagonal), and user
// u's scores are X_u·B. The model stores X as its user factors and the
// columns of B as its item factors (Dim = number of items). It makes no
// privacy claim.
func EASE(ctx context.Context, train *ratings.Dataset, lambda float64) (*model.Model, error) {
	if !(lambda > 0) {
		return nil, fmt.Errorf("lambda %v: want > 0", lambda)
	}
	n, nu := train.NumItems(), train.NumUsers()
	rows := binaryRows(train.ByUser())
	g := mat.NewSymDense(n, nil)
	raw := g.RawSymmetric().Data
	for _, r := range rows {
		for a, i := range r {
			row := raw[int(i)*n:]
			for _, j := range r[a:] {
				row[j]++
			}
		}
	}
	for i := range n {
		raw[i*n+i] += lambda
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var ch mat.Cholesky
	if !ch.Factorize(g) {
		return nil, errors.New("ease: Gram matrix not positive definite")
	}
	var p mat.SymDense
	if err := ch.InverseTo(&p); err != nil {
		return nil, fmt.Errorf("ease: %w", err)
	}
	// V row i = column i of B: B[j][i] = −P[j][i]/P[i][i], B[i][i] = 0.
	v := make([]float32, n*n)
	for i := range n {
		pii := p.At(i, i)
		vi := v[i*n : i*n+n]
		for j := range n {
			if j != i {
				vi[j] = float32(-p.At(j, i) / pii)
			}
		}
	}
	u := make([]float32, nu*n)
	for k, r := range rows {
		for _, i := range r {
			u[k*n+int(i)] = 1
		}
	}
	return &model.Model{
		Dim: n, NumUsers: nu, NumItems: n, U: u, V: v, Ranking: true, Scale: train.Scale,
		UserIDs: slices.Clone(train.UserIDs), ItemIDs: slices.Clone(train.ItemIDs), ItemTitles: slices.Clone(train.ItemTitles),
	}, nil
}

// IALSConfig holds the hyperparameters of implicit ALS.
type IALSConfig struct {
	// Dim is the latent dimension.
	Dim int
	// Epochs is the number of passes (each solves all users, then all
	// items).
	Epochs int
	// Alpha0 is the weight of every unobserved pair (Rendle et al.'s α0).
	Alpha0 float64
	// Reg is λ; a row's ridge is λ·(n + α0·N)^Nu, with n its observed
	// count and N the size of the other side (frequency-scaled
	// regularisation).
	Reg float64
	// Nu is the exponent ν of the frequency scaling (0: plain λ).
	Nu float64
	// Init is the standard deviation of the initial factors (divided by
	// sqrt(Dim)).
	Init float64
	// Workers is the number of goroutines (0: GOMAXPROCS).
	Workers int
}

// DefaultIALSConfig returns the defaults: dim 64, 10 epochs, α0 = 0.1,
// λ = 0.01, ν = 1, init 0.1 — the best of a grid over α0 ∈ {0.1, 1} and
// λ ∈ {0.001, 0.01, 0.03, 0.1} on a validation split of ML-1M's training
// part (docs/results/ranking.md).
func DefaultIALSConfig() IALSConfig {
	return IALSConfig{Dim: 64, Epochs: 10, Alpha0: 0.1, Reg: 0.01, Nu: 1, Init: 0.1}
}

// Validate reports a parameter out of range.
func (c IALSConfig) Validate() error {
	switch {
	case c.Dim < 1 || c.Dim > 4096:
		return fmt.Errorf("dim %d: want 1..4096", c.Dim)
	case c.Epochs < 1:
		return fmt.Errorf("epochs %d: want ≥ 1", c.Epochs)
	case !(c.Alpha0 >= 0):
		return fmt.Errorf("alpha0 %v: want ≥ 0", c.Alpha0)
	case !(c.Reg > 0):
		return fmt.Errorf("reg %v: want > 0", c.Reg)
	case !(c.Nu >= 0):
		return fmt.Errorf("nu %v: want ≥ 0", c.Nu)
	case !(c.Init > 0):
		return fmt.Errorf("init %v: want > 0", c.Init)
	case c.Workers < 0:
		return fmt.Errorf("workers %d: want ≥ 0", c.Workers)
	}
	return nil
}

// IALS fits implicit ALS: it minimises
//
//	Σ_{(u,i) observed} (w_u·h_i − 1)² + α0 Σ_{all u,i} (w_u·h_i)²
//	  + λ Σ_u (n_u + α0·N_items)^ν ‖w_u‖² + λ Σ_i (n_i + α0·N_users)^ν ‖h_i‖²
//
// by alternating exact solves (a Cholesky solve per row, with the
// α0-weighted Gramian of the other side shared by all rows). It makes no
// privacy claim.
func IALS(ctx context.Context, train *ratings.Dataset, cfg IALSConfig, r *rand.Rand) (*model.Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	nu, ni, d := train.NumUsers(), train.NumItems(), cfg.Dim
	byU := binaryRows(train.ByUser())
	byI := binaryRows(train.ByItem())
	w := make([]float64, nu*d)
	h := make([]float64, ni*d)
	sd := cfg.Init / math.Sqrt(float64(d))
	for k := range w {
		w[k] = sd * r.NormFloat64()
	}
	for k := range h {
		h[k] = sd * r.NormFloat64()
	}
	workers := cfg.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	for range cfg.Epochs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		solveSide(w, h, byU, d, ni, cfg, workers)
		solveSide(h, w, byI, d, nu, cfg, workers)
	}
	m := &model.Model{
		Dim: d, NumUsers: nu, NumItems: ni, U: toF32(w), V: toF32(h), Ranking: true, Scale: train.Scale,
		UserIDs: slices.Clone(train.UserIDs), ItemIDs: slices.Clone(train.ItemIDs), ItemTitles: slices.Clone(train.ItemTitles),
	}
	return m, nil
}

func toF32(x []float64) []float32 {
	y := make([]float32, len(x))
	for k, v := range x {
		y[k] = float32(v)
	}
	return y
}

// solveSide sets every row of x (one per entry of rows) to its exact
// minimiser given the other side y (nOther rows).
func solveSide(x, y []float64, rows [][]int32, d, nOther int, cfg IALSConfig, workers int) {
	// G = α0·YᵀY.
	gram := make([]float64, d*d)
	for o := range nOther {
		yo := y[o*d : o*d+d]
		for a := range d {
			ya := yo[a]
			if ya == 0 {
				continue
			}
			ga := gram[a*d:]
			for b := a; b < d; b++ {
				ga[b] += ya * yo[b]
			}
		}
	}
	for a := range d {
		for b := a; b < d; b++ {
			gram[a*d+b] *= cfg.Alpha0
			gram[b*d+a] = gram[a*d+b]
		}
	}
	var next int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	const chunk = 64
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := make([]float64, d*d)
			rhs := make([]float64, d)
			for {
				mu.Lock()
				start := int(next)
				next += chunk
				mu.Unlock()
				if start >= len(rows) {
					return
				}
				for k := start; k < min(start+chunk, len(rows)); k++ {
					r := rows[k]
					copy(a, gram)
					clear(rhs)
					for _, o := range r {
						yo := y[int(o)*d : int(o)*d+d]
						for p := range d {
							yp := yo[p]
							rhs[p] += yp
							ap := a[p*d:]
							for q := p; q < d; q++ {
								ap[q] += yp * yo[q]
							}
						}
					}
					reg := cfg.Reg * math.Pow(float64(len(r))+cfg.Alpha0*float64(nOther), cfg.Nu)
					for p := range d {
						a[p*d+p] += reg
						for q := p + 1; q < d; q++ {
							a[q*d+p] = a[p*d+q]
						}
					}
					xk := x[k*d : k*d+d]
					if len(r) == 0 {
						clear(xk)
						continue
					}
					if linalg.CholeskySolve(a, rhs, d) {
						copy(xk, rhs)
					}
				}
			}
		}()
	}
	wg.Wait()
}
