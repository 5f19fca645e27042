package sdcf

import (
	"errors"
	"fmt"
	"io"
	"math"
)

// ErrConfig is wrapped by every error about an invalid Config.
var ErrConfig = errors.New("sdcf: invalid config")

// ErrDiverged is wrapped by the error of a run whose factors blew up (a step
// too large for the data): Train stops instead of returning NaNs.
var ErrDiverged = errors.New("sdcf: training diverged")

// maxFactor bounds every coordinate of U and V; a larger one means the run
// diverged (trained factors are below 10 on every MovieLens set).
const maxFactor = 1e3

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

// Config configures Train. DefaultConfig gives the defaults, chosen on a
// validation split of ML-100K training data (see DefaultConfig).
type Config struct {
	Loss Loss
	// Dim is the latent dimension K (including the item-offset coordinate
	// when ItemBias is set).
	Dim int
	// Rounds is the number of training iterations t = 1..Rounds.
	Rounds int
	// LR0 and Gamma give the step η_t = LR0 / t^Gamma of eq. (5). The step
	// multiplies a mean gradient: the client averages over its own ratings
	// (Alg. 1, line 15), the server over the uploads it receives for an item.
	LR0, Gamma float64
	// Lambda, when positive, fixes the diagonal precisions Λ_u = Λ_v =
	// Lambda·I. When 0 they are drawn once per dimension from Gamma(shape
	// LambdaShape, rate LambdaRate), public, as the paper's "Gamma(1, 100)"
	// (read as shape 1, rate 100: mean 0.01; as scale 100 the mean is 100,
	// which in the mean-gradient step shrinks every factor to zero). A
	// shape-1 Gamma is an exponential: some dimensions get Λ near 0 and
	// overfit, which costs 0.03-0.07 RMSE on validation (see DefaultConfig).
	Lambda                  float64
	LambdaShape, LambdaRate float64
	// Temp scales the Langevin noise: each gradient carries N(0, Temp·η_t I).
	// 1 is eq. (5)-(6) literally; at the paper's η_0 = 5·10⁻⁶ that noise has
	// variance 5·10⁻⁶, and Temp = 10⁻⁴ at η_0 = 1 is of that order.
	Temp float64
	// InitScale is the standard deviation of the initial factors.
	InitScale float64
	// ItemBias fixes the first coordinate of every u_i at 1 (on the device;
	// it is neither updated nor noised), so that the first coordinate of v_j
	// learns item j's offset from the same uploads. The paper's u_i·v_j has
	// no offset; with the user's own mean kept on the device this is the
	// item half of a biased MF, at no privacy cost (uploads are unchanged in
	// form).
	ItemBias bool
	// ServerStep is κ in the server's update v_j ← v_j − η_t Λ_v v_j −
	// κ·(mean over the uploads received for j of their data part), where
	// the data part of an upload is grad(v_j) − η_t Λ_v v_j (the server
	// knows η_t, Λ_v and v_j, so it can take the prior term out). With κ = 1
	// this is exactly the mean of the received gradients. Under SDMF about
	// 94% of the uploads are fakes, so the mean of what arrives carries only
	// the fraction of real gradients (about |R|/(|U|·|V|), 6% on ML-100K) of
	// the data signal while its prior term counts in full: κ > 1 gives back
	// part of the diluted step. 0 means the default: 4 for SDMF, else 1.
	ServerStep float64
	// ServerPseudo is n0 in the server's average: the data part is summed
	// over the n uploads received for an item and divided by n + n0, as if
	// n0 zero gradients had also arrived. It keeps an item that few
	// clients sent (a single rater takes a step of η_t|u_i|², which diverges
	// above 2) from overshooting; with ~50 uploads per item under SDMF it
	// hardly matters there.
	ServerPseudo float64
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
	// then neither uploads nor updates its user vector, and the server
	// averages whatever arrives.
	Dropout float64
	// Workers is the number of client goroutines (0: all cores); the result
	// does not depend on it.
	Workers int
	// Seed fixes every random draw.
	Seed uint64
	// Transcript, when not nil, receives everything the server sends and
	// receives: one record per round with the broadcast (V and the step
	// "eta") and the uploads the server aggregated, in
	// protocol.TranscriptWriter's format (read it back with
	// protocol.NewTranscriptReader). Writing it does not change the run.
	// The header's Method is MethodName and its Meta holds the public
	// parameters a server knows: "loss", "private", "dim", "rounds", "lr0",
	// "gamma", "temp", "item_bias", "server_step" and "server_pseudo" (κ
	// and n0 in effect), "dropout", "lambda_u" and "lambda_v" (the K
	// precisions, comma-separated) and, when Private, "eps_i", "eps_p",
	// "eps_g" and "z" (in effect, defaults resolved). The header's Seed is
	// the simulation's: the clients' secrets derive from it, so an attack
	// that plays the server must not use it.
	Transcript io.Writer
}

// MethodName returns the name of the variant c trains, as the method
// registry calls it: "sgld-mf", "sdmf", "sdmf-alpha-inf" (EpsG = 0),
// "bpr-sgld" or "sd-bprmf".
func (c Config) MethodName() string {
	switch {
	case c.Loss == BPR && c.Private:
		return "sd-bprmf"
	case c.Loss == BPR:
		return "bpr-sgld"
	case c.Private && c.EpsG == 0:
		return "sdmf-alpha-inf"
	case c.Private:
		return "sdmf"
	}
	return "sgld-mf"
}

// DefaultConfig returns the defaults for loss, without or with the
// two-stage randomized response (SDMF, SD-BPRMF). They were chosen on a
// validation split of training data only: ML-100K is split 80/20 with seed
// 1 (as `privrec evaluate --split random:0.8 --seed 1`), its training part
// again 80/20 with seed 2, and the candidates are scored on that validation
// part (for BPR: leave-one-out AUC within the training part). The test part
// is never read. `PRIVREC_TUNE=all go test -run TestTuneDefaults -v ./sdcf/`
// reruns the search; its figures (validation RMSE):
//
//   - K = 50 (10 for BPR), 100 rounds, γ = 0.6: the paper's.
//   - SGLD MF: η_0 = 3 with n0 = 30: 0.942 (the defaults). η_0 = 2: 0.948
//     (n0 = 0), 0.946 (n0 = 10); η_0 = 1.5: 0.952; η_0 = 3 with n0 = 0
//     diverges (an item with one rater overshoots).
//   - Λ = 0.1 fixed: 0.942 (0.05: 0.966, 0.2: 0.968); the paper's
//     per-dimension draws (Gamma(1, rate 10), mean 0.1): 0.994 for SGLD MF,
//     0.978 against 0.977 for SDMF.
//   - Temp = 10⁻⁴: 10⁻² costs SGLD MF 0.001 and SDMF 0.007 (0.985) and
//     makes SDMF diverge sooner.
//   - ItemBias: SGLD MF 0.945 → 0.942, SDMF 1.006 → 0.977.
//   - SDMF (ε_I = 1; ε_g = 4 and α = ∞): η_0 = 1.5, κ = 4, n0 = 10 gives
//     0.978 and 0.989 (ε_g = 1: 0.977). κ = 1 (the plain mean of what
//     arrives): 1.003 and 1.002; κ = 2: 0.991, 0.992; η_0 = 1, κ = 8:
//     0.973 but diverges at α = ∞.
//   - BPR (leave-one-out AUC): η_0 = 10 (30 diverges), Λ = 0.03, n0 = 10:
//     BPR-SGLD 0.931, SD-BPRMF 0.896 (Λ = 0.1: 0.904, 0.865; the paper's
//     Gamma(1, rate 100) draws: 0.929, 0.869).
//
// Setting Private on a non-private default keeps the non-private steps:
// start from DefaultConfig(loss, true) instead.
func DefaultConfig(loss Loss, private bool) Config {
	c := Config{Loss: loss, Dim: 50, Rounds: 100, LR0: 3, Gamma: 0.6, Lambda: 0.1, LambdaShape: 1, LambdaRate: 100,
		Temp: 1e-4, InitScale: 0.1, ItemBias: true, ServerStep: 1, ServerPseudo: 30, Private: private, EpsG: 1, EpsI: 1}
	if private {
		c.LR0, c.ServerStep, c.ServerPseudo = 1.5, 4, 10
	}
	if loss == BPR {
		c.Dim, c.LR0, c.Lambda, c.ServerStep, c.ServerPseudo = 10, 10, 0.03, 1, 10
	}
	return c
}

func (c Config) serverStep() float64 {
	switch {
	case c.ServerStep > 0:
		return c.ServerStep
	case c.Private && c.Loss == Squared:
		return 4
	}
	return 1
}

// EffectiveEpsP returns the ε_P a run of c uses: EpsP, or 2·EpsI when
// EpsP is 0.
func (c Config) EffectiveEpsP() float64 {
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
	case !(c.Lambda >= 0) || !finite(c.Lambda):
		return fmt.Errorf("%w: Lambda = %g must be ≥ 0 and finite (0: draw Λ from the Gamma prior)", ErrConfig, c.Lambda)
	case c.Lambda == 0 && (!(c.LambdaShape > 0) || !(c.LambdaRate > 0) || !finite(c.LambdaShape) || !finite(c.LambdaRate)):
		return fmt.Errorf("%w: Λ prior Gamma(%g, %g) needs positive finite shape and rate", ErrConfig, c.LambdaShape, c.LambdaRate)
	case !(c.Temp >= 0) || !finite(c.Temp):
		return fmt.Errorf("%w: Temp = %g must be ≥ 0 and finite", ErrConfig, c.Temp)
	case !(c.InitScale >= 0) || !finite(c.InitScale):
		return fmt.Errorf("%w: InitScale = %g must be ≥ 0 and finite", ErrConfig, c.InitScale)
	case !(c.Dropout >= 0 && c.Dropout < 1):
		return fmt.Errorf("%w: Dropout = %g outside [0, 1)", ErrConfig, c.Dropout)
	case !(c.ServerStep >= 0) || !finite(c.ServerStep):
		return fmt.Errorf("%w: ServerStep = %g must be ≥ 0 and finite (0: default)", ErrConfig, c.ServerStep)
	case !(c.ServerPseudo >= 0) || !finite(c.ServerPseudo):
		return fmt.Errorf("%w: ServerPseudo = %g must be ≥ 0 and finite", ErrConfig, c.ServerPseudo)
	case c.ItemBias && c.Dim < 2:
		return fmt.Errorf("%w: ItemBias needs Dim ≥ 2 (the first coordinate is the item offset)", ErrConfig)
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
