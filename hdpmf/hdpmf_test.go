package hdpmf

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/privrec/privrec/budget"
	"github.com/privrec/privrec/datasets"
	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
)

var (
	smallOnce             sync.Once
	smallTrain, smallTest *ratings.Dataset
)

// small returns a holdout split of the embedded ml-latest-small data.
func small(t testing.TB) (train, test *ratings.Dataset) {
	t.Helper()
	smallOnce.Do(func() {
		d, _, err := datasets.Open("ml-latest-small", ratings.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s, err := ratings.Holdout(d, 0.8, 1)
		if err != nil {
			t.Fatal(err)
		}
		smallTrain, smallTest = s.Train, s.Test
	})
	if smallTrain == nil {
		t.Fatal("no data")
	}
	return smallTrain, smallTest
}

// tiny returns the first users of the small training set.
func tiny(t testing.TB, users int32) *ratings.Dataset {
	train, _ := small(t)
	var idx []int
	for k, u := range train.Users {
		if u < users {
			idx = append(idx, k)
		}
	}
	return train.Subset(idx)
}

func TestSameResultAtAnyWorkerCount(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: every variant at several worker counts (36 s); go test without -short runs it")
	}
	train := tiny(t, 60)
	for _, v := range []Variant{HDPMF, DPMF, PDPMF} {
		for _, noise := range []dp.ShareScheme{dp.GammaShares, dp.MixtureShares} {
			t.Run(v.String()+"/"+noise.String(), func(t *testing.T) {
				var ref *model.Model
				for _, w := range []int{1, 2, 8} {
					cfg := DefaultConfig(v)
					cfg.Rounds, cfg.Workers, cfg.Noise, cfg.Seed = 4, w, noise, 3
					m, _, err := Train(context.Background(), train, cfg)
					if err != nil {
						t.Fatal(err)
					}
					if ref == nil {
						ref = m
						continue
					}
					if !slices.Equal(ref.U, m.U) || !slices.Equal(ref.V, m.V) {
						t.Errorf("%d workers give a different model than 1 worker", w)
					}
				}
			})
		}
	}
}

func TestTranscriptCarriesNoRating(t *testing.T) {
	train := tiny(t, 30)
	for _, v := range []Variant{HDPMF, PDPMF} {
		t.Run(v.String(), func(t *testing.T) {
			var buf bytes.Buffer
			cfg := DefaultConfig(v)
			// Per-client uploads, to check each of them (secure
			// aggregation would show only sums).
			cfg.Rounds, cfg.Transcript, cfg.Aggregation = 3, &buf, protocol.AggOff
			if _, _, err := Train(context.Background(), train, cfg); err != nil {
				t.Fatal(err)
			}
			raw := map[[2]int32]float32{}
			for k := range train.Values {
				raw[[2]int32{train.Users[k], train.Items[k]}] = train.Values[k]
			}
			tr, err := protocol.NewTranscriptReader(&buf)
			if err != nil {
				t.Fatal(err)
			}
			rounds, uploads := 0, 0
			for {
				rec, err := tr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				rounds++
				for _, u := range rec.Uploads {
					uploads++
					if u.Scalars != nil {
						t.Errorf("round %d: client %d sends scalars", rec.Round, u.Client)
					}
					if rec.Broadcast.Phase == protocol.PhaseSetup && u.Values != nil {
						t.Errorf("setup upload of client %d carries values", u.Client)
					}
					for n, j := range u.Items {
						r, ok := raw[[2]int32{int32(u.Client), j}]
						if !ok {
							t.Fatalf("client %d uploads item %d it did not rate", u.Client, j)
						}
						if u.Values == nil {
							continue
						}
						for _, x := range u.Row(n, rec.Broadcast.Dim) {
							if x == r {
								t.Errorf("round %d: client %d sends its raw rating %v of item %d", rec.Round, u.Client, r, j)
							}
						}
					}
				}
			}
			if rounds != cfg.Rounds+2 || uploads == 0 {
				t.Errorf("transcript has %d rounds and %d uploads, want %d rounds", rounds, uploads, cfg.Rounds+2)
			}
		})
	}
}

// TestServerHoldsNoClientData walks the server value by reflection: no
// path from it reaches a client or a dataset.
func TestServerHoldsNoClientData(t *testing.T) {
	train := tiny(t, 10)
	srv, err := NewServer(DefaultConfig(HDPMF), train.Public(), 1)
	if err != nil {
		t.Fatal(err)
	}
	forbidden := map[reflect.Type]bool{
		reflect.TypeFor[client](): true, reflect.TypeFor[ratings.Dataset](): true,
		reflect.TypeFor[shared](): true, reflect.TypeFor[budget.HDPWeights](): true,
	}
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type, string)
	walk = func(ty reflect.Type, path string) {
		if forbidden[ty] {
			t.Errorf("server reaches %v at %s", ty, path)
		}
		if seen[ty] {
			return
		}
		seen[ty] = true
		switch ty.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
			walk(ty.Elem(), path+"[]")
		case reflect.Struct:
			for f := range ty.Fields() {
				walk(f.Type, path+"."+f.Name)
			}
		case reflect.Interface, reflect.Func, reflect.Chan:
			t.Errorf("server holds %v at %s, which could reach anything", ty, path)
		}
	}
	walk(reflect.TypeOf(srv.(*server)), "server")
}

func TestAccountant(t *testing.T) {
	train := tiny(t, 40)
	w, err := budget.HDPMFSpec(train, budget.DefaultHDPMF(), 1)
	if err != nil {
		t.Fatal(err)
	}
	// The most exposed rating of any user: max β_u·γ_i over rated pairs.
	var maxW, minW float64 = 0, 1
	for k := range train.Values {
		x := w.W(train.Users[k], train.Items[k])
		maxW, minW = math.Max(maxW, x), math.Min(minW, x)
	}
	meanEps, _ := budget.Threshold(w.RatingEps(train), "mean")
	const T, eps = 6, 0.5
	tests := []struct {
		v                 Variant
		epsTotal          float64
		wantRound         float64
		wantRounds        int // training rounds with uploads
		wantTotalOfRounds float64
	}{
		{HDPMF, 0, maxW * eps, T, T},
		{HDPMF, 2 * eps, maxW * eps, 2, 2},
		{DPMF, 0, minW * eps, T, T},
		{PDPMF, 3.5 * eps, meanEps * eps / eps, 3, 3}, // t = mean ε, with EpsMax 1 of the spec
	}
	for _, tc := range tests {
		t.Run(tc.v.String(), func(t *testing.T) {
			cfg := DefaultConfig(tc.v)
			cfg.Rounds, cfg.Eps, cfg.EpsTotal = T, eps, tc.epsTotal
			cfg.Spec.EpsMax = 1
			cfg.Weights = w
			active := 0
			cfg.OnRound = func(s RoundStats) {
				if s.Phase == protocol.PhaseTrain && s.Uploads > 0 {
					active++
				}
			}
			_, rep, err := Train(context.Background(), train, cfg)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.wantRound
			if tc.v == PDPMF {
				want, _ = budget.Threshold(w.RatingEps(train), "mean")
				want *= eps // the weights scale with ε
			}
			if math.Abs(rep.EpsRound-want) > 1e-9 {
				t.Errorf("ε per round %.6g, want %.6g", rep.EpsRound, want)
			}
			if math.Abs(rep.EpsTotal-tc.wantTotalOfRounds*want) > 1e-9 {
				t.Errorf("ε total %.6g, want %g × %.6g", rep.EpsTotal, tc.wantTotalOfRounds, want)
			}
			if active != tc.wantRounds {
				t.Errorf("%d training rounds had uploads, want %d", active, tc.wantRounds)
			}
			if (tc.epsTotal > 0) != (rep.Refused > 0) {
				t.Errorf("refused %d uploads with ε total cap %g", rep.Refused, tc.epsTotal)
			}
			if rep.AdvEpsTotal <= 0 || len(rep.Accountant.Rounds) != tc.wantRounds {
				t.Errorf("accountant report %+v", rep.Accountant)
			}
		})
	}
}

func TestNoiseScale(t *testing.T) {
	train := tiny(t, 40)
	w, err := budget.HDPMFSpec(train, budget.DefaultHDPMF(), 1)
	if err != nil {
		t.Fatal(err)
	}
	eps := w.RatingEps(train)
	lo, _ := budget.Threshold(eps, "min")
	mean, _ := budget.Threshold(eps, "mean")
	const k, delta = 10, 4.5 // ml-latest-small: 0.5..5
	tests := []struct {
		v         Variant
		threshold string
		want      float64
	}{
		{HDPMF, "", 2 * math.Sqrt(k) * delta / 1},
		{HDPMFR, "", 2 * math.Sqrt(k) * delta / 1},
		{DPMF, "", 2 * math.Sqrt(k) * delta / lo},
		{PDPMF, "mean", 2 * math.Sqrt(k) * delta / mean},
		{PDPMF, "0.7", 2 * math.Sqrt(k) * delta / 0.7},
	}
	for _, tc := range tests {
		t.Run(tc.v.String()+tc.threshold, func(t *testing.T) {
			cfg := DefaultConfig(tc.v)
			cfg.Rounds, cfg.Weights, cfg.Threshold = 1, w, tc.threshold
			_, rep, err := Train(context.Background(), train, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(rep.NoiseScale-tc.want) > 1e-9*tc.want {
				t.Errorf("noise scale %.6g, want %.6g", rep.NoiseScale, tc.want)
			}
		})
	}
}

func TestPDPMFSamplingRate(t *testing.T) {
	train, _ := small(t)
	w, err := budget.HDPMFSpec(train, budget.DefaultHDPMF(), 5)
	if err != nil {
		t.Fatal(err)
	}
	for _, th := range []string{"mean", "0.2", "max"} {
		t.Run(th, func(t *testing.T) {
			eps := w.RatingEps(train)
			tv, err := budget.Threshold(eps, th)
			if err != nil {
				t.Fatal(err)
			}
			var mean, v float64
			for _, e := range eps {
				p := dp.KeepProb(e, tv)
				mean += p
				v += p * (1 - p)
			}
			n := float64(len(eps))
			cfg := DefaultConfig(PDPMF)
			cfg.Rounds, cfg.Weights, cfg.Threshold = 1, w, th
			_, rep, err := Train(context.Background(), train, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(rep.Kept*n-mean) > 5*math.Sqrt(v)+1e-9 {
				t.Errorf("kept %.4f of the ratings, expected %.4f ± %.4f", rep.Kept, mean/n, 5*math.Sqrt(v)/n)
			}
		})
	}
}

func TestHugeEpsilonApproachesPlainFederatedMF(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a private and a plain run to convergence (138 s); go test without -short runs it")
	}
	train, test := small(t)
	ones := &budget.HDPWeights{User: make([]float64, train.NumUsers()), Item: make([]float64, train.NumItems()), EpsMax: 1}
	for k := range ones.User {
		ones.User[k] = 1
	}
	for k := range ones.Item {
		ones.Item[k] = 1
	}
	spread := map[float64]float64{} // the published table's spread across items, by ε
	fit := func(v Variant, eps float64, w *budget.HDPWeights) float64 {
		cfg := DefaultConfig(v)
		cfg.Rounds, cfg.Eps, cfg.Weights = 40, eps, w
		m, _, err := Train(context.Background(), train, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if v == HDPMF && w == nil {
			spread[eps] = tableSpread(m.V, m.Dim)
		}
		return eval.Rating(m, test).RMSE
	}
	plain := fit(DPMF, 1e9, ones)        // all weights 1, no noise to speak of: plain federated MF
	unstretched := fit(HDPMF, 1e9, ones) // HDPMF's machinery with all weights 1
	huge := fit(HDPMF, 1e9, nil)
	noisy := fit(HDPMF, 0.05, nil)
	t.Logf("test RMSE: plain %.4f, HDPMF weights 1 %.4f, HDPMF ε=1e9 %.4f, HDPMF ε=0.05 %.4f; table spread ε=1e9 %.4g, ε=0.05 %.4g",
		plain, unstretched, huge, noisy, spread[1e9], spread[0.05])
	if math.Abs(unstretched-plain) > 0.01 {
		t.Errorf("HDPMF with weights 1 at huge ε (RMSE %.4f) differs from plain federated MF (%.4f)", unstretched, plain)
	}
	// Stretching down-weights the errors of low-weight ratings and the
	// rescaling amplifies them, so even without noise HDPMF stays behind.
	if huge > plain+0.15 {
		t.Errorf("HDPMF at huge ε (RMSE %.4f) is far from plain federated MF (%.4f)", huge, plain)
	}
	// The noise costs against plain federated MF, but the posterior-mean
	// table shrinks the noisy items to the prior (its spread across items
	// falls) instead of letting the noise through: the RMSE stays near
	// plain MF's (before the table, 1.4 on this split at ε = 1).
	if !(noisy > plain) || !(noisy < plain+0.05) {
		t.Errorf("HDPMF at ε 0.05: RMSE %.4f, want above plain federated MF's %.4f and within 0.05 of it", noisy, plain)
	}
	if !(spread[0.05] < spread[1e9]/2) {
		t.Errorf("the published table's spread across items is %.4g at ε 0.05 and %.4g at huge ε: not shrunk", spread[0.05], spread[1e9])
	}
}

// tableSpread returns the mean squared distance of the rows of v
// (items × k) from their mean row.
func tableSpread(v []float32, k int) float64 {
	n := len(v) / k
	mean := make([]float64, k)
	for j := range n {
		for d := range k {
			mean[d] += float64(v[j*k+d]) / float64(n)
		}
	}
	var s float64
	for j := range n {
		for d := range k {
			e := float64(v[j*k+d]) - mean[d]
			s += e * e
		}
	}
	return s / float64(n)
}

func TestConfigErrors(t *testing.T) {
	train := tiny(t, 5)
	tests := []struct {
		name string
		edit func(*Config)
	}{
		{"dim", func(c *Config) { c.Dim = 0 }},
		{"rounds", func(c *Config) { c.Rounds = 0 }},
		{"lr", func(c *Config) { c.LearnRate = math.NaN() }},
		{"eps", func(c *Config) { c.Eps = 0 }},
		{"eps total", func(c *Config) { c.EpsTotal = -1 }},
		{"variant", func(c *Config) { c.Variant = 9 }},
		{"spec", func(c *Config) { c.Spec.User.Conservative = 2 }},
		{"threshold", func(c *Config) { c.Variant, c.Threshold = PDPMF, "median" }},
		{"weights", func(c *Config) { c.Weights = &budget.HDPWeights{User: []float64{1}, Item: []float64{1}, EpsMax: 1} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig(HDPMF)
			tc.edit(&cfg)
			_, _, err := Train(context.Background(), train, cfg)
			if !errors.Is(err, ErrConfig) {
				t.Errorf("error %v does not wrap ErrConfig", err)
			}
		})
	}
}

// TestSecureAggregation checks the default: the server's transcript holds
// only summed uploads (Client −1), never one user's, and the summed run
// learns exactly the model of the per-client run (the server only adds).
func TestSecureAggregation(t *testing.T) {
	train := tiny(t, 30)
	for _, v := range []Variant{HDPMF, DPMF, PDPMF} {
		t.Run(v.String(), func(t *testing.T) {
			cfg := DefaultConfig(v)
			if !cfg.Aggregation.Secure() {
				t.Fatal("secure aggregation is not the default")
			}
			var buf bytes.Buffer
			cfg.Rounds, cfg.Transcript, cfg.Workers = 3, &buf, 2
			sum, _, err := Train(context.Background(), train, cfg)
			if err != nil {
				t.Fatal(err)
			}
			tr, err := protocol.NewTranscriptReader(&buf)
			if err != nil {
				t.Fatal(err)
			}
			if got := tr.Header().Meta["secagg"]; got != "ideal" {
				t.Errorf("header secagg = %q, want true", got)
			}
			for {
				rec, err := tr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if rec.Broadcast.Phase != protocol.PhaseFinal && len(rec.Uploads) != 1 {
					t.Errorf("round %d: %d uploads, want one sum", rec.Round, len(rec.Uploads))
				}
				for _, u := range rec.Uploads {
					if u.Client != -1 {
						t.Errorf("round %d: the server sees client %d's own upload", rec.Round, u.Client)
					}
				}
			}
			cfg.Aggregation, cfg.Transcript = protocol.AggOff, nil
			each, _, err := Train(context.Background(), train, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(sum.U, each.U) {
				// Float sums in another order may differ in the last bit.
				var d float64
				for k := range sum.V {
					d = math.Max(d, math.Abs(float64(sum.V[k]-each.V[k])))
				}
				if d > 1e-3 {
					t.Errorf("summed and per-client runs differ by %g in V", d)
				}
			}
		})
	}
}

// TestPlain checks the unprotected control: it trains, reports ε = ∞ and
// uploads the exact gradients 2(u·v − r)u.
func TestPlain(t *testing.T) {
	train := tiny(t, 20)
	cfg := DefaultConfig(Plain)
	if cfg.Aggregation.Secure() {
		t.Error("Plain defaults to secure aggregation; it is the unprotected control")
	}
	var buf bytes.Buffer
	cfg.Rounds, cfg.Transcript = 2, &buf
	m, rep, err := Train(context.Background(), train, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !math.IsInf(rep.EpsTotal, 1) || !math.IsInf(rep.EpsRound, 1) {
		t.Errorf("Plain reports ε %v per round, %v in total; want +Inf", rep.EpsRound, rep.EpsTotal)
	}
	if m.UserWeight != nil {
		t.Error("Plain rescales predictions")
	}
	tr, err := protocol.NewTranscriptReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	byUser := train.ByUser()
	for {
		rec, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		// Round 1: every user vector is still its start, so each upload row
		// is a multiple of one vector: check that the rows are parallel.
		if rec.Round != 1 {
			continue
		}
		k := rec.Broadcast.Dim
		for _, u := range rec.Uploads {
			items, _ := byUser.Row(u.Client)
			if len(u.Items) != len(items) {
				t.Fatalf("client %d uploads %d items, rated %d", u.Client, len(u.Items), len(items))
			}
			a, b := u.Row(0, k), u.Row(len(u.Items)-1, k)
			var ab, aa, bb float64
			for d := range k {
				ab += float64(a[d]) * float64(b[d])
				aa += float64(a[d]) * float64(a[d])
				bb += float64(b[d]) * float64(b[d])
			}
			if c := math.Abs(ab) / math.Sqrt(aa*bb); aa > 0 && bb > 0 && c < 0.9999 {
				t.Errorf("client %d: rows not parallel (|cos| = %.6f): noise in Plain?", u.Client, c)
			}
		}
	}
}
