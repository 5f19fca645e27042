package dpease

import (
	"context"
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/privrec/privrec/datasets"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
)

// TestML1MDemoProfile prints, when PRIVREC_H33_DEMO is set and
// PRIVREC_DATA holds ml-1m, the top-10 lists that a device holding the
// profile examples/ml1m-scifi-fantasy.csv gets from an in-process masked
// dp-ease run (test mode, ε = 1, δ = 1e-6, seed 1) on ML-1M's random 80%
// (seed 1) with the profile added as one more user, and from DP
// popularity at the same ε (which ignores the profile).
func TestML1MDemoProfile(t *testing.T) {
	if os.Getenv("PRIVREC_H33_DEMO") == "" {
		t.Skip("set PRIVREC_H33_DEMO (and PRIVREC_DATA with ml-1m) to print the demo lists")
	}
	d, _, err := datasets.Open("ml-1m", ratings.LoadOptions{})
	if err != nil {
		t.Skip(err)
	}
	sp, err := ratings.Holdout(d, 0.8, 1)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join("..", "examples", "ml1m-scifi-fantasy.csv"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	tr := sp.Train
	me := int32(tr.NumUsers())
	with := &ratings.Dataset{Name: tr.Name, Scale: tr.Scale, ItemIDs: tr.ItemIDs, ItemTitles: tr.ItemTitles,
		UserIDs: append(slices.Clone(tr.UserIDs), "me"), Users: slices.Clone(tr.Users), Items: slices.Clone(tr.Items), Values: slices.Clone(tr.Values)}
	var mine []string
	for _, r := range rows[1:] {
		j := slices.Index(tr.ItemIDs, r[1])
		if j < 0 {
			t.Fatalf("profile item %s is not in the catalog", r[1])
		}
		with.Users, with.Items, with.Values = append(with.Users, me), append(with.Items, int32(j)), append(with.Values, 5)
		mine = append(mine, r[1])
		t.Logf("profile: %s %s", r[1], tr.ItemTitles[j])
	}
	cfg := DefaultConfig()
	cfg.Aggregation, cfg.Seeded = protocol.AggMasked, true
	m, rep, err := Train(context.Background(), with, cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	show := func(name string, m *model.Model) {
		recs, err := m.RecommendUser("me", 10, mine)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			fmt.Printf("%s\t%d\t%s\t%.4f\t%s\n", name, r.Rank, r.Item, r.Score, r.Title)
		}
	}
	fmt.Printf("dp-ease masked: ε %.10f at δ %g, η %.3g, σ_c %.4g (Skellam %.4g), σ_g %.4g (Skellam %.4g), λ %.4g\n", rep.Eps, cfg.Delta,
		rep.Stats["skellam_eta"], rep.Stats["sigma_counts"], rep.Stats["sigma_counts_skellam"], rep.Stats["sigma_gram"],
		rep.Stats["sigma_gram_skellam"], rep.Stats["lambda"])
	show("dp-ease", m)
	pop := dpPop(with, 1, 1e-6, 7)
	pop.UserIDs, pop.ItemIDs, pop.ItemTitles, pop.NumUsers = with.UserIDs, with.ItemIDs, with.ItemTitles, with.NumUsers()
	show("dp-pop", pop)
}
