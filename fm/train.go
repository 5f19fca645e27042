package fm

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

// maxParam bounds every parameter; a larger one means the run diverged.
const maxParam = 1e4

// Random stream labels under Config.Seed.
const (
	streamInit uint64 = 0x464d_0000_0000_0000 + iota // "FM"
	streamOrder
)

// Config configures Train. DefaultConfig gives the defaults.
type Config struct {
	// Features chooses the features of a rating (IDs, Items, All).
	Features Features
	// Dim is the number k of factors per feature.
	Dim int
	// Epochs is the number of SGD passes over the training ratings, each in
	// a fresh random order.
	Epochs int
	// LR is the SGD step of the first quarter of the epochs; it is divided
	// by 5 after 25% and again after 75% of them (mf's step schedule).
	LR float64
	// Reg is the L2 penalty λ on the factors v_f, RegBias on the biases
	// w_f (the global bias w_0 is not penalized).
	Reg, RegBias float64
	// InitScale is the standard deviation of the initial factors.
	InitScale float64
	// YearBucket is the width in years of a release-year feature (10:
	// decades).
	YearBucket int
	// Seed fixes the initial factors and the visiting order.
	Seed uint64
}

// DefaultConfig returns the defaults: k = 50, 60 epochs, mf's step
// schedule, η = 0.02, λ = 0.1 on the factors and 0.01 on the biases,
// features IDs and decade buckets. η and λ were chosen on a validation
// split of ML-100K training data (TestTuneSteps): lr 0.02, reg 0.1 is
// the best of lr {0.005, 0.01, 0.02} × reg {0.02, 0.05, 0.1} and (lr,
// reg) = (0.02, 0.2), (0.04, 0.1), (0.04, 0.2) for every feature set
// (validation RMSE ids 0.9293, items 0.9213, all 0.9208; at mf's own
// 0.01, 0.05: 0.9414, 0.9283, 0.9283).
func DefaultConfig() Config {
	return Config{Features: IDs, Dim: 50, Epochs: 60, LR: 0.02, Reg: 0.1, RegBias: 0.01, InitScale: 0.1, YearBucket: 10, Seed: 1}
}

// Validate checks the fields of c.
func (c Config) Validate() error {
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	switch {
	case c.Features != IDs && c.Features != Items && c.Features != All:
		return fmt.Errorf("%w: features %q, want ids, items or all", ErrConfig, c.Features)
	case c.Dim < 1 || c.Dim > model.MaxDim:
		return fmt.Errorf("%w: Dim = %d outside 1..%d", ErrConfig, c.Dim, model.MaxDim)
	case c.Epochs < 1:
		return fmt.Errorf("%w: Epochs = %d must be ≥ 1", ErrConfig, c.Epochs)
	case !(c.LR > 0) || !finite(c.LR):
		return fmt.Errorf("%w: LR = %g must be positive and finite", ErrConfig, c.LR)
	case !(c.Reg >= 0) || !finite(c.Reg) || !(c.RegBias >= 0) || !finite(c.RegBias):
		return fmt.Errorf("%w: Reg = %g, RegBias = %g must be ≥ 0 and finite", ErrConfig, c.Reg, c.RegBias)
	case !(c.InitScale >= 0) || !finite(c.InitScale):
		return fmt.Errorf("%w: InitScale = %g must be ≥ 0 and finite", ErrConfig, c.InitScale)
	case c.YearBucket < 1:
		return fmt.Errorf("%w: YearBucket = %d must be ≥ 1", ErrConfig, c.YearBucket)
	}
	return nil
}

// EpochStats is what Train's hook receives after each epoch.
type EpochStats struct {
	Epoch, Epochs int     // finished epochs and the total
	TrainRMSE     float64 // RMSE of the epoch's SGD predictions (before each step)
}

// Report is what Train measured.
type Report struct {
	// NumFeatures is the size of the feature space; ItemAttrs and UserAttrs
	// count the attribute features.
	NumFeatures, ItemAttrs, UserAttrs int
	// MissingItems and MissingUsers count indices without attributes.
	MissingItems, MissingUsers int
	// TrainRMSE is the last epoch's.
	TrainRMSE float64
}

// Train fits a second-order FM to train by SGD on the squared loss with L2
// penalties and returns it as a model.Model (see ToModel).
func Train(ctx context.Context, train *ratings.Dataset, cfg Config, hook func(EpochStats)) (*model.Model, *Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	if train.Len() == 0 {
		return nil, nil, fmt.Errorf("%w: dataset %q has no ratings", ErrConfig, train.Name)
	}
	enc, err := Encode(train, cfg.Features, cfg.YearBucket)
	if err != nil {
		return nil, nil, err
	}
	K := cfg.Dim
	nF := enc.NumFeatures()
	p := &Params{Dim: K, W0: float32(train.Mean()), W: make([]float32, nF), V: make([]float32, nF*K)}
	ir := rng.New(cfg.Seed, streamInit)
	for k := range p.V {
		p.V[k] = float32(ir.NormFloat64() * cfg.InitScale)
	}
	order := make([]int, train.Len())
	for k := range order {
		order[k] = k
	}
	or := rng.New(cfg.Seed, streamOrder)
	sum := make([]float32, K)
	var fs []Feat
	rep := &Report{NumFeatures: nF, ItemAttrs: enc.NumItemAttrs, UserAttrs: enc.NumUserAttrs,
		MissingItems: enc.MissingItems, MissingUsers: enc.MissingUsers, TrainRMSE: math.NaN()}
	reg, regB := float32(cfg.Reg), float32(cfg.RegBias)
	for ep := range cfg.Epochs {
		if err := ctx.Err(); err != nil {
			return nil, nil, fmt.Errorf("fm: epoch %d: %w", ep+1, err)
		}
		lr := cfg.LR
		if 4*ep >= cfg.Epochs {
			lr /= 5
		}
		if 4*ep >= 3*cfg.Epochs {
			lr /= 5
		}
		eta := float32(lr)
		or.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		var se float64
		for _, k := range order {
			fs, _ = enc.appendFeatures(fs[:0], train.Users[k], train.Items[k])
			e := p.Predict(fs, sum) - train.Values[k]
			se += float64(e) * float64(e)
			p.W0 -= eta * e
			for _, f := range fs {
				x := f.Value
				p.W[f.Index] -= eta * (e*x + regB*p.W[f.Index])
				row := p.row(f.Index)
				for d, v := range row {
					row[d] = v - eta*(e*x*(sum[d]-v*x)+reg*v)
				}
			}
		}
		rep.TrainRMSE = math.Sqrt(se / float64(train.Len()))
		if !p.finite(maxParam) || math.IsNaN(rep.TrainRMSE) {
			return nil, nil, fmt.Errorf("%w at epoch %d: parameters left [−%g, %g]; lower lr", ErrDiverged, ep+1, maxParam, maxParam)
		}
		if hook != nil {
			hook(EpochStats{Epoch: ep + 1, Epochs: cfg.Epochs, TrainRMSE: rep.TrainRMSE})
		}
	}
	return ToModel(p, enc, train), rep, nil
}

// ToModel returns the FM p over enc as a model.Model on train's index
// space, exactly: split the features of a rating into the user's side
// (the user indicator and attributes) and the item's (the item indicator
// and attributes); the pairwise term is then the interactions within the
// user's side, plus those within the item's, plus <Σ_user x v, Σ_item x v>.
// So U[u] = Σ_user x_f v_f, V[i] = Σ_item x_f v_f, Mean = w_0, BU[u] = the
// user side's biases and own interactions, BI[i] the item side's. Users
// without training ratings are unknown (Rated): the model predicts the
// global bias plus the item's terms for them, as for any model.
func ToModel(p *Params, enc *Encoding, train *ratings.Dataset) *model.Model {
	K, nU, nI := p.Dim, enc.NumUsers, enc.NumItems
	m := &model.Model{
		Dim: K, NumUsers: nU, NumItems: nI, U: make([]float32, nU*K), V: make([]float32, nI*K),
		Mean: p.W0, BU: make([]float32, nU), BI: make([]float32, nI), Rated: make([]bool, nU),
		Default: p.W0, Scale: train.Scale,
		UserIDs: slices.Clone(train.UserIDs), ItemIDs: slices.Clone(train.ItemIDs), ItemTitles: slices.Clone(train.ItemTitles),
	}
	for _, u := range train.Users {
		m.Rated[u] = true
	}
	var fs []Feat
	var nUser int
	for u := range nU {
		fs, nUser = enc.appendFeatures(fs[:0], int32(u), 0)
		m.BU[u] = p.half(fs[:nUser], m.U[u*K:(u+1)*K])
	}
	for i := range nI {
		fs, nUser = enc.appendFeatures(fs[:0], 0, int32(i))
		m.BI[i] = p.half(fs[nUser:], m.V[i*K:(i+1)*K])
	}
	return m
}
