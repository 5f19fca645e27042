package method_test

import (
	"context"

	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
)

// params are hyperparameters as text, as flags and experiment files give
// them.
type params = map[string]string

// fitText trains the method called name with p set over its defaults, the
// way the command line does.
func fitText(ctx context.Context, name string, train *ratings.Dataset, p params, seed uint64, hook method.Hook) (*model.Model, *method.Result, error) {
	s, err := method.Lookup(name)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := s.Configure(p)
	if err != nil {
		return nil, nil, err
	}
	return s.Fit(ctx, train, cfg, seed, hook)
}
