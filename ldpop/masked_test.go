package ldpop

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/privrec/privrec/accountant/rdp"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/secagg"
)

// runHalves runs cfg's server and clients over the in-process transport
// and returns the final V, the server and the clients.
func runHalves(t *testing.T, d *ratings.Dataset, cfg Config, opt protocol.RunOptions) ([]float32, *server, *Clients) {
	t.Helper()
	srv, err := NewServer(cfg, d.Public(), cfg.Seed)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := NewClients(d, cfg)
	if err != nil {
		t.Fatal(err)
	}
	opt.MaxRounds = 2*cfg.Rounds + 2
	if err := protocol.Run(context.Background(), srv, cl.List, opt); err != nil {
		t.Fatal(err)
	}
	v, _ := srv.Factors()
	return v, srv.(*server), cl
}

// TestMaskedUploadsAreDenseWords: on the integer path the server receives
// one sum of integer words per round, over exactly the named positions,
// and never a float value or an item list.
func TestMaskedUploadsAreDenseWords(t *testing.T) {
	d := synth(t, 40, 30, 8)
	cfg := DefaultConfig(LDPOP)
	cfg.Rounds, cfg.PerRound, cfg.Aggregation = 6, 25, protocol.AggMasked
	_, rep, recs := train(t, d, cfg)
	if rep.Noise != "skellam" || rep.Aggregation != "masked" || !(rep.SkellamMu > 0) || rep.Delta != DefaultDelta {
		t.Errorf("report: noise %q, aggregation %q, μ %g, δ %g", rep.Noise, rep.Aggregation, rep.SkellamMu, rep.Delta)
	}
	for _, rec := range recs {
		if len(rec.Uploads) != 1 {
			t.Fatalf("round %d: the server saw %d uploads, want one sum", rec.Round, len(rec.Uploads))
		}
		u := rec.Uploads[0]
		if u.Client != -1 || u.Values != nil || u.Items != nil || u.Scalars != nil {
			t.Fatalf("round %d: the server saw client %d, %d values, %d items", rec.Round, u.Client, len(u.Values), len(u.Items))
		}
		want := 1
		if rec.Round > 0 {
			want = 25 + 1 // the positions and the arrival count
			if got := u.Words[25]; got != 40 {
				t.Errorf("round %d: %d arrivals counted, want 40", rec.Round, got)
			}
		}
		if len(u.Words) != want || rec.Broadcast.Words != want {
			t.Fatalf("round %d: %d words, broadcast asks %d, want %d", rec.Round, len(u.Words), rec.Broadcast.Words, want)
		}
	}
}

// TestMaskedProtocolGivesTheSameModel: the SecAgg+ protocol in process
// gives V bit for bit as the direct sum of the integer uploads.
func TestMaskedProtocolGivesTheSameModel(t *testing.T) {
	d := synth(t, 30, 20, 6)
	cfg := DefaultConfig(LDPOP)
	cfg.Rounds, cfg.PerRound, cfg.Aggregation = 4, 30, protocol.AggMasked
	direct, _, _ := runHalves(t, d, cfg, protocol.RunOptions{Seed: cfg.Seed, Aggregation: protocol.AggMasked})
	masked, _, _ := runHalves(t, d, cfg, protocol.RunOptions{Seed: cfg.Seed, Aggregation: protocol.AggMasked, MaskProtocol: secagg.SimulateSum})
	for p := range direct {
		if math.Float32bits(direct[p]) != math.Float32bits(masked[p]) {
			t.Fatalf("V[%d] = %v with the protocol, %v by direct sums", p, masked[p], direct[p])
		}
	}
}

// TestQuantizationCostsLittle: without noise (RSMF) the integer path's
// V differs from the float path's only by the rounding, and the two
// models' training errors agree to 1e-3.
func TestQuantizationCostsLittle(t *testing.T) {
	d := synth(t, 80, 60, 10)
	cfg := DefaultConfig(RSMF)
	cfg.Rounds, cfg.PerRound, cfg.LearnRate, cfg.Decay, cfg.Refit = 10, 60*10, 1, 1, 5
	cfg.Aggregation = protocol.AggIdeal
	_, fl, _ := train(t, d, cfg)
	cfg.Aggregation = protocol.AggMasked
	_, in, _ := train(t, d, cfg)
	if in.Noise != "none" || in.Aggregation != "masked" {
		t.Errorf("RSMF masked reports noise %q, aggregation %q", in.Noise, in.Aggregation)
	}
	if diff := math.Abs(fl.TrainRMSE - in.TrainRMSE); diff > 1e-3 {
		t.Errorf("train RMSE %g float, %g integer: differ by %g", fl.TrainRMSE, in.TrainRMSE, diff)
	}
}

// TestMaskedAccounting: μ is calibrated so that the run's full passes
// compose to ε·√d per pass at δ, the worst row of a finished pass spends
// exactly that, and one position alone spends less; refit segments add up
// like passes; the clients' accounting is the server's.
func TestMaskedAccounting(t *testing.T) {
	d := synth(t, 30, 12, 6)
	const k = 4
	cases := []struct {
		name               string
		rounds, per, refit int
		passes             int
	}{
		{"one position per round", 5, 1, 0, 1},
		{"one pass per round", 1, 12 * k, 0, 1},
		{"two passes", 4, 12 * k / 2, 0, 2},
		{"two passes, refit every pass", 4, 12 * k / 2, 2, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig(LDPOP)
			cfg.Dim, cfg.Rounds, cfg.PerRound, cfg.Refit = k, tc.rounds, tc.per, tc.refit
			cfg.Aggregation, cfg.Eps = protocol.AggMasked, 0.5
			_, srv, cl := runHalves(t, d, cfg, protocol.RunOptions{Seed: 1, Aggregation: protocol.AggMasked})
			mod, err := cl.Model(srv.v)
			if err != nil {
				t.Fatal(err)
			}
			rep := cl.Report(mod)
			if got := cfg.passes(d.NumItems()); got != tc.passes {
				t.Fatalf("%d passes calibrated, want %d", got, tc.passes)
			}
			target := cfg.Eps * math.Sqrt(k) * float64(tc.passes)
			a := srv.mk.a
			pass := rdp.SkellamEpsilon(srv.mk.mu, 1, math.Min(a*math.Sqrt(k)+2*k, (a+2*math.Sqrt(k))*(a+2*math.Sqrt(k))), a+2*math.Sqrt(k), DefaultDelta)
			one := rdp.SkellamEpsilon(srv.mk.mu, 1, a+2, a+2, DefaultDelta)
			switch {
			case rep.EpsTotal > target*(1+1e-6):
				t.Errorf("ε total %g above the calibrated %g", rep.EpsTotal, target)
			case tc.rounds*tc.per >= 12*k && math.Abs(rep.EpsTotal-rdp.SkellamEpsilon(srv.mk.mu, tc.passes, math.Min(a*math.Sqrt(k)+2*k, (a+2*math.Sqrt(k))*(a+2*math.Sqrt(k))), a+2*math.Sqrt(k), DefaultDelta)) > 1e-9*target:
				t.Errorf("ε total %g, want %d full-row releases' %g (one pass: %g)", rep.EpsTotal, tc.passes, target, pass)
			case tc.per == 1 && math.Abs(rep.EpsRound-one) > 1e-12:
				t.Errorf("ε of a one-position round %g, want %g", rep.EpsRound, one)
			case !(rep.EpsRound <= rep.EpsTotal) || !(rep.EpsTotal <= rep.EpsTotalUser):
				t.Errorf("ε round %g, total %g, user %g: not increasing", rep.EpsRound, rep.EpsTotal, rep.EpsTotalUser)
			case rep.EpsTotal != srv.led.skMax:
				t.Errorf("clients account ε %g, the server %g", rep.EpsTotal, srv.led.skMax)
			}
			if tc.per == 1 && !(one < pass) {
				t.Errorf("one position costs %g, a whole row %g", one, pass)
			}
		})
	}
}

// TestMaskedSnapshot: a masked server restored from its snapshot between
// rounds finishes the run as the uninterrupted one, accounting included.
func TestMaskedSnapshot(t *testing.T) {
	d := synth(t, 30, 15, 6)
	cfg := DefaultConfig(LDPOP)
	cfg.Rounds, cfg.PerRound, cfg.Refit, cfg.Aggregation = 6, 20, 2, protocol.AggMasked
	whole, ws, _ := runHalves(t, d, cfg, protocol.RunOptions{Seed: 1, Aggregation: protocol.AggMasked})

	srv, err := NewServer(cfg, d.Public(), cfg.Seed)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := NewClients(d, cfg)
	if err != nil {
		t.Fatal(err)
	}
	opt := protocol.RunOptions{Seed: 1, Aggregation: protocol.AggMasked, MaxRounds: 4}
	if err := protocol.Run(context.Background(), srv, cl.List, opt); !errors.Is(err, protocol.ErrRounds) {
		t.Fatalf("stopped after 4 rounds: %v", err)
	}
	snap, err := srv.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	again, err := NewServer(cfg, d.Public(), cfg.Seed)
	if err != nil {
		t.Fatal(err)
	}
	if err := again.UnmarshalBinary(snap); err != nil {
		t.Fatal(err)
	}
	opt.StartRound, opt.MaxRounds = again.Round(), 2*cfg.Rounds+2
	if err := protocol.Run(context.Background(), again, cl.List, opt); err != nil {
		t.Fatal(err)
	}
	v, _ := again.Factors()
	for p := range whole {
		if math.Float32bits(whole[p]) != math.Float32bits(v[p]) {
			t.Fatalf("V[%d] = %v resumed, %v uninterrupted", p, v[p], whole[p])
		}
	}
	if a, b := again.(*server).led.skMax, ws.led.skMax; a != b || a == 0 {
		t.Errorf("ε resumed %g, uninterrupted %g", a, b)
	}
}

// TestMaskedConfig: the basic scheme and the mixture noise refuse the
// integer path; δ must be a probability.
func TestMaskedConfig(t *testing.T) {
	basic := DefaultConfig(Basic)
	basic.Aggregation = protocol.AggMasked
	mix := DefaultConfig(LDPOP)
	mix.Aggregation, mix.Noise = protocol.AggMasked, 1
	delta := DefaultConfig(LDPOP)
	delta.Aggregation, delta.Delta = protocol.AggMasked, 1
	for name, c := range map[string]Config{"basic": basic, "mixture": mix, "delta": delta} {
		if err := c.Validate(); err == nil {
			t.Errorf("%s: masked config accepted", name)
		}
	}
}

// lyingServer is a server that announces its own client count to the
// clients (the "clients" parameter their shares were calibrated by) and,
// when roster is set, a roster calibration (protocol.ParamRoster); it
// keeps the training rounds' sums.
type lyingServer struct {
	protocol.Server
	clients, roster float64
	sums            [][]uint32
}

func (l *lyingServer) Broadcast(round int) (*protocol.Broadcast, error) {
	b, err := l.Server.Broadcast(round)
	if err == nil && b.Words > 0 && b.Phase == protocol.PhaseTrain {
		b.Params[paramClients] = l.clients
		if l.roster > 0 {
			b.Params[protocol.ParamRoster] = l.roster
		}
	}
	return b, err
}

func (l *lyingServer) Aggregate(round int, ups []*protocol.Upload) error {
	if len(ups) == 1 && ups[0] != nil && ups[0].Client == -1 && round > 0 {
		l.sums = append(l.sums, slices.Clone(ups[0].Words))
	}
	return l.Server.Aggregate(round, ups)
}

// TestRosterNoiseIgnoresCount mounts issue 31's noise attack: a server
// that announces 2^30 clients shrinks every client's Skellam share
// μ/⌊ρ·n⌋ on the count-calibrated path (the control: the sums' mean
// |word| falls more than tenfold). Under a roster calibration
// (protocol.ParamRoster, which a deployment's clients check against the
// roster they pin) the shares ignore the announced count: the sums are
// the same, bit for bit, whether the server announces 40 clients or 2^30.
func TestRosterNoiseIgnoresCount(t *testing.T) {
	d := synth(t, 40, 30, 8)
	cfg := DefaultConfig(LDPOP)
	cfg.Rounds, cfg.PerRound, cfg.Aggregation = 2, 25, protocol.AggMasked
	run := func(clients, roster float64) [][]uint32 {
		srv, err := NewServer(cfg, d.Public(), cfg.Seed)
		if err != nil {
			t.Fatal(err)
		}
		cl, err := NewClients(d, cfg)
		if err != nil {
			t.Fatal(err)
		}
		l := &lyingServer{Server: srv, clients: clients, roster: roster}
		if err := protocol.Run(context.Background(), l, cl.List, protocol.RunOptions{Seed: 7, Aggregation: protocol.AggMasked, MaxRounds: 2*cfg.Rounds + 2}); err != nil {
			t.Fatal(err)
		}
		if len(l.sums) == 0 {
			t.Fatal("no training sum")
		}
		return l.sums
	}
	meanAbs := func(w []uint32) float64 {
		var s float64
		for _, x := range w[:len(w)-1] { // the positions, not the arrival word
			s += math.Abs(float64(int32(x)))
		}
		return s / float64(len(w)-1)
	}
	honest, lying := run(40, 0), run(1<<30, 0)
	t.Logf("count-calibrated: mean |sum word| %.0f at n = 40, %.0f at n = 2^30", meanAbs(honest[0]), meanAbs(lying[0]))
	if meanAbs(lying[0]) > meanAbs(honest[0])/3 {
		t.Fatalf("control: an inflated count did not shrink the shares (%.0f vs %.0f)", meanAbs(lying[0]), meanAbs(honest[0]))
	}
	ref, got := run(40, 40), run(1<<30, 40)
	for r := range ref {
		if !slices.Equal(ref[r], got[r]) {
			t.Fatalf("roster calibration: training sum %d differs when the server announces 2^30 clients", r)
		}
	}
	t.Logf("roster calibration: mean |sum word| %.0f at n = 40 and at n = 2^30", meanAbs(ref[0]))
}
