package ldpop

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

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
	variant               Variant
	rounds, perRound, fit int
	seed                  uint64
	rho                   float64 // ParamMinShare; 0: absent
	drop                  float64 // per-round dropout of every client but 0
	hostile               *protocoltest.Tamperer
	lateJoiner            bool // client 1 sends nothing in setup, then trains
	// observe, when not nil, is called after every round.
	observe func(srv *server, ri protocol.RoundInfo)
}

// run returns the hooks' round infos, V before the run and after every
// round, and the run's error.
func (c checkedRun) run(t *testing.T, d *ratings.Dataset) ([]protocol.RoundInfo, [][]float32, error) {
	t.Helper()
	cfg := DefaultConfig(c.variant)
	cfg.Rounds, cfg.PerRound, cfg.Refit, cfg.Seed, cfg.Aggregation = c.rounds, c.perRound, c.fit, c.seed, protocol.AggMasked
	st, err := NewServer(cfg, d.Public(), cfg.Seed)
	if err != nil {
		t.Fatal(err)
	}
	srv := st.(*server)
	cl, err := NewClients(d, cfg)
	if err != nil {
		t.Fatal(err)
	}
	clients := slices.Clone(cl.List)
	if c.drop > 0 {
		for k, x := range clients[1:] {
			clients[k+1] = &protocoltest.Dropper{Client: x, P: c.drop}
		}
	}
	if c.lateJoiner {
		clients[1] = &protocoltest.Dropper{Client: cl.List[1], Setup: true}
	}
	if h := c.hostile; h != nil {
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
	err = protocol.RunTransport(context.Background(), srv, protocol.NewMaskedSum(tr, c.seed), protocol.RunOptions{Seed: c.seed,
		MaxRounds: 2*c.rounds + 2,
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

// TestHonestSumsPass: no honest masked sum is refused, for LDP-OP and
// RSMF, several seeds, refits, and dropouts with ρ < 1.
func TestHonestSumsPass(t *testing.T) {
	d := synth(t, 40, 30, 8)
	total := 0
	runs := []checkedRun{
		{variant: LDPOP, rounds: 15, perRound: 25, seed: 1},
		{variant: LDPOP, rounds: 15, perRound: 60, seed: 2},
		{variant: LDPOP, rounds: 15, perRound: 7, seed: 3, fit: 4},
		{variant: RSMF, rounds: 10, perRound: 25, seed: 4},
		{variant: LDPOP, rounds: 15, perRound: 25, seed: 5, rho: 0.8, drop: 0.15},
		{variant: LDPOP, rounds: 15, perRound: 25, seed: 6, rho: 0.5, drop: 0.4},
	}
	for seed := uint64(7); seed <= 16; seed++ {
		runs = append(runs, checkedRun{variant: LDPOP, rounds: 10, perRound: 50, seed: seed, rho: 0.7, drop: 0.2})
	}
	for _, c := range runs {
		infos, _, err := c.run(t, d)
		if err != nil {
			t.Fatalf("%v seed %d: %v", c.variant, c.seed, err)
		}
		for _, ri := range infos {
			if ri.Rejected != nil {
				t.Fatalf("%v seed %d ρ %v: honest round %d refused: %v", c.variant, c.seed, c.rho, ri.Round, ri.Rejected)
			}
			if ri.Phase == protocol.PhaseTrain && ri.Uploads > 0 {
				total++
			}
		}
	}
	if total < 50 {
		t.Fatalf("only %d training sums checked", total)
	}
	t.Logf("%d honest training sums (and their setups) checked, none refused", total)
}

// TestHostileSumsRefused: a client masking a value of 2^28, or inflating
// its arrival word above the inputs or above the announced clients, gets
// every sum it joins refused, reported in RoundInfo.Rejected, with V
// unchanged by the refused rounds while the run goes on; a client that
// was not counted at setup cannot train; inflated setup counts end the
// run before training.
func TestHostileSumsRefused(t *testing.T) {
	d := synth(t, 40, 30, 8)
	last := func(up *protocol.Upload) *uint32 { return &up.Words[len(up.Words)-1] }
	for _, tc := range []struct {
		name   string
		from   int
		tamper func(b *protocol.Broadcast, up *protocol.Upload)
		late   bool
		want   string
	}{
		{"value 2^28", 2, func(b *protocol.Broadcast, up *protocol.Upload) { up.Words[0] += 1 << 28 }, false, "beyond"},
		{"value -2^28", 2, func(b *protocol.Broadcast, up *protocol.Upload) { up.Words[1] -= 1 << 28 }, false, "beyond"},
		{"arrivals above inputs", 2, func(b *protocol.Broadcast, up *protocol.Upload) { *last(up) += 1000 }, false, "arrivals"},
		{"arrivals one above", 2, func(b *protocol.Broadcast, up *protocol.Upload) { *last(up)++ }, false, "arrivals 41 above min(40 inputs, 40"},
		{"client not counted at setup", 1, func(*protocol.Broadcast, *protocol.Upload) {}, true, "arrivals 40 above min(40 inputs, 39 announced)"},
		{"setup count above inputs", 0, func(b *protocol.Broadcast, up *protocol.Upload) {
			if b.Phase == protocol.PhaseSetup {
				up.Words[0] += 100
			}
		}, false, "setup"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := checkedRun{variant: LDPOP, rounds: 5, perRound: 25, seed: 3, lateJoiner: tc.late,
				hostile: &protocoltest.Tamperer{From: tc.from, Tamper: tc.tamper}}
			infos, vs, err := c.run(t, d)
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

// TestCoverageOfInflatedArrivals: the attack. With half the
// clients dropping out, the honest reading of the noise coverage is
// about one half; a client adding the missing half to its arrival word,
// to make the ledger read full coverage, has every such sum refused, and
// a refused round reports no coverage (ok false).
func TestCoverageOfInflatedArrivals(t *testing.T) {
	d := synth(t, 40, 30, 8)
	inflate := &protocoltest.Tamperer{From: 1, Tamper: func(b *protocol.Broadcast, up *protocol.Upload) {
		up.Words[len(up.Words)-1] += 20
	}}
	for _, tc := range []struct {
		name    string
		hostile *protocoltest.Tamperer
	}{{"honest", nil}, {"inflated arrivals", inflate}} {
		t.Run(tc.name, func(t *testing.T) {
			var covs, epss []float64
			refused := 0
			c := checkedRun{variant: LDPOP, rounds: 6, perRound: 25, seed: 2, drop: 0.5, hostile: tc.hostile,
				observe: func(srv *server, ri protocol.RoundInfo) {
					cov, eps, ok := srv.NoiseCoverage(1)
					if ri.Rejected != nil {
						refused++
						if ok {
							t.Errorf("round %d refused, and NoiseCoverage reports %v (ε %v)", ri.Round, cov, eps)
						}
						return
					}
					if ok {
						covs, epss = append(covs, cov), append(epss, eps)
					}
				}}
			if _, _, err := c.run(t, d); err != nil {
				t.Fatal(err)
			}
			if tc.hostile == nil {
				if refused != 0 || len(covs) != 6 || slices.Max(covs) > 0.75 || slices.Min(covs) < 0.25 {
					t.Fatalf("honest dropouts: %d refused, coverages %v (want 6 near 1/2)", refused, covs)
				}
			} else if refused != 6 || len(covs) != 0 {
				t.Fatalf("inflated arrivals: %d of 6 rounds refused, coverages reported %v", refused, covs)
			}
			t.Logf("%d rounds refused, coverages reported %.3v, ε %.3v", refused, covs, epss)
		})
	}
}
