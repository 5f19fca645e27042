package method

import (
	"context"

	"github.com/privrec/privrec/fm"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
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
