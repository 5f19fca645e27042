package method

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

// ErrNotTunable is wrapped by Tune's error for a method that has no knob to
// tune (the baselines, Gibbs sampling) or that ranks instead of rating.
var ErrNotTunable = errors.New("nothing to tune")

// A Param is the value of one tuned hyperparameter, by its field name.
type Param struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
}

// A Candidate is one point of a tuning grid: the values it sets over the
// base config.
type Candidate []Param

// String formats c as "name=value" pairs.
func (c Candidate) String() string {
	parts := make([]string, len(c))
	for k, p := range c {
		parts[k] = p.Name + "=" + ftoa(p.Value)
	}
	return strings.Join(parts, " ")
}

// tuneAxis is one tuned knob: its values are the base value times factors.
type tuneAxis struct {
	name    string
	factors []float64
}

// Step sizes span 16× around the base; regularization 100×.
var (
	stepFactors = []float64{0.25, 0.5, 1, 2, 4}
	regFactors  = []float64{0.1, 1, 10}
)

// tuneAxes are the knobs each method family tunes. Everything else (the
// dimension, the rounds, every ε) stays as the base config sets it: the
// rounds and ε set the privacy cost, the dimension the model size.
var tuneAxes = func() map[string][]tuneAxis {
	lrReg := []tuneAxis{{"lr", stepFactors}, {"reg", regFactors}}
	// SDCF: the step η_0 of η_t = η_0/t^γ and the prior precision Λ.
	sdcf := []tuneAxis{{"lr0", stepFactors}, {"lambda", regFactors}}
	// LDP-OP's default λ is the paper's 1e-8, in effect none: its grid
	// spans six orders of magnitude, up to 1e-2.
	ldpop := []tuneAxis{{"lr", stepFactors}, {"reg", []float64{1, 1e3, 1e6}}}
	m := map[string][]tuneAxis{}
	for _, n := range []string{"mf", "fm", "pmf", "dp-pmf", "pdp-pmf", "hdpmf", "dpmf", "pdpmf"} {
		m[n] = lrReg
	}
	for _, n := range []string{"sgld-mf", "sdmf", "sdmf-alpha-inf", "isgld", "sd-fm"} {
		m[n] = sdcf
	}
	for _, n := range []string{"ldp-op", "ldp-op-basic", "rsmf"} {
		m[n] = ldpop
	}
	// dp-als and dp-biases solve in closed form: no step size. Their
	// knobs are the device's ridge (of the vector; of the bias when
	// biases only) and the ridge per unit of the releases' noise σ.
	small := []float64{0.3, 1, 3}
	noise := []float64{0.5, 1, 2}
	m["dp-als"] = []tuneAxis{{"reg-user", small}, {"reg-noise", noise}}
	m["dp-biases"] = []tuneAxis{{"reg-user-bias", small}, {"reg-noise", noise}}
	return m
}()

// TuneGrid returns the candidate grid of method s around base, a config of
// s: every combination of the method family's knobs, each the base value
// times a factor (step sizes × {0.25, 0.5, 1, 2, 4}, regularization ×
// {0.1, 1, 10}; LDP-OP's λ × {1, 10³, 10⁶}). Duplicates (a base value of
// 0) are dropped. A method without knobs to tune is an error wrapping
// ErrNotTunable.
func TuneGrid(s Spec, base any) ([]Candidate, error) {
	if err := s.check(base); err != nil {
		return nil, err
	}
	if s.Ranks {
		return nil, fmt.Errorf("%w: %s ranks items, and tuning scores rating error", ErrNotTunable, s.Name)
	}
	axes, ok := tuneAxes[s.Name]
	if !ok {
		return nil, fmt.Errorf("%w: %s has no step size or regularization to tune", ErrNotTunable, s.Name)
	}
	grid := []Candidate{nil}
	for _, ax := range axes {
		f, err := s.Field(base, ax.name)
		if err != nil {
			return nil, err
		}
		v, ok := f.Value.Get().(float64)
		if !ok {
			return nil, fmt.Errorf("method: %s %s is a %s, not a number", s.Name, ax.name, f.Value.Type())
		}
		var next []Candidate
		seen := map[float64]bool{}
		for _, x := range ax.factors {
			// 12 significant digits: 0.1·0.05 is 0.005, not 0.005000000000000001.
			y, _ := strconv.ParseFloat(strconv.FormatFloat(v*x, 'g', 12, 64), 64)
			if seen[y] {
				continue
			}
			seen[y] = true
			for _, c := range grid {
				next = append(next, append(append(Candidate(nil), c...), Param{ax.name, y}))
			}
		}
		grid = next
	}
	return grid, nil
}

// TuneOptions configure Tune. The zero value tunes privately on a 20%
// hold-out of the training data with the defaults below.
type TuneOptions struct {
	// Seed drives every random choice: the hold-out, the candidates drawn,
	// the stopping coin, the score noise and each candidate's training
	// seed. The same seed gives the same selection.
	Seed uint64
	// ValFrac is the fraction of the ratings held out to score candidates
	// (0: 0.2). A rating is held out by a public hash of its user and item
	// IDs and Seed, so adding, removing or changing one rating moves no
	// other rating between the parts.
	ValFrac float64
	// EpsScore is ε_s of each candidate's noisy validation score (0: a
	// tenth of the candidate's own ε, EpsTotal of its Result, which the
	// config fixes, not the data).
	EpsScore float64
	// Stop is γ, the probability of stopping after each candidate (0:
	// 1/(2·grid size), so that about twice the grid size are tried).
	Stop float64
	// Delta is the δ of stopping at the cap: at most T = ⌈ln(1/Delta)/γ⌉
	// candidates are tried, and the selection is (3ε, e^(−γT))-DP (0: 1e-6).
	Delta float64
	// Grid replaces the method's grid (TuneGrid) when not nil.
	Grid []Candidate
	// Public, when not nil, is tuning data the user declares public:
	// candidates are trained and scored on its parts instead of on the
	// training data, without noise and at no privacy cost. It is read on
	// the training data's scale, which must hold its ratings.
	Public *ratings.Dataset
	// KeepCandidate makes FitTuned return the selected candidate's own
	// model (trained on the tuning part of the training data) instead of
	// retraining on all of it with the chosen values; it saves the
	// retraining's ε. It is ignored with Public data.
	KeepCandidate bool
	// OnTrial, when not nil, is called after each candidate is scored.
	OnTrial func(Trial)
}

// A Trial is one candidate trained and scored.
type Trial struct {
	N         int       `json:"n"` // 1, 2, ...
	Candidate Candidate `json:"candidate"`
	// Score is the validation MSE (clipped to the scale's range²), with
	// Laplace noise when the tuning is private; +Inf if it diverged.
	Score    float64 `json:"score"`
	Diverged bool    `json:"diverged,omitempty"`
}

// TuneReport is what Tune did and what it cost.
type TuneReport struct {
	Method string      `json:"method"`
	Grid   []Candidate `json:"grid"`
	// Best is the selected candidate and BestScore its (noisy) score.
	Best      Candidate `json:"best"`
	BestScore float64   `json:"best_score"`
	// Tried is the number of candidates trained (K).
	Tried int `json:"tried"`
	// Trials lists every candidate tried with its score, only when the
	// tuning is not private: in a private selection only the best is
	// released.
	Trials []Trial `json:"trials,omitempty"`
	// ScoreKind names the validation score, whose sensitivity depends on
	// the method's privacy unit (see Tune).
	ScoreKind string `json:"score_kind"`
	// Trusted is the method's trusted party; "nobody" makes Eps EpsAll.
	Trusted string `json:"trusted"`
	// Private says whether the scores carried noise and the selection is
	// accounted (a private method tuned on its own training data).
	Private bool `json:"private"`
	// Public names the tuning data declared public ("" when tuned on a
	// hold-out of the training data).
	Public string `json:"public,omitempty"`
	// TuneRatings and ValRatings are the sizes of the parts candidates
	// were trained and scored on.
	TuneRatings int     `json:"tune_ratings"`
	ValRatings  int     `json:"val_ratings"`
	ValFrac     float64 `json:"val_fraction"`
	// Stop is γ and Cap is T (0 when every candidate is tried once).
	Stop float64 `json:"stop,omitempty"`
	Cap  int     `json:"cap,omitempty"`
	// EpsTrain is each candidate's ε_c (its EpsTotal) and DeltaTrain its
	// δ_c; EpsScore is ε_s of its noisy score.
	EpsTrain   float64 `json:"eps_train"`
	DeltaTrain float64 `json:"delta_train,omitempty"`
	EpsScore   float64 `json:"eps_score"`
	// EpsReplaceTrain is each candidate's ε for replacing one unit (its
	// Privacy.EpsReplace; 0 when the method states none).
	EpsReplaceTrain float64 `json:"eps_replace_train,omitempty"`
	// EpsSelect and DeltaSelect are the selection's cost to whoever sees
	// only its output (the chosen values and model): Liu and Talwar's
	// Theorem 3.1 with ε₁ = ε_c + ε_s.
	EpsSelect   float64 `json:"eps_select"`
	DeltaSelect float64 `json:"delta_select"`
	// EpsAll and DeltaAll are the cost to whoever sees every candidate's
	// training (an untrusted server runs each candidate's protocol):
	// basic composition over the K candidates tried.
	EpsAll   float64 `json:"eps_all"`
	DeltaAll float64 `json:"delta_all,omitempty"`
	// Eps and Delta are the cost that holds under the method's trust
	// model: EpsAll when nobody is trusted, else EpsSelect; 0 when not
	// private.
	Eps   float64 `json:"eps"`
	Delta float64 `json:"delta"`
	// Model and Result are the selected candidate's own training, on the
	// tuning part.
	Model  *model.Model `json:"-"`
	Result *Result      `json:"-"`
}

// Default tuning settings.
const (
	defaultValFrac   = 0.2
	defaultScoreFrac = 0.1
	defaultTuneDelta = 1e-6
)

// Tune chooses the step size and regularization of method s (TuneGrid:
// the knobs of its family, around the values of base, a config of s) on a
// hold-out of train, and returns a copy of base with the chosen values.
// train is split by a public hash of each rating's user and item IDs and
// opt.Seed: candidates are trained on 1 − ValFrac of it and scored on the
// rest, never on test data.
//
// A private method (its claim's unit is not "none") is tuned by Liu and
// Talwar's random stopping (J. Liu and K. Talwar, Private Selection from
// Private Candidates, STOC 2019, Algorithm 1): repeat { draw a candidate
// uniformly from the grid; train it on the tuning part (ε_c-DP, δ_c, by
// the method's own claim, its Result's EpsTotal and Delta); score it on
// the held-out ratings with squared errors clipped to the scale's range
// R², plus Laplace noise of the score's sensitivity for the method's unit
// over ε_s (scoreFor: for a rating value with a trusted curator, the
// mean over the n held-out ratings, sensitivity R²/n; for any other unit
// within one user, the mean over the N users of each user's mean, R²/N,
// since a rating's existence changes n and, when nobody is trusted, the
// devices' u_i carry all of a user's ratings into every held-out term of
// hers; for a user added or removed (dp-als, dp-biases), the sum over
// users of each user's mean, sensitivity R², one user's whole held-out
// contribution, and then, as δ_c > 0 makes Theorem 3.1's δ exceed 1, the
// total is basic composition of the K candidates' (ε_c + ε_s, δ_c), each
// ε_c the candidate's zCDP ledger converted to (ε, δ_c); when
// nobody is trusted, the devices compute the terms and the sum is taken
// under secure aggregation like the methods' uploads, which Tune computes
// in process); stop with probability γ or after T candidates }, and
// return the candidate of lowest noisy score. One round is an
// (ε₁, δ_c)-DP mechanism with ε₁ = ε_c + ε_s by basic composition
// (conservative: a rating is in one part only). By their Theorem 3.1
// (with T = ln(1/δ₂)/γ), the output is
// (3ε₁ + 3√(2δ_c), √(2δ_c)·T + δ₂)-DP, δ₂ = e^(−γT): for the pure-DP
// methods here, (3ε₁, e^(−γT))-DP. That covers whoever sees only the
// output. The unit and trusted party are the method's: when nobody is
// trusted, the untrusted server runs every candidate's protocol and sees
// all of them, so against it the cost is basic composition over the K
// candidates tried, K·ε₁ (K is independent of the data); the report's Eps
// is that one. When the method's claim does not hold (hdpmf with
// secagg=false), neither does this.
//
// A non-private method is tuned on the same hold-out without noise, every
// candidate once, and the report says it is not private. With opt.Public
// set, candidates are trained and scored on parts of that declared-public
// data, without noise: the choice costs no privacy of train.
//
// A method with nothing to tune is an error wrapping ErrNotTunable. A
// candidate that diverges scores +Inf; if all do, Tune fails. A
// cancelled run returns an error wrapping ctx's error.
func Tune(ctx context.Context, s Spec, base any, train *ratings.Dataset, opt TuneOptions) (best any, rep *TuneReport, err error) {
	grid := opt.Grid
	if grid == nil {
		if grid, err = TuneGrid(s, base); err != nil {
			return nil, nil, err
		}
	} else if err := s.check(base); err != nil {
		return nil, nil, err
	}
	if len(grid) == 0 {
		return nil, nil, fmt.Errorf("%w: tune %s: empty grid", ErrParam, s.Name)
	}
	data := train
	if opt.Public != nil {
		// The public data is read on the training data's (declared) scale:
		// the candidates then train on the scale the final model will.
		for _, v := range opt.Public.Values {
			if !(v >= train.Scale.Min && v <= train.Scale.Max) {
				return nil, nil, fmt.Errorf("%w: tune %s: public tuning data %s has rating %g outside the training scale %v",
					ErrParam, s.Name, opt.Public.Name, v, train.Scale)
			}
		}
		pd := *opt.Public
		pd.Scale = train.Scale
		data = &pd
	}
	frac := opt.ValFrac
	if frac == 0 {
		frac = defaultValFrac
	}
	tunePart, val, err := tuneSplit(data, frac, opt.Seed)
	if err != nil {
		return nil, nil, fmt.Errorf("tune %s: %w", s.Name, err)
	}
	rangeSq := float64(data.Scale.Range()) * float64(data.Scale.Range())
	if !(rangeSq > 0) {
		return nil, nil, fmt.Errorf("%w: tune %s: rating scale %v has no range", ErrParam, s.Name, data.Scale)
	}
	rep = &TuneReport{Method: s.Name, Grid: grid, ValFrac: frac, TuneRatings: tunePart.Len(), ValRatings: val.Len(),
		Trusted: s.Claim.Trusted, Private: s.Claim.Unit != "none" && opt.Public == nil, BestScore: math.Inf(1)}
	// The score and its sensitivity for the method's unit (scoreFor).
	scoreOf, scoreSens, scoreKind, err := scoreFor(s, data, val, rangeSq, rep.Private)
	if err != nil {
		return nil, nil, err
	}
	rep.ScoreKind = scoreKind
	if opt.Public != nil {
		rep.Public = opt.Public.Name
		if rep.Public == "" {
			rep.Public = "the tuning data"
		}
	}

	seeds := rng.New(opt.Seed, rngTune, tuneFitSeeds)
	// try trains candidate c, the n-th, and scores it by score, which
	// gets the clipped validation MSE and the candidate's Result.
	try := func(n int, c Candidate, score func(mse float64, res *Result) (float64, error)) error {
		cfg, err := withCandidate(s, base, c)
		if err != nil {
			return err
		}
		t := Trial{N: n, Candidate: c}
		m, res, err := s.Fit(ctx, tunePart, cfg, seeds.Uint64(), nil)
		switch {
		case errors.Is(err, ErrDiverged):
			t.Score, t.Diverged = math.Inf(1), true
		case err != nil:
			return fmt.Errorf("tune %s: candidate %v: %w", s.Name, c, err)
		default:
			if t.Score, err = score(scoreOf(m), res); err != nil {
				return err
			}
			if rep.Model == nil || t.Score < rep.BestScore {
				rep.Best, rep.BestScore, rep.Model, rep.Result = c, t.Score, m, res
			}
		}
		rep.Tried++
		if !rep.Private {
			rep.Trials = append(rep.Trials, t)
		}
		if opt.OnTrial != nil {
			opt.OnTrial(t)
		}
		return nil
	}

	if !rep.Private {
		exact := func(mse float64, _ *Result) (float64, error) { return mse, nil }
		for k, c := range grid {
			if err := try(k+1, c, exact); err != nil {
				return nil, nil, err
			}
		}
	} else {
		if err := rep.randomStop(opt, len(grid)); err != nil {
			return nil, nil, fmt.Errorf("tune %s: %w", s.Name, err)
		}
		draws := rng.New(opt.Seed, rngTune, tuneDraws)
		coin := rng.New(opt.Seed, rngTune, tuneCoin)
		lap := rng.New(opt.Seed, rngTune, tuneNoise)
		first := true
		noisy := func(mse float64, res *Result) (float64, error) {
			p := res.Privacy
			if first { // the first candidate's claim fixes ε_c, δ_c and ε_s
				first = false
				rep.EpsTrain, rep.DeltaTrain = p.EpsTotal, p.Delta
				rep.EpsScore = opt.EpsScore
				if rep.EpsScore == 0 {
					rep.EpsScore = defaultScoreFrac * p.EpsTotal
				}
				if !(rep.EpsScore > 0) || math.IsInf(rep.EpsScore, 0) || math.IsInf(p.EpsTotal, 0) {
					return 0, fmt.Errorf("%w: tune %s: score ε %g and candidate ε %g must be positive and finite (set the score ε)",
						ErrParam, s.Name, rep.EpsScore, p.EpsTotal)
				}
			}
			// A candidate's ε can differ from the first's when the method's
			// accounting depends on its own public random choices (LDP-OP's
			// ε counts the positions its seed released): every candidate is
			// then DP at the largest ε, which the composition below uses.
			rep.EpsTrain = math.Max(rep.EpsTrain, p.EpsTotal)
			rep.DeltaTrain = math.Max(rep.DeltaTrain, p.Delta)
			rep.EpsReplaceTrain = math.Max(rep.EpsReplaceTrain, p.EpsReplace)
			return mse + dp.SampleLaplace(lap, scoreSens/rep.EpsScore), nil
		}
		for n := 1; ; n++ {
			if err := try(n, grid[draws.IntN(len(grid))], noisy); err != nil {
				return nil, nil, err
			}
			if coin.Float64() < rep.Stop || n >= rep.Cap {
				break
			}
		}
		rep.account()
	}
	if rep.Model == nil {
		return nil, nil, fmt.Errorf("%w: tune %s: all %d candidates diverged", ErrDiverged, s.Name, rep.Tried)
	}
	best, err = withCandidate(s, base, rep.Best)
	if err != nil {
		return nil, nil, err
	}
	return best, rep, nil
}

// randomStop sets γ and the cap T from opt for a grid of size g.
func (r *TuneReport) randomStop(opt TuneOptions, g int) error {
	r.Stop = opt.Stop
	if r.Stop == 0 {
		r.Stop = 1 / (2 * float64(g))
	}
	if !(r.Stop > 0 && r.Stop <= 1) {
		return fmt.Errorf("%w: stopping probability γ = %g not in (0, 1]", ErrParam, r.Stop)
	}
	delta := opt.Delta
	if delta == 0 {
		delta = defaultTuneDelta
	}
	if !(delta > 0 && delta < 1) {
		return fmt.Errorf("%w: truncation δ = %g not in (0, 1)", ErrParam, delta)
	}
	r.Cap = int(math.Ceil(math.Log(1/delta) / r.Stop))
	return nil
}

// account fills the selection's cost from ε_c, δ_c, ε_s, γ, T and K.
func (r *TuneReport) account() {
	eps1, d1 := r.EpsTrain+r.EpsScore, r.DeltaTrain
	// Liu and Talwar, Theorem 3.1: T = ln(1/δ₂)/γ, so δ₂ = e^(−γT).
	r.EpsSelect = 3*eps1 + 3*math.Sqrt(2*d1)
	r.DeltaSelect = math.Sqrt(2*d1)*float64(r.Cap) + math.Exp(-r.Stop*float64(r.Cap))
	r.EpsAll, r.DeltaAll = float64(r.Tried)*eps1, float64(r.Tried)*d1
	r.Eps, r.Delta = r.EpsSelect, r.DeltaSelect
	// With δ_c > 0 Theorem 3.1's δ, √(2δ_c)·T + δ₂, is no bound at all
	// once it reaches 1 (δ_c = 1e-6 and T in the hundreds): basic
	// composition is then the bound used. Both depend only on public
	// settings and K, which the coin draws independently of the data.
	if r.Trusted == "nobody" || r.DeltaSelect >= 1 {
		r.Eps, r.Delta = r.EpsAll, r.DeltaAll
	}
}

// replaceEps is the selection's ε for replacing one unit, composed as Eps
// is but from each candidate's replace-one ε.
func (r *TuneReport) replaceEps() float64 {
	eps1 := r.EpsReplaceTrain + r.EpsScore
	if r.Eps == r.EpsAll {
		return float64(r.Tried) * eps1
	}
	return 3*eps1 + 3*math.Sqrt(2*r.DeltaTrain)
}

// Compose returns the privacy of a run that tuned by r and then released
// final, the claim of the final model's training: a retraining on all the
// training data when refit, else the selected candidate's own training,
// which the selection already covers. Private tuning adds r's cost by
// basic composition; tuning on public data or of a non-private method adds
// nothing, and the note says so.
func (r *TuneReport) Compose(final model.Privacy, refit bool) model.Privacy {
	p := final
	switch {
	case r.Public != "":
		p.Note = join(fmt.Sprintf("hyperparameters chosen on %s, declared public: no privacy cost", r.Public), final.Note)
	case !r.Private:
		p.Note = join(fmt.Sprintf("hyperparameters tuned without noise on a %g%% hold-out of the training data (not private)", 100*r.ValFrac), final.Note)
	default:
		sel := fmt.Sprintf("hyperparameters by Liu–Talwar random stopping (STOC 2019, Alg. 1, Thm 3.1) over %d candidates "+
			"(γ = %.3g, cap T = %d), each ε_c %.4g for training plus ε_s %.4g for its noisy validation score: "+
			"the selection is (3·(ε_c+ε_s) = %.4g, δ = e^(−γT) = %.2g)-DP to whoever sees only its output, "+
			"and %d·(ε_c+ε_s) = %.4g by basic composition to whoever sees every candidate's training",
			r.Tried, r.Stop, r.Cap, r.EpsTrain, r.EpsScore, r.EpsSelect, r.DeltaSelect, r.Tried, r.EpsAll)
		if r.Trusted == "nobody" {
			sel += "; the untrusted server runs every candidate, so the total uses the latter"
		} else {
			sel += "; only the selected output is released, so the total uses the former"
		}
		p.EpsTotal, p.Delta = r.Eps, r.Delta
		if final.EpsReplace > 0 {
			// Replacing one unit moves one score term within [0, R²] too,
			// so ε_s holds; the candidates' training counts at its
			// replace-one ε, composed as the add/remove total is.
			p.EpsReplace = r.replaceEps()
			if refit {
				p.EpsReplace += final.EpsReplace
			}
		}
		if refit {
			p.EpsTotal += final.EpsTotal
			p.Delta += final.Delta
			sel += fmt.Sprintf("; plus the retraining on all training data (ε %.4g) by basic composition: ε %.4g in total",
				final.EpsTotal, p.EpsTotal)
		} else {
			sel += fmt.Sprintf("; the model is the selected candidate's, trained on %d of the training ratings", r.TuneRatings)
		}
		p.Note = join(sel, final.Note)
	}
	return p
}

// join joins two notes with "; ".
func join(a, b string) string {
	if b == "" {
		return a
	}
	return a + "; " + b
}

// FitTuned tunes s on train by Tune and trains the final model: by
// default, s with the chosen values on all of train with seed, so that
// the privacy claim is the tuning's cost plus the method's own ε by basic
// composition (TuneReport.Compose); with opt.KeepCandidate (and no Public
// data), the selected candidate's model, trained on the tuning part, at
// the tuning's cost alone. When the retraining diverges although the
// candidate did not, FitTuned returns the candidate's model, still
// charging the retraining's ε. The Result's Privacy says how it composes.
func FitTuned(ctx context.Context, s Spec, base any, train *ratings.Dataset, seed uint64, hook Hook, opt TuneOptions) (*model.Model, *Result, *TuneReport, error) {
	best, rep, err := Tune(ctx, s, base, train, opt)
	if err != nil {
		return nil, nil, nil, err
	}
	if opt.KeepCandidate && opt.Public == nil {
		res := *rep.Result
		res.Privacy = rep.Compose(rep.Result.Privacy, false)
		rep.Model.Privacy = res.Privacy
		return rep.Model, &res, rep, nil
	}
	m, res, err := s.Fit(ctx, train, best, seed, hook)
	if errors.Is(err, ErrDiverged) && opt.Public == nil && rep.Model != nil {
		// The chosen values trained on the tuning part but diverge on all
		// of train: keep the candidate's model rather than fail. The
		// retraining's rounds did run (an untrusted server saw them), so
		// its ε is charged all the same.
		res := *rep.Result
		res.Privacy = rep.Compose(rep.Result.Privacy, true)
		res.Privacy.Note = join("the retraining on all training data diverged, so the model is the selected candidate's, "+
			"trained on the tuning part", res.Privacy.Note)
		rep.Model.Privacy = res.Privacy
		return rep.Model, &res, rep, nil
	}
	if err != nil {
		return nil, nil, nil, err
	}
	res.Privacy = rep.Compose(res.Privacy, true)
	m.Privacy = res.Privacy
	return m, res, rep, nil
}

// withCandidate returns a copy of base, a config of s, with c's values set.
func withCandidate(s Spec, base any, c Candidate) (any, error) {
	if err := s.check(base); err != nil {
		return nil, err
	}
	v := reflect.ValueOf(base)
	cfg := reflect.New(v.Elem().Type())
	cfg.Elem().Set(v.Elem())
	out := cfg.Interface()
	for _, p := range c {
		if err := s.Set(out, p.Name, ftoa(p.Value)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// scoreFor returns the validation score of s's candidates on val, the
// sensitivity of that score for s's privacy unit (the Laplace scale of
// the private score is it over ε_s), and the score's name; an error
// wrapping ErrNotTunable where no score with a bounded sensitivity is
// known for the unit.
//
//   - A rating value with a trusted curator (the model, users' factors
//     included, is the released output): the mean over the n held-out
//     ratings of the squared error clipped to R². One rating changes one
//     term by at most R², and n does not change: R²/n.
//   - Any unit within one user who takes part either way (a rating's
//     value or existence, all of a user's rating values or ratings) when
//     nobody is trusted, and a rating's existence: the devices keep u_i,
//     which is fitted to all of the user's ratings, so one change moves
//     every held-out term of that user; and a rating's existence changes
//     n. The score is the mean over the N users of the data (a public
//     count: every user takes part, with or without ratings) of each
//     user's mean clipped squared error (0 for a user without held-out
//     ratings): one user's data move one user's term by at most R², so
//     R²/N.
//   - A user added or removed (dp-als, dp-biases): the sum, not the
//     mean, over users of each user's mean clipped squared error, each
//     term in [0, R²]. Given the candidate's released model (the item
//     statistics, composed separately as its ε_c), a user's term depends
//     only on her own held-out ratings and her own device-side vector,
//     fitted to her own ratings and the broadcast; adding or removing her
//     adds or removes that one term and moves no other: sensitivity R²,
//     a user's whole held-out contribution, with no count of users in a
//     denominator. The sum is over the same users for every candidate, so
//     its minimum is the mean's.
func scoreFor(s Spec, data, val *ratings.Dataset, rangeSq float64, private bool) (func(*model.Model) float64, float64, string, error) {
	perRating := func(m *model.Model) float64 { return clippedMSE(m, val, rangeSq) }
	unit := s.Claim.Unit
	switch {
	case !private:
		return perRating, 0, "mean clipped squared error", nil
	case unit == "rating value" && s.Claim.Trusted != "nobody":
		return perRating, rangeSq / float64(max(1, val.Len())), "mean clipped squared error", nil
	case unit == "user":
		return func(m *model.Model) float64 { return userClippedSum(m, val, rangeSq) }, rangeSq,
			"sum over users of each user's mean clipped squared error", nil
	}
	n := data.NumUsers()
	return func(m *model.Model) float64 { return userClippedMSE(m, val, rangeSq, n) }, rangeSq / float64(max(1, n)),
		"mean over users of each user's mean clipped squared error", nil
}

// userClippedSum returns the sum over the users of val of each user's
// mean squared error on val, each error clipped to rangeSq (a NaN
// prediction counts rangeSq): every user's term is in [0, rangeSq].
func userClippedSum(m *model.Model, val *ratings.Dataset, rangeSq float64) float64 {
	return userClippedMSE(m, val, rangeSq, 1)
}

// userClippedMSE returns the mean over n users of each user's mean
// squared error on val, each error clipped to rangeSq (a NaN prediction
// counts rangeSq); a user without held-out ratings adds 0.
func userClippedMSE(m *model.Model, val *ratings.Dataset, rangeSq float64, n int) float64 {
	sum := make([]float64, max(n, val.NumUsers()))
	cnt := make([]int, len(sum))
	for k := range val.Len() {
		e := float64(m.Predict(val.Users[k], val.Items[k]) - val.Values[k])
		e *= e
		if !(e <= rangeSq) {
			e = rangeSq
		}
		sum[val.Users[k]] += e
		cnt[val.Users[k]]++
	}
	var t float64
	for u, x := range sum { // in user order: the same sum every time
		if cnt[u] > 0 {
			t += x / float64(cnt[u])
		}
	}
	return t / float64(max(1, n))
}

// clippedMSE is the mean over val of m's squared error clipped to
// rangeSq (a NaN prediction counts rangeSq).
func clippedMSE(m *model.Model, val *ratings.Dataset, rangeSq float64) float64 {
	var sum float64
	for k := range val.Len() {
		e := float64(m.Predict(val.Users[k], val.Items[k]) - val.Values[k])
		e *= e
		if !(e <= rangeSq) {
			e = rangeSq
		}
		sum += e
	}
	return sum / float64(val.Len())
}

// tuneSplit holds out about frac of d's ratings: rating (u, i) is held
// out when a hash of seed and the IDs of u and i falls below frac. The
// hash is public and depends on no other rating, so neighbouring
// datasets split alike. Both parts keep d's index space.
func tuneSplit(d *ratings.Dataset, frac float64, seed uint64) (tune, val *ratings.Dataset, err error) {
	if !(frac > 0 && frac < 1) {
		return nil, nil, fmt.Errorf("%w: validation fraction %g not in (0, 1)", ErrParam, frac)
	}
	key := rng.Seed(seed, rngTune, tuneSplitKey)
	h := sha256.New()
	var sum [sha256.Size]byte
	var tr, va []int
	for k := range d.Len() {
		h.Reset()
		h.Write(key[:])
		h.Write([]byte(id(d.UserIDs, d.Users[k])))
		h.Write([]byte{0})
		h.Write([]byte(id(d.ItemIDs, d.Items[k])))
		u := float64(binary.LittleEndian.Uint64(h.Sum(sum[:0]))>>11) / (1 << 53)
		if u < frac {
			va = append(va, k)
		} else {
			tr = append(tr, k)
		}
	}
	if len(tr) == 0 || len(va) == 0 {
		return nil, nil, fmt.Errorf("%w: holding out %g of %d ratings leaves an empty part", ErrParam, frac, d.Len())
	}
	return d.Subset(tr), d.Subset(va), nil
}

// id returns ids[k], or k in decimal when ids does not have it.
func id(ids []string, k int32) string {
	if int(k) < len(ids) {
		return ids[k]
	}
	return "#" + strconv.Itoa(int(k))
}

// Tune's random streams: rng.New(seed, rngTune, purpose).
const (
	rngTune      uint64 = 0x7475_6e65 // "tune"
	tuneSplitKey uint64 = iota
	tuneDraws
	tuneCoin
	tuneNoise
	tuneFitSeeds
)
