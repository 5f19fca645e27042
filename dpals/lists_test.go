package dpals

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
)

// listFigures returns the share of the top-k slots of every test user
// (items without a training rating of theirs, by the model's raw score)
// taken by items with fewer than rare training ratings, the share of the
// catalog that appears in some user's top k, the share of those slots
// whose raw score reaches the scale's top (shown as the top rating after
// the clamp) and the mean raw score of the first slot.
func listFigures(m *model.Model, train, test *ratings.Dataset, k, rare int) (rareShare, coverage, atTop, top1 float64) {
	ni := train.NumItems()
	cnt := make([]int, ni)
	for _, j := range train.Items {
		cnt[j]++
	}
	byTrain, byTest := train.ByUser(), test.ByUser()
	seen := make([]bool, ni)
	var slots, rareSlots, topSlots, users int
	for u := range min(train.NumUsers(), test.NumUsers()) {
		if ti, _ := byTest.Row(u); len(ti) == 0 {
			continue
		}
		rated, _ := byTrain.Row(u)
		recs := m.Recommend(int32(u), k, rated)
		if len(recs) > 0 {
			users++
			top1 += float64(recs[0].Score)
		}
		for _, s := range recs {
			slots++
			if s.Score >= m.Scale.Max {
				topSlots++
			}
			if cnt[s.Item] < rare {
				rareSlots++
			}
			seen[s.Item] = true
		}
	}
	var c int
	for _, b := range seen {
		if b {
			c++
		}
	}
	return float64(rareSlots) / float64(max(slots, 1)), float64(c) / float64(ni),
		float64(topSlots) / float64(max(slots, 1)), top1 / float64(max(users, 1))
}

// TestListsML1M is a manual measurement, run only with PRIVREC_LISTS set
// (to an ε) and PRIVREC_DATA naming the datasets folder: dp-als with its
// defaults on ML-1M with its public catalog, random 80/20 split with seeds
// 1–3 (evaluate's --split random:0.8 --seed s, the noise from the seed as
// in its test mode), reporting per seed and their mean the test RMSE,
// Recall@20 and NDCG@20 (relevant: rating ≥ 4), rare@10 (the share of
// top-10 slots held by items with fewer than 20 training ratings) and
// catalog coverage of the top 10, the share of top-10 slots whose raw
// score reaches the scale's top (a "5.0" after the clamp) and the mean
// top-1 raw score. With PRIVREC_LISTS_VAL set it measures
// on a 10% validation part of the training part instead and never reads
// the test ratings.
func TestListsML1M(t *testing.T) {
	epsS := os.Getenv("PRIVREC_LISTS")
	dir := os.Getenv("PRIVREC_DATA")
	if epsS == "" || dir == "" {
		t.Skip("PRIVREC_LISTS or PRIVREC_DATA not set")
	}
	d, _, err := ratings.Load(filepath.Join(dir, "ml-1m"), ratings.LoadOptions{Catalog: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	if err := setField(&cfg, "eps", epsS); err != nil {
		t.Fatal(err)
	}
	var sum [7]float64
	for seed := uint64(1); seed <= 3; seed++ {
		sp, err := ratings.Holdout(d, 0.8, seed)
		if err != nil {
			t.Fatal(err)
		}
		train, test := sp.Train, sp.Test
		if os.Getenv("PRIVREC_LISTS_VAL") != "" {
			v, err := ratings.Holdout(train, 0.9, seed+100)
			if err != nil {
				t.Fatal(err)
			}
			train, test = v.Train, v.Test
		}
		m, rep, err := Train(context.Background(), train, cfg, seed)
		if err != nil {
			t.Fatal(err)
		}
		e := eval.Rating(m, test)
		rk := eval.RankAt(m, train, test, []int{20}, 4, 0)[0]
		rare, cov, atTop, top1 := listFigures(m, train, test, 10, 20)
		f := [7]float64{e.RMSE, rk.Recall, rk.NDCG, rare, cov, atTop, top1}
		for i := range f {
			sum[i] += f[i] / 3
		}
		t.Logf("seed %d: rmse %.4f R@20 %.4f N@20 %.4f rare@10 %.4f coverage@10 %.4f at-top@10 %.4f top-1 score %.3f (ε %.4g)",
			seed, f[0], f[1], f[2], f[3], f[4], f[5], f[6], rep.Eps)
		if math.IsNaN(f[0]) {
			t.Errorf("seed %d: NaN RMSE", seed)
		}
	}
	t.Logf("mean:   rmse %.4f R@20 %.4f N@20 %.4f rare@10 %.4f coverage@10 %.4f at-top@10 %.4f top-1 score %.3f",
		sum[0], sum[1], sum[2], sum[3], sum[4], sum[5], sum[6])
}
