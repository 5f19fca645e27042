package sdcf

import (
	"errors"
	"fmt"
	"math"
)

// ErrConfig is wrapped by every error about an invalid Config.
var ErrConfig = errors.New("sdcf: invalid config")

// Loss is the training objective.
type Loss int

const (
	// Squared is the rating-prediction loss of eq. (1): e_ij = u_i·v_j − r_ij
	// on ratings centred at the user's own mean (on the device).
	Squared Loss = iota
	// BPR is the one-class pairwise loss of Rendle et al. (2009) as in
	// Lemma 2: every training rating is a positive.
	BPR
)

// String returns "squared" or "bpr".
func (l Loss) String() string {
	if l == BPR {
		return "bpr"
	}
	return "squared"
}

// Config configures Train.
type Config struct {
	Loss Loss
	// Dim is the latent dimension K.
	Dim int
	// Rounds is the number of training iterations t = 1..Rounds.
	Rounds int
	// LR0 and Gamma give the step η_t = LR0 / t^Gamma of eq. (5).
	LR0, Gamma float64
	// LambdaShape and LambdaRate are the Gamma prior of the diagonal
	// precisions Λ_u and Λ_v, drawn once per dimension from the seed and
	// public. The paper writes Gamma(1, 100); read as shape 1 and rate 100
	// (mean 0.01).
	LambdaShape, LambdaRate float64
	// Temp scales the Langevin noise: each gradient carries N(0, Temp·η_t I).
	// 1 is the paper's eq. (5)-(6).
	Temp float64
	// InitScale is the standard deviation of the initial factors.
	InitScale float64
	// Private selects SDMF / SD-BPRMF (two-stage randomized response);
	// without it every client uploads for exactly the items it rated.
	Private bool
	// EpsG is ε_g of Thm 3 (squared loss only); 0 means α = ∞, fake errors
	// drawn from the untruncated normal ("SDMF α = ∞", ε_g = −ln 1 = 0).
	EpsG float64
	// EpsI is the per-round budget ε_I of Thm 2.
	EpsI float64
	// EpsP is the permanent budget ε_P of Thm 1; 0 means 2·EpsI, as the
	// paper sets it.
	EpsP float64
	// Z is the expected number of uploads per client and round (eq. 12);
	// 0 means |R|/|U|, the paper's choice.
	Z float64
	// Dropout is the probability that a client is offline in a round: it
	// then neither uploads nor updates its user vector.
	Dropout float64
	// Workers is the number of client goroutines (0: all cores); the result
	// does not depend on it.
	Workers int
	// Seed fixes every random draw.
	Seed uint64
}

// DefaultConfig returns the defaults for loss: K = 50 for ratings, 10 for
// BPR; η_0 = 0.5 (10 for BPR), 100 rounds,
// γ = 0.6, ε_I = ε_g = 1.
func DefaultConfig(loss Loss) Config {
	c := Config{Loss: loss, Dim: 50, Rounds: 100, LR0: 0.5, Gamma: 0.6, LambdaShape: 1, LambdaRate: 100,
		Temp: 1, InitScale: 0.1, EpsG: 1, EpsI: 1}
	if loss == BPR {
		c.Dim, c.LR0 = 10, 10
	}
	return c
}

func (c Config) epsP() float64 {
	if c.EpsP == 0 {
		return 2 * c.EpsI
	}
	return c.EpsP
}

// Validate checks the fields of c.
func (c Config) Validate() error {
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	switch {
	case c.Loss != Squared && c.Loss != BPR:
		return fmt.Errorf("%w: unknown loss %d", ErrConfig, c.Loss)
	case c.Dim < 1:
		return fmt.Errorf("%w: Dim = %d must be ≥ 1", ErrConfig, c.Dim)
	case c.Rounds < 1:
		return fmt.Errorf("%w: Rounds = %d must be ≥ 1", ErrConfig, c.Rounds)
	case !(c.LR0 > 0) || !finite(c.LR0):
		return fmt.Errorf("%w: LR0 = %g must be positive and finite", ErrConfig, c.LR0)
	case !(c.Gamma >= 0) || !finite(c.Gamma):
		return fmt.Errorf("%w: Gamma = %g must be ≥ 0 and finite", ErrConfig, c.Gamma)
	case !(c.LambdaShape > 0) || !(c.LambdaRate > 0) || !finite(c.LambdaShape) || !finite(c.LambdaRate):
		return fmt.Errorf("%w: Λ prior Gamma(%g, %g) needs positive finite shape and rate", ErrConfig, c.LambdaShape, c.LambdaRate)
	case !(c.Temp >= 0) || !finite(c.Temp):
		return fmt.Errorf("%w: Temp = %g must be ≥ 0 and finite", ErrConfig, c.Temp)
	case !(c.InitScale >= 0) || !finite(c.InitScale):
		return fmt.Errorf("%w: InitScale = %g must be ≥ 0 and finite", ErrConfig, c.InitScale)
	case !(c.Dropout >= 0 && c.Dropout < 1):
		return fmt.Errorf("%w: Dropout = %g outside [0, 1)", ErrConfig, c.Dropout)
	case !(c.Z >= 0) || !finite(c.Z):
		return fmt.Errorf("%w: Z = %g must be ≥ 0 and finite", ErrConfig, c.Z)
	}
	if c.Private {
		switch {
		case !(c.EpsI > 0) || !finite(c.EpsI):
			return fmt.Errorf("%w: EpsI = %g must be positive and finite", ErrConfig, c.EpsI)
		case !(c.EpsP >= 0) || !finite(c.EpsP):
			return fmt.Errorf("%w: EpsP = %g must be ≥ 0 and finite", ErrConfig, c.EpsP)
		case !(c.EpsG >= 0) || !finite(c.EpsG):
			return fmt.Errorf("%w: EpsG = %g must be ≥ 0 and finite (0: α = ∞)", ErrConfig, c.EpsG)
		}
	}
	return nil
}
