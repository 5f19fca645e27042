package dpals

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/privrec/privrec/internal/testdata"
	"github.com/privrec/privrec/ratings"
)

// setField sets the Config field called name (its Go name, lower case
// accepted) from text; it is the tuning aid's way to read a grid.
func setField(c *Config, name, val string) error {
	f := map[string]*float64{
		"eps": &c.Eps, "delta": &c.Delta, "clip": &c.Clip, "clipnorm": &c.ClipNorm, "normu": &c.NormU, "beta": &c.Beta,
		"fracmean": &c.FracMean, "fracbias": &c.FracBias, "fracgram": &c.FracGram,
		"reguser": &c.RegUser, "reguserbias": &c.RegUserBias, "regitem": &c.RegItem, "regnoise": &c.RegNoise,
		"initscale": &c.InitScale, "regfeature": &c.RegFeature, "fracinit": &c.FracInit, "initfloor": &c.InitFloor,
	}
	i := map[string]*int{"dim": &c.Dim, "biasrounds": &c.BiasRounds, "rounds": &c.Rounds, "maxratings": &c.MaxRatings, "topitems": &c.TopItems, "inititems": &c.InitItems, "userfeatures": &c.UserFeatures}
	if strings.ToLower(name) == "poolbias" {
		x, err := strconv.ParseBool(val)
		c.PoolBias = x
		return err
	}
	if strings.ToLower(name) == "sharedgram" {
		x, err := strconv.ParseBool(val)
		c.SharedGram = x
		return err
	}
	if p, ok := f[strings.ToLower(name)]; ok {
		x, err := strconv.ParseFloat(val, 64)
		*p = x
		return err
	}
	if p, ok := i[strings.ToLower(name)]; ok {
		x, err := strconv.Atoi(val)
		*p = x
		return err
	}
	return fmt.Errorf("no field %q", name)
}

// TestTune is a manual tuning aid, run only with PRIVREC_TUNE set to
// configs separated by ";", each a list of name=value over the defaults
// (for example "eps=1,dim=4;eps=1,dim=0"). It splits ML-1M random 80/20
// with seed 1 (evaluate's --split random:0.8 --seed 1) and carves a random
// 10% validation part out of the training part; it never reads the test
// ratings. Its choices are not accounted in ε (the report says so).
func TestTune(t *testing.T) {
	spec := os.Getenv("PRIVREC_TUNE")
	if spec == "" {
		t.Skip("PRIVREC_TUNE not set")
	}
	d, _, err := ratings.Load(testdata.Path(t, "ml-1m/ratings_uir_dense.tsv"), ratings.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	outer, err := ratings.Holdout(d, 0.8, 1)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := ratings.Holdout(outer.Train, 0.9, 2)
	if err != nil {
		t.Fatal(err)
	}
	seeds := 1
	if s := os.Getenv("PRIVREC_TUNE_SEEDS"); s != "" {
		seeds, _ = strconv.Atoi(s)
	}
	for _, line := range strings.Split(spec, ";") {
		cfg := DefaultConfig()
		for _, kv := range strings.Split(line, ",") {
			if kv == "" {
				continue
			}
			k, v, _ := strings.Cut(kv, "=")
			if err := setField(&cfg, k, v); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		var sum float64
		var rep *Report
		for s := range seeds {
			m, r, err := Train(context.Background(), inner.Train, cfg, uint64(s+1))
			if err != nil {
				t.Fatal(err)
			}
			rep = r
			var se float64
			for k := range inner.Test.Values {
				e := float64(m.Predict(inner.Test.Users[k], inner.Test.Items[k]) - inner.Test.Values[k])
				se += e * e
			}
			sum += math.Sqrt(se / float64(inner.Test.Len()))
		}
		t.Logf("%-60s val RMSE %.4f  ε %.3f  train %.4f  %.1fs dims %g λ1 %.0f floor %.0f", line, sum/float64(seeds), rep.Eps, rep.Stats["train_rmse"], time.Since(start).Seconds(),
			rep.Stats["init_dims"], rep.Stats["init_top_eigenvalue"], rep.Stats["init_noise_floor"])
	}
}
