package ldpop

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/internal/kstest"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

// synth returns a small synthetic dataset (rank 3, 5-star scale).
func synth(t testing.TB, users, items, perUser int) *ratings.Dataset {
	t.Helper()
	d, err := ratings.Synthetic(ratings.SyntheticConfig{
		Users: users, Items: items, Rank: 3, PerUser: perUser, MinPerUser: perUser / 2, Noise: 0.3,
	}, 7)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// train runs cfg on d and returns the model, report and transcript.
func train(t testing.TB, d *ratings.Dataset, cfg Config) (*model.Model, *Report, []*protocol.Record) {
	t.Helper()
	var buf bytes.Buffer
	cfg.Transcript = &buf
	m, rep, err := Train(context.Background(), d, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := protocol.NewTranscriptReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var recs []*protocol.Record
	for {
		rec, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	return m, rep, recs
}

// TestSummedNoiseIsLaplace reads the first training round of LDP-OP and of
// RSMF (same seed: same V⁰, same u_i, same positions) from the transcripts
// the server sees: their difference, summed over the users, is the noise
// of each position, which must be Laplace(2ΔB/ε) and must not pass as
// 0.7 × that scale.
func TestSummedNoiseIsLaplace(t *testing.T) {
	d := synth(t, 150, 250, 20)
	for _, scheme := range []dp.ShareScheme{dp.GammaShares, dp.MixtureShares} {
		t.Run(scheme.String(), func(t *testing.T) {
			cfg := DefaultConfig(LDPOP)
			cfg.Aggregation, cfg.Noise, cfg.Rounds, cfg.Eps = protocol.AggOff, scheme, 1, 2
			cfg.PerRound = d.NumItems() * cfg.Dim // every position once, scale 1
			_, rep, noisy := train(t, d, cfg)
			cfg.Variant = RSMF
			_, _, clean := train(t, d, cfg)
			want := 2 * float64(d.Scale.Max-d.Scale.Min) * cfg.Bound / cfg.Eps
			if rep.NoiseScale != want {
				t.Fatalf("noise scale %g, want %g", rep.NoiseScale, want)
			}
			k := cfg.Dim
			sum := make([]float64, d.NumItems()*k)
			rec, ref := noisy[1], clean[1] // round 0 is the setup
			if len(rec.Uploads) != d.NumUsers() || rec.Broadcast.Param(paramScale, 0) != 1 {
				t.Fatalf("%d uploads at scale %g, want %d at 1", len(rec.Uploads), rec.Broadcast.Param(paramScale, 0), d.NumUsers())
			}
			for c, up := range rec.Uploads {
				for q, j := range up.Items {
					for l := range k {
						p := q*k + l
						sum[int(j)*k+l] += float64(up.Values[p]) - float64(ref.Uploads[c].Values[p])
					}
				}
			}
			crit := 1.95 / math.Sqrt(float64(len(sum))) // α = 0.001
			if dist := kstest.Distance(sum, kstest.LaplaceCDF(want)); dist > crit {
				t.Errorf("KS distance to Laplace(%g) = %.4f > %.4f", want, dist, crit)
			}
			if dist := kstest.Distance(sum, kstest.LaplaceCDF(0.7*want)); dist <= crit {
				t.Errorf("KS distance to Laplace(0.7·%g) = %.4f, should exceed %.4f", want, dist, crit)
			}
		})
	}
}

// uploadsByClient maps client → upload of a record.
func uploadsByClient(rec *protocol.Record) map[int]*protocol.Upload {
	out := map[int]*protocol.Upload{}
	for _, u := range rec.Uploads {
		out[u.Client] = u
	}
	return out
}

// TestNoiseRepeatsOnlyInBasic reads two training rounds from the
// transcripts. With λ = 0 a user's upload for an item she did not rate is
// pure noise. The basic scheme repeats it exactly, so the difference of
// the rounds is zero at exactly the unrated items (the difference attack
// recovers every user's rated set); LDP-OP draws it afresh.
func TestNoiseRepeatsOnlyInBasic(t *testing.T) {
	d := synth(t, 60, 80, 12)
	byUser := d.ByUser()
	k := 4
	t.Run("basic", func(t *testing.T) {
		cfg := DefaultConfig(Basic)
		cfg.Rounds, cfg.Reg, cfg.Dim = 3, 0, k
		_, _, recs := train(t, d, cfg)
		r1, r2 := uploadsByClient(recs[1]), uploadsByClient(recs[2])
		for u := range d.NumUsers() {
			rated, _ := byUser.Row(u)
			var found []int32
			a, b := r1[u], r2[u]
			for q, j := range a.Items {
				if !slices.Equal(a.Row(q, k), b.Row(q, k)) {
					found = append(found, j)
				}
			}
			if !slices.Equal(found, rated) {
				t.Fatalf("user %d: rounds differ at items %v, rated %v", u, found, rated)
			}
		}
	})
	for _, scheme := range []dp.ShareScheme{dp.GammaShares, dp.MixtureShares} {
		t.Run("ldp-op/"+scheme.String(), func(t *testing.T) {
			cfg := DefaultConfig(LDPOP)
			cfg.Aggregation, cfg.Noise, cfg.Reg, cfg.Dim = protocol.AggOff, scheme, 0, k
			cfg.Rounds, cfg.PerRound = 2, d.NumItems()*k // two passes: every position twice
			_, rep, recs := train(t, d, cfg)
			if rep.Passes != 2 {
				t.Fatalf("%d passes, want 2", rep.Passes)
			}
			r1, r2 := uploadsByClient(recs[1]), uploadsByClient(recs[2])
			var nonzero, same int
			for u := range d.NumUsers() {
				rated, _ := byUser.Row(u)
				a, b := r1[u], r2[u]
				for q, j := range a.Items {
					if _, ok := slices.BinarySearch(rated, j); ok {
						continue
					}
					for l, x := range a.Row(q, k) {
						if x != 0 {
							nonzero++
							if b.Row(q, k)[l] == x {
								same++
							}
						}
					}
				}
			}
			if nonzero < 500 || same > 0 {
				t.Errorf("%d of %d nonzero noise shares repeated in the second pass", same, nonzero)
			}
		})
	}
}

// TestRSMFLearns: without noise and with the documented knobs that let V
// learn (every position each round, no decay, refit), RSMF beats the
// global mean and the paper's faithful schedule on held-out synthetic
// ratings.
func TestRSMFLearns(t *testing.T) {
	d := synth(t, 300, 200, 30)
	s, err := ratings.Holdout(d, 0.8, 1)
	if err != nil {
		t.Fatal(err)
	}
	testRMSE := func(m *model.Model) float64 { return eval.Rating(m, s.Test).RMSE }
	mean := float32(s.Train.Mean())
	var se float64
	for _, v := range s.Test.Values {
		se += float64((v - mean) * (v - mean))
	}
	meanRMSE := math.Sqrt(se / float64(s.Test.Len()))

	faithful := DefaultConfig(RSMF)
	mf, _, err := Train(context.Background(), s.Train, faithful)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig(RSMF)
	cfg.PerRound, cfg.Rounds, cfg.LearnRate, cfg.Decay, cfg.Refit = s.Train.NumItems()*cfg.Dim, 40, 1, 1, 5
	m, rep, err := Train(context.Background(), s.Train, cfg)
	if err != nil {
		t.Fatal(err)
	}
	got, base := testRMSE(m), testRMSE(mf)
	t.Logf("test RMSE: global mean %.4f, RSMF faithful %.4f, RSMF learning %.4f (train %.4f)", meanRMSE, base, got, rep.TrainRMSE)
	if !(got < 0.85*meanRMSE) || !(got < base) {
		t.Errorf("RSMF test RMSE %.4f: want below 0.85 × the global mean's %.4f and below the faithful schedule's %.4f", got, meanRMSE, base)
	}
	if rep.EpsTotal != 0 || rep.NoiseScale != 0 {
		t.Errorf("RSMF reports ε %g, noise %g", rep.EpsTotal, rep.NoiseScale)
	}
}

// TestFaithfulSchedule: one position per round, each at most once a pass,
// scaled by md − t; the accounting follows.
func TestFaithfulSchedule(t *testing.T) {
	d := synth(t, 30, 20, 6)
	k := 3
	md := d.NumItems() * k
	cfg := DefaultConfig(LDPOP)
	cfg.Dim, cfg.Rounds, cfg.Aggregation = k, md, protocol.AggOff
	_, rep, recs := train(t, d, cfg)
	if rep.Passes != 1 || rep.Updated != md || rep.Positions != md {
		t.Errorf("passes %d, updated %d of %d, want 1 pass updating all %d", rep.Passes, rep.Updated, rep.Positions, md)
	}
	seen := map[[2]int]bool{}
	for t0, rec := range recs[1:] {
		b := rec.Broadcast
		if got := b.Param(paramScale, 0); got != float64(md-t0) {
			t.Fatalf("round %d: scale %g, want md − t = %d", t0, got, md-t0)
		}
		if len(b.Items) != 1 {
			t.Fatalf("round %d names %d rows", t0, len(b.Items))
		}
		var on []int
		for l, x := range b.Aux[:k] {
			if x != 0 {
				on = append(on, l)
			}
		}
		if len(on) != 1 {
			t.Fatalf("round %d names %d positions", t0, len(on))
		}
		p := [2]int{int(b.Items[0]), on[0]}
		if seen[p] {
			t.Fatalf("round %d names %v again within the pass", t0, p)
		}
		seen[p] = true
		for _, u := range rec.Uploads {
			for l, x := range u.Values {
				if l != on[0] && x != 0 {
					t.Fatalf("round %d: client %d uploads an unnamed coordinate", t0, u.Client)
				}
			}
		}
	}
	if rep.EpsRound != cfg.Eps || math.Abs(rep.EpsTotal-cfg.Eps*math.Sqrt(float64(k))) > 1e-12 {
		t.Errorf("ε per round %g, total %g; want %g and ε·√d = %g", rep.EpsRound, rep.EpsTotal, cfg.Eps, cfg.Eps*math.Sqrt(float64(k)))
	}
	wantUser := 2 * cfg.Eps * float64(d.NumItems()) * math.Sqrt(float64(k))
	if math.Abs(rep.EpsTotalUser-wantUser) > 1e-9 {
		t.Errorf("user-level total %g, want 2ε·m·√d = %g", rep.EpsTotalUser, wantUser)
	}
}

func TestRefitSegmentsCompose(t *testing.T) {
	d := synth(t, 30, 20, 6)
	cfg := DefaultConfig(LDPOP)
	cfg.Dim, cfg.PerRound, cfg.Rounds, cfg.Refit = 2, 40, 3, 1 // one whole pass per round
	_, rep, recs := train(t, d, cfg)
	// Setup, then train, fit, train, fit, train.
	if len(recs) != 6 || recs[2].Broadcast.Param(paramFit, 0) != 1 {
		t.Fatalf("%d protocol rounds, want 6 with fit rounds between", len(recs))
	}
	want := 3 * cfg.Eps * math.Sqrt(2) // three segments of one full row each
	if math.Abs(rep.EpsTotal-want) > 1e-9 || math.Abs(rep.EpsRound-cfg.Eps*math.Sqrt(2)) > 1e-12 {
		t.Errorf("ε per round %g, total %g, want %g and %g", rep.EpsRound, rep.EpsTotal, cfg.Eps*math.Sqrt(2), want)
	}
}

func TestSameResultAtAnyWorkerCount(t *testing.T) {
	d := synth(t, 80, 60, 10)
	for _, v := range []Variant{LDPOP, Basic, RSMF} {
		cfg := DefaultConfig(v)
		cfg.Rounds, cfg.PerRound = 30, 7
		cfg.Workers = 1
		a, _, err := Train(context.Background(), d, cfg)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Workers = 3
		b, _, err := Train(context.Background(), d, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(a.V, b.V) || !slices.Equal(a.U, b.U) {
			t.Errorf("%v: the model depends on the worker count", v)
		}
	}
}

func TestSecureAggregationGivesTheSameModel(t *testing.T) {
	d := synth(t, 80, 60, 10)
	cfg := DefaultConfig(LDPOP)
	cfg.Rounds, cfg.PerRound = 20, 50
	m1, _, recs := train(t, d, cfg)
	for _, rec := range recs[1:] {
		if len(rec.Uploads) != 1 || rec.Uploads[0].Client != -1 {
			t.Fatalf("round %d: the server saw %d uploads, want one sum", rec.Round, len(rec.Uploads))
		}
	}
	cfg.Aggregation = protocol.AggOff
	m2, _, err := Train(context.Background(), d, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for p := range m1.V {
		if math.Abs(float64(m1.V[p]-m2.V[p])) > 1e-3 {
			t.Fatalf("V[%d]: %g with secure sums, %g without", p, m1.V[p], m2.V[p])
		}
	}
}

func TestFitUser(t *testing.T) {
	r := rng.New(5)
	const k = 4
	V := make([]float32, 30*k)
	for p := range V {
		V[p] = float32(r.NormFloat64())
	}
	items := []int32{0, 3, 4, 9, 12, 17, 20, 29}
	y := []float32{1, 2, 3, 4, 5, 4, 3, 2}
	var w fitWork
	free := make([]float32, k)
	if fitUser(free, items, y, V, k, 1e-8, 1e9, &w) {
		t.Fatal("a huge bound reported active")
	}
	// Unconstrained: the gradient of the objective vanishes.
	grad := func(u []float32) []float64 {
		g := make([]float64, k)
		for n, j := range items {
			v := V[int(j)*k : int(j)*k+k]
			var e float64
			for p := range k {
				e += float64(u[p]) * float64(v[p])
			}
			e -= float64(y[n])
			for p := range k {
				g[p] += e * float64(v[p]) / float64(len(items))
			}
		}
		for p := range k {
			g[p] += 1e-8 * float64(u[p])
		}
		return g
	}
	if g := grad(free); norm(g) > 1e-4 {
		t.Errorf("unconstrained fit: gradient norm %g", norm(g))
	}
	var nf float64
	for _, x := range free {
		nf += float64(x) * float64(x)
	}
	bound := math.Sqrt(nf) / 2
	u := make([]float32, k)
	if !fitUser(u, items, y, V, k, 1e-8, bound, &w) {
		t.Fatal("bound at half the free norm reported inactive")
	}
	var nu float64
	for _, x := range u {
		nu += float64(x) * float64(x)
	}
	if math.Abs(math.Sqrt(nu)-bound) > 1e-4*bound {
		t.Errorf("constrained norm %g, want the bound %g", math.Sqrt(nu), bound)
	}
	// KKT: the gradient points against u (−g = μu, μ > 0).
	g := grad(u)
	var dot float64
	for p := range k {
		dot += -g[p] * float64(u[p])
	}
	if cos := dot / (norm(g) * math.Sqrt(nu)); cos < 0.9999 {
		t.Errorf("constrained fit is not a KKT point: cos(−g, u) = %g", cos)
	}
	if fitUser(u, nil, nil, V, k, 1e-8, 1, &w) || slices.ContainsFunc(u, func(x float32) bool { return x != 0 }) {
		t.Error("a user without ratings must get u = 0")
	}
}

func TestConfigErrors(t *testing.T) {
	d := synth(t, 20, 10, 4)
	tests := []struct {
		name string
		edit func(*Config)
	}{
		{"dim", func(c *Config) { c.Dim = 0 }},
		{"rounds", func(c *Config) { c.Rounds = 0 }},
		{"per-round", func(c *Config) { c.PerRound = 0 }},
		{"lr", func(c *Config) { c.LearnRate = math.NaN() }},
		{"decay", func(c *Config) { c.Decay = 1.5 }},
		{"decay-every", func(c *Config) { c.DecayEvery = 0 }},
		{"reg", func(c *Config) { c.Reg = -1 }},
		{"eps", func(c *Config) { c.Eps = 0 }},
		{"bound", func(c *Config) { c.Bound = math.Inf(1) }},
		{"init", func(c *Config) { c.InitScale = -1 }},
		{"refit", func(c *Config) { c.Refit = -2 }},
		{"basic refit", func(c *Config) { c.Variant, c.Refit = Basic, 3 }},
		{"noise", func(c *Config) { c.Noise = dp.ShareScheme(9) }},
		{"variant", func(c *Config) { c.Variant = Variant(7) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig(LDPOP)
			tc.edit(&cfg)
			if _, _, err := Train(context.Background(), d, cfg); !errors.Is(err, ErrConfig) {
				t.Errorf("got %v, want ErrConfig", err)
			}
		})
	}
	cfg := DefaultConfig(RSMF)
	cfg.Eps = 0 // RSMF has no ε
	if err := cfg.Validate(); err != nil {
		t.Errorf("RSMF with ε = 0: %v", err)
	}
	if _, _, err := Train(context.Background(), &ratings.Dataset{Scale: ratings.Stars5}, DefaultConfig(LDPOP)); !errors.Is(err, ErrConfig) {
		t.Errorf("empty data: %v", err)
	}
}

// TestClientsAccountLikeServer: the clients' accounting, kept from the
// broadcasts, equals the server's, refits and passes included; and the
// server averages over the clients that announced themselves.
func TestClientsAccountLikeServer(t *testing.T) {
	d := synth(t, 30, 12, 5)
	for _, secagg := range []bool{false, true} {
		cfg := DefaultConfig(LDPOP)
		cfg.Dim, cfg.Rounds, cfg.PerRound, cfg.Refit, cfg.Aggregation = 4, 30, 7, 6, protocol.SecureIf(secagg)
		st, err := NewServer(cfg, d.Public(), cfg.Seed)
		if err != nil {
			t.Fatal(err)
		}
		cl, err := NewClients(d, cfg)
		if err != nil {
			t.Fatal(err)
		}
		opt := protocol.RunOptions{Seed: cfg.Seed, Aggregation: protocol.SecureIf(secagg)}
		if err := protocol.Run(context.Background(), st, cl.List, opt); err != nil {
			t.Fatal(err)
		}
		srv, obs := st.(*server), cl.run.sh.obs
		if srv.n != d.NumUsers() {
			t.Errorf("secagg %v: server counted %d clients, want %d", secagg, srv.n, d.NumUsers())
		}
		if !reflect.DeepEqual(srv.led, obs.led) {
			t.Errorf("secagg %v: clients' ledger differs from the server's", secagg)
		}
		v, _ := st.Factors()
		m, err := cl.Model(v)
		if err != nil {
			t.Fatal(err)
		}
		if rep := cl.Report(m); rep.Passes != srv.pass {
			t.Errorf("secagg %v: %d passes reported, the server made %d", secagg, rep.Passes, srv.pass)
		}
	}
}
