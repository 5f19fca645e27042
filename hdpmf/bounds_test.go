package hdpmf

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/protocol/protocoltest"
	"github.com/privrec/privrec/ratings"
)

// rhoTransport sets ParamMinShare in every broadcast, as a deployment
// provisioning for dropouts does (in the server's broadcast too, which
// CheckSum reads).
type rhoTransport struct {
	protocol.Transport
	rho float64
}

func (t rhoTransport) Exchange(ctx context.Context, b *protocol.Broadcast) ([]*protocol.Upload, error) {
	b.Params[protocol.ParamMinShare] = t.rho
	return t.Transport.Exchange(ctx, b)
}

// checkedRun is one masked run for the bounds tests.
type checkedRun struct {
	variant Variant
	rounds  int
	seed    uint64
	rho     float64 // ParamMinShare; 0: absent
	drop    float64 // per-round dropout of every client
	hostile *protocoltest.Tamperer
	noTail  bool // the negative control: the bound without its noise tail
	// unchecked runs the server without its SumChecker, as before.
	unchecked bool
	// clients, when not nil, receives the run's clients.
	clients **Clients
	// observe, when not nil, is called after every round.
	observe func(srv protocol.Stateful, ri protocol.RoundInfo)
}

// run returns the hooks' round infos, V before the run and after every
// round, and the run's error.
func (c checkedRun) run(t *testing.T, train *ratings.Dataset) ([]protocol.RoundInfo, [][]float32, error) {
	t.Helper()
	cfg := DefaultConfig(c.variant)
	cfg.Rounds, cfg.Seed, cfg.Aggregation = c.rounds, c.seed, protocol.AggMasked
	srv, err := NewServer(cfg, train.Public(), cfg.Seed)
	if err != nil {
		t.Fatal(err)
	}
	if c.noTail {
		srv.(*server).chk.mu = 0
	}
	cl, err := NewClients(train, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c.clients != nil {
		*c.clients = cl
	}
	clients := slices.Clone(cl.List)
	if c.drop > 0 {
		for k, x := range clients {
			clients[k] = &protocoltest.Dropper{Client: x, P: c.drop}
		}
	}
	if h := c.hostile; h != nil { // client 0, which never drops out
		h.Client = cl.List[0]
		clients[0] = h
	}
	in, err := protocol.NewInMem(clients, 2, c.seed)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var tr protocol.Transport = in
	if c.rho > 0 {
		tr = rhoTransport{in, c.rho}
	}
	v, _ := srv.Factors()
	vs := [][]float32{slices.Clone(v)}
	var infos []protocol.RoundInfo
	var run protocol.Server = srv
	if c.unchecked {
		run = struct{ protocol.Server }{srv} // hides CheckSum
	}
	err = protocol.RunTransport(context.Background(), run, protocol.NewMaskedSum(tr, c.seed), protocol.RunOptions{Seed: c.seed,
		OnRound: func(ri protocol.RoundInfo) error {
			infos = append(infos, ri)
			if c.observe != nil {
				c.observe(srv, ri)
			}
			v, _ := srv.Factors()
			vs = append(vs, slices.Clone(v))
			return nil
		}})
	return infos, vs, err
}

// TestHonestSumsPass: no honest masked sum is refused, over every
// variant, several seeds, and dropouts with ρ < 1 (the noise tail then
// grows with the arrivals beyond ⌊ρ·n_j⌋).
func TestHonestSumsPass(t *testing.T) {
	train := tiny(t, 60)
	total := 0
	for _, c := range []checkedRun{
		{variant: HDPMF, rounds: 12, seed: 1}, {variant: HDPMF, rounds: 12, seed: 2},
		{variant: HDPMF, rounds: 12, seed: 3}, {variant: HDPMFR, rounds: 8, seed: 4},
		{variant: DPMF, rounds: 8, seed: 5}, {variant: PDPMF, rounds: 8, seed: 6},
		{variant: Plain, rounds: 5, seed: 7},
		{variant: HDPMF, rounds: 12, seed: 8, rho: 0.8, drop: 0.15},
		{variant: HDPMF, rounds: 12, seed: 9, rho: 0.5, drop: 0.4},
	} {
		infos, _, err := c.run(t, train)
		if err != nil {
			t.Fatalf("%v seed %d: %v", c.variant, c.seed, err)
		}
		for _, ri := range infos {
			if ri.Rejected != nil {
				t.Fatalf("%v seed %d ρ %v: honest round %d refused: %v", c.variant, c.seed, c.rho, ri.Round, ri.Rejected)
			}
			if ri.Phase == protocol.PhaseTrain {
				total++
			}
		}
	}
	if total < 50 {
		t.Fatalf("only %d training rounds checked", total)
	}
	t.Logf("%d honest training rounds (and their setups) checked, none refused", total)
}

// TestHostileSumsRefused: a client masking a value of 2^28, or inflating
// its arrival words above the inputs or above the announced count, gets
// every sum it joins refused, reported in RoundInfo.Rejected, with V
// unchanged by the refused rounds; inflated setup counts end the run
// before training.
func TestHostileSumsRefused(t *testing.T) {
	train := tiny(t, 60)
	const k = 10 // DefaultConfig's Dim
	for _, tc := range []struct {
		name    string
		from    int
		tamper  func(b *protocol.Broadcast, up *protocol.Upload)
		want    string
		variant Variant
	}{
		// Half the most every rater of the item could add, on every
		// coordinate of the row: within each coordinate's bound, beyond
		// the row's L2 bound (Plain: no noise to hide it).
		{"row spread within coordinates", 2, func(b *protocol.Broadcast, up *protocol.Upload) {
			for d := range k {
				up.Words[d] += uint32(b.Counts[up.Items[0]]) * 1152 / 2
			}
		}, "row L2 norm", Plain},
		{"value 2^28", 2, func(b *protocol.Broadcast, up *protocol.Upload) { up.Words[0] += 1 << 28 }, "beyond", HDPMF},
		{"value -2^28", 2, func(b *protocol.Broadcast, up *protocol.Upload) { up.Words[3] -= 1 << 28 }, "beyond", HDPMF},
		{"arrivals above inputs", 2, func(b *protocol.Broadcast, up *protocol.Upload) { up.Words[k] += 1000 }, "arrivals", HDPMF},
		{"arrivals above announced", 2, func(b *protocol.Broadcast, up *protocol.Upload) {
			// The item the fewest announced: add its count, which stays
			// below the 60 inputs.
			n := slices.IndexFunc(up.Items, func(j int32) bool {
				return b.Counts[j] == slices.Min(countsOf(b, up.Items))
			})
			up.Words[n*(k+1)+k] += uint32(b.Counts[up.Items[n]])
		}, "announced", HDPMF},
		{"setup counts above inputs", 0, func(b *protocol.Broadcast, up *protocol.Upload) {
			if b.Phase == protocol.PhaseSetup {
				up.Words[0] += 100
			}
		}, "setup", HDPMF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := checkedRun{variant: tc.variant, rounds: 4, seed: 3, hostile: &protocoltest.Tamperer{From: tc.from, Tamper: tc.tamper}}
			infos, vs, err := c.run(t, train)
			if tc.from == 0 { // a refused setup: no training
				if err == nil || len(infos) != 1 || infos[0].Rejected == nil {
					t.Fatalf("refused setup: run error %v, infos %+v", err, infos)
				}
				t.Logf("setup refused: %v; the run: %v", infos[0].Rejected, err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for r, ri := range infos {
				refused := ri.Rejected != nil
				if want := ri.Phase == protocol.PhaseTrain && r >= tc.from; refused != want {
					t.Fatalf("round %d (%s): refused %v (%v), want %v", r, ri.Phase, refused, ri.Rejected, want)
				}
				if !refused {
					continue
				}
				if !errors.Is(ri.Rejected, protocol.ErrOutOfBounds) || !strings.Contains(ri.Rejected.Error(), tc.want) {
					t.Fatalf("round %d: %v, want ErrOutOfBounds naming %q", r, ri.Rejected, tc.want)
				}
				if !slices.Equal(vs[r], vs[r+1]) {
					t.Fatalf("round %d was refused and V changed", r)
				}
			}
			t.Logf("%v", infos[tc.from].Rejected)
		})
	}
}

func countsOf(b *protocol.Broadcast, items []int32) []int32 {
	out := make([]int32, len(items))
	for n, j := range items {
		out[n] = b.Counts[j]
	}
	return out
}

// TestNoiseTailMatters is the negative control: without the noise tail
// the bound (arrivals × clip × scale alone) refuses honest sums.
func TestNoiseTailMatters(t *testing.T) {
	infos, _, err := checkedRun{variant: HDPMF, rounds: 4, seed: 1, noTail: true}.run(t, tiny(t, 60))
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for _, ri := range infos {
		if ri.Rejected != nil {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("no honest round refused without the noise tail: the test does not exercise it")
	}
	t.Logf("without the noise tail %d of %d rounds refused: %v", refused, len(infos), infos[1].Rejected)
}

// TestCoverageOfInflatedArrivals: with half the clients dropping out, the
// honest reading of the noise coverage is below 1; a client inflating its
// arrival words to make it read 1 (adding each item's announced count)
// has every such sum refused, and a refused round reports no coverage
// (ok false) rather than a full one.
func TestCoverageOfInflatedArrivals(t *testing.T) {
	train := tiny(t, 60)
	const k = 10
	inflate := &protocoltest.Tamperer{From: 1, Tamper: func(b *protocol.Broadcast, up *protocol.Upload) {
		for n, j := range up.Items {
			up.Words[n*(k+1)+k] += uint32(b.Counts[j])
		}
	}}
	for _, tc := range []struct {
		name    string
		hostile *protocoltest.Tamperer
	}{{"honest", nil}, {"inflated arrivals", inflate}} {
		t.Run(tc.name, func(t *testing.T) {
			var covs []float64
			refused := 0
			c := checkedRun{variant: HDPMF, rounds: 6, seed: 2, drop: 0.5, hostile: tc.hostile,
				observe: func(srv protocol.Stateful, ri protocol.RoundInfo) {
					cov, eps, ok := srv.(protocol.NoiseCoverage).NoiseCoverage(1)
					if ri.Rejected != nil {
						refused++
						if ok {
							t.Errorf("round %d refused, and NoiseCoverage reports %v (ε %v)", ri.Round, cov, eps)
						}
						return
					}
					if ok {
						covs = append(covs, cov)
					}
				}}
			if _, _, err := c.run(t, train); err != nil {
				t.Fatal(err)
			}
			if tc.hostile == nil {
				if refused != 0 || len(covs) != 6 || slices.Max(covs) >= 1 {
					t.Fatalf("honest dropouts: %d refused, coverages %v (want 6 below 1)", refused, covs)
				}
			} else if refused != 6 || len(covs) != 0 {
				t.Fatalf("inflated arrivals: %d of 6 rounds refused, coverages reported %v", refused, covs)
			}
			t.Logf("%d rounds refused, coverages reported %.3v", refused, covs)
		})
	}
}

// BenchmarkCheckSumML1M is the cost of checking one masked training sum
// of MovieLens 1M at K = 10 (3,706 items × 11 words), to set beside a
// round's (BenchmarkEpochML1M).
func BenchmarkCheckSumML1M(b *testing.B) {
	d := ml1m(b)
	cfg := DefaultConfig(HDPMF)
	cfg.Rounds, cfg.Aggregation = 1000, protocol.AggMasked
	st, err := NewServer(cfg, d.Public(), cfg.Seed)
	if err != nil {
		b.Fatal(err)
	}
	cl, err := NewClients(d, cfg)
	if err != nil {
		b.Fatal(err)
	}
	in, err := protocol.NewInMem(cl.List, 0, 1)
	if err != nil {
		b.Fatal(err)
	}
	tr := protocol.NewMaskedSum(in, 1)
	ctx := context.Background()
	var sum *protocol.Upload
	for round := range 2 {
		bc, err := st.Broadcast(round)
		if err != nil {
			b.Fatal(err)
		}
		ups, err := tr.Exchange(ctx, bc)
		if err != nil {
			b.Fatal(err)
		}
		if round == 1 {
			sum = ups[0]
			break
		}
		if err := st.Aggregate(round, ups); err != nil {
			b.Fatal(err)
		}
	}
	srv := st.(*server)
	b.ResetTimer()
	for range b.N {
		if err := srv.CheckSum(1, sum, tr.SumInputs()); err != nil {
			b.Fatal(err)
		}
	}
}

// TestHostileValueKeepsTheModel: the attack end to end. One
// client adding 2^28 to a masked coordinate from round 6 on wrecks the
// released V when sums are folded unchecked (an entry of millions);
// checked, the refused rounds leave V as round 5 left it, and the test
// RMSE stays near the honest run's. (The published posterior-mean table
// and the devices' fold-in confine the wrecked item's damage to its own
// predictions, so the unchecked run's RMSE is no longer the symptom.)
func TestHostileValueKeepsTheModel(t *testing.T) {
	if testing.Short() {
		t.Skip("three masked runs on ml-latest-small")
	}
	train, test := small(t)
	hostile := func() *protocoltest.Tamperer {
		return &protocoltest.Tamperer{From: 6, Tamper: func(b *protocol.Broadcast, up *protocol.Upload) {
			if b.Phase == protocol.PhaseTrain {
				up.Words[0] += 1 << 28
			}
		}}
	}
	rmse, peak := map[string]float64{}, map[string]float64{}
	for _, tc := range []struct {
		name string
		c    checkedRun
	}{
		{"honest", checkedRun{variant: HDPMF, rounds: 10, seed: 1}},
		{"hostile, unchecked", checkedRun{variant: HDPMF, rounds: 10, seed: 1, hostile: hostile(), unchecked: true}},
		{"hostile, checked", checkedRun{variant: HDPMF, rounds: 10, seed: 1, hostile: hostile()}},
	} {
		var cl *Clients
		tc.c.clients = &cl
		infos, vs, err := tc.c.run(t, train)
		if err != nil {
			t.Fatal(err)
		}
		refused := 0
		for _, ri := range infos {
			if ri.Rejected != nil {
				refused++
			}
		}
		m, err := cl.Model(vs[len(vs)-1])
		if err != nil {
			t.Fatal(err)
		}
		rmse[tc.name] = eval.Rating(m, test).RMSE
		for _, x := range vs[len(vs)-2] { // the last training round's V
			peak[tc.name] = max(peak[tc.name], math.Abs(float64(x)))
		}
		t.Logf("%s: %d rounds refused, largest |V| %.4g, test RMSE %.4f", tc.name, refused, peak[tc.name], rmse[tc.name])
	}
	if h, u, c := peak["honest"], peak["hostile, unchecked"], peak["hostile, checked"]; !(u > 100*h) || !(c < 2*h) {
		t.Fatalf("largest |V|: honest %.4g, hostile unchecked %.4g, checked %.4g", h, u, c)
	}
	if h, c := rmse["honest"], rmse["hostile, checked"]; !(c < h+0.1) {
		t.Fatalf("test RMSE honest %.4f, hostile checked %.4f", h, c)
	}
}
