package dpals

import (
	"fmt"
	"math"

	"github.com/privrec/privrec/protocol"
)

// Config configures Train. Ratings are on the method registry's internal
// 1..5 scale; every bound below is in those units.
type Config struct {
	// Eps and Delta are the user-level (ε, δ) of the whole run: every
	// release is accounted, and the noise is calibrated from them and the
	// number of releases alone, never from the data. Eps > 0, Delta in
	// (0, 1).
	Eps, Delta float64
	// Dim is the latent dimension K; 0 trains the biases-only model
	// (global mean, item biases released, user biases solved on the
	// device).
	Dim int
	// BiasRounds is the number of rounds that release item-bias
	// statistics (sums and weighted counts) before the factor rounds,
	// ≥ 1.
	BiasRounds int
	// PoolBias estimates the item biases of each bias round from the sums
	// and counts of every bias round so far (post-processing), not the
	// round's alone.
	PoolBias bool
	// Rounds is the number of factor rounds (alternating least squares
	// with noisy per-item Gramians and right-hand sides), ≥ 0; ignored
	// when Dim is 0.
	Rounds int
	// MaxRatings is c, the largest number of a user's ratings that enter
	// the released statistics (a uniform sample of them, drawn on the
	// device); 0 means all. Every rating still enters the user's own
	// solve on the device.
	MaxRatings int
	// Clip bounds the residual |r − μ − b_u (− b_j)| a user contributes,
	// > 0 (rating units).
	Clip float64
	// ClipNorm, when in (0, Clip), bounds the L2 norm of a user's whole
	// weighted residual vector (w_uj·y_uj over the user's contributed
	// ratings), scaling it down, as DP-SGD clips a gradient: the
	// sensitivity of the residual sums is then ClipNorm instead of Clip,
	// and of the warm start ClipNorm² instead of Clip². A typical user's
	// norm is the weighted RMS of the residuals, about 0.85 on ML-1M.
	// 0: Clip bounds it.
	ClipNorm float64
	// NormU bounds ‖u‖ of the user vectors contributed to the Gramians and
	// right-hand sides (vectors are scaled down to it), > 0.
	NormU float64
	// Beta is the exponent of the adaptive per-user weights: a user's
	// ratings are weighted ∝ (noisy count of the item)^(−Beta), normalized
	// so that the squares sum to 1 over the user's contributed ratings
	// (Krichene et al. 2023); 0 weights them uniformly (1/√n_u).
	Beta float64
	// FracMean is the share of the zCDP budget ρ spent on the noisy global
	// mean, in (0, 1).
	FracMean float64
	// FracBias is the share of ρ spent on the bias rounds (the rest, after
	// FracMean, goes to the factor rounds; all of it when Dim is 0 or
	// Rounds is 0), in (0, 1).
	FracBias float64
	// FracGram is the share of a factor round's ρ spent on the Gramians
	// (the rest on the right-hand sides), in (0, 1).
	FracGram float64
	// RegUser is the ridge of the user vectors in the device's solve, > 0;
	// RegUserBias the ridge of the user bias, ≥ 0.
	RegUser, RegUserBias float64
	// RegItem is the ridge of the item solve, in weighted ratings, ≥ 0:
	// in the bias rounds' posterior mean it stands for the items' own
	// sampling variance (RegItem·τ²·c for a weighted count c), beside the
	// release's noise variance, which the posterior uses as the mechanism
	// added it. RegNoise adds RegNoise·σ (the noise of the released
	// Gramian entries, or counts) to the factor rounds' ridge, so it
	// grows with the noise and items with few raters shrink: the factors
	// to 0 and the item bias towards the bias rounds' estimate. ≥ 0.
	RegItem, RegNoise float64
	// TopItems, when > 0, restricts the factor rounds to the TopItems
	// items with the largest noisy counts of the last bias round (a
	// post-processing): users spend their weight on those items only, and
	// the others keep v_j = 0 and the bias rounds' b_j. 0: all items.
	TopItems int
	// SharedGram replaces each item's released Gramian by its released
	// weighted count times one global Gramian of the user vectors (one
	// small release summed over all users): per item only K + 2 noisy
	// numbers instead of (K+1)(K+2)/2 + K + 1.
	SharedGram bool
	// UserFeatures, 0..3, gives each device that many public item
	// features to fit its own coefficients on in its final solve (no
	// release: the user's own ratings and public quantities only): 1 the
	// item bias, 2 also the standardized log of the item's released count,
	// 3 also the item's standardized release year from its title in the
	// public catalog (0 when titles are absent).
	UserFeatures int
	// RegFeature is the ridge of those coefficients, > 0 when
	// UserFeatures > 0.
	RegFeature float64
	// InitItems, when > 0, warm-starts the item factors of the InitItems
	// items with the largest noisy counts by the top Dim eigenvectors of
	// a noisy item-item second-moment matrix of the users' residuals (one
	// release); 0 starts from public random factors.
	InitItems int
	// FracInit is the share of the factor budget (after the mean and the
	// bias rounds) spent on the warm start when Rounds > 0, in (0, 1).
	FracInit float64
	// InitFloor keeps only the warm start's components whose eigenvalue
	// exceeds InitFloor times the noise matrix's spectral norm (2σ√m),
	// ≥ 0.
	InitFloor float64
	// InitScale is the standard deviation of the initial item factors
	// (public random numbers), > 0.
	InitScale float64
	// Aggregation is how the server receives the clients' statistics:
	// AggIdeal (the default: only their sums, the ideal functionality of
	// secure aggregation, to which the server adds the noise), AggMasked
	// (the integer path: quantized dense vectors with the clients'
	// Skellam noise shares, summed by SecAgg+; see masked.go) or AggOff
	// (it reads every user's vector, and the claim does not hold against
	// it).
	Aggregation protocol.Aggregation
	// Cohort, when > 0, runs each training round (the global mean, the
	// bias rounds, the warm start and the factor rounds) over a cohort of
	// Cohort users out of the enrolled population, picked by the server
	// (in process: a seeded uniform choice among the users whose limits
	// allow the round); the others sit the round out. 0: every user in
	// every round (a roster run). Sums and counts are over the cohort;
	// the noise, fixed by each round's ρ and sensitivity, is not.
	Cohort int
	// RoundsPerUser, when > 0, is the most training rounds one user's
	// device answers in a run (protocol.Participation.MaxRounds), a limit
	// the device enforces whatever cohorts the server picks. The rounds'
	// ρ, in the proportions the Frac fields set, are scaled so that the
	// costliest set of rounds the limits let one user answer spends
	// exactly (Eps, Delta): no amplification by sampling is assumed. 0:
	// every round.
	RoundsPerUser int
	// MinGap, when > 1, is the least difference between the numbers of
	// two training rounds one device answers
	// (protocol.Participation.MinGap), enforced by the device; the
	// accounting takes the costliest set of rounds that respects it. 0 or
	// 1: none.
	MinGap int
}

// Participation returns the run's participation limits (the zero value
// for a roster run), which the devices enforce.
func (c Config) Participation() protocol.Participation {
	return protocol.Participation{Cohort: c.Cohort, MaxRounds: c.RoundsPerUser, MinGap: c.MinGap}
}

// limited reports whether the devices' limits bound the rounds one user
// answers below the whole schedule, so that the accounting composes the
// costliest allowed set of rounds rather than every round.
func (c Config) limited() bool { return c.Participation().Limited() }

// DefaultConfig returns the defaults of dp-als at ε = 1, δ = 1e-6, chosen
// on a validation part (10%) of ML-1M's random 80% training part (dpals
// TestTune; the choice is not accounted): eight pooled bias rounds, then a
// spectral warm start on the 60 most rated items with two factors, no
// factor rounds, and three public item features (the item bias, the log
// of its noisy count and its release year from the public catalog) on
// which each device fits its own coefficients. Validation RMSE at ε = 1,
// three seeds: 0.9337 (0.9427 with the first two features only, 0.9607
// with none and ClipNorm 1.1); the biases-only model reaches 0.9326,
// so at ε ≤ 2 on ML-1M the factors do not pay for their share of the
// budget; at ε ≥ 5 they gain (see docs/results/frontier).
func DefaultConfig() Config {
	return Config{
		Eps: 1, Delta: 1e-6,
		Dim: 2, BiasRounds: 8, PoolBias: true, Rounds: 0, MaxRatings: 0,
		Clip: 3, ClipNorm: 0.9, NormU: 1, Beta: 0,
		FracMean: 0.02, FracBias: 0.9, FracGram: 0.2,
		RegUser: 10, RegUserBias: 8,
		RegItem: 1, RegNoise: 1.5,
		TopItems: 500, SharedGram: true,
		InitItems: 60, FracInit: 0.5, InitFloor: 1, InitScale: 0.5,
		UserFeatures: 3, RegFeature: 5,
		Aggregation: protocol.AggIdeal,
	}
}

// BiasesConfig returns the defaults of the biases-only model dp-biases at
// ε = 1, δ = 1e-6, chosen the same way (validation RMSE 0.9326, 0.9600
// without the user features): eight pooled bias rounds on the whole
// budget but the global mean's, and the three user features.
func BiasesConfig() Config {
	c := DefaultConfig()
	c.Dim, c.Rounds, c.InitItems, c.TopItems, c.SharedGram = 0, 0, 0, 0, false
	return c
}

// Validate reports an invalid field.
func (c Config) Validate() error {
	fin := func(x float64) bool { return !math.IsInf(x, 0) && !math.IsNaN(x) }
	in01 := func(x float64) bool { return x > 0 && x < 1 }
	switch {
	case !(c.Eps > 0) || !fin(c.Eps):
		return fmt.Errorf("dpals: Eps = %g must be > 0 and finite", c.Eps)
	case !in01(c.Delta):
		return fmt.Errorf("dpals: Delta = %g must be in (0, 1)", c.Delta)
	case c.Dim < 0 || c.Dim > 256:
		return fmt.Errorf("dpals: Dim = %d must be in 0..256", c.Dim)
	case c.BiasRounds < 1 || c.BiasRounds > 100:
		return fmt.Errorf("dpals: BiasRounds = %d must be in 1..100", c.BiasRounds)
	case c.Rounds < 0 || c.Rounds > 100:
		return fmt.Errorf("dpals: Rounds = %d must be in 0..100", c.Rounds)
	case c.MaxRatings < 0:
		return fmt.Errorf("dpals: MaxRatings = %d must be ≥ 0", c.MaxRatings)
	case !(c.Clip > 0) || !fin(c.Clip):
		return fmt.Errorf("dpals: Clip = %g must be > 0 and finite", c.Clip)
	case !(c.ClipNorm >= 0) || !fin(c.ClipNorm):
		return fmt.Errorf("dpals: ClipNorm = %g must be ≥ 0 and finite", c.ClipNorm)
	case !(c.NormU > 0) || !fin(c.NormU):
		return fmt.Errorf("dpals: NormU = %g must be > 0 and finite", c.NormU)
	case !(c.Beta >= 0) || !fin(c.Beta):
		return fmt.Errorf("dpals: Beta = %g must be ≥ 0 and finite", c.Beta)
	case !in01(c.FracMean) || !in01(c.FracBias) || !in01(c.FracGram):
		return fmt.Errorf("dpals: FracMean = %g, FracBias = %g, FracGram = %g must each be in (0, 1)", c.FracMean, c.FracBias, c.FracGram)
	case c.FracMean+c.FracBias >= 1 && c.Dim > 0 && (c.Rounds > 0 || c.InitItems > 0):
		return fmt.Errorf("dpals: FracMean + FracBias = %g leaves nothing for the factor rounds", c.FracMean+c.FracBias)
	case !(c.RegUser > 0) || !fin(c.RegUser) || !(c.RegUserBias >= 0) || !fin(c.RegUserBias):
		return fmt.Errorf("dpals: RegUser = %g must be > 0, RegUserBias = %g ≥ 0", c.RegUser, c.RegUserBias)
	case !(c.RegItem >= 0) || !fin(c.RegItem) || !(c.RegNoise >= 0) || !fin(c.RegNoise):
		return fmt.Errorf("dpals: RegItem = %g and RegNoise = %g must be ≥ 0 and finite", c.RegItem, c.RegNoise)
	case c.RegItem == 0 && c.RegNoise == 0:
		return fmt.Errorf("dpals: RegItem and RegNoise are both 0: the item solve needs a ridge")
	case c.InitItems < 0 || c.InitItems > 5000:
		return fmt.Errorf("dpals: InitItems = %d must be in 0..5000", c.InitItems)
	case c.InitItems > 0 && c.Rounds > 0 && !in01(c.FracInit):
		return fmt.Errorf("dpals: FracInit = %g must be in (0, 1)", c.FracInit)
	case !(c.InitFloor >= 0) || !fin(c.InitFloor):
		return fmt.Errorf("dpals: InitFloor = %g must be ≥ 0 and finite", c.InitFloor)
	case c.UserFeatures < 0 || c.UserFeatures > 3:
		return fmt.Errorf("dpals: UserFeatures = %d must be in 0..3", c.UserFeatures)
	case c.UserFeatures > 0 && (!(c.RegFeature > 0) || !fin(c.RegFeature)):
		return fmt.Errorf("dpals: RegFeature = %g must be > 0 and finite when UserFeatures > 0", c.RegFeature)
	case c.TopItems < 0:
		return fmt.Errorf("dpals: TopItems = %d must be ≥ 0", c.TopItems)
	case !(c.InitScale > 0) || !fin(c.InitScale):
		return fmt.Errorf("dpals: InitScale = %g must be > 0 and finite", c.InitScale)
	case c.Aggregation != protocol.AggIdeal && c.Aggregation != protocol.AggOff && c.Aggregation != protocol.AggMasked:
		return fmt.Errorf("dpals: aggregation %v: want masked, ideal or off", c.Aggregation)
	case c.Cohort < 0 || c.RoundsPerUser < 0 || c.MinGap < 0:
		return fmt.Errorf("dpals: Cohort = %d, RoundsPerUser = %d, MinGap = %d must each be ≥ 0", c.Cohort, c.RoundsPerUser, c.MinGap)
	}
	return nil
}
