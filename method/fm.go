package method

import (
	"context"
	"fmt"

	"github.com/privrec/privrec/fm"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/sdcf"
)

// fmFields names the fields of an fm.Config.
func fmFields(c *fm.Config) []Field {
	return []Field{
		textF("features", &c.Features, "features of a rating: ids (biased MF), items (+ genres, release-year bucket), all (+ user gender, age, occupation)",
			string(fm.IDs), string(fm.Items), string(fm.All)),
		intF("dim", &c.Dim, "factors k per feature"),
		intF("epochs", &c.Epochs, "passes of SGD over the training ratings"),
		floatF("lr", &c.LR, "initial SGD step (÷5 at 25% and 75% of the epochs)"),
		floatF("reg", &c.Reg, "L2 regularization λ of the factors"),
		floatF("reg-bias", &c.RegBias, "L2 regularization of the biases"),
		floatF("init", &c.InitScale, "standard deviation of the initial factors"),
		intF("year-bucket", &c.YearBucket, "width in years of a release-year feature"),
	}
}

func init() {
	define(Spec{
		Name:    "fm",
		Summary: "factorization machine (libFM's model) by SGD over ids and side features (non-private reference)",
		Claim:   noPrivacy,
	}, fm.DefaultConfig, fmFields, func(ctx context.Context, train *ratings.Dataset, cfg *fm.Config, seed uint64, hook Hook) (*model.Model, *Result, error) {
		c := *cfg
		c.Seed = seed
		if err := c.Validate(); err != nil {
			return nil, nil, invalid(err)
		}
		var h func(fm.EpochStats)
		if hook != nil {
			h = func(s fm.EpochStats) { hook(Progress{Epoch: s.Epoch, Epochs: s.Epochs, TrainRMSE: s.TrainRMSE}) }
		}
		m, rep, err := fm.Train(ctx, train, c, h)
		if err != nil {
			return nil, nil, err
		}
		return m, &Result{Privacy: noPrivacy, Stats: map[string]float64{
			"train_rmse": rep.TrainRMSE, "features": float64(rep.NumFeatures), "item_attrs": float64(rep.ItemAttrs),
			"user_attrs": float64(rep.UserAttrs), "missing_items": float64(rep.MissingItems), "missing_users": float64(rep.MissingUsers),
		}}, nil
	})
}

// sdfmNote is SD-FM's note: SDMF's, and what stays on the device.
const sdfmNote = sdmfNote + "; SD-FM: the user's bias, factor and attributes stay on the device (no user-attribute " +
	"features: their gradients would reveal them); the item and item-attribute parameters are public, and the public " +
	"side features describe the catalog, not the users"

var sdfmClaim = model.Privacy{Unit: "rating existence", Trusted: "nobody", Note: sdfmNote, Neighbouring: NeighboursRatingExistence}

// sdfmFields names the fields of an fm.SDConfig: SDMF's and the features.
func sdfmFields(c *fm.SDConfig) []Field {
	return append(sdcfFields(true, true)(&c.Config),
		textF("features", &c.Features, "features of a rating: ids (SDMF) or items (+ genres, release-year bucket); user attributes stay on the device",
			string(fm.IDs), string(fm.Items)),
		intF("year-bucket", &c.YearBucket, "width in years of a release-year feature"),
		floatF("attr-step", &c.AttrStep, "scale of the item-attribute parameters' step (the mean gradient over the items carrying them)"))
}

// sdfmConfig returns cfg with the seed, validated.
func sdfmConfig(cfg *fm.SDConfig, seed uint64) (fm.SDConfig, error) {
	c := *cfg
	c.Loss, c.Private, c.Seed = sdcf.Squared, true, seed
	if !(c.EpsG > 0) {
		return c, paramErr("eps-g = %g must be positive", c.EpsG)
	}
	return c, invalid(c.Validate())
}

// sdfmStats adds SD-FM's encoding to a Result's stats.
func sdfmStats(res *Result, enc *fm.Encoding) {
	res.Stats["item_attrs"], res.Stats["missing_items"] = float64(enc.NumItemAttrs), float64(enc.MissingItems)
}

// sdfmFederated is SD-FM's client/server protocol: sdcf's clients and
// the FM server, which needs the catalog's item attributes (ServerFor);
// Server alone serves features ids only.
func sdfmFederated() *Federated {
	fed := federated(
		func(cfg *fm.SDConfig, numItems int, _ ratings.Scale, seed uint64) (protocol.Stateful, error) {
			c, err := sdfmConfig(cfg, seed)
			if err != nil {
				return nil, err
			}
			if c.Features != fm.IDs {
				return nil, paramErr("features %s: the server needs the catalog's item attributes (Spec.NewServerFor, `privrec serve --items` with its side files)", c.Features)
			}
			return sdfmServer(c, &fm.Encoding{Features: fm.IDs, NumItems: numItems})
		},
		func(cfg *fm.SDConfig, train *ratings.Dataset, seed uint64) (*Clients, error) {
			c, err := sdfmConfig(cfg, seed)
			if err != nil {
				return nil, err
			}
			enc, err := fm.Encode(train, c.Features, c.YearBucket)
			if err != nil {
				return nil, err
			}
			return sdcfClients(train, c.Config, sdfmClaim, func(res *Result) { sdfmStats(res, enc) })
		}, noAggregation[fm.SDConfig])
	fed.Rounds = roundsOf(func(cfg *fm.SDConfig) (int, error) {
		c, err := sdfmConfig(cfg, 0)
		if err != nil {
			return 0, err
		}
		return sdcf.Rounds(c.Config)
	})
	fed.ServerFor = func(cfg any, items *ratings.Dataset, seed uint64) (protocol.Stateful, error) {
		c, ok := cfg.(*fm.SDConfig)
		if !ok || c == nil {
			return nil, fmt.Errorf("%w: the config is a %T, want a non-nil %T", ErrParam, cfg, c)
		}
		sc, err := sdfmConfig(c, seed)
		if err != nil {
			return nil, err
		}
		enc, err := fm.Encode(items, sc.Features, sc.YearBucket)
		if err != nil {
			return nil, err
		}
		return sdfmServer(sc, enc)
	}
	return fed
}

// sdfmServer builds the SD-FM server of cfg over enc, which accounts what
// the run spent as SDMF's does (accounted).
func sdfmServer(cfg fm.SDConfig, enc *fm.Encoding) (protocol.Stateful, error) {
	srv, err := fm.NewSDServer(cfg, enc)
	if err != nil || !cfg.Private {
		return srv, err
	}
	return &accounted{Stateful: srv, total: func(t int) float64 { return sdcfSpent(cfg.Config, t) }, round: sdcfRoundEps(cfg.Config)}, nil
}

func init() {
	define(Spec{
		Name:      fm.MethodName,
		Summary:   "SD-FM (SDCF §5): SDMF's randomized response and fake gradients over a factorization machine with item features",
		Claim:     sdfmClaim,
		Federated: sdfmFederated(),
	}, fm.DefaultSDConfig, sdfmFields, func(ctx context.Context, train *ratings.Dataset, cfg *fm.SDConfig, seed uint64, hook Hook) (*model.Model, *Result, error) {
		c, err := sdfmConfig(cfg, seed)
		if err != nil {
			return nil, nil, err
		}
		var h func(sdcf.RoundStats)
		if hook != nil {
			h = func(s sdcf.RoundStats) {
				hook(Progress{Epoch: s.Round, Epochs: s.Rounds, TrainRMSE: s.TrainRMSE, EpsSpent: sdcfSpent(c.Config, s.Round)})
			}
		}
		m, rep, err := fm.TrainSD(ctx, train, c, h)
		if err != nil {
			return nil, nil, err
		}
		res := sdcfResult(c.Config, sdfmClaim, &rep.Report)
		res.Stats["item_attrs"], res.Stats["missing_items"] = float64(rep.ItemAttrs), float64(rep.MissingItems)
		return m, res, nil
	})
}
