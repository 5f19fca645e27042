package budget

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

// ErrSpec is wrapped by every error about an invalid privacy specification:
// bad generator parameters, invalid budgets or weights, a bad threshold.
var ErrSpec = errors.New("budget: invalid privacy specification")

// specStream is the rng path label of the specification generators, so
// their streams never coincide with a mechanism's stream for the same seed.
const specStream = 0x53504543 // "SPEC"

// Groups is a three-group privacy specification, the simulation of
// Jorgensen, Yu and Cormode (ICDE 2015) used by HDPMF and PDP-PMF.
//
// Each subject (a user, an item or a rating) is independently
// conservative with probability Conservative, moderate with probability
// Moderate and liberal otherwise (1 − Conservative − Moderate). A
// conservative subject's value is uniform in [Low, Mid), a moderate one's
// uniform in [Mid, High), a liberal one's exactly High. The value is an ε
// (PDP-PMF) or a privacy weight in (0, 1] (HDPMF).
//
// Membership is drawn independently per subject, so group sizes are
// binomial around the fractions rather than exact; the papers say only
// that subjects are divided "randomly" in the given ratios.
type Groups struct {
	Conservative, Moderate float64 // group fractions; liberal is the rest
	Low, Mid, High         float64 // group boundaries, 0 < Low ≤ Mid ≤ High
}

// DefaultPDP returns PDP-PMF's default per-rating specification (Zhang et
// al. 2019, §6.1, Tables 1-2): f_c = 0.54, f_m = 0.37, f_l = 0.09,
// ε_c = 0.1, ε_m = 0.2, ε_l = 1.0. Its mean ε is 0.393. (The paper writes
// the ranges as closed intervals [ε_c, ε_m] and [ε_m, ε_l]; for a
// continuous uniform draw the endpoints have probability zero.)
func DefaultPDP() Groups {
	return Groups{Conservative: 0.54, Moderate: 0.37, Low: 0.1, Mid: 0.2, High: 1.0}
}

// Validate checks that the fractions lie in [0, 1] and sum to at most 1 and
// that 0 < Low ≤ Mid ≤ High, all finite.
func (g Groups) Validate() error {
	if !(g.Conservative >= 0 && g.Conservative <= 1) || !(g.Moderate >= 0 && g.Moderate <= 1) {
		return fmt.Errorf("%w: group fractions %g and %g must lie in [0, 1]", ErrSpec, g.Conservative, g.Moderate)
	}
	if s := g.Conservative + g.Moderate; s > 1+1e-12 {
		return fmt.Errorf("%w: group fractions %g + %g = %g exceed 1", ErrSpec, g.Conservative, g.Moderate, s)
	}
	for _, v := range [...]float64{g.Low, g.Mid, g.High} {
		if !(v > 0) || math.IsInf(v, 0) {
			return fmt.Errorf("%w: group bounds %g, %g, %g must be positive and finite", ErrSpec, g.Low, g.Mid, g.High)
		}
	}
	if !(g.Low <= g.Mid && g.Mid <= g.High) {
		return fmt.Errorf("%w: group bounds must be ordered Low ≤ Mid ≤ High, got %g, %g, %g", ErrSpec, g.Low, g.Mid, g.High)
	}
	return nil
}

// Liberal returns the fraction of liberal subjects, 1 − Conservative − Moderate.
func (g Groups) Liberal() float64 { return math.Max(0, 1-g.Conservative-g.Moderate) }

// Mean returns the expected value of one draw.
func (g Groups) Mean() float64 {
	return g.Conservative*(g.Low+g.Mid)/2 + g.Moderate*(g.Mid+g.High)/2 + g.Liberal()*g.High
}

// fill draws len(dst) independent values. g must be valid.
func (g Groups) fill(dst []float64, r *rand.Rand) {
	c, cm := g.Conservative, g.Conservative+g.Moderate
	for k := range dst {
		switch u := r.Float64(); {
		case u < c:
			dst[k] = g.Low + (g.Mid-g.Low)*r.Float64()
		case u < cm:
			dst[k] = g.Mid + (g.High-g.Mid)*r.Float64()
		default:
			dst[k] = g.High
		}
	}
}

// HDPMFGroups is HDPMF's heterogeneous specification (Hu and Fang, §5.1.3,
// Table 2): users and items each fall into three groups with privacy
// weights β_i (users) and γ_j (items) in (0, 1], and rating (i, j) gets
// weight W_ij = β_i·γ_j and budget ε_ij = W_ij·EpsMax.
//
// The relation is the paper's Definition 2, heterogeneous (ε, v)-DP: record
// k is protected at ε·v_k, where ε is the maximum budget of all records and
// v_k ∈ (0, 1] its weight; the stretching mechanism multiplies rating
// (i, j) by W_ij and adds noise calibrated to EpsMax alone.
type HDPMFGroups struct {
	User, Item Groups  // weight groups; High must be at most 1
	EpsMax     float64 // maximum budget ε, the budget of weight 1
}

// DefaultHDPMF returns HDPMF's defaults (Table 2): users conservative 0.54
// with β in [0.1, 0.5), moderate 0.37 with β in [0.5, 1), liberal 0.09 with
// β = 1; items one third each with γ in [0.1, 0.5), [0.5, 1) and 1;
// EpsMax = 1.
func DefaultHDPMF() HDPMFGroups {
	return HDPMFGroups{
		User:   Groups{Conservative: 0.54, Moderate: 0.37, Low: 0.1, Mid: 0.5, High: 1},
		Item:   Groups{Conservative: 1.0 / 3, Moderate: 1.0 / 3, Low: 0.1, Mid: 0.5, High: 1},
		EpsMax: 1,
	}
}

// Validate checks both weight groups (bounds within (0, 1]) and EpsMax.
func (h HDPMFGroups) Validate() error {
	for _, x := range [...]struct {
		name string
		g    Groups
	}{{"user", h.User}, {"item", h.Item}} {
		if err := x.g.Validate(); err != nil {
			return fmt.Errorf("%s weights: %w", x.name, err)
		}
		if x.g.High > 1 {
			return fmt.Errorf("%w: %s weights: High = %g, weights must lie in (0, 1]", ErrSpec, x.name, x.g.High)
		}
	}
	if !(h.EpsMax > 0) || math.IsInf(h.EpsMax, 0) {
		return fmt.Errorf("%w: EpsMax = %g must be positive and finite", ErrSpec, h.EpsMax)
	}
	return nil
}

// HDPWeights is a user × item privacy-weight specification: W(u, i) =
// User[u]·Item[i] and ε(u, i) = W(u, i)·EpsMax. It covers the whole index
// space of the dataset it was made for, so it answers for test pairs too
// (HDPMF divides predictions by W at prediction time).
type HDPWeights struct {
	User   []float64 // β per user index, in (0, 1]
	Item   []float64 // γ per item index, in (0, 1]
	EpsMax float64   // budget of weight 1
}

// HDPMFSpec draws an HDPMF specification for d's user and item index
// spaces. Users and items use independent streams derived from seed, so
// changing the item groups does not change the user weights.
func HDPMFSpec(d *ratings.Dataset, cfg HDPMFGroups, seed uint64) (*HDPWeights, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w := &HDPWeights{
		User:   make([]float64, d.NumUsers()),
		Item:   make([]float64, d.NumItems()),
		EpsMax: cfg.EpsMax,
	}
	cfg.User.fill(w.User, rng.New(seed, specStream, 1))
	cfg.Item.fill(w.Item, rng.New(seed, specStream, 2))
	return w, nil
}

// HDPMFItemWeights returns the item weights γ that HDPMFSpec draws for a
// catalog of numItems items with cfg and seed: they do not depend on the
// users, so a server that knows only the catalog can draw them.
func HDPMFItemWeights(numItems int, cfg HDPMFGroups, seed uint64) ([]float64, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w := make([]float64, numItems)
	cfg.Item.fill(w, rng.New(seed, specStream, 2))
	return w, nil
}

// W returns the privacy weight β_u·γ_i of the pair (u, i).
func (w *HDPWeights) W(u, i int32) float64 { return w.User[u] * w.Item[i] }

// Eps returns the budget W(u, i)·EpsMax of the pair (u, i).
func (w *HDPWeights) Eps(u, i int32) float64 { return w.User[u] * w.Item[i] * w.EpsMax }

// RatingWeights returns W for every rating of d, indexed like d.Values.
func (w *HDPWeights) RatingWeights(d *ratings.Dataset) []float64 {
	out := make([]float64, d.Len())
	for k := range out {
		out[k] = w.User[d.Users[k]] * w.Item[d.Items[k]]
	}
	return out
}

// RatingEps returns ε for every rating of d, indexed like d.Values.
func (w *HDPWeights) RatingEps(d *ratings.Dataset) []float64 {
	out := w.RatingWeights(d)
	for k := range out {
		out[k] *= w.EpsMax
	}
	return out
}

// Validate checks that every weight lies in (0, 1] and EpsMax is positive
// and finite.
func (w *HDPWeights) Validate() error {
	if err := ValidateWeights(w.User); err != nil {
		return fmt.Errorf("user weights: %w", err)
	}
	if err := ValidateWeights(w.Item); err != nil {
		return fmt.Errorf("item weights: %w", err)
	}
	if !(w.EpsMax > 0) || math.IsInf(w.EpsMax, 0) {
		return fmt.Errorf("%w: EpsMax = %g must be positive and finite", ErrSpec, w.EpsMax)
	}
	return nil
}

// PDPSpec draws PDP-PMF's per-rating specification: one ε per rating of d,
// indexed like d.Values, each rating's group drawn independently.
func PDPSpec(d *ratings.Dataset, g Groups, seed uint64) ([]float64, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	eps := make([]float64, d.Len())
	g.fill(eps, rng.New(seed, specStream, 3))
	return eps, nil
}

// Uniform returns n copies of eps: the same budget for every user, item or
// rating.
func Uniform(n int, eps float64) ([]float64, error) {
	if err := checkEps(eps); err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, fmt.Errorf("%w: negative count %d", ErrSpec, n)
	}
	out := make([]float64, n)
	for k := range out {
		out[k] = eps
	}
	return out, nil
}

// epsProblem describes what is wrong with budget e, or returns "".
func epsProblem(e float64) string {
	if !(e > 0) || math.IsInf(e, 0) {
		return fmt.Sprintf("ε = %g must be positive and finite", e)
	}
	return ""
}

// weightProblem describes what is wrong with weight w, or returns "".
func weightProblem(w float64) string {
	if !(w > 0 && w <= 1) {
		return fmt.Sprintf("weight %g outside (0, 1]", w)
	}
	return ""
}

func checkEps(e float64) error {
	if p := epsProblem(e); p != "" {
		return fmt.Errorf("%w: %s", ErrSpec, p)
	}
	return nil
}

func checkWeight(w float64) error {
	if p := weightProblem(w); p != "" {
		return fmt.Errorf("%w: %s", ErrSpec, p)
	}
	return nil
}

// ValidateBudgets checks that every ε is positive and finite; the error
// names the first bad index.
func ValidateBudgets(eps []float64) error {
	for k, e := range eps {
		if err := checkEps(e); err != nil {
			return fmt.Errorf("index %d: %w", k, err)
		}
	}
	return nil
}

// ValidateWeights checks that every weight lies in (0, 1]; the error names
// the first bad index.
func ValidateWeights(w []float64) error {
	for k, x := range w {
		if err := checkWeight(x); err != nil {
			return fmt.Errorf("index %d: %w", k, err)
		}
	}
	return nil
}

// Threshold reduces per-rating budgets to the single threshold t of the
// sample mechanism: mode "min", "mean" or "max" of eps, or a positive
// number given as text ("0.7"). PDP-PMF and HDPMF's PDPMF baseline use the
// mean; DPMF uses the min.
func Threshold(eps []float64, mode string) (float64, error) {
	mode = strings.TrimSpace(mode)
	switch mode {
	case "min", "mean", "max":
	default:
		t, err := strconv.ParseFloat(mode, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: threshold %q is neither min, mean, max nor a number", ErrSpec, mode)
		}
		if err := checkEps(t); err != nil {
			return 0, fmt.Errorf("threshold: %w", err)
		}
		return t, nil
	}
	if len(eps) == 0 {
		return 0, fmt.Errorf("%w: threshold %q of no budgets", ErrSpec, mode)
	}
	if err := ValidateBudgets(eps); err != nil {
		return 0, err
	}
	lo, hi, sum := math.Inf(1), math.Inf(-1), 0.0
	for _, e := range eps {
		lo, hi, sum = math.Min(lo, e), math.Max(hi, e), sum+e
	}
	switch mode {
	case "min":
		return lo, nil
	case "max":
		return hi, nil
	}
	return sum / float64(len(eps)), nil
}
