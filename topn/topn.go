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
	"sync/atomic"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/lapack/lapack64"

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
//
// The cost is the inverse: an in-place Cholesky factorisation and inverse
// (LAPACK's dpotrf and dpotri through gonum, float64) of the Gramian of
// the items with at least one training interaction, about m³/2
// multiply-adds for m such items. An item without one has a zero row and
// column in B (its Gramian row is λ·e_i), so leaving it out of the inverse
// changes no score. Memory: 8·m² bytes for the Gramian and its inverse,
// 4·n² for the model's item factors and 4·users·n for its user factors.
// workers (0: GOMAXPROCS) build the Gramian and the item factors.
func EASE(ctx context.Context, train *ratings.Dataset, lambda float64) (*model.Model, error) {
	return easeWorkers(ctx, train, lambda, 0)
}

func easeWorkers(ctx context.Context, train *ratings.Dataset, lambda float64, workers int) (*model.Model, error) {
	if !(lambda > 0) {
		return nil, fmt.Errorf("lambda %v: want > 0", lambda)
	}
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	n, nu := train.NumItems(), train.NumUsers()
	rows := binaryRows(train.ByUser())
	// Compact the items that have an interaction: act[c] is the item of
	// compact index c, pos[i] the compact index of item i (−1: none).
	pos := make([]int32, n)
	for i := range pos {
		pos[i] = -1
	}
	for _, r := range rows {
		for _, i := range r {
			pos[i] = 0
		}
	}
	var act []int32
	for i := range pos {
		if pos[i] == 0 {
			pos[i] = int32(len(act))
			act = append(act, int32(i))
		}
	}
	m := len(act)
	crows := make([][]int32, len(rows))
	for k, r := range rows {
		c := make([]int32, len(r))
		for a, i := range r {
			c[a] = pos[i] // increasing, as r is sorted
		}
		crows[k] = c
	}
	g := easeGram(crows, m, lambda, workers)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t, ok := lapack64.Potrf(blas64.Symmetric{Uplo: blas.Upper, N: m, Stride: max(m, 1), Data: g})
	if !ok {
		return nil, errors.New("ease: Gram matrix not positive definite")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if _, ok := lapack64.Potri(t); !ok {
		return nil, errors.New("ease: Gram matrix is singular")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The upper triangle of g now holds P; mirror it, then V row i =
	// column i of B: B[j][i] = −P[j][i]/P[i][i] = −P[i][j]/P[i][i],
	// B[i][i] = 0 (P is symmetric).
	mirrorUpper(g, m)
	v := make([]float32, n*n)
	parallelRange(m, workers, func(lo, hi int) {
		for c := lo; c < hi; c++ {
			prow := g[c*m : c*m+m]
			inv := -1 / prow[c]
			vi := v[int(act[c])*n : int(act[c])*n+n]
			for d, p := range prow {
				vi[act[d]] = float32(p * inv)
			}
			vi[act[c]] = 0
		}
	})
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

// easeGram returns the upper triangle of XᵀX + λI (row-major, m×m; the
// strict lower triangle is zero) for the binary rows (sorted item
// indices below m). Worker w adds the pairs whose first item i has
// i % workers == w, so no two workers write the same row.
func easeGram(rows [][]int32, m int, lambda float64, workers int) []float64 {
	g := make([]float64, m*m)
	workers = max(1, min(workers, m))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, r := range rows {
				for a, i := range r {
					if int(i)%workers != w {
						continue
					}
					row := g[int(i)*m:]
					for _, j := range r[a:] {
						row[j]++
					}
				}
			}
		}()
	}
	wg.Wait()
	for i := range m {
		g[i*m+i] += lambda
	}
	return g
}

// mirrorUpper copies the upper triangle of the m×m row-major a onto its
// lower triangle, in tiles to stay in cache.
func mirrorUpper(a []float64, m int) {
	const tile = 64
	for bi := 0; bi < m; bi += tile {
		for bj := 0; bj <= bi; bj += tile {
			for i := bi; i < min(bi+tile, m); i++ {
				for j := bj; j < min(bj+tile, i); j++ {
					a[i*m+j] = a[j*m+i]
				}
			}
		}
	}
}

// parallelRange calls f on contiguous chunks of [0, n) from workers
// goroutines and waits for them.
func parallelRange(n, workers int, f func(lo, hi int)) {
	var next atomic.Int64
	const chunk = 32
	var wg sync.WaitGroup
	for range max(1, workers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				lo := int(next.Add(chunk)) - chunk
				if lo >= n {
					return
				}
				f(lo, min(lo+chunk, n))
			}
		}()
	}
	wg.Wait()
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
	return IALSProgress(ctx, train, cfg, r, nil)
}

// IALSProgress is IALS calling done, when not nil, after each epoch with
// the number of epochs finished.
func IALSProgress(ctx context.Context, train *ratings.Dataset, cfg IALSConfig, r *rand.Rand, done func(epoch int)) (*model.Model, error) {
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
	for e := range cfg.Epochs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		solveSide(w, h, byU, d, ni, cfg, workers)
		solveSide(h, w, byI, d, nu, cfg, workers)
		if done != nil {
			done(e + 1)
		}
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
