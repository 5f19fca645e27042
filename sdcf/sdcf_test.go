package sdcf

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/privrec/privrec/datasets"
	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

// smallData returns a split of a fifth of ml-latest-small's users.
func smallData(t *testing.T) ratings.Split {
	t.Helper()
	d, _, err := datasets.Open("ml-latest-small", ratings.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d, err = ratings.SubsampleUsers(d, 0.2, 1)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ratings.Holdout(d, 0.8, 1)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func quick(loss Loss, private bool, rounds int) Config {
	c := DefaultConfig(loss, private)
	c.Rounds, c.Seed = rounds, 7
	if loss == Squared {
		c.Dim = 10
	}
	return c
}

func TestSameResultAtAnyWorkerCount(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: SDMF at several worker counts (70 s); go test without -short runs it")
	}
	s := smallData(t)
	sd := quick(Squared, true, 4)
	sd.Dropout = 0.2
	tests := []struct {
		name string
		cfg  Config
	}{
		{"sgld-mf", quick(Squared, false, 4)},
		{"sdmf with dropout", sd},
		{"sd-bprmf", quick(BPR, true, 4)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ref *model.Model
			for _, w := range []int{1, 2, 8} {
				tc.cfg.Workers = w
				m, _, err := Train(context.Background(), s.Train, tc.cfg, nil)
				if err != nil {
					t.Fatal(err)
				}
				if ref == nil {
					ref = m
					continue
				}
				if !slices.Equal(m.U, ref.U) || !slices.Equal(m.V, ref.V) {
					t.Fatalf("%d workers give a different model than 1", w)
				}
			}
		})
	}
}

func TestUploadsMatchEq12(t *testing.T) {
	s := smallData(t)
	tests := []struct {
		name    string
		loss    Loss
		z       float64
		dropout float64
	}{
		{"sdmf z = |R|/|U|", Squared, 0, 0},
		{"sdmf z = 40, dropout 0.3", Squared, 40, 0.3},
		{"sd-bprmf", BPR, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := quick(tc.loss, true, 6)
			cfg.Z, cfg.Dropout = tc.z, tc.dropout
			_, rep, err := Train(context.Background(), s.Train, cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.z != 0 && rep.Z != tc.z {
				t.Errorf("Z = %g, want %g", rep.Z, tc.z)
			}
			if math.Abs(rep.ExpectedUploads-rep.Z) > 1e-6*rep.Z {
				t.Errorf("eq. (12) expectation %g, want z = %g", rep.ExpectedUploads, rep.Z)
			}
			// ~120 clients × 6 rounds × z sends: a few percent of noise.
			if math.Abs(rep.UploadsPerClientRound-rep.Z) > 0.05*rep.Z {
				t.Errorf("measured %g uploads per client and round, eq. (12) says %g", rep.UploadsPerClientRound, rep.Z)
			}
			if math.Abs(rep.UnratedFraction-rep.ExpectedUnrated) > 0.03 || !(rep.ExpectedUnrated > 0.5) {
				t.Errorf("%.3f of the uploads were for unrated items, eq. (10)-(12) expect %.3f", rep.UnratedFraction, rep.ExpectedUnrated)
			}
			if math.Abs(rep.Participation-(1-tc.dropout)) > 0.05 {
				t.Errorf("participation %g with dropout %g", rep.Participation, tc.dropout)
			}
		})
	}
}

// TestRRRates checks PRR and IRR frequencies of one client against f, p*
// and q*.
func TestRRRates(t *testing.T) {
	const nItems, h = 4000, 400
	for _, epsI := range []float64{4, 0.25} {
		rr, err := dp.SolveTwoStageRR(2*epsI, epsI, h, nItems, 200)
		if err != nil {
			t.Fatal(err)
		}
		pub := &public{nItems: nItems}
		c := &client{pub: pub, rr: rr}
		for j := range int32(h) {
			c.items = append(c.items, 10*j) // rated: every tenth item
		}
		src := dp.NewPRRSource([]byte("0123456789abcdef"))
		var onesRated int
		for j := range int32(nItems) {
			_, rated := c.rated(j)
			if rr.PRR(src, j, rated) {
				c.ones = append(c.ones, j)
				if rated {
					onesRated++
				}
			}
		}
		frac := func(n, of int) float64 { return float64(n) / float64(of) }
		if got, want := frac(onesRated, h), 1-rr.F/2; math.Abs(got-want) > 4*math.Sqrt(want*(1-want)/h) {
			t.Errorf("ε_I %g: P(B'=1 | rated) = %.3f, want %.3f", epsI, got, want)
		}
		if got, want := frac(len(c.ones)-onesRated, nItems-h), rr.F/2; math.Abs(got-want) > 4*math.Sqrt(want*(1-want)/(nItems-h)) {
			t.Errorf("ε_I %g: P(B'=1 | unrated) = %.3f, want %.3f", epsI, got, want)
		}
		// IRR over many rounds: send rates of rated and unrated items given
		// this B' are q or p per item; average them into p*, q* over items.
		r := rng.New(1)
		const rounds = 400
		var sentRated, sentUnrated int
		for range rounds {
			c.sendSet(r)
			if !slices.IsSorted(c.send) {
				t.Fatal("send set not sorted")
			}
			for _, j := range c.send {
				if _, ok := c.rated(j); ok {
					sentRated++
				} else {
					sentUnrated++
				}
			}
		}
		ps, qs := rr.SendProbs()
		// given this B', E[sent rated] = Σ over rated of q or p
		wantRated := float64(onesRated)*rr.Q + float64(h-onesRated)*rr.P
		wantUnrated := float64(len(c.ones)-onesRated)*rr.Q + float64(nItems-h-len(c.ones)+onesRated)*rr.P
		if got := frac(sentRated, rounds); math.Abs(got-wantRated) > 0.05*wantRated+1 {
			t.Errorf("ε_I %g: %.1f rated items sent per round, want %.1f (q* = %.3f)", epsI, got, wantRated, qs)
		}
		if got := frac(sentUnrated, rounds); math.Abs(got-wantUnrated) > 0.05*wantUnrated+1 {
			t.Errorf("ε_I %g: %.1f unrated items sent per round, want %.1f (p* = %.4f)", epsI, got, wantUnrated, ps)
		}
	}
}

func TestTruncationBoundAndFakeErrors(t *testing.T) {
	tests := []struct{ epsG, mu, sigma float64 }{
		{4, 0, 1}, {1, -0.3, 0.8}, {0.25, 0.5, 1.2}, {0.0625, 0, 0.5},
	}
	r := rng.New(3)
	for _, tc := range tests {
		a, err := dp.TruncationBound(tc.epsG, tc.mu, tc.sigma)
		if err != nil {
			t.Fatal(err)
		}
		mass := 0.5 * (math.Erf((a-tc.mu)/(tc.sigma*math.Sqrt2)) - math.Erf((-a-tc.mu)/(tc.sigma*math.Sqrt2)))
		if got := -math.Log(mass); math.Abs(got-tc.epsG) > 1e-6 {
			t.Errorf("ε_g %g: α = %g gives −ln P(|X| < α) = %g", tc.epsG, a, got)
		}
		// the normal's draws fall inside with probability e^−ε_g, and the
		// truncated sampler stays inside
		const n = 20000
		in := 0
		for range n {
			if x := tc.mu + tc.sigma*r.NormFloat64(); math.Abs(x) < a {
				in++
			}
			if x := truncNormal(r, tc.mu, tc.sigma, a); !(math.Abs(x) <= a) {
				t.Fatalf("ε_g %g: fake error %g outside ±%g", tc.epsG, x, a)
			}
		}
		if got, want := float64(in)/n, math.Exp(-tc.epsG); math.Abs(got-want) > 4*math.Sqrt(want*(1-want)/n) {
			t.Errorf("ε_g %g: %.4f of the draws inside ±α, want %.4f", tc.epsG, got, want)
		}
	}
}

func TestSGLDMFLearns(t *testing.T) {
	s := smallData(t)
	cfg := quick(Squared, false, 30)
	var first, last float64
	m, rep, err := Train(context.Background(), s.Train, cfg, func(st RoundStats) {
		if st.Round == 1 {
			first = st.TrainRMSE
		}
		last = st.TrainRMSE
	})
	if err != nil {
		t.Fatal(err)
	}
	if !(last < first-0.05) || last != rep.TrainRMSE {
		t.Errorf("train RMSE %.4f after round 1, %.4f at the end (report %.4f)", first, last, rep.TrainRMSE)
	}
	var mean float64
	for _, v := range s.Train.Values {
		mean += float64(v)
	}
	mean /= float64(s.Train.Len())
	var se float64
	for _, v := range s.Test.Values {
		se += (float64(v) - mean) * (float64(v) - mean)
	}
	if got, base := eval.Rating(m, s.Test).RMSE, math.Sqrt(se/float64(s.Test.Len())); !(got < base) {
		t.Errorf("test RMSE %.4f does not beat the global mean's %.4f", got, base)
	}
}

func TestLedger(t *testing.T) {
	s := smallData(t)
	cfg := quick(Squared, true, 5)
	cfg.EpsG, cfg.EpsI = 0.5, 0.25
	_, rep, err := Train(context.Background(), s.Train, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Report{EpsG: Spend{0.5, 2.5}, EpsI: Spend{0.25, 1.25}, EpsP: Spend{0.5, 0.5}}
	near := func(a, b Spend) bool { return math.Abs(a.Round-b.Round) < 1e-9 && math.Abs(a.Total-b.Total) < 1e-9 }
	if !near(rep.EpsG, want.EpsG) || !near(rep.EpsI, want.EpsI) || !near(rep.EpsP, want.EpsP) {
		t.Errorf("spent ε_g %+v, ε_I %+v, ε_P %+v; want %+v, %+v, %+v", rep.EpsG, rep.EpsI, rep.EpsP, want.EpsG, want.EpsI, want.EpsP)
	}
	if got := rep.ExistenceTotal; math.Abs(got-(0.5+2.5)) > 1e-9 {
		t.Errorf("existence total %g, want min(ε_P, Tε_I) + Tε_g = 3", got)
	}
}

func TestBPRRanks(t *testing.T) {
	d, _, err := datasets.Open("ml-latest-small", ratings.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := ratings.LeaveOneOut(d, 1)
	if err != nil {
		t.Fatal(err)
	}
	cfg := quick(BPR, false, 20)
	m, _, err := Train(context.Background(), s.Train, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auc := eval.Rank(m, s.Train, s.Test, 10, s.Train.Scale.Min).AUC; !(auc > 0.75) {
		t.Errorf("BPR-MF by SGLD: leave-one-out AUC %.4f", auc)
	}
}

func TestConfigErrors(t *testing.T) {
	bad := []func(*Config){
		func(c *Config) { c.Dim = 0 },
		func(c *Config) { c.Rounds = 0 },
		func(c *Config) { c.LR0 = math.NaN() },
		func(c *Config) { c.Dropout = 1 },
		func(c *Config) { c.Private, c.EpsI = true, 0 },
		func(c *Config) { c.Private, c.EpsG = true, -1 },
		func(c *Config) { c.Lambda, c.LambdaRate = 0, 0 },
		func(c *Config) { c.Lambda = -0.1 },
		func(c *Config) { c.ServerStep = math.Inf(1) },
		func(c *Config) { c.Dim = 1 }, // ItemBias needs a second coordinate
	}
	for k, f := range bad {
		c := DefaultConfig(Squared, false)
		f(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("case %d: no error for %+v", k, c)
		}
	}
}

// TestServerUpdate checks Aggregate's rule on hand-made uploads: the prior
// term η Λ_v v_j applied once, the data part averaged over n + n0 and
// scaled by κ; items nobody sent stay.
func TestServerUpdate(t *testing.T) {
	tests := []struct{ kappa, n0 float64 }{{1, 0}, {2, 0}, {4, 3}}
	for _, tc := range tests {
		v := []float32{1, 2, 3, 4}
		lam := []float32{0.5, 0.25}
		s := newServer(2, 2, 1, 0.1, 0, tc.kappa, lam, v) // η = 0.1 at every round
		s.pseudo = tc.n0
		g1, g2 := []float32{0.3, -0.2}, []float32{0.1, 0.6}
		ups := []*protocol.Upload{
			{Client: 0, Items: []int32{0}, Values: g1},
			{Client: 1, Items: []int32{0}, Values: g2},
		}
		if err := s.Aggregate(0, ups); err != nil {
			t.Fatal(err)
		}
		for d, v0 := range []float64{1, 2} {
			prior := 0.1 * float64(lam[d]) * v0
			want := v0 - prior - tc.kappa*(float64(g1[d])+float64(g2[d])-2*prior)/(2+tc.n0)
			if math.Abs(float64(v[d])-want) > 1e-6 {
				t.Errorf("κ %g n0 %g: v_0[%d] = %g, want %g", tc.kappa, tc.n0, d, v[d], want)
			}
		}
		if tc.kappa == 1 && tc.n0 == 0 { // the plain mean of what arrived
			if want := 1 - (0.3+0.1)/2; math.Abs(float64(v[0])-want) > 1e-6 {
				t.Errorf("κ = 1: v_0[0] = %g, want the mean step %g", v[0], want)
			}
		}
		if v[2] != 3 || v[3] != 4 {
			t.Errorf("item nobody sent moved to %v", v[2:])
		}
	}
}

// TestItemBiasCoordinate checks that the offset coordinate of every user
// vector stays exactly 1 and that v_j[0] learns item offsets: it correlates
// with the items' mean centred rating.
func TestItemBiasCoordinate(t *testing.T) {
	s := smallData(t)
	cfg := quick(Squared, false, 20)
	m, _, err := Train(context.Background(), s.Train, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	byUser := s.Train.ByUser()
	for u := range s.Train.NumUsers() {
		if byUser.RowLen(u) > 0 && m.U[u*m.Dim] != 1 {
			t.Fatalf("user %d: u[0] = %g, want 1", u, m.U[u*m.Dim])
		}
	}
	n := s.Train.NumItems()
	sum, cnt := make([]float64, n), make([]float64, n)
	for k := range s.Train.Values {
		i := s.Train.Items[k]
		sum[i] += float64(s.Train.Values[k] - m.Offset[s.Train.Users[k]])
		cnt[i]++
	}
	var xs, ys []float64
	for j := range n {
		if cnt[j] >= 10 {
			xs, ys = append(xs, sum[j]/cnt[j]), append(ys, float64(m.V[j*m.Dim]))
		}
	}
	if r := corr(xs, ys); !(r > 0.5) {
		t.Errorf("correlation of v_j[0] with the item's mean centred rating %.3f over %d items", r, len(xs))
	}
}

func corr(x, y []float64) float64 {
	var mx, my float64
	for k := range x {
		mx, my = mx+x[k], my+y[k]
	}
	mx, my = mx/float64(len(x)), my/float64(len(y))
	var sxy, sxx, syy float64
	for k := range x {
		sxy += (x[k] - mx) * (y[k] - my)
		sxx += (x[k] - mx) * (x[k] - mx)
		syy += (y[k] - my) * (y[k] - my)
	}
	return sxy / math.Sqrt(sxx*syy)
}

// TestDivergenceIsAnError: a step far too large ends the run with
// ErrDiverged instead of NaN factors.
func TestDivergenceIsAnError(t *testing.T) {
	s := smallData(t)
	for _, private := range []bool{false, true} {
		cfg := quick(Squared, private, 20)
		cfg.LR0 = 50
		_, _, err := Train(context.Background(), s.Train, cfg, nil)
		if !errors.Is(err, ErrDiverged) {
			t.Errorf("private %v, η_0 = 50: err = %v, want ErrDiverged", private, err)
		}
	}
}

// TestSDMFLearnsAndFollowsEpsG: SDMF beats the users' own means (the model
// before any learning) and its RMSE grows as ε_g falls (wider fake errors);
// with κ = 1, the plain mean of what arrives, it learns less. (On ML-100K
// validation: 0.978, 0.989 and 1.003; see DefaultConfig.)
func TestSDMFLearnsAndFollowsEpsG(t *testing.T) {
	s := smallData(t)
	rmse := func(epsG, kappa float64, rounds int) float64 {
		cfg := quick(Squared, true, rounds)
		cfg.EpsG, cfg.ServerStep = epsG, kappa
		m, _, err := Train(context.Background(), s.Train, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		return eval.Rating(m, s.Test).RMSE
	}
	cfg := quick(Squared, false, 1) // the offsets only: each user's own mean
	cfg.LR0 = 1e-9
	m0, _, err := Train(context.Background(), s.Train, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	base := eval.Rating(m0, s.Test).RMSE
	hi, inf, plain := rmse(4, 4, 25), rmse(0, 4, 25), rmse(4, 1, 25)
	t.Logf("users' means %.4f; SDMF ε_g = 4: %.4f, α = ∞: %.4f; κ = 1: %.4f", base, hi, inf, plain)
	// ~120 clients: the real gradients are few, so the margins are small.
	if !(hi < base-0.005) {
		t.Errorf("SDMF ε_g = 4 RMSE %.4f does not beat the users' means %.4f by 0.005", hi, base)
	}
	if !(hi < inf-0.02) {
		t.Errorf("SDMF ε_g = 4 RMSE %.4f not 0.02 below α = ∞'s %.4f", hi, inf)
	}
	if !(plain > hi) {
		t.Errorf("κ = 1 RMSE %.4f not above κ = 4's %.4f", plain, hi)
	}
}

// TestTranscriptRecordsWhatTheServerAggregates reads back the transcript
// of a short SDMF run: one record per round, a header with the public
// parameters, and uploads that, replayed through the server's update rule
// from the first broadcast's V, give every later broadcast and the final V
// exactly. Writing the transcript does not change the run.
func TestTranscriptRecordsWhatTheServerAggregates(t *testing.T) {
	d, err := ratings.Synthetic(ratings.SyntheticConfig{Users: 200, Items: 300, Rank: 5, PerUser: 30, MinPerUser: 10, Noise: 0.3}, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		loss    Loss
		private bool
		method  string
	}{{Squared, true, "sdmf"}, {Squared, false, "sgld-mf"}, {BPR, true, "sd-bprmf"}} {
		t.Run(tc.method, func(t *testing.T) {
			cfg := quick(tc.loss, tc.private, 4)
			cfg.Dropout = 0.1
			plain, _, err := Train(context.Background(), d, cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			cfg.Transcript = &buf
			m, rep, err := Train(context.Background(), d, cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(m.V, plain.V) || !slices.Equal(m.U, plain.U) {
				t.Fatal("the run with a transcript differs from the run without")
			}
			tr, err := protocol.NewTranscriptReader(&buf)
			if err != nil {
				t.Fatal(err)
			}
			h := tr.Header()
			if h.Method != tc.method || h.NumClients != rep.Clients {
				t.Errorf("header method %q with %d clients, want %q with %d", h.Method, h.NumClients, tc.method, rep.Clients)
			}
			num := func(key string) float64 {
				x, err := strconv.ParseFloat(h.Meta[key], 64)
				if err != nil {
					t.Fatalf("meta %q: %v", key, err)
				}
				return x
			}
			var lamV []float32
			for _, f := range strings.Split(h.Meta["lambda_v"], ",") {
				x, err := strconv.ParseFloat(f, 32)
				if err != nil {
					t.Fatal(err)
				}
				lamV = append(lamV, float32(x))
			}
			if len(lamV) != cfg.Dim || lamV[0] != float32(cfg.Lambda) {
				t.Errorf("lambda_v %q, want %d values %g", h.Meta["lambda_v"], cfg.Dim, cfg.Lambda)
			}
			if _, ok := h.Meta["eps_i"]; ok != tc.private {
				t.Errorf("eps_i in the header: %v, private %v", ok, tc.private)
			}
			if tc.private && (num("z") != rep.Z || num("eps_p") != 2*cfg.EpsI) {
				t.Errorf("header z %s, eps_p %s; want %g, %g", h.Meta["z"], h.Meta["eps_p"], rep.Z, 2*cfg.EpsI)
			}
			var srv *server
			var ups, items int
			for round := 0; ; round++ {
				rec, err := tr.Next()
				if err == io.EOF {
					if round != cfg.Rounds {
						t.Errorf("%d records, want one per round (%d)", round, cfg.Rounds)
					}
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				b := rec.Broadcast
				if rec.Round != round || b.Phase != protocol.PhaseTrain || b.Dim != cfg.Dim {
					t.Fatalf("record %d: round %d, phase %q, dim %d", round, rec.Round, b.Phase, b.Dim)
				}
				if srv == nil {
					srv = newServer(cfg.Dim, b.NumItems, cfg.Rounds, num("lr0"), num("gamma"), num("server_step"), lamV, slices.Clone(b.V))
					srv.pseudo = num("server_pseudo")
				}
				if !slices.Equal(b.V, srv.v) || b.Param("eta", 0) != srv.eta(round) {
					t.Fatalf("round %d: broadcast differs from the replayed server", round)
				}
				for _, up := range rec.Uploads {
					ups++
					items += len(up.Items)
					if up.Round != round || len(up.Values) != len(up.Items)*cfg.Dim {
						t.Fatalf("round %d: upload of client %d for round %d, %d values for %d items", round, up.Client, up.Round, len(up.Values), len(up.Items))
					}
				}
				if err := srv.Aggregate(round, rec.Uploads); err != nil {
					t.Fatal(err)
				}
			}
			if !slices.Equal(srv.v, m.V) {
				t.Error("replaying the transcript's uploads does not give the trained V")
			}
			if got := float64(items) / float64(ups); got != rep.UploadsPerClientRound {
				t.Errorf("transcript: %g items per upload, report %g", got, rep.UploadsPerClientRound)
			}
			if got := float64(ups) / float64(rep.Clients*cfg.Rounds); got != rep.Participation || got == 1 {
				t.Errorf("transcript: participation %g, report %g (dropout %g)", got, rep.Participation, cfg.Dropout)
			}
		})
	}
}

func TestMethodName(t *testing.T) {
	alphaInf := DefaultConfig(Squared, true)
	alphaInf.EpsG = 0
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{DefaultConfig(Squared, false), "sgld-mf"},
		{DefaultConfig(Squared, true), "sdmf"},
		{alphaInf, "sdmf-alpha-inf"},
		{DefaultConfig(BPR, false), "bpr-sgld"},
		{DefaultConfig(BPR, true), "sd-bprmf"},
	} {
		if got := tc.cfg.MethodName(); got != tc.want {
			t.Errorf("%v private %v ε_g %g: %q, want %q", tc.cfg.Loss, tc.cfg.Private, tc.cfg.EpsG, got, tc.want)
		}
	}
}
