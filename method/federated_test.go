package method_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/privrec/privrec/datasets"
	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
)

// fedParams keeps every federated method's run short.
var fedParams = map[string]params{
	"hdpmf": {"epochs": "6"}, "dpmf": {"epochs": "6"}, "pdpmf": {"epochs": "6"},
	"ldp-op":       {"epochs": "40", "per-round": "7", "refit": "15", "noise": "mixture"},
	"ldp-op-basic": {"epochs": "5"}, "rsmf": {"epochs": "40", "per-round": "5"},
	"sgld-mf": {"epochs": "5"}, "sdmf": {"epochs": "5"}, "sdmf-alpha-inf": {"epochs": "5"},
	"bpr-sgld": {"epochs": "5"}, "sd-bprmf": {"epochs": "5"}, "isgld": {"epochs": "5"},
	"sd-fm":  {"epochs": "5", "features": "items"},
	"dp-als": {"rounds": "2", "max-ratings": "6", "beta": "0.5", "init-items": "20", "top-items": "30"}, "dp-biases": {"max-ratings": "6"},
	"dp-ease": {"seeded": "true", "top-items": "20", "eps": "5"},
}

// fedData returns a small synthetic training set on scale sc.
func fedData(t *testing.T, sc ratings.Scale) *ratings.Dataset {
	t.Helper()
	d, err := ratings.Synthetic(ratings.SyntheticConfig{Users: 80, Items: 50, Rank: 2, PerUser: 10, Noise: 0.3, Scale: sc}, 3)
	if err != nil {
		t.Fatal(err)
	}
	// public item attributes for SD-FM: a genre of three and a decade
	side := &ratings.Side{Genres: []string{"a", "b", "c"}, Items: map[string]ratings.ItemSide{}}
	for j, id := range d.ItemIDs {
		side.Items[id] = ratings.ItemSide{Genres: []int16{int16(j % 3)}, Year: 1970 + 10*(j%4)}
	}
	d.Side = ratings.StaticSide(side)
	return d
}

// runHalves builds the halves of s with seed and runs them in process.
func runHalves(t *testing.T, s method.Spec, cfg any, train *ratings.Dataset, seed uint64) (*model.Model, *method.Result) {
	t.Helper()
	// The catalog with the public roster (the users' IDs, no ratings).
	srv, err := s.NewServerFor(cfg, &ratings.Dataset{Scale: train.Scale, UserIDs: train.UserIDs, ItemIDs: train.ItemIDs, ItemTitles: train.ItemTitles, Side: train.Side}, seed)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := s.NewClients(cfg, train, seed)
	if err != nil {
		t.Fatal(err)
	}
	opt := protocol.RunOptions{Seed: seed, Aggregation: s.Federated.Aggregation(cfg)}
	if err := protocol.Run(context.Background(), srv, cl.List, opt); err != nil {
		t.Fatal(err)
	}
	v, _ := srv.Factors()
	m, res, err := cl.Finish(v)
	if err != nil {
		t.Fatal(err)
	}
	return m, res
}

// untestMode removes from a Fit run in the test mode the label that only
// Fit adds (the halves do not know whether their server's seed is
// secret: a deployment's plan says so).
func untestMode(m *model.Model, res *method.Result) {
	if _, ok := res.Stats["test_mode"]; !ok {
		return
	}
	delete(res.Stats, "test_mode")
	res.Privacy.Note = strings.TrimPrefix(res.Privacy.Note, method.TestModeNote+"; ")
	m.Privacy.Note = strings.TrimPrefix(m.Privacy.Note, method.TestModeNote+"; ")
}

// sameBits reports whether a and b hold the same float32 bits.
func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if math.Float32bits(a[k]) != math.Float32bits(b[k]) {
			return false
		}
	}
	return true
}

// sameStats compares stats, NaN equal to NaN.
func sameStats(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, x := range a {
		y, ok := b[k]
		if !ok || math.Float64bits(x) != math.Float64bits(y) {
			return false
		}
	}
	return true
}

// samePredictions compares every (user, item) prediction of a and b.
func samePredictions(t *testing.T, a, b *model.Model) {
	t.Helper()
	for u := range int32(a.NumUsers) {
		for i := range int32(a.NumItems) {
			if pa, pb := a.Predict(u, i), b.Predict(u, i); math.Float32bits(pa) != math.Float32bits(pb) {
				t.Fatalf("prediction (%d, %d): Fit %v, halves %v", u, i, pa, pb)
			}
		}
	}
}

// TestFederatedMatchesFit: the halves run over protocol.Run give Fit's
// model and Result bit for bit, on the internal scale and on another.
func TestFederatedMatchesFit(t *testing.T) {
	scales := map[string]ratings.Scale{
		"1..5":      {},
		"0.5..5":    {Min: 0.5, Max: 5, Step: 0.5},
		"-10..10/1": {Min: -10, Max: 10, Step: 1},
	}
	var n int
	for _, s := range method.All() {
		if s.Federated == nil {
			continue
		}
		n++
		p, ok := fedParams[s.Name]
		if !ok {
			t.Errorf("%s: no test parameters", s.Name)
			continue
		}
		for name, sc := range scales {
			t.Run(s.Name+"/"+name, func(t *testing.T) {
				train := fedData(t, sc)
				cfg, err := s.Configure(p)
				if err != nil {
					t.Fatal(err)
				}
				const seed = 7
				want, wantRes, err := s.Fit(method.WithTestMode(context.Background()), train, cfg, seed, nil)
				if err != nil {
					t.Fatal(err)
				}
				untestMode(want, wantRes)
				got, gotRes := runHalves(t, s, cfg, train, seed)
				if !sameBits(want.V, got.V) || !sameBits(want.U, got.U) || !sameBits(want.Offset, got.Offset) {
					t.Fatal("factors differ from Fit's")
				}
				samePredictions(t, want, got)
				if want.Scale != got.Scale || want.Method != got.Method || string(want.Config) != string(got.Config) {
					t.Errorf("model: scale %v, method %q, config %s; Fit: %v, %q, %s", got.Scale, got.Method, got.Config, want.Scale, want.Method, want.Config)
				}
				if !reflect.DeepEqual(wantRes.Privacy, gotRes.Privacy) || !reflect.DeepEqual(want.Privacy, got.Privacy) {
					t.Errorf("privacy %+v, Fit %+v", gotRes.Privacy, wantRes.Privacy)
				}
				if !sameStats(wantRes.Stats, gotRes.Stats) {
					t.Errorf("stats %v, Fit %v", gotRes.Stats, wantRes.Stats)
				}
			})
		}
	}
	if n < 12 {
		t.Errorf("%d federated methods, want the 12 client/server ones", n)
	}
}

var errStop = errors.New("stop")

// TestServerResumes stops a run after round r, restores the server's
// snapshot into a fresh server and resumes with the same clients: V and
// the Result equal the uninterrupted run's.
func TestServerResumes(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    params
		stop []int
	}{
		{"hdpmf", params{"epochs": "6"}, []int{0, 1, 3, 6}},
		{"dpmf", params{"epochs": "6", "noise": "mixture"}, []int{2}},
		// 40 rounds of 60 positions: four passes over the 500 of V.
		{"ldp-op", params{"epochs": "40", "per-round": "60", "refit": "7", "noise": "mixture"}, []int{0, 5, 8, 23}},
		{"ldp-op-basic", params{"epochs": "5"}, []int{2}},
		{"rsmf", params{"epochs": "40", "per-round": "30"}, []int{17}},
		{"sdmf", params{"epochs": "5"}, []int{0, 2}},
		{"sdmf", params{"epochs": "5", "lambda": "0"}, []int{3}},
		{"sd-bprmf", params{"epochs": "5"}, []int{1}},
		{"dp-als", params{"rounds": "2", "shared-gram": "false"}, []int{0, 3, 9, 10, 11}},
		{"dp-biases", params{}, []int{0, 8}},
	} {
		s, err := method.Lookup(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := s.Configure(tc.p)
		if err != nil {
			t.Fatal(err)
		}
		train := fedData(t, ratings.Scale{})
		const seed = 11
		want, wantRes := runHalves(t, s, cfg, train, seed)
		for _, r := range tc.stop {
			t.Run(tc.name, func(t *testing.T) {
				ctx := context.Background()
				srv, err := s.NewServer(cfg, train.NumItems(), train.Scale, seed)
				if err != nil {
					t.Fatal(err)
				}
				cl, err := s.NewClients(cfg, train, seed)
				if err != nil {
					t.Fatal(err)
				}
				opt := protocol.RunOptions{Seed: seed, Aggregation: s.Federated.Aggregation(cfg)}
				opt.OnRound = func(info protocol.RoundInfo) error {
					if info.Round == r {
						return errStop
					}
					return nil
				}
				if err := protocol.Run(ctx, srv, cl.List, opt); !errors.Is(err, errStop) {
					t.Fatalf("run stopped with %v", err)
				}
				snap, err := srv.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				fresh, err := s.NewServer(cfg, train.NumItems(), train.Scale, seed)
				if err != nil {
					t.Fatal(err)
				}
				if err := fresh.UnmarshalBinary(snap); err != nil {
					t.Fatal(err)
				}
				if fresh.Round() != r+1 {
					t.Fatalf("restored server at round %d, want %d", fresh.Round(), r+1)
				}
				opt.OnRound, opt.StartRound = nil, fresh.Round()
				if err := protocol.Run(ctx, fresh, cl.List, opt); err != nil {
					t.Fatal(err)
				}
				v, _ := fresh.Factors()
				got, gotRes, err := cl.Finish(v)
				if err != nil {
					t.Fatal(err)
				}
				if !sameBits(want.V, got.V) || !sameBits(want.U, got.U) {
					t.Fatalf("stopped after round %d: factors differ from the uninterrupted run's", r)
				}
				if !sameStats(wantRes.Stats, gotRes.Stats) || !reflect.DeepEqual(wantRes.Privacy, gotRes.Privacy) {
					t.Errorf("stopped after round %d: result %v, uninterrupted %v", r, gotRes, wantRes)
				}
			})
		}
	}
}

// TestSnapshotErrors: corrupt snapshots and snapshots of another shape
// are errors, never panics, and leave the server usable.
func TestSnapshotErrors(t *testing.T) {
	for _, name := range []string{"hdpmf", "dpmf", "ldp-op", "ldp-op-basic", "sdmf", "dp-als"} {
		t.Run(name, func(t *testing.T) {
			s, err := method.Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			train := fedData(t, ratings.Scale{})
			cfg := s.New()
			srv, err := s.NewServer(cfg, train.NumItems(), train.Scale, 1)
			if err != nil {
				t.Fatal(err)
			}
			snap, err := srv.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			bad := map[string][]byte{
				"empty":     nil,
				"version":   append([]byte{99}, snap[1:]...),
				"truncated": snap[:len(snap)/2],
				"garbage":   append([]byte{snap[0]}, []byte("not a snapshot at all, just some bytes")...),
			}
			for what, b := range bad {
				if err := srv.UnmarshalBinary(b); err == nil {
					t.Errorf("%s snapshot: no error", what)
				}
			}
			if err := s.Set(cfg, "dim", "3"); err != nil {
				t.Fatal(err)
			}
			other, err := s.NewServer(cfg, train.NumItems(), train.Scale, 1)
			if err != nil {
				t.Fatal(err)
			}
			if err := other.UnmarshalBinary(snap); err == nil {
				t.Error("snapshot of dim 10 restored into a server of dim 3")
			}
			fewer, err := s.NewServer(s.New(), train.NumItems()-1, train.Scale, 1)
			if err != nil {
				t.Fatal(err)
			}
			if err := fewer.UnmarshalBinary(snap); err == nil {
				t.Error("snapshot restored into a server of fewer items")
			}
			if err := srv.UnmarshalBinary(snap); err != nil {
				t.Errorf("good snapshot after bad ones: %v", err)
			}
		})
	}
}

// TestNewServerRefuses: centralized methods, configs of another method
// and inferred scales for private methods are errors.
func TestNewServerRefuses(t *testing.T) {
	train := fedData(t, ratings.Scale{})
	mf, _ := method.Lookup("mf")
	if _, err := mf.NewServer(mf.New(), 10, train.Scale, 1); !errors.Is(err, method.ErrNotFederated) {
		t.Errorf("mf: %v, want ErrNotFederated", err)
	}
	if _, err := mf.NewClients(mf.New(), train, 1); !errors.Is(err, method.ErrNotFederated) {
		t.Errorf("mf clients: %v, want ErrNotFederated", err)
	}
	hd, _ := method.Lookup("hdpmf")
	if _, err := hd.NewServer(mf.New(), 10, train.Scale, 1); !errors.Is(err, method.ErrParam) {
		t.Errorf("hdpmf with an mf config: %v, want ErrParam", err)
	}
	if _, err := hd.Federated.Server(mf.New(), 10, train.Scale, 1); !errors.Is(err, method.ErrParam) {
		t.Errorf("Federated.Server with an mf config: %v, want ErrParam", err)
	}
	inferred := *train
	inferred.Scale.Inferred = true
	if _, err := hd.NewServer(hd.New(), 10, inferred.Scale, 1); !errors.Is(err, method.ErrUndeclaredScale) {
		t.Errorf("inferred scale: %v, want ErrUndeclaredScale", err)
	}
	if _, err := hd.NewClients(hd.New(), &inferred, 1); !errors.Is(err, method.ErrUndeclaredScale) {
		t.Errorf("inferred scale, clients: %v, want ErrUndeclaredScale", err)
	}
}

// TestFederatedMatchesFitML100K repeats TestFederatedMatchesFit on the
// ML-100K training split for hdpmf, dpmf, ldp-op and sdmf, when
// PRIVREC_DATA holds it.
func TestFederatedMatchesFitML100K(t *testing.T) {
	root := os.Getenv("PRIVREC_DATA")
	if root == "" || testing.Short() {
		t.Skip("PRIVREC_DATA not set (or -short): ML-100K skipped")
	}
	d, _, err := datasets.Open(filepath.Join(root, "ml-100k"), ratings.LoadOptions{Scale: &ratings.Stars5})
	if err != nil {
		t.Skipf("ML-100K not under PRIVREC_DATA: %v", err)
	}
	split, err := ratings.Holdout(d, 0.9, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		p    params
	}{
		{"hdpmf", params{"epochs": "3"}},
		{"dpmf", params{"epochs": "3"}},
		{"ldp-op", params{"epochs": "20", "per-round": "2000"}},
		{"sdmf", params{"epochs": "3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := method.Lookup(tc.name)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := s.Configure(tc.p)
			if err != nil {
				t.Fatal(err)
			}
			want, wantRes, err := s.Fit(context.Background(), split.Train, cfg, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, gotRes := runHalves(t, s, cfg, split.Train, 1)
			if !sameBits(want.V, got.V) || !sameBits(want.U, got.U) {
				t.Fatal("factors differ from Fit's")
			}
			for k := range split.Test.Len() {
				u, i := split.Test.Users[k], split.Test.Items[k]
				if pa, pb := want.Predict(u, i), got.Predict(u, i); math.Float32bits(pa) != math.Float32bits(pb) {
					t.Fatalf("prediction (%d, %d): Fit %v, halves %v", u, i, pa, pb)
				}
			}
			if !sameStats(wantRes.Stats, gotRes.Stats) {
				t.Errorf("stats %v, Fit %v", gotRes.Stats, wantRes.Stats)
			}
		})
	}
}
