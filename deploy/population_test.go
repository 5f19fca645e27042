package deploy

import (
	"math"
	"strings"
	"testing"
)

// TestParsePopulation: specs read back to the fields they name and print
// back as themselves; a malformed or out-of-range field is refused with
// an error naming it.
func TestParsePopulation(t *testing.T) {
	good := []struct {
		spec string
		want Population
	}{
		{"", Population{}},
		{"diurnal:0.3-0.9", Population{Low: 0.3, High: 0.9}},
		{"diurnal:0.3-0.9,hours:2,start:18,zones:3,churn:0.01,late:0.2@3,drop-after-shares:0.1",
			Population{Low: 0.3, High: 0.9, Hours: 2, Start: 18, Zones: 3, Churn: 0.01, Late: 0.2, LateAfter: 3, LateUntil: 3, DropAfterShares: 0.1}},
		{"late:0.5@2-6", Population{Late: 0.5, LateAfter: 2, LateUntil: 6}},
	}
	for _, tt := range good {
		got, err := ParsePopulation(tt.spec)
		if err != nil {
			t.Errorf("%q: %v", tt.spec, err)
			continue
		}
		if got != tt.want {
			t.Errorf("%q: %+v, want %+v", tt.spec, got, tt.want)
		}
		if back, err := ParsePopulation(got.String()); err != nil || back != got {
			t.Errorf("%q printed as %q reads back as %+v, %v", tt.spec, got.String(), back, err)
		}
	}
	bad := []struct{ spec, names string }{
		{"diurnal:0.9-0.3", "diurnal"},
		{"diurnal:0.3", "diurnal"},
		{"diurnal:0.3-1.5", "high"},
		{"churn:1", "churn"},
		{"churn:x", "churn"},
		{"late:0.2", "late"},
		{"late:0.2@5-3", "late"},
		{"late:1@3", "late"},
		{"hours:0", "hours"},
		{"zones:30", "zones"},
		{"drop-after-shares:-0.1", "drop-after-shares"},
		{"churn:0.1,churn:0.2", "twice"},
		{"weekly:3", "unknown field"},
		{"churn", "NAME:VALUE"},
	}
	for _, tt := range bad {
		_, err := ParsePopulation(tt.spec)
		if err == nil || !strings.Contains(err.Error(), tt.names) {
			t.Errorf("%q: error %v, want one naming %q", tt.spec, err, tt.names)
		}
	}
}

// TestPopulationDiurnal: over many devices of one time zone, the
// fraction online in each round is the curve's probability at the
// round's hour, within 4 standard deviations; spread over 3 zones, the
// population's fraction is the mean of the zones' curves.
func TestPopulationDiurnal(t *testing.T) {
	const devices = 20000
	tests := []struct {
		name string
		p    Population
	}{
		{"one zone, an hour a round", Population{Low: 0.3, High: 0.9}},
		{"three zones, two hours a round from 18:00", Population{Low: 0.1, High: 0.7, Zones: 3, Hours: 2, Start: 18}},
		{"always online", Population{Churn: 0}},
	}
	for _, tt := range tests {
		for r := range 24 {
			want := 0.0
			zones := max(tt.p.Zones, 1)
			for z := range zones {
				want += tt.p.OnlineProb(z, r) / float64(zones)
			}
			on := 0
			for d := range devices {
				if tt.p.Online(7, d, r) {
					on++
				}
			}
			got := float64(on) / devices
			tol := 4*math.Sqrt(want*(1-want)/devices) + 0.01*float64(zones-1) // zones drawn, not split evenly
			if math.Abs(got-want) > tol+1e-12 {
				t.Errorf("%s: round %d: %.4f online, want %.4f ± %.4f", tt.name, r, got, want, tol)
			}
		}
	}
	// The curve's shape: low at night, peak in the evening.
	if lo, hi := Diurnal(4), Diurnal(20); lo != 0 || hi != 1 || Diurnal(4+24) != lo || Diurnal(-4) != hi {
		t.Errorf("Diurnal(4) = %v, Diurnal(20) = %v; want 0 and 1, of period 24", lo, hi)
	}
}

// TestPopulationChurnAndLate: a device is in the population over one
// interval of rounds (once gone it never returns); late devices arrive
// within their window and never before; the fractions late and still
// present after m rounds are the model's; and everything is a function
// of the seed.
func TestPopulationChurnAndLate(t *testing.T) {
	const devices, rounds = 20000, 40
	tests := []struct {
		name string
		p    Population
	}{
		{"churn 2%, 20% late after round 3", Population{Churn: 0.02, Late: 0.2, LateAfter: 3, LateUntil: 3}},
		{"churn 10%, half late over rounds 2..6", Population{Churn: 0.1, Late: 0.5, LateAfter: 2, LateUntil: 6, Low: 0.5, High: 0.5}},
		{"no churn", Population{}},
	}
	for _, tt := range tests {
		p := tt.p
		late, stayed, atRisk := 0, 0, 0
		const m = 10 // rounds after arrival
		for d := range devices {
			a, dep := p.Arrival(1, d), p.Departure(1, d)
			if a != 0 {
				late++
				if a < p.LateAfter+1 || a > p.LateUntil+1 {
					t.Fatalf("%s: device %d arrives at round %d, outside %d..%d", tt.name, d, a, p.LateAfter+1, p.LateUntil+1)
				}
			}
			if dep <= a {
				t.Fatalf("%s: device %d leaves at %d before arriving at %d", tt.name, d, dep, a)
			}
			// Present exactly over [a, dep): churned devices never return.
			for r := range rounds {
				if in := r >= a && r < dep; p.Present(1, d, r) != in {
					t.Fatalf("%s: device %d present in round %d = %v, want %v (arrival %d, departure %d)", tt.name, d, r, !in, in, a, dep)
				}
				if !p.Present(1, d, r) && p.Online(1, d, r) {
					t.Fatalf("%s: device %d online in round %d while not in the population", tt.name, d, r)
				}
			}
			atRisk++
			if p.Present(1, d, a+m) {
				stayed++
			}
			// Deterministic under the seed, and the seed matters.
			if p.Arrival(1, d) != a || p.Departure(1, d) != dep {
				t.Fatalf("%s: device %d: a second draw differs", tt.name, d)
			}
		}
		check := func(what string, got int, n int, want float64) {
			if f := float64(got) / float64(n); math.Abs(f-want) > 4*math.Sqrt(want*(1-want)/float64(n))+1e-12 {
				t.Errorf("%s: %s: %.4f, want %.4f", tt.name, what, f, want)
			}
		}
		check("fraction late", late, devices, p.Late)
		check("fraction present 10 rounds after arrival", stayed, atRisk, math.Pow(1-p.Churn, m))
	}
	p := Population{Churn: 0.05, Late: 0.3, LateAfter: 1, LateUntil: 5, Low: 0.2, High: 0.8, DropAfterShares: 0.1}
	differ := 0
	for d := range 1000 {
		if p.Departure(1, d) != p.Departure(2, d) || p.Online(1, d, 3) != p.Online(2, d, 3) || p.DropsAfterShares(1, d, 3) != p.DropsAfterShares(2, d, 3) {
			differ++
		}
		if p.Online(1, d, 3) != p.Online(1, d, 3) || p.DropsAfterShares(1, d, 4) != p.DropsAfterShares(1, d, 4) {
			t.Fatalf("device %d: two draws under one seed differ", d)
		}
	}
	if differ < 100 {
		t.Errorf("seeds 1 and 2 give the same behaviour to %d of 1000 devices: the seed does not matter", 1000-differ)
	}
}

// TestPopulationDropAfterShares: the fraction of devices that drop after
// their shares in a round is DropAfterShares, independently per round.
func TestPopulationDropAfterShares(t *testing.T) {
	for _, q := range []float64{0, 0.1, 0.5} {
		p := Population{DropAfterShares: q}
		const n = 20000
		both, drops := 0, 0
		for d := range n {
			a, b := p.DropsAfterShares(3, d, 1), p.DropsAfterShares(3, d, 2)
			if a {
				drops++
			}
			if a && b {
				both++
			}
		}
		tol := 4 * math.Sqrt(q*(1-q)/n)
		if f := float64(drops) / n; math.Abs(f-q) > tol+1e-12 {
			t.Errorf("drop-after-shares %g: %.4f of the devices dropped", q, f)
		}
		if f := float64(both) / n; math.Abs(f-q*q) > 4*math.Sqrt(q*q*(1-q*q)/n)+1e-12 {
			t.Errorf("drop-after-shares %g: %.4f dropped in both rounds, want %.4f (independent rounds)", q, f, q*q)
		}
	}
}
