package dpease

import (
	"context"
	"math"
	"testing"

	"github.com/privrec/privrec/accountant/rdp"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
)

// runOver runs cfg on d over the cohort transport with chooser choose
// (nil: the honest seeded choice), the server adding no noise when quiet,
// and returns the server and the transport.
func runOver(t *testing.T, d *ratings.Dataset, cfg Config, choose protocol.CohortChooser, quiet bool) (*Server, *protocol.Cohorts, *Clients) {
	t.Helper()
	cfg = cfg.WithRoster(d)
	srv, err := NewServer(cfg, d.Public(), 1)
	if err != nil {
		t.Fatal(err)
	}
	srv.zeroNoise = quiet
	cl := mustClients(t, d, cfg)
	tr, err := protocol.NewCohorts(cl.List, cfg.Participation(), choose, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := protocol.RunTransport(context.Background(), srv, protocol.NewSecureSum(tr), protocol.RunOptions{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	return srv, tr, cl
}

// near reports whether two sums agree up to the float32 rounding of
// the uploads (SecureSum adds float32 values).
func near(a, b float64) bool { return math.Abs(a-b) <= 1e-5*math.Max(1, math.Abs(b)) }

// TestCohortSumsAddUpEachUserOnce: over disjoint cohorts the pooled
// released sums (without noise) equal the roster's, each user counted
// once in the counts and once in the Gram, whether the server picks
// honestly or asks everyone in every round; the devices' limits make the
// second kind of server get each user once as well.
func TestCohortSumsAddUpEachUserOnce(t *testing.T) {
	d := synth(90, 30, 5)
	base := DefaultConfig()
	base.TopItems, base.Cap, base.Seeded, base.FracCounts = 12, 4, true, 0.3
	roster, _, _ := runOver(t, d, base, nil, true)
	everyone := func(_ int, _ []int, _ int) []int {
		out := make([]int, d.NumUsers())
		for k := range out {
			out[k] = k
		}
		return out
	}
	for _, c := range []struct {
		name           string
		cohort, rounds int
		choose         protocol.CohortChooser
	}{
		{"honest, 3 cohorts of 30", 30, 3, nil},
		{"honest, 4 cohorts of 25", 25, 4, nil},
		{"everyone every round", 30, 3, everyone},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := base
			cfg.Cohort, cfg.CohortRounds = c.cohort, c.rounds
			srv, tr, cl := runOver(t, d, cfg, c.choose, true)
			for j := range roster.st.Counts {
				if !near(srv.st.Counts[j], roster.st.Counts[j]) {
					t.Fatalf("item %d: pooled count %g, roster %g", j, srv.st.Counts[j], roster.st.Counts[j])
				}
			}
			if len(srv.gram) != len(roster.gram) {
				t.Fatalf("pooled Gram of %d entries, roster %d", len(srv.gram), len(roster.gram))
			}
			for p := range roster.gram {
				if !near(srv.gram[p], roster.gram[p]) {
					t.Fatalf("Gram entry %d: pooled %g, roster %g", p, srv.gram[p], roster.gram[p])
				}
			}
			for _, x := range cl.List {
				var counts, grams int
				for _, r := range tr.Answered(x.ID()) {
					if r < c.rounds {
						counts++
					} else {
						grams++
					}
				}
				if counts != 1 || grams != 1 {
					t.Errorf("user %d answered %d counts and %d Gram rounds (%v), want one of each", x.ID(), counts, grams, tr.Answered(x.ID()))
				}
			}
			if n := len(srv.Ledger().Releases()); n != 2*c.rounds {
				t.Errorf("%d releases, want %d", n, 2*c.rounds)
			}
		})
	}
}

// TestCohortAccounting recomputes a cohort run's ε: every set of rounds
// protocol.Participation.Allows admits under the config's limits,
// enumerated, costs at most one counts and one Gram release, and the
// costliest set's Gaussian Rényi curves, composed and converted, give
// the reported ε, which is the target: the continual release over
// cohorts costs what the roster's two releases cost.
func TestCohortAccounting(t *testing.T) {
	d := synth(90, 30, 5)
	for _, rounds := range []int{2, 3, 5} {
		cfg := DefaultConfig()
		cfg.TopItems, cfg.Cap, cfg.Seeded = 12, 4, true
		cfg.Cohort, cfg.CohortRounds = 30, rounds
		m, rep, err := Train(context.Background(), d, cfg, 1)
		if err != nil {
			t.Fatal(err)
		}
		rel := rep.Ledger.Releases()
		if len(rel) != 2*rounds || m == nil {
			t.Fatalf("%d rounds: %d releases", rounds, len(rel))
		}
		p := cfg.Participation()
		worst, worstCurve := 0.0, rdp.Compose()
		for mask := 1; mask < 1<<len(rel); mask++ {
			var set []int
			ok := true
			for r := range rel {
				if mask&(1<<r) == 0 {
					continue
				}
				if ok = p.Allows(set, r); !ok {
					break
				}
				set = append(set, r)
			}
			if !ok {
				continue
			}
			var rho float64
			var cs []rdp.Curve
			for _, r := range set {
				rho += rel[r].L2 * rel[r].L2 / (2 * rel[r].Sigma * rel[r].Sigma)
				cs = append(cs, rdp.GaussianCurve(rel[r].Sigma, rel[r].L2))
			}
			if len(set) > 2 || (len(set) == 2 && (set[0] >= rounds || set[1] < rounds)) {
				t.Errorf("%d rounds: the limits allow rounds %v", rounds, set)
			}
			if rho > worst {
				worst, worstCurve = rho, rdp.Compose(cs...)
			}
		}
		want, _ := rdp.ZCDPRhoFor(cfg.Eps, cfg.Delta)
		grid, _ := rdp.ToDP(worstCurve, cfg.Delta)
		if math.Abs(worst-want) > 1e-9*want || math.Abs(rep.Eps-cfg.Eps) > 1e-6 || grid < rep.Eps-1e-9 || grid > 1.02*rep.Eps {
			t.Errorf("%d rounds: costliest allowed ρ %g (budget %g), ε %g (grid %g), target %g", rounds, worst, want, rep.Eps, grid, cfg.Eps)
		}
	}
}

// TestCohortSnapshotResume: a cohort run's server restored from its
// snapshot after its first Gram cohort (the pooled counts and Gram in
// it) finishes with the factors of the uninterrupted run.
func TestCohortSnapshotResume(t *testing.T) {
	d := synth(90, 30, 5)
	cfg := DefaultConfig()
	cfg.TopItems, cfg.Cap, cfg.Seeded, cfg.Cohort, cfg.CohortRounds = 12, 4, true, 30, 3
	cfg = cfg.WithRoster(d)
	full, _, _ := runOver(t, d, cfg, nil, true)

	a, err := NewServer(cfg, d.Public(), 1)
	if err != nil {
		t.Fatal(err)
	}
	a.zeroNoise = true
	cl := mustClients(t, d, cfg)
	tr, err := protocol.NewCohorts(cl.List, cfg.Participation(), nil, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	stop := cfg.CohortRounds + 1 // after the first Gram cohort
	opt := protocol.RunOptions{Seed: 1, MaxRounds: stop}
	if err := protocol.RunTransport(context.Background(), a, protocol.NewSecureSum(tr), opt); err == nil {
		t.Fatal("the interrupted run finished")
	}
	snap, err := a.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	r, _ := NewServer(cfg, d.Public(), 1)
	r.zeroNoise = true
	if err := r.UnmarshalBinary(snap); err != nil {
		t.Fatal(err)
	}
	if r.Round() != stop || len(r.st.GramSum) != pairs(r.m) {
		t.Fatalf("restored at round %d with %d pooled Gram entries, want round %d", r.Round(), len(r.st.GramSum), stop)
	}
	opt = protocol.RunOptions{Seed: 1, StartRound: r.Round()}
	if err := protocol.RunTransport(context.Background(), r, protocol.NewSecureSum(tr), opt); err != nil {
		t.Fatal(err)
	}
	v1, _ := full.Factors()
	v2, _ := r.Factors()
	if len(v1) != len(v2) {
		t.Fatalf("factors of %d and %d values", len(v1), len(v2))
	}
	for k := range v1 {
		if !near(float64(v2[k]), float64(v1[k])) {
			t.Fatalf("factor %d: resumed %g, uninterrupted %g", k, v2[k], v1[k])
		}
	}
}

// TestCohortMasked runs the integer path over cohorts: each device's
// Skellam share is drawn for the cohort, so with every share of every
// cohort arriving the realized ε (the costliest counts round plus the
// costliest Gram round, with the noise that arrived) is the plan's, which
// is the target; before the shares were drawn for the cohort it was far
// above. A device that answered no counts round (more users than counts
// slots) still answers its Gram round: the broadcast names the catalog's
// size.
func TestCohortMasked(t *testing.T) {
	d := synth(90, 30, 5)
	for _, c := range []struct {
		name           string
		cohort, rounds int
	}{
		{"3 cohorts of 30", 30, 3},
		{"3 cohorts of 25, 15 users without counts", 25, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.TopItems, cfg.Cap, cfg.Seeded, cfg.FracCounts = 12, 4, true, 0.3
			cfg.Cohort, cfg.CohortRounds, cfg.Aggregation = c.cohort, c.rounds, protocol.AggMasked
			m, rep, err := Train(context.Background(), d, cfg, 1)
			if err != nil {
				t.Fatal(err)
			}
			if m == nil || len(rep.Ledger.Releases()) != 2*c.rounds {
				t.Fatalf("%d releases, want %d", len(rep.Ledger.Releases()), 2*c.rounds)
			}
			if rep.Eps > cfg.Eps+1e-9 || rep.Eps < 0.999*cfg.Eps {
				t.Errorf("ε = %g, want the target %g", rep.Eps, cfg.Eps)
			}
			if got := rep.Stats["eps_spent"]; math.Abs(got-rep.Eps) > 1e-6 {
				t.Errorf("realized ε %g with every cohort's shares, planned %g", got, rep.Eps)
			}
		})
	}
}
