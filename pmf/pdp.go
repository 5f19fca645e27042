package pmf

import "github.com/privrec/privrec/budget"

// PDPConfig configures PDP-PMF (Zhang et al. 2019, Alg. 1-2): each rating
// gets a personal budget ε_k from a simulated privacy specification,
// ratings are sampled with the sample mechanism at threshold t, and
// DP-PMF's V stage runs at ε = t on what was kept. A rating k spends
// min(ε_k, t) against its addition or removal and twice that for a changed
// value.
type PDPConfig struct {
	// DPConfig is the DP-PMF configuration of the stages; its Eps is not
	// used (the V stage runs at ε = t).
	DPConfig
	// Groups gives the fractions of conservative and moderate ratings and
	// the ε ranges of each group (the paper's ε_c, ε_m, ε_l).
	Groups budget.Groups
	// Threshold is t: "mean", "min" or "max" of the ratings' ε, or a
	// number.
	Threshold string
	// SpecSeed seeds the simulated specification. It is public: it is not
	// drawn from the data.
	SpecSeed uint64
}

// DefaultPDPConfig returns DP-PMF's defaults, the paper's groups
// (budget.DefaultPDP), threshold "mean" and SpecSeed 1.
func DefaultPDPConfig() PDPConfig {
	return PDPConfig{DPConfig: DefaultDPConfig(), Groups: budget.DefaultPDP(), Threshold: "mean", SpecSeed: 1}
}
