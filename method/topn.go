package method

import (
	"context"
	"fmt"
	"math"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
	"github.com/privrec/privrec/topn"
)

// Stream labels of the top-N baselines.
const (
	rngDPPop uint64 = 0x6470_706f70 // "dppop"
	rngIALS  uint64 = 0x69_616c73   // "ials"
)

// popConfig is pop's (empty) configuration.
type popConfig struct{}

// easeConfig holds EASE's ridge.
type easeConfig struct {
	Lambda   float64 `json:"lambda"`
	MaxItems int     `json:"max_items"`
}

// dpPopClaim is dp-pop's claim: one user (all their ratings) is the unit,
// the curator that adds the noise sees the raw data.
var dpPopClaim = model.Privacy{Unit: "user", Trusted: "the recommender",
	Note:         "one Gaussian release of the item popularity vector, each user's item indicators weighted 1/sqrt(n_u) (L2 sensitivity 1), σ by zCDP",
	Neighbouring: NeighboursAddRemoveUser}

func init() {
	// pop: no privacy claim.
	define(Spec{
		Name:    "pop",
		Summary: "most popular items by training count (non-private top-N baseline; ranking-only)",
		Claim:   noPrivacy,
		Ranks:   true,
	}, func() popConfig { return popConfig{} }, func(*popConfig) []Field { return nil },
		func(ctx context.Context, train *ratings.Dataset, cfg *popConfig, seed uint64, hook Hook) (*model.Model, *Result, error) {
			return topn.Pop(train), &Result{Privacy: noPrivacy}, nil
		})
	// dp-pop: user-level (ε, δ)-DP, one release, trusted curator.
	define(Spec{
		Name:    "dp-pop",
		Summary: "user-level (ε, δ)-DP popularity list: the bar every private top-N method must clear (ranking-only)",
		Claim:   dpPopClaim,
		Ranks:   true,
	}, topn.DefaultDPPopConfig, func(c *topn.DPPopConfig) []Field {
		return []Field{
			floatF("eps", &c.Eps, "user-level ε of the one release"),
			floatF("delta", &c.Delta, "user-level δ of the one release"),
			boolF("reproducible", &c.Reproducible, "TEST MODE: draw the noise from the seeded stream, not crypto/rand"),
		}
	}, func(ctx context.Context, train *ratings.Dataset, cfg *topn.DPPopConfig, seed uint64, hook Hook) (*model.Model, *Result, error) {
		if err := cfg.Validate(); err != nil {
			return nil, nil, invalid(err)
		}
		r := rng.Crypto()
		if cfg.Reproducible {
			r = rng.New(seed, rngDPPop)
		}
		m, l, err := topn.DPPop(train, *cfg, r)
		if err != nil {
			return nil, nil, invalid(err)
		}
		p := dpPopClaim
		p.EpsRound, p.EpsTotal, p.Delta = cfg.Eps, l.Epsilon(cfg.Delta), cfg.Delta
		p.Releases = l.Releases()
		if cfg.Reproducible {
			p.Note += "; TEST MODE: reproducible noise from the seed, not for release"
		}
		return m, &Result{Privacy: p}, nil
	})
	// ease: no privacy claim.
	define(Spec{
		Name:    "ease",
		Summary: "EASE (Steck 2019): closed-form item-item ridge regression on the binary matrix (non-private; ranking-only)",
		Claim:   noPrivacy,
		Ranks:   true,
	}, func() easeConfig { return easeConfig{Lambda: 500, MaxItems: 16000} }, func(c *easeConfig) []Field {
		return []Field{floatF("lambda", &c.Lambda, "ridge λ added to the diagonal of XᵀX"),
			intF("max-items", &c.MaxItems, "refuse catalogs larger than this: memory grows as 12·items² bytes (+4·users·items)")}
	}, func(ctx context.Context, train *ratings.Dataset, cfg *easeConfig, seed uint64, hook Hook) (*model.Model, *Result, error) {
		if !(cfg.Lambda > 0) {
			return nil, nil, invalid(fmt.Errorf("lambda %v: want > 0", cfg.Lambda))
		}
		if n := train.NumItems(); n > cfg.MaxItems {
			return nil, nil, invalid(fmt.Errorf("%d items > max-items %d: EASE's Gramian, inverse and model need about %.1f GB; raise --max-items to try",
				n, cfg.MaxItems, (12*float64(n)+4*float64(train.NumUsers()))*float64(n)/1e9))
		}
		m, err := topn.EASE(ctx, train, cfg.Lambda)
		if err != nil {
			return nil, nil, err
		}
		return m, &Result{Privacy: noPrivacy}, nil
	})
	// ials: no privacy claim.
	define(Spec{
		Name:    "ials",
		Summary: "implicit ALS (Hu et al. 2008, Rendle et al. 2021 tuning) on the binary matrix (non-private; ranking-only)",
		Claim:   noPrivacy,
		Ranks:   true,
	}, topn.DefaultIALSConfig, func(c *topn.IALSConfig) []Field {
		return []Field{
			intF("dim", &c.Dim, "latent dimension"),
			intF("epochs", &c.Epochs, "alternating passes (users, then items)"),
			floatF("alpha0", &c.Alpha0, "weight of every unobserved pair"),
			floatF("reg", &c.Reg, "λ; a row's ridge is λ·(n + α0·N)^nu"),
			floatF("nu", &c.Nu, "exponent of the frequency-scaled ridge (0: plain λ)"),
			floatF("init", &c.Init, "standard deviation of the initial factors × sqrt(dim)"),
			intF("workers", &c.Workers, "parallel workers (0: all cores)"),
		}
	}, func(ctx context.Context, train *ratings.Dataset, cfg *topn.IALSConfig, seed uint64, hook Hook) (*model.Model, *Result, error) {
		if err := cfg.Validate(); err != nil {
			return nil, nil, invalid(err)
		}
		var done func(int)
		if hook != nil {
			done = func(e int) { hook(Progress{Epoch: e, Epochs: cfg.Epochs, TrainRMSE: math.NaN()}) }
		}
		m, err := topn.IALSProgress(ctx, train, *cfg, rng.New(seed, rngIALS), done)
		if err != nil {
			return nil, nil, err
		}
		return m, &Result{Privacy: noPrivacy}, nil
	})
}
