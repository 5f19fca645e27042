package budget_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/privrec/privrec/budget"
	"github.com/privrec/privrec/ratings"
)

// shapeOnly returns a dataset with nu users, ni items and nr ratings spread
// round-robin, enough for the generators, which look only at sizes.
func shapeOnly(nu, ni, nr int) *ratings.Dataset {
	d := &ratings.Dataset{
		Name:    "synthetic",
		Scale:   ratings.Stars5,
		UserIDs: make([]string, nu),
		ItemIDs: make([]string, ni),
		Users:   make([]int32, nr),
		Items:   make([]int32, nr),
		Values:  make([]float32, nr),
	}
	for k := range nr {
		d.Users[k], d.Items[k], d.Values[k] = int32(k%nu), int32(k%ni), 3
	}
	return d
}

// groupStats classifies values by the groups of g.
func groupStats(t *testing.T, vals []float64, g budget.Groups) (fc, fm, fl float64) {
	t.Helper()
	var nc, nm, nl int
	for k, v := range vals {
		switch {
		case v >= g.Low && v < g.Mid:
			nc++
		case v >= g.Mid && v < g.High:
			nm++
		case v == g.High:
			nl++
		default:
			t.Fatalf("value %d = %g outside every group of %+v", k, v, g)
		}
	}
	n := float64(len(vals))
	return float64(nc) / n, float64(nm) / n, float64(nl) / n
}

// within checks a binomial fraction against p at 4.5 standard deviations.
func within(t *testing.T, what string, got, p float64, n int) {
	t.Helper()
	tol := 4.5 * math.Sqrt(p*(1-p)/float64(n))
	if math.Abs(got-p) > tol {
		t.Errorf("%s: fraction %.4f, want %.4f ± %.4f (n = %d)", what, got, p, tol, n)
	}
}

func TestGroupsValidate(t *testing.T) {
	tests := []struct {
		name string
		g    budget.Groups
		ok   bool
	}{
		{"pdp default", budget.DefaultPDP(), true},
		{"hdpmf users", budget.DefaultHDPMF().User, true},
		{"all liberal", budget.Groups{Low: 1, Mid: 1, High: 1}, true},
		{"fractions sum to 1", budget.Groups{Conservative: 0.5, Moderate: 0.5, Low: 0.1, Mid: 0.2, High: 1}, true},
		{"fractions over 1", budget.Groups{Conservative: 0.6, Moderate: 0.5, Low: 0.1, Mid: 0.2, High: 1}, false},
		{"negative fraction", budget.Groups{Conservative: -0.1, Moderate: 0.5, Low: 0.1, Mid: 0.2, High: 1}, false},
		{"NaN fraction", budget.Groups{Conservative: math.NaN(), Low: 0.1, Mid: 0.2, High: 1}, false},
		{"zero low", budget.Groups{Conservative: 0.5, Low: 0, Mid: 0.2, High: 1}, false},
		{"unordered", budget.Groups{Conservative: 0.5, Low: 0.3, Mid: 0.2, High: 1}, false},
		{"infinite high", budget.Groups{Conservative: 0.5, Low: 0.1, Mid: 0.2, High: math.Inf(1)}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.g.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok = %v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, budget.ErrSpec) {
				t.Errorf("error %v does not wrap ErrSpec", err)
			}
		})
	}
}

func TestGroupsMean(t *testing.T) {
	// PDP-PMF §6.2 quotes 0.445 as the average budget of its Table 4 setting.
	g := budget.Groups{Conservative: 0.6, Moderate: 0.35, Low: 0.1, Mid: 0.4, High: 1}
	if m := g.Mean(); math.Abs(m-0.445) > 1e-12 {
		t.Errorf("Mean = %g, want 0.445 (PDP-PMF §6.2)", m)
	}
}

func TestHDPMFSpecGroups(t *testing.T) {
	const nu, ni = 6040, 3706 // ML-1M
	d := shapeOnly(nu, ni, 1000)
	cfg := budget.DefaultHDPMF()
	w, err := budget.HDPMFSpec(d, cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.User) != nu || len(w.Item) != ni {
		t.Fatalf("got %d user and %d item weights, want %d and %d", len(w.User), len(w.Item), nu, ni)
	}
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct {
		name string
		vals []float64
		g    budget.Groups
	}{{"users", w.User, cfg.User}, {"items", w.Item, cfg.Item}} {
		fc, fm, fl := groupStats(t, x.vals, x.g)
		within(t, x.name+" conservative", fc, x.g.Conservative, len(x.vals))
		within(t, x.name+" moderate", fm, x.g.Moderate, len(x.vals))
		within(t, x.name+" liberal", fl, x.g.Liberal(), len(x.vals))
	}
	// W and ε of a pair, and of every rating.
	for _, k := range []int{0, 17, 999} {
		u, i := d.Users[k], d.Items[k]
		want := w.User[u] * w.Item[i]
		if got := w.W(u, i); got != want {
			t.Errorf("W(%d, %d) = %g, want β·γ = %g", u, i, got, want)
		}
		if got := w.Eps(u, i); got != want*cfg.EpsMax {
			t.Errorf("Eps(%d, %d) = %g, want W·EpsMax = %g", u, i, got, want*cfg.EpsMax)
		}
		if got := w.RatingEps(d)[k]; got != w.Eps(u, i) {
			t.Errorf("RatingEps[%d] = %g, want %g", k, got, w.Eps(u, i))
		}
	}
}

func TestHDPMFSpecSeeds(t *testing.T) {
	d := shapeOnly(500, 300, 0)
	cfg := budget.DefaultHDPMF()
	a, _ := budget.HDPMFSpec(d, cfg, 7)
	b, _ := budget.HDPMFSpec(d, cfg, 7)
	c, _ := budget.HDPMFSpec(d, cfg, 8)
	cfg2 := cfg
	cfg2.Item.Conservative = 0.1
	e, _ := budget.HDPMFSpec(d, cfg2, 7)
	same := func(x, y []float64) bool {
		for k := range x {
			if x[k] != y[k] {
				return false
			}
		}
		return true
	}
	if !same(a.User, b.User) || !same(a.Item, b.Item) {
		t.Error("same seed gave different weights")
	}
	if same(a.User, c.User) {
		t.Error("different seeds gave the same user weights")
	}
	if !same(a.User, e.User) {
		t.Error("changing the item groups changed the user weights")
	}
	if same(a.Item, e.Item) {
		t.Error("changing the item groups left the item weights unchanged")
	}
}

func TestHDPMFValidate(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*budget.HDPMFGroups)
	}{
		{"user weight over 1", func(h *budget.HDPMFGroups) { h.User.High = 2 }},
		{"item fractions over 1", func(h *budget.HDPMFGroups) { h.Item.Moderate = 0.9 }},
		{"zero EpsMax", func(h *budget.HDPMFGroups) { h.EpsMax = 0 }},
		{"infinite EpsMax", func(h *budget.HDPMFGroups) { h.EpsMax = math.Inf(1) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := budget.DefaultHDPMF()
			tc.mod(&cfg)
			if _, err := budget.HDPMFSpec(shapeOnly(3, 3, 0), cfg, 1); !errors.Is(err, budget.ErrSpec) {
				t.Errorf("HDPMFSpec error = %v, want ErrSpec", err)
			}
		})
	}
}

func TestPDPSpec(t *testing.T) {
	const n = 200_000
	d := shapeOnly(100, 100, n)
	for _, g := range []budget.Groups{
		budget.DefaultPDP(),
		{Conservative: 0.2, Moderate: 0.37, Low: 0.1, Mid: 0.2, High: 1}, // PDP-PMF3, Table 2
		{Conservative: 0.6, Moderate: 0.35, Low: 0.1, Mid: 0.4, High: 1}, // Table 4
	} {
		t.Run(fmt.Sprintf("fc=%g", g.Conservative), func(t *testing.T) {
			eps, err := budget.PDPSpec(d, g, 3)
			if err != nil {
				t.Fatal(err)
			}
			if len(eps) != n {
				t.Fatalf("%d budgets for %d ratings", len(eps), n)
			}
			fc, fm, fl := groupStats(t, eps, g)
			within(t, "conservative", fc, g.Conservative, n)
			within(t, "moderate", fm, g.Moderate, n)
			within(t, "liberal", fl, g.Liberal(), n)
			mean, err := budget.Threshold(eps, "mean")
			if err != nil {
				t.Fatal(err)
			}
			// The mean of n draws: sd below (High − Low)/sqrt(n).
			if tol := 4.5 * (g.High - g.Low) / math.Sqrt(n); math.Abs(mean-g.Mean()) > tol {
				t.Errorf("mean ε %g, want %g ± %g", mean, g.Mean(), tol)
			}
		})
	}
}

func TestThreshold(t *testing.T) {
	eps := []float64{0.5, 0.1, 1, 0.4}
	tests := []struct {
		mode string
		want float64
		ok   bool
	}{
		{"min", 0.1, true},
		{"max", 1, true},
		{"mean", 0.5, true},
		{" 0.7 ", 0.7, true},
		{"0", 0, false},
		{"-1", 0, false},
		{"NaN", 0, false},
		{"median", 0, false},
	}
	for _, tc := range tests {
		got, err := budget.Threshold(eps, tc.mode)
		if (err == nil) != tc.ok || (tc.ok && math.Abs(got-tc.want) > 1e-15) {
			t.Errorf("Threshold(%q) = %g, %v; want %g, ok = %v", tc.mode, got, err, tc.want, tc.ok)
		}
	}
	if _, err := budget.Threshold(nil, "mean"); err == nil {
		t.Error("Threshold of no budgets: no error")
	}
	if _, err := budget.Threshold([]float64{0.1, 0}, "min"); err == nil {
		t.Error("Threshold with a zero budget: no error")
	}
}

func TestUniformAndValidate(t *testing.T) {
	u, err := budget.Uniform(4, 0.3)
	if err != nil || len(u) != 4 || u[3] != 0.3 {
		t.Fatalf("Uniform(4, 0.3) = %v, %v", u, err)
	}
	for _, e := range []float64{0, -1, math.Inf(1), math.NaN()} {
		if _, err := budget.Uniform(2, e); !errors.Is(err, budget.ErrSpec) {
			t.Errorf("Uniform(2, %g): error %v, want ErrSpec", e, err)
		}
	}
	if err := budget.ValidateBudgets([]float64{1, 0.2, -0.1}); err == nil || !strings.Contains(err.Error(), "index 2") {
		t.Errorf("ValidateBudgets: %v, want an error naming index 2", err)
	}
	if err := budget.ValidateWeights([]float64{1, 1.01}); err == nil || !strings.Contains(err.Error(), "index 1") {
		t.Errorf("ValidateWeights: %v, want an error naming index 1", err)
	}
}

func ExampleHDPMFSpec() {
	d := &ratings.Dataset{
		UserIDs: []string{"alice", "bob", "carol"},
		ItemIDs: []string{"film", "book"},
	}
	w, err := budget.HDPMFSpec(d, budget.DefaultHDPMF(), 42)
	if err != nil {
		fmt.Println(err)
		return
	}
	// Every pair, rated or not, has a weight and a budget.
	fmt.Println(w.W(2, 1) == w.User[2]*w.Item[1], w.Eps(2, 1) <= 1)
	// Output: true true
}
