package accountant_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/privrec/privrec/accountant"
	"github.com/privrec/privrec/budget"
)

func newAcct(t testing.TB, budgets []float64, cfg accountant.Config) *accountant.Accountant {
	t.Helper()
	a, err := accountant.New(budgets, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestChargeExhaustion(t *testing.T) {
	type charge struct {
		unit, round int
		eps, delta  float64
		err         error // nil, ErrBudgetExceeded or ErrCharge
	}
	tests := []struct {
		name    string
		budgets []float64
		cfg     accountant.Config
		charges []charge
	}{
		{"ten tenths fit a budget of one", []float64{1}, accountant.Config{}, func() []charge {
			var c []charge
			for r := range 10 {
				c = append(c, charge{0, r, 0.1, 0, nil})
			}
			return append(c, charge{0, 10, 1e-6, 0, accountant.ErrBudgetExceeded})
		}()},
		{"refusal leaves room for a smaller release", []float64{1}, accountant.Config{}, []charge{
			{0, 0, 0.7, 0, nil},
			{0, 1, 0.5, 0, accountant.ErrBudgetExceeded},
			{0, 1, 0.3, 0, nil},
			{0, 2, 0.01, 0, accountant.ErrBudgetExceeded},
		}},
		{"units have separate budgets", []float64{0.5, 2}, accountant.Config{}, []charge{
			{0, 0, 0.5, 0, nil},
			{1, 0, 1.5, 0, nil},
			{0, 1, 0.1, 0, accountant.ErrBudgetExceeded},
			{1, 1, 0.5, 0, nil},
		}},
		{"delta needs a delta budget", []float64{1}, accountant.Config{}, []charge{
			{0, 0, 0.1, 1e-7, accountant.ErrBudgetExceeded},
			{0, 0, 0.1, 0, nil},
		}},
		{"delta budget", []float64{10}, accountant.Config{Delta: 1e-5}, []charge{
			{0, 0, 0.1, 6e-6, nil},
			{0, 1, 0.1, 6e-6, accountant.ErrBudgetExceeded},
			{0, 1, 0.1, 4e-6, nil},
		}},
		{"unlimited unit", []float64{math.Inf(1)}, accountant.Config{}, []charge{
			{0, 0, 1e6, 0, nil},
			{0, 1, 1e6, 0, nil},
		}},
		{"invalid charges", []float64{1}, accountant.Config{}, []charge{
			{1, 0, 0.1, 0, accountant.ErrCharge},
			{-1, 0, 0.1, 0, accountant.ErrCharge},
			{0, -1, 0.1, 0, accountant.ErrCharge},
			{0, 0, -0.1, 0, accountant.ErrCharge},
			{0, 0, math.NaN(), 0, accountant.ErrCharge},
			{0, 0, math.Inf(1), 0, accountant.ErrCharge},
			{0, 0, 0.1, 1, accountant.ErrCharge},
			{0, 3, 0.1, 0, nil},
			{0, 2, 0.1, 0, accountant.ErrCharge}, // rounds must not go back
			{0, 3, 0.1, 0, nil},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Log = true
			a := newAcct(t, tc.budgets, cfg)
			for k, c := range tc.charges {
				var before accountant.UnitSpend
				var ledger int
				inRange := c.unit >= 0 && c.unit < a.Len()
				if inRange {
					before, ledger = a.Spent(c.unit), len(a.Ledger(c.unit))
					if can := a.CanSpend(c.unit, c.eps, c.delta); c.err != accountant.ErrCharge && can != (c.err == nil) {
						t.Errorf("charge %d: CanSpend = %v, but Charge should give %v", k, can, c.err)
					}
				}
				err := a.Charge(c.unit, c.round, c.eps, c.delta, "test")
				if !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
					t.Fatalf("charge %d %+v: error %v, want %v", k, c, err, c.err)
				}
				if !inRange {
					continue
				}
				after := a.Spent(c.unit)
				if err != nil {
					if after != before || len(a.Ledger(c.unit)) != ledger {
						t.Errorf("charge %d refused but recorded: %+v -> %+v", k, before, after)
					}
					continue
				}
				if after.Releases != before.Releases+1 || math.Abs(after.Eps-before.Eps-c.eps) > 1e-12 {
					t.Errorf("charge %d: spend %+v -> %+v, want one more release of ε %g", k, before, after, c.eps)
				}
				if rem := a.Remaining(c.unit); math.Abs(rem-math.Max(0, tc.budgets[c.unit]-after.Eps)) > 1e-9 && !math.IsInf(rem, 1) {
					t.Errorf("charge %d: Remaining = %g, budget %g, spent %g", k, rem, tc.budgets[c.unit], after.Eps)
				}
			}
		})
	}
}

func TestAdvancedComposition(t *testing.T) {
	// k = 100 releases of ε = 0.1, δ' = 1e-5, by hand:
	// sqrt(2·100·ln(1e5))·0.1 = sqrt(2302.585)·0.1 = 4.798526
	// 100·0.1·(e^0.1 − 1)     = 10·0.1051709     = 1.051709
	// ε' = 5.850235; δ_total = 100·1e-7 + 1e-5 = 2e-5.
	eps, delta := accountant.AdvancedComposition(100, 0.1, 1e-7, 1e-5)
	if math.Abs(eps-5.850235) > 1e-6 || math.Abs(delta-2e-5) > 1e-18 {
		t.Errorf("AdvancedComposition = %g, %g; want 5.850235, 2e-5", eps, delta)
	}
	// The accountant agrees, for equal releases and for a mixed pair:
	// sqrt(2·ln(1e6)·(0.1² + 0.5²)) + 0.1(e^0.1 − 1) + 0.5(e^0.5 − 1) = 3.015188.
	a := newAcct(t, []float64{math.Inf(1), math.Inf(1)}, accountant.Config{DeltaPrime: 1e-5, Delta: 0.5})
	for r := range 100 {
		if err := a.Charge(0, r, 0.1, 1e-7, "x"); err != nil {
			t.Fatal(err)
		}
	}
	if s := a.Spent(0); math.Abs(s.AdvEps-eps) > 1e-9 || math.Abs(s.AdvDelta-delta) > 1e-15 || math.Abs(s.Eps-10) > 1e-9 {
		t.Errorf("Spent = %+v, want AdvEps %g, AdvDelta %g, Eps 10", s, eps, delta)
	}
	b := newAcct(t, []float64{math.Inf(1)}, accountant.Config{})
	_ = b.Charge(0, 0, 0.1, 0, "x")
	_ = b.Charge(0, 1, 0.5, 0, "x")
	if s := b.Spent(0); math.Abs(s.AdvEps-3.015188) > 1e-6 {
		t.Errorf("mixed releases: AdvEps = %g, want 3.015188", s.AdvEps)
	}
}

func TestAdvancedBudget(t *testing.T) {
	// Budget ε = 6 in steps of 0.01: basic composition allows 600 releases,
	// advanced (δ' = 1e-6 within a δ budget of 1e-5) many more.
	count := func(cfg accountant.Config) (int, *accountant.Accountant) {
		a := newAcct(t, []float64{6}, cfg)
		n := 0
		for ; n < 100000; n++ {
			if err := a.Charge(0, n, 0.01, 0, "x"); err != nil {
				if !errors.Is(err, accountant.ErrBudgetExceeded) {
					t.Fatal(err)
				}
				break
			}
		}
		return n, a
	}
	nb, _ := count(accountant.Config{Delta: 1e-5})
	na, a := count(accountant.Config{Delta: 1e-5, Advanced: true})
	if nb != 600 {
		t.Errorf("basic composition allowed %d releases of 0.01 in 6, want 600", nb)
	}
	if na <= 2*nb {
		t.Errorf("advanced composition allowed %d releases, basic %d: want far more", na, nb)
	}
	s := a.Spent(0)
	if s.AdvEps > 6*(1+1e-9) || s.AdvDelta > 1e-5 {
		t.Errorf("advanced spend %+v beyond budget (6, 1e-5)", s)
	}
	if next, _ := accountant.AdvancedComposition(na+1, 0.01, 0, 1e-6); next <= 6 {
		t.Errorf("refused release %d although ε' would be %g ≤ 6", na+1, next)
	}
	// Without room for δ' advanced composition is of no use.
	if n, _ := count(accountant.Config{Advanced: true}); n != nb {
		t.Errorf("advanced without δ budget allowed %d releases, want %d", n, nb)
	}
}

func TestTicket(t *testing.T) {
	a := newAcct(t, []float64{1}, accountant.Config{Log: true})
	tk, err := a.Reserve(0, 0, 0.6, 0, "grad")
	if err != nil {
		t.Fatal(err)
	}
	// The reservation counts before it is committed.
	if _, err := a.Reserve(0, 0, 0.6, 0, "grad"); !errors.Is(err, accountant.ErrBudgetExceeded) {
		t.Errorf("second reservation past the budget: %v, want ErrBudgetExceeded", err)
	}
	if len(a.Ledger(0)) != 0 {
		t.Error("reservation in the ledger before Commit")
	}
	if err := tk.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := tk.Commit(); !errors.Is(err, accountant.ErrTicketUsed) {
		t.Errorf("second Commit: %v, want ErrTicketUsed", err)
	}
	if err := tk.Cancel(); !errors.Is(err, accountant.ErrTicketUsed) {
		t.Errorf("Cancel after Commit: %v, want ErrTicketUsed", err)
	}
	if l := a.Ledger(0); len(l) != 1 || l[0].Eps != 0.6 || l[0].Label != "grad" {
		t.Errorf("ledger %+v, want one release of 0.6", l)
	}
	tk2, err := a.Reserve(0, 1, 0.4, 0, "grad")
	if err != nil {
		t.Fatal(err)
	}
	if rem := a.Remaining(0); rem > 1e-9 {
		t.Errorf("Remaining = %g with everything reserved", rem)
	}
	if err := tk2.Cancel(); err != nil {
		t.Fatal(err)
	}
	if rem := a.Remaining(0); math.Abs(rem-0.4) > 1e-12 {
		t.Errorf("Remaining = %g after Cancel, want 0.4", rem)
	}
	if s := a.Spent(0); s.Releases != 1 {
		t.Errorf("%d releases after a cancelled reservation, want 1", s.Releases)
	}
	if err := tk2.Commit(); !errors.Is(err, accountant.ErrTicketUsed) {
		t.Errorf("Commit after Cancel: %v, want ErrTicketUsed", err)
	}
}

func TestConcurrentCharge(t *testing.T) {
	const users, workers, eps = 97, 8, 0.1
	budgets, _ := budget.Uniform(users, 1) // room for exactly 10 releases each
	for _, shards := range []int{1, 4, 64} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			a := newAcct(t, budgets, accountant.Config{Shards: shards, Log: true})
			var ok, refused, other [workers]int
			var wg sync.WaitGroup
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					// Every worker tries 3 releases per user per round, 5 rounds.
					for r := range 5 {
						for k := range 3 * users {
							u := (k + w*13) % users
							switch err := a.Charge(u, r, eps, 0, "c"); {
							case err == nil:
								ok[w]++
							case errors.Is(err, accountant.ErrBudgetExceeded):
								refused[w]++
							case errors.Is(err, accountant.ErrCharge):
								other[w]++ // a worker still in an earlier round
							default:
								panic(err)
							}
						}
					}
				}()
			}
			wg.Wait()
			total, nref, calls := 0, 0, 0
			for w := range workers {
				total, nref, calls = total+ok[w], nref+refused[w], calls+ok[w]+refused[w]+other[w]
			}
			if calls != workers*3*5*users {
				t.Errorf("%d calls counted, want %d", calls, workers*3*5*users)
			}
			if total != 10*users {
				t.Errorf("%d releases accepted, want exactly %d", total, 10*users)
			}
			for u := range users {
				s := a.Spent(u)
				if s.Releases != 10 || s.Eps > 1+1e-9 || len(a.Ledger(u)) != 10 {
					t.Fatalf("user %d: %+v, %d ledger entries; want 10 releases within budget 1", u, s, len(a.Ledger(u)))
				}
			}
			rep := a.Report()
			if rep.Releases != 10*users || rep.Exhausted != users || rep.Active != users {
				t.Errorf("report %+v", rep)
			}
			if rep.Refused != nref {
				t.Errorf("report counts %d refusals, the workers %d", rep.Refused, nref)
			}
		})
	}
}

func TestReport(t *testing.T) {
	budgets, _ := budget.Uniform(5, 10)
	a := newAcct(t, budgets, accountant.Config{Name: "rating", Shards: 2})
	// Round 0: units 0..3 spend 0.1 each, unit 0 twice. Round 1: unit 4 spends 0.5.
	for u := range 4 {
		_ = a.Charge(u, 0, 0.1, 0, "x")
	}
	_ = a.Charge(0, 0, 0.1, 0, "x")
	_ = a.Charge(4, 1, 0.5, 0, "x")
	_ = a.Charge(4, 1, 20, 0, "x") // refused
	r := a.Report()
	if r.Units != 5 || r.Active != 5 || r.Releases != 6 || r.Refused != 1 || r.Exhausted != 0 {
		t.Errorf("counts %+v", r)
	}
	if math.Abs(r.Basic.MaxEps-0.5) > 1e-12 || math.Abs(r.Basic.MeanEps-1.0/5) > 1e-12 {
		t.Errorf("basic %+v, want max 0.5, mean 0.2", r.Basic)
	}
	if r.Advanced.MaxEps <= r.Basic.MaxEps || r.Best != r.Basic {
		t.Errorf("few small releases: advanced %+v should exceed basic %+v, best %+v should be basic", r.Advanced, r.Basic, r.Best)
	}
	if len(r.Rounds) != 2 {
		t.Fatalf("rounds %+v", r.Rounds)
	}
	r0, r1 := r.Rounds[0], r.Rounds[1]
	if r0.Units != 4 || r0.Releases != 5 || math.Abs(r0.MaxEps-0.2) > 1e-12 || math.Abs(r0.MeanEps-0.5/4) > 1e-12 {
		t.Errorf("round 0 %+v, want 4 units, 5 releases, max 0.2, mean 0.125", r0)
	}
	if r1.Round != 1 || r1.Units != 1 || r1.MaxEps != 0.5 {
		t.Errorf("round 1 %+v", r1)
	}
	for _, s := range []string{r.String(), r.Markdown(1)} {
		for _, want := range []string{"5 of 5 ratings", "advanced", "0.5"} {
			if !strings.Contains(s, want) {
				t.Errorf("rendering lacks %q:\n%s", want, s)
			}
		}
	}
	if md := r.Markdown(1); strings.Contains(md, "| 0 | 4 |") || !strings.Contains(md, "| 1 | 1 | 1 |") {
		t.Errorf("Markdown(1) should keep only the last round:\n%s", md)
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name    string
		budgets []float64
		cfg     accountant.Config
	}{
		{"zero budget", []float64{1, 0}, accountant.Config{}},
		{"NaN budget", []float64{math.NaN()}, accountant.Config{}},
		{"delta budget 1", []float64{1}, accountant.Config{Delta: 1}},
		{"negative delta'", []float64{1}, accountant.Config{DeltaPrime: -1}},
		{"negative shards", []float64{1}, accountant.Config{Shards: -2}},
	}
	for _, tc := range tests {
		if _, err := accountant.New(tc.budgets, tc.cfg); !errors.Is(err, accountant.ErrConfig) {
			t.Errorf("%s: error %v, want ErrSpec", tc.name, err)
		}
	}
}

// BenchmarkCharge measures one Charge with ML-1M's 6,040 users, serially and
// from parallel goroutines, with one mutex and with 64 shards.
func BenchmarkCharge(b *testing.B) {
	const users = 6040
	budgets, err := budget.Uniform(users, 1e12) // effectively unlimited
	if err != nil {
		b.Fatal(err)
	}
	for _, shards := range []int{1, 64} {
		b.Run(fmt.Sprintf("serial/shards=%d", shards), func(b *testing.B) {
			a := newAcct(b, budgets, accountant.Config{Shards: shards})
			k := 0
			for b.Loop() {
				if err := a.Charge(k%users, k/users, 0.01, 0, "b"); err != nil {
					b.Fatal(err)
				}
				k++
			}
		})
		b.Run(fmt.Sprintf("parallel/shards=%d", shards), func(b *testing.B) {
			a := newAcct(b, budgets, accountant.Config{Shards: shards})
			var next sync.Mutex
			start := 0
			b.RunParallel(func(pb *testing.PB) {
				next.Lock()
				u := start * 997 % users // spread goroutines over users
				start++
				next.Unlock()
				for pb.Next() {
					if err := a.Charge(u, 0, 0.01, 0, "b"); err != nil {
						b.Error(err)
						return
					}
					if u++; u == users {
						u = 0
					}
				}
			})
		})
	}
}

func ExampleAccountant() {
	// Three users with a total budget of ε = 1 each.
	budgets, _ := budget.Uniform(3, 1)
	acct, _ := accountant.New(budgets, accountant.Config{})
	for round := range 4 {
		for user := range 3 {
			// Charge before drawing any noise; a refused user uploads nothing.
			if err := acct.Charge(user, round, 0.3, 0, "gradient"); err != nil {
				fmt.Printf("round %d: user %d out of budget (%.1f left)\n", round, user, acct.Remaining(user))
				continue
			}
			// ... draw noise and upload ...
		}
	}
	r := acct.Report()
	fmt.Printf("%d releases, max ε %.1f per user\n", r.Releases, r.Basic.MaxEps)
	// Output:
	// round 3: user 0 out of budget (0.1 left)
	// round 3: user 1 out of budget (0.1 left)
	// round 3: user 2 out of budget (0.1 left)
	// 9 releases, max ε 0.9 per user
}
