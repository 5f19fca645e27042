package pmf

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/privrec/privrec/budget"
	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/internal/linalg"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

// Solver says how the perturbed item matrix V̄ of objective (8) is found.
type Solver string

const (
	// SolverExact computes the exact minimizer of (8) given U: per item the
	// d×d system (Σ_i u_i u_iᵀ + λ_v I) v̄_j = Σ_i (r_ij − c) u_i − η_j, with
	// one η_j per item drawn once. This is what Theorem 4's proof needs
	// (∇E = 0 at V̄ for both neighbours), so the ε claim holds for V̄.
	SolverExact Solver = "exact"
	// SolverPaper follows Alg. 2 lines 14-21 literally: V̄ starts at the
	// non-private V of stage 1 and takes VEpochs full-batch gradient steps
	// of γ/|R| (the averaged scaling of Config), drawing a fresh η_j every
	// step. Its output depends on the non-private start and on many noise
	// draws, so Theorem 4 does not cover it; it is here to reproduce the
	// paper's figures, and makes no privacy claim of its own.
	SolverPaper Solver = "paper"
)

// DPConfig configures DP-PMF (and the DP-PMF stage of PDP-PMF).
type DPConfig struct {
	// PMF is stage 1 (U and V without noise). Its Center is replaced by
	// an ε-DP mean rating (see MeanShare).
	PMF Config
	// MeanShare is the fraction of ε spent on a DP mean rating
	// (dp.DPAverage), the center of stages 1 and 2; the rest, (1 −
	// MeanShare)·ε, is the ε of the V̄ noise (sequential composition).
	// 0 centers at the scale midpoint, a public constant.
	MeanShare float64
	// Eps is ε of Theorem 4 (ignored by TrainPDP, which uses t).
	Eps float64
	// Sens is Δ, the bound on |r − r'| for the protected change. 0 means
	// Scale.Max − Scale.Min: a changed rating value (Remark 7's bounded
	// DP). Theorem 4's Δ = r_max is for the paper's add/remove reading.
	Sens float64
	// RegV is λ_v of objective (8) in the V stage, unscaled: the exact
	// solver adds it to Σ u_i u_iᵀ. 0 means 1 + 6.25·(Δ/ε_V)², growing
	// with the noise variance, for SolverExact and PaperReg for
	// SolverPaper. The paper's value is 0.01 (see the package
	// documentation for why that is far too small for the exact solver).
	RegV float64
	// Solver finds V̄; "" means SolverExact.
	Solver Solver
	// VEpochs is k2, the gradient steps of SolverPaper.
	VEpochs int
}

// PaperReg is the paper's λ_u = λ_v (§6.1), SolverPaper's λ_v when
// DPConfig.RegV is 0.
const PaperReg = 0.01

// autoRegV is λ_v when DPConfig.RegV is 0: 1 + 6.25·(Δ/ε_V)². The noise
// term of a prediction falls as 1/λ_v and its variance as 1/λ_v², while
// the signal lost to shrinkage falls as 1/λ_v, so the best λ_v grows like
// the noise variance (Δ/ε)². 6.25·4² = 100 is the best of
// {0.01, 1, 5, 25, 100, 400} for DP-PMF on ML-100K at ε = 1; the 1 is a
// ridge floor for large ε, where the exact V step with λ_v = 0.01
// overfits items with few ratings.
func autoRegV(scale float64) float64 { return 1 + 6.25*scale*scale }

// DefaultDPConfig returns DP-PMF's defaults: DefaultConfig for stage 1,
// ε = 1 with 1% of it on the mean, Δ = the scale's range, λ_v = 1 + 6.25·(Δ/ε_V)², the
// exact solver, k2 = 50.
func DefaultDPConfig() DPConfig {
	return DPConfig{PMF: DefaultConfig(), Eps: 1, MeanShare: 0.01, RegV: 0, Solver: SolverExact, VEpochs: 50}
}

// Validate checks the configuration, except Eps when checkEps is false.
func (c DPConfig) validate(checkEps bool) error {
	if err := c.PMF.Validate(); err != nil {
		return err
	}
	switch {
	case checkEps && (!(c.Eps > 0) || math.IsInf(c.Eps, 0)):
		return fmt.Errorf("%w: Eps = %g must be positive and finite", ErrConfig, c.Eps)
	case !(c.MeanShare >= 0 && c.MeanShare < 1):
		return fmt.Errorf("%w: MeanShare = %g outside [0, 1)", ErrConfig, c.MeanShare)
	case !(c.Sens >= 0) || math.IsInf(c.Sens, 0):
		return fmt.Errorf("%w: Sens = %g must be ≥ 0 and finite", ErrConfig, c.Sens)
	case !(c.RegV >= 0) || math.IsInf(c.RegV, 0):
		return fmt.Errorf("%w: RegV = %g must be ≥ 0 and finite", ErrConfig, c.RegV)
	case c.Solver != "" && c.Solver != SolverExact && c.Solver != SolverPaper:
		return fmt.Errorf("%w: Solver = %q is neither %q nor %q", ErrConfig, c.Solver, SolverExact, SolverPaper)
	case c.VEpochs < 0:
		return fmt.Errorf("%w: VEpochs = %d is negative", ErrConfig, c.VEpochs)
	}
	return nil
}

// Validate checks the configuration.
func (c DPConfig) Validate() error { return c.validate(true) }

// DPStats describes a DP-PMF run.
type DPStats struct {
	Eps          float64 // ε used for the noise (t for PDP-PMF)
	EpsV         float64 // ε of the V̄ noise, (1 − MeanShare)·Eps
	Sens         float64 // Δ
	Center       float64 // the DP mean rating (or the scale midpoint)
	RegV         float64 // λ_v used
	NoiseNorm    float64 // mean ‖η_j‖ over the draws; expected Dim·Δ/EpsV
	ClippedUsers int     // rows of U scaled down to norm 1
	TrainRMSE    float64 // on the ratings trained on
}

// TrainDP runs DP-PMF (§4, Alg. 2): PMF for U on d, U's rows clipped to
// norm ≤ 1, then V̄ minimizing objective (8) with η_j of density
// ∝ exp(−ε‖η_j‖₂/Δ). See the package documentation for the claim.
func TrainDP(ctx context.Context, d *ratings.Dataset, cfg DPConfig, hook func(EpochStats)) (*model.Model, DPStats, error) {
	if err := cfg.Validate(); err != nil {
		return nil, DPStats{}, err
	}
	return trainDP(ctx, d, cfg, cfg.Eps, hook)
}

func trainDP(ctx context.Context, d *ratings.Dataset, cfg DPConfig, eps float64, hook func(EpochStats)) (*model.Model, DPStats, error) {
	st := DPStats{Eps: eps, Sens: cfg.Sens}
	if st.Sens == 0 {
		st.Sens = float64(d.Scale.Max - d.Scale.Min)
	}
	if !(st.Sens > 0) {
		return nil, st, fmt.Errorf("%w: rating scale %v has no range; set Sens", ErrConfig, d.Scale)
	}
	pc := cfg.PMF
	lo, hi := float64(d.Scale.Min), float64(d.Scale.Max)
	nr := rng.New(pc.Seed, rngNoise)
	st.EpsV, pc.Center = eps, (lo+hi)/2
	if cfg.MeanShare > 0 {
		pc.Center = math.Max(lo, math.Min(hi, dp.DPAverage(nr, d.Values, lo, hi, cfg.MeanShare*eps)))
		st.EpsV = (1 - cfg.MeanShare) * eps
	}
	st.Center = pc.Center
	f, err := trainFactors(ctx, d, pc, hook)
	if err != nil {
		return nil, st, err
	}
	st.ClippedUsers = clipRows(f.u, f.dim, 1)
	scale := st.Sens / st.EpsV
	st.RegV = cfg.RegV
	if st.RegV == 0 {
		st.RegV = autoRegV(scale)
		if cfg.Solver == SolverPaper {
			st.RegV = PaperReg
		}
	}
	cfg.RegV = st.RegV
	if cfg.Solver == SolverPaper {
		if st.NoiseNorm, err = solvePaper(ctx, f, d, cfg, scale, nr, hook); err != nil {
			return nil, st, err
		}
	} else {
		st.NoiseNorm = solveExact(f, d, cfg.RegV, scale, nr)
	}
	for _, x := range f.v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, st, fmt.Errorf("%w in the V stage (λ_v = %g, γ = %g)", ErrDiverged, st.RegV, cfg.PMF.LearnRate)
		}
	}
	st.TrainRMSE = f.rmse(d)
	return f.model(), st, nil
}

// clipRows scales every row of w (dim wide) with norm above c down to c and
// returns how many it scaled.
func clipRows(w []float64, dim int, c float64) int {
	n := 0
	for o := 0; o < len(w); o += dim {
		row := w[o : o+dim]
		if s := math.Sqrt(dot(row, row)); s > c {
			for k := range row {
				row[k] *= c / s
			}
			n++
		}
	}
	return n
}

// solveExact sets f.v to the exact minimizer of (8) given f.u, one η_j per
// item, and returns the mean noise norm.
func solveExact(f *factors, d *ratings.Dataset, regV, scale float64, r *rand.Rand) float64 {
	dim := f.dim
	byItem := d.ByItem()
	a := make([]float64, dim*dim)
	b := make([]float64, dim)
	eta := make([]float64, dim)
	var norms float64
	for j := range f.ni {
		clear(a)
		clear(b)
		users, vals := byItem.Row(j)
		for k, i := range users {
			u := f.u[int(i)*dim : int(i)*dim+dim]
			y := float64(vals[k]) - f.center
			for p := range dim {
				b[p] += y * u[p]
				row := a[p*dim : p*dim+p+1]
				for q := range row {
					row[q] += u[p] * u[q]
				}
			}
		}
		dp.FillL2Laplace(r, scale, eta)
		norms += math.Sqrt(dot(eta, eta))
		for p := range dim {
			a[p*dim+p] += regV
			b[p] -= eta[p]
		}
		if !linalg.CholeskySolve(a, b, dim) {
			for p := range b {
				b[p] = math.NaN() // reported as divergence below
			}
		}
		copy(f.v[j*dim:j*dim+dim], b)
	}
	return norms / float64(max(f.ni, 1))
}

// solvePaper runs Alg. 2 lines 14-21: VEpochs full-batch gradient steps of
// γ/|R| on (8) from stage 1's V, a fresh η_j per item and step. It returns
// the mean noise norm.
func solvePaper(ctx context.Context, f *factors, d *ratings.Dataset, cfg DPConfig, scale float64, r *rand.Rand, hook func(EpochStats)) (float64, error) {
	dim := f.dim
	byItem := d.ByItem()
	g := make([]float64, dim)
	eta := make([]float64, dim)
	step := cfg.PMF.LearnRate / float64(max(d.Len(), 1))
	var norms float64
	var draws int
	for ep := range cfg.VEpochs {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		for j := range f.ni {
			v := f.v[j*dim : j*dim+dim]
			users, vals := byItem.Row(j)
			dp.FillL2Laplace(r, scale, eta)
			norms += math.Sqrt(dot(eta, eta))
			draws++
			for p := range dim {
				g[p] = cfg.RegV*v[p] + eta[p]
			}
			for k, i := range users {
				u := f.u[int(i)*dim : int(i)*dim+dim]
				e := float64(vals[k]) - f.center - dot(u, v)
				for p := range dim {
					g[p] -= e * u[p]
				}
			}
			for p := range dim {
				v[p] -= step * g[p]
			}
		}
		if hook != nil {
			hook(EpochStats{Stage: 2, Epoch: ep + 1, Epochs: cfg.VEpochs, TrainRMSE: f.rmse(d)})
		}
	}
	return norms / float64(max(draws, 1)), nil
}

// PDPStats describes a PDP-PMF run.
type PDPStats struct {
	DPStats
	Threshold float64 // t
	Kept      int     // ratings the RSM sample kept
	// MaxEps is the largest per-rating guarantee, max_k min(ε_k, t), for
	// the paper's add/remove neighbours (Thm 6).
	MaxEps float64
}

// TrainPDP runs PDP-PMF (§5): the RSM sample of d (Alg. 1) keeps rating k
// with probability (e^{ε_k} − 1)/(e^t − 1) if ε_k < t, else 1, and DP-PMF
// at ε = t (Alg. 2) is trained on the sample. eps holds one ε per rating
// of d (budget.PDPSpec draws the paper's); choose t with budget.Threshold. The
// model covers all users and items of d. cfg.Eps is ignored.
func TrainPDP(ctx context.Context, d *ratings.Dataset, eps []float64, t float64, cfg DPConfig, hook func(EpochStats)) (*model.Model, PDPStats, error) {
	var st PDPStats
	if err := cfg.validate(false); err != nil {
		return nil, st, err
	}
	if len(eps) != d.Len() {
		return nil, st, fmt.Errorf("%w: %d budgets for %d ratings", ErrConfig, len(eps), d.Len())
	}
	if err := budget.ValidateBudgets(eps); err != nil {
		return nil, st, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if !(t > 0) || math.IsInf(t, 0) {
		return nil, st, fmt.Errorf("%w: threshold t = %g must be positive and finite", ErrConfig, t)
	}
	keep := rsm(d.Len(), eps, t, cfg.PMF.Seed)
	if len(keep) == 0 {
		return nil, st, fmt.Errorf("%w: the RSM sample kept no rating (t = %g)", ErrConfig, t)
	}
	sample := d.Subset(keep)
	m, dst, err := trainDP(ctx, sample, cfg, t, hook)
	if err != nil {
		return nil, st, err
	}
	st.DPStats, st.Threshold, st.Kept = dst, t, len(keep)
	for _, e := range eps {
		st.MaxEps = math.Max(st.MaxEps, math.Min(e, t))
	}
	return m, st, nil
}

// rsm is Alg. 1: the positions of the kept ratings.
func rsm(n int, eps []float64, t float64, seed uint64) []int {
	return dp.SampleKeep(rng.New(seed, rngRSM), eps, t, make([]int, 0, n))
}
