package dpease

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/privrec/privrec/datasets"
	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
)

// trainVariant is Train in the test mode (cfg.Seeded) with the server's
// validation hook: snr > 0 lets the released counts choose M.
func trainVariant(train *ratings.Dataset, cfg Config, seed uint64, snr float64) (*model.Model, *Report, error) {
	cfg = cfg.WithRoster(train)
	srv, err := NewServer(cfg, train.Public(), seed)
	if err != nil {
		return nil, nil, err
	}
	defer func() { lastPopDiag, lastBlend, lastPopMode = srv.PopDiag(), srv.Blend(), srv.PopularityMode() }()
	srv.snr = snr
	cl, err := NewClients(train, cfg)
	if err != nil {
		return nil, nil, err
	}
	if err := protocol.Run(context.Background(), srv, cl.List, protocol.RunOptions{Workers: cfg.Workers, Seed: seed, Aggregation: cfg.Aggregation}); err != nil {
		return nil, nil, err
	}
	v, _ := srv.Factors()
	m, err := cl.Model(v)
	if err != nil {
		return nil, nil, err
	}
	return m, srv.Report(), nil
}

// lastPopDiag is whether trainVariant's last run took the popularity from
// the Gram's diagonal; lastBlend and lastPopMode its personal weight and
// popularity mode.
var (
	lastPopDiag, lastPopMode bool
	lastBlend                Blend
)

// TestDefaultsValidation measures dp-ease settings against dp-pop on a
// validation split of the training part of every dataset the
// defaults-ranking experiment uses (random:0.9 seed 1, the 90% split again
// 80/20 with seed 2; the test split is never read) when PRIVREC_H33F=val.
// PRIVREC_H33F_DATA lists datasets (comma-separated; default all five),
// PRIVREC_H33F_DRAWS the number of seeded noise draws (default 2; every
// config of a draw sees the same noise), PRIVREC_H33F_GRID the configs as
// "eps:snr:pop:lamN:popdiag:M:frac:shrink;...": snr > 0 lets the noisy counts
// choose M (items clearing snr·σ_c, at most M), popdiag is PopDiagSNR
// (0 never, inf always), frac is FracCounts; a missing field or "-" keeps
// the default (ByEps's for pop, lamN and M; DefaultConfig's otherwise);
// an eighth field shrink 0 switches Config.Shrink off.
func TestDefaultsValidation(t *testing.T) {
	if os.Getenv("PRIVREC_H33F") != "val" {
		t.Skip("set PRIVREC_H33F=val (and PRIVREC_DATA) to measure dp-ease's defaults on validation splits")
	}
	names := "ml-latest-small,ml-100k,douban-monti/ratings_all.tsv,yelp-hin,ml-1m"
	if v := os.Getenv("PRIVREC_H33F_DATA"); v != "" {
		names = v
	}
	grid := os.Getenv("PRIVREC_H33F_GRID")
	if grid == "" {
		grid = "1:0:-:-;1:3:-:-;10:0:-:-;10:3:-:-"
	}
	draws := 2
	if v := os.Getenv("PRIVREC_H33F_DRAWS"); v != "" {
		draws, _ = strconv.Atoi(v)
	}
	for _, name := range strings.Split(names, ",") {
		spec := name
		if strings.Contains(name, "/") {
			spec = os.Getenv("PRIVREC_DATA") + "/" + name
		}
		d, _, err := datasets.Open(spec, ratings.LoadOptions{})
		if err != nil {
			t.Skipf("%s: %v (set PRIVREC_DATA)", name, err)
		}
		outer, err := ratings.Holdout(d, 0.9, 1)
		if err != nil {
			t.Fatal(err)
		}
		in, err := ratings.Holdout(outer.Train, 0.8, 2)
		if err != nil {
			t.Fatal(err)
		}
		train, val := in.Train, in.Test
		for draw := 1; draw <= draws; draw++ {
			for _, eps := range []float64{1, 10} {
				r := eval.Rank(dpPop(train, eps, 1e-6, uint64(draw)), train, val, 20, 4)
				fmt.Printf("val %s draw %d dp-pop eps=%g  R@20 %.4f N@20 %.4f\n", name, draw, eps, r.Recall, r.NDCG)
			}
			for _, g := range strings.Split(grid, ";") {
				f := strings.Split(g, ":")
				num := func(k, def float64) float64 {
					if int(k) >= len(f) || f[int(k)] == "-" {
						return def
					}
					v, err := strconv.ParseFloat(f[int(k)], 64)
					if err != nil {
						t.Fatalf("grid entry %q field %d: %v", g, int(k)+1, err)
					}
					return v
				}
				cfg := DefaultConfig()
				cfg.Eps, cfg.PopWeight, cfg.LambdaNoise, cfg.TopItems = num(0, 1), num(2, -1), num(3, -1), int(num(5, 0))
				cfg.PopDiagSNR = num(4, cfg.PopDiagSNR)
				cfg.FracCounts = num(6, cfg.FracCounts)
				cfg.Shrink = num(7, 1) != 0
				cfg.Seeded = true
				m, rep, err := trainVariant(train, cfg, uint64(draw), num(1, 0))
				if err != nil {
					t.Fatalf("%s %s: %v", name, g, err)
				}
				r := eval.Rank(m, train, val, 20, 4)
				fmt.Printf("val %s draw %d dp-ease %s  R@20 %.4f N@20 %.4f  (M %g σc %.3g σg %.3g λ %.4g pop %.3g diag %v popmode %v π %.3g snr %.3g h %.3g)\n", name, draw, g,
					r.Recall, r.NDCG, rep.Stats["top_items"], rep.Stats["sigma_counts"], rep.Stats["sigma_gram"], rep.Stats["lambda"], rep.Stats["pop_weight"], lastPopDiag, lastPopMode, lastBlend.Weight, lastBlend.EntrySNR, lastBlend.History)
			}
		}
	}
}
