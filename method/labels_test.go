package method_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/ratings"
)

// tinyData returns a small dense dataset: 40 users, each rating 8 of 16
// items on a 1..5 scale, with the items as a declared public catalog.
func tinyData() *ratings.Dataset {
	d := &ratings.Dataset{Name: "tiny", Scale: ratings.Scale{Min: 1, Max: 5, Step: 1}, Catalog: "tiny items"}
	for i := range 16 {
		d.ItemIDs = append(d.ItemIDs, fmt.Sprint("i", i))
	}
	for u := range 40 {
		d.UserIDs = append(d.UserIDs, fmt.Sprint("u", u))
		for k := range 8 {
			i := (u*3 + k*2) % 16
			d.Users = append(d.Users, int32(u))
			d.Items = append(d.Items, int32(i))
			d.Values = append(d.Values, float32(1+(u+i)%5))
		}
	}
	return d
}

// TestLabelsSayWhatRan runs every method with a --secagg parameter under
// every aggregation it accepts and checks that the run's privacy label
// describes that run: the aggregation it names is the one that ran, the
// note names no other mode as what ran, and with secagg=off (the server
// reads single uploads) a claim that trusted nobody either reports no ε
// against the server (+Inf) or names the server as trusted.
func TestLabelsSayWhatRan(t *testing.T) {
	train := tinyData()
	for _, s := range method.All() {
		if !s.Has("secagg") {
			continue
		}
		for _, mode := range []string{"masked", "ideal", "off"} {
			t.Run(s.Name+"/"+mode, func(t *testing.T) {
				p := params{"secagg": mode}
				for name, v := range map[string]string{"epochs": "2", "rounds": "1", "bias-rounds": "1", "top-items": "8", "dim": "2"} {
					if s.Has(name) {
						p[name] = v
					}
				}
				if s.Name == "dp-ease" {
					p["top-items"] = "8"
				}
				cfg, err := s.Configure(p)
				if err != nil {
					t.Skipf("%s does not take secagg=%s: %v", s.Name, mode, err)
				}
				_, res, err := s.Fit(method.WithTestMode(context.Background()), train, cfg, 1, nil)
				if err != nil {
					if mode == "masked" {
						t.Skipf("no masked path in process: %v", err)
					}
					t.Fatal(err)
				}
				pr := res.Privacy
				if s.Claim.Unit == "none" {
					return
				}
				if pr.Aggregation != mode {
					t.Errorf("label says aggregation %q, ran %q", pr.Aggregation, mode)
				}
				for _, other := range []string{"masked", "ideal", "off"} {
					if other != mode && strings.Contains(pr.Note, "secagg="+other+", the default") {
						t.Errorf("a secagg=%s run's note calls secagg=%s the default: %.200s", mode, other, pr.Note)
					}
				}
				if mode == "off" && s.Claim.Trusted == "nobody" && pr.Trusted == "nobody" && !math.IsInf(pr.EpsTotal, 1) {
					t.Errorf("secagg=off: trusted %q with ε %g, but the server read single uploads", pr.Trusted, pr.EpsTotal)
				}
				if mode != "off" && strings.Contains(pr.Note, "secagg=off: the server read") {
					t.Errorf("a secagg=%s run's note says the server read single uploads", mode)
				}
			})
		}
	}
}

// TestPrivateMethodsRefuseRepeatedPairs checks that every private method
// refuses training data with a repeated (user, item) pair, in process and
// as federated clients: their sensitivities assume distinct items (a
// dp-ease device's indicator vector would have norm √2 against a charge
// of 1).
func TestPrivateMethodsRefuseRepeatedPairs(t *testing.T) {
	train := tinyData()
	train.Users = append(train.Users, train.Users[0])
	train.Items = append(train.Items, train.Items[0])
	train.Values = append(train.Values, train.Values[0])
	for _, s := range method.All() {
		if s.Claim.Unit == "none" {
			continue
		}
		t.Run(s.Name, func(t *testing.T) {
			p := params{}
			for name, v := range map[string]string{"epochs": "1", "rounds": "1", "bias-rounds": "1"} {
				if s.Has(name) {
					p[name] = v
				}
			}
			cfg, err := s.Configure(p)
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = s.Fit(method.WithTestMode(context.Background()), train, cfg, 1, nil)
			if !errors.Is(err, ratings.ErrDuplicate) {
				t.Errorf("Fit: error %v, want one wrapping ratings.ErrDuplicate", err)
			}
			if s.Federated == nil {
				return
			}
			if _, err := s.NewClients(cfg, train, 1); !errors.Is(err, ratings.ErrDuplicate) {
				t.Errorf("NewClients: error %v, want one wrapping ratings.ErrDuplicate", err)
			}
		})
	}
}

// TestEveryClaimStatesItsNeighbours checks that every private method's
// claim, and the privacy its run reports, names the neighbouring relation
// its ε holds for.
func TestEveryClaimStatesItsNeighbours(t *testing.T) {
	train := tinyData()
	for _, s := range method.All() {
		if s.Claim.Unit == "none" {
			continue
		}
		t.Run(s.Name, func(t *testing.T) {
			if s.Claim.Neighbouring == "" {
				t.Fatal("the claim names no neighbouring relation")
			}
			p := params{}
			for name, v := range map[string]string{"epochs": "1", "rounds": "1", "bias-rounds": "1", "top-items": "8"} {
				if s.Has(name) {
					p[name] = v
				}
			}
			cfg, err := s.Configure(p)
			if err != nil {
				t.Fatal(err)
			}
			_, res, err := s.Fit(method.WithTestMode(context.Background()), train, cfg, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Privacy.Neighbouring != s.Claim.Neighbouring {
				t.Errorf("the run reports neighbouring %q, the claim %q", res.Privacy.Neighbouring, s.Claim.Neighbouring)
			}
		})
	}
}

// TestEveryPrivateMethodDrawsSecretNoise checks the one rule of every
// private method's noise: outside the test mode (WithTestMode, privrec's
// --seed) two runs with the same seed draw different noise, from
// crypto/rand, and the Result says so; in it two runs are identical and
// the Result says the model is not a release.
func TestEveryPrivateMethodDrawsSecretNoise(t *testing.T) {
	train := tinyData()
	for _, s := range method.All() {
		if s.Claim.Unit == "none" {
			continue
		}
		t.Run(s.Name, func(t *testing.T) {
			p := params{}
			for name, v := range map[string]string{"epochs": "2", "rounds": "1", "bias-rounds": "1", "top-items": "8"} {
				if s.Has(name) {
					p[name] = v
				}
			}
			cfg, err := s.Configure(p)
			if err != nil {
				t.Fatal(err)
			}
			fit := func(ctx context.Context) ([]float32, *method.Result) {
				m, res, err := s.Fit(ctx, train, cfg, 3, nil)
				if err != nil {
					t.Fatal(err)
				}
				var scores []float32
				for u := range int32(4) {
					scores = append(scores, m.ScoreItems(u, nil)...)
				}
				return scores, res
			}
			a, ra := fit(context.Background())
			b, _ := fit(context.Background())
			if slices.Equal(a, b) {
				t.Error("two runs outside the test mode drew the same noise from seed 3")
			}
			if strings.Contains(ra.Privacy.Note, "TEST MODE") || !strings.Contains(ra.Privacy.Note, "crypto/rand") {
				t.Errorf("note outside the test mode: %.300q", ra.Privacy.Note)
			}
			ctx := method.WithTestMode(context.Background())
			c, rc := fit(ctx)
			d, _ := fit(ctx)
			if !slices.Equal(c, d) {
				t.Error("two runs in the test mode with seed 3 differ")
			}
			if !strings.Contains(rc.Privacy.Note, "TEST MODE") || rc.Stats["test_mode"] != 1 {
				t.Errorf("test mode not labelled: %.300q, %v", rc.Privacy.Note, rc.Stats)
			}
		})
	}
}
