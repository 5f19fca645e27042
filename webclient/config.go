package webclient

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/privrec/privrec/dpals"
	"github.com/privrec/privrec/dpease"
	"github.com/privrec/privrec/protocol"
)

// dpalsConfig parses the plan's configuration of dp-als (or dp-biases)
// over its defaults, as method.Spec.Configure does, without the method
// registry (which would bring every method into the wasm). A test checks
// that both read every field of the registry's list alike.
func dpalsConfig(name string, params map[string]string) (dpals.Config, error) {
	var c dpals.Config
	switch name {
	case "dp-als":
		c = dpals.DefaultConfig()
	case "dp-biases":
		c = dpals.BiasesConfig()
	default:
		return c, fmt.Errorf("webclient: the server runs method %q; this page runs dp-als and dp-biases", name)
	}
	floats := map[string]*float64{
		"eps": &c.Eps, "delta": &c.Delta, "clip": &c.Clip, "clip-norm": &c.ClipNorm, "norm-u": &c.NormU,
		"beta": &c.Beta, "frac-mean": &c.FracMean, "frac-bias": &c.FracBias, "frac-gram": &c.FracGram,
		"reg-user": &c.RegUser, "reg-user-bias": &c.RegUserBias, "reg-item": &c.RegItem, "reg-noise": &c.RegNoise,
		"reg-feature": &c.RegFeature, "frac-init": &c.FracInit, "init-floor": &c.InitFloor, "init": &c.InitScale,
	}
	ints := map[string]*int{
		"dim": &c.Dim, "bias-rounds": &c.BiasRounds, "rounds": &c.Rounds, "max-ratings": &c.MaxRatings,
		"top-items": &c.TopItems, "user-features": &c.UserFeatures, "init-items": &c.InitItems,
		"cohort": &c.Cohort, "rounds-per-user": &c.RoundsPerUser, "min-gap": &c.MinGap,
	}
	bools := map[string]*bool{"pool-bias": &c.PoolBias, "shared-gram": &c.SharedGram}
	if err := setFields(name, params, floats, ints, bools, &c.Aggregation); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// dpeaseConfig parses the plan's configuration of dp-ease over its
// defaults, as method.Spec.Configure does, without the method registry.
// A test checks that both read every field of the registry's list alike.
func dpeaseConfig(params map[string]string) (dpease.Config, error) {
	c := dpease.DefaultConfig()
	floats := map[string]*float64{
		"eps": &c.Eps, "delta": &c.Delta, "frac-counts": &c.FracCounts, "lambda": &c.Lambda,
		"lambda-noise": &c.LambdaNoise, "pop-weight": &c.PopWeight, "pop-diag-snr": &c.PopDiagSNR,
	}
	ints := map[string]*int{"top-items": &c.TopItems, "cap": &c.Cap, "workers": &c.Workers, "roster": &c.Roster,
		"cohort": &c.Cohort, "cohort-rounds": &c.CohortRounds}
	bools := map[string]*bool{"seeded": &c.Seeded, "shrink": &c.Shrink}
	if err := setFields("dp-ease", params, floats, ints, bools, &c.Aggregation); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// setFields sets the fields that params names, by their flag names, in
// sorted order: floats, ints and bools point into a method's config, and
// "secagg" sets agg. A name the method does not have is an error.
func setFields(name string, params map[string]string, floats map[string]*float64, ints map[string]*int,
	bools map[string]*bool, agg *protocol.Aggregation) error {
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		s := strings.TrimSpace(params[k])
		var err error
		if p, ok := floats[k]; ok {
			*p, err = strconv.ParseFloat(s, 64)
		} else if p, ok := ints[k]; ok {
			*p, err = strconv.Atoi(s)
		} else if p, ok := bools[k]; ok {
			*p, err = strconv.ParseBool(s)
		} else if k == "secagg" {
			*agg, err = protocol.ParseAggregation(s)
		} else if k == "aggregation" {
			continue // the plan's, not a configuration key
		} else {
			return fmt.Errorf("webclient: the plan's config has a field %q that %s does not have", k, name)
		}
		if err != nil {
			return fmt.Errorf("webclient: the plan's config: %s %s = %q: %v", name, k, params[k], err)
		}
	}
	return nil
}
