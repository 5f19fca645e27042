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
// taken by items with fewer than rare training ratings, and the share of
// the catalog that appears in some user's top k.
func listFigures(m *model.Model, train, test *ratings.Dataset, k, rare int) (rareShare, coverage float64) {
	ni := train.NumItems()
	cnt := make([]int, ni)
	for _, j := range train.Items {
		cnt[j]++
	}
	byTrain, byTest := train.ByUser(), test.ByUser()
	seen := make([]bool, ni)
	var slots, rareSlots int
	var scores []float32
	for u := range min(train.NumUsers(), test.NumUsers()) {
		if ti, _ := byTest.Row(u); len(ti) == 0 {
			continue
		}
		rated, _ := byTrain.Row(u)
		for _, s := range m.Recommend(int32(u), k, rated) {
			slots++
			if cnt[s.Item] < rare {
				rareSlots++
			}
			seen[s.Item] = true
		}
		_ = scores
	}
	var c int
	for _, b := range seen {
		if b {
			c++
		}
	}
	return float64(rareSlots) / float64(max(slots, 1)), float64(c) / float64(ni)
}

// TestListsML1M is a manual measurement, run only with PRIVREC_LISTS set
// (to an ε) and PRIVREC_DATA naming the datasets folder: dp-als with its
// defaults on ML-1M with its public catalog, random 80/20 split with seeds
// 1–3 (evaluate's --split random:0.8 --seed s, the noise from the seed as
// in its test mode), reporting per seed and their mean the test RMSE,
// Recall@20 and NDCG@20 (relevant: rating ≥ 4), rare@10 (the share of
// top-10 slots held by items with fewer than 20 training ratings) and
// catalog coverage of the top 10. With PRIVREC_LISTS_VAL set it measures
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
	var sum [5]float64
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
		rare, cov := listFigures(m, train, test, 10, 20)
		f := [5]float64{e.RMSE, rk.Recall, rk.NDCG, rare, cov}
		for i := range f {
			sum[i] += f[i] / 3
		}
		t.Logf("seed %d: rmse %.4f R@20 %.4f N@20 %.4f rare@10 %.4f coverage@10 %.4f (ε %.4g)", seed, f[0], f[1], f[2], f[3], f[4], rep.Eps)
		if math.IsNaN(f[0]) {
			t.Errorf("seed %d: NaN RMSE", seed)
		}
	}
	t.Logf("mean:   rmse %.4f R@20 %.4f N@20 %.4f rare@10 %.4f coverage@10 %.4f", sum[0], sum[1], sum[2], sum[3], sum[4])
}
