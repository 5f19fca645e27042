package audit

import (
	"bytes"
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/sdcf"
)

var (
	quickOnce sync.Once
	quickRep  *Report
	quickErr  error
)

// quickAudit runs the whole quick audit once, on the synthetic data;
// under -short it skips the test.
func quickAudit(t *testing.T) *Report {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the whole quick audit (68 s); go test without -short runs it")
	}
	quickOnce.Do(func() {
		quickRep, quickErr = Run(context.Background(), Config{Quick: true, Seed: 1})
	})
	if quickErr != nil {
		t.Fatal(quickErr)
	}
	return quickRep
}

// TestEveryControlBrokenEveryProtectedWithin is the audit's contract:
// every control is broken, every protected method stays within its bound,
// and every attack has both.
func TestEveryControlBrokenEveryProtectedWithin(t *testing.T) {
	rep := quickAudit(t)
	roles := map[string]map[Role]int{}
	for _, r := range rep.Results {
		t.Log(r.line())
		if roles[r.Attack] == nil {
			roles[r.Attack] = map[Role]int{}
		}
		roles[r.Attack][r.Role]++
		switch r.Role {
		case Control:
			if r.Status != Broken {
				t.Errorf("%s: control %s not broken: %s %.4g [%.4g, %.4g], bound %.4g", r.Attack, r.Method, r.Metric, r.Value, r.Lo, r.Hi, r.Bound)
			}
		case Protected:
			if r.Status != Within {
				t.Errorf("%s: %s leaks: %s %.4g [%.4g, %.4g], bound %.4g; %s", r.Attack, r.Method, r.Metric, r.Value, r.Lo, r.Hi, r.Bound, r.Note)
			}
		case Finding:
			if r.Status != Info {
				t.Errorf("%s: finding %s has status %s", r.Attack, r.Method, r.Status)
			}
		}
		if math.IsNaN(r.Value) || r.N == 0 {
			t.Errorf("%s on %s: value %v from %d cases", r.Attack, r.Method, r.Value, r.N)
		}
	}
	for _, a := range AttackNames() {
		// The grid attack has no protected row: what it breaks is outside
		// SDMF's claim as stated, so SDMF is a finding there.
		if roles[a][Control] == 0 || roles[a][Protected]+roles[a][Finding] == 0 {
			t.Errorf("attack %s has %d controls and %d protected rows, want both", a, roles[a][Control], roles[a][Protected])
		}
	}
	if !rep.OK() || len(rep.Failures()) != 0 {
		t.Errorf("report not OK: %d failures", len(rep.Failures()))
	}
}

// TestControlsAreClearlyBroken checks the size of the leaks the controls
// show, beyond merely crossing the bound.
func TestControlsAreClearlyBroken(t *testing.T) {
	rep := quickAudit(t)
	want := []struct {
		attack, method, cas string
		check               func(v float64) bool
		what                string
	}{
		{"inversion", "fedmf", "", func(v float64) bool { return v < 0.01 }, "near-exact recovery (ratio < 0.01)"},
		// Quantized to 1/64 of a rating unit, the integer path's unmasked
		// uploads still give most ratings away.
		{"inversion", "fedmf", "integer, unmasked", func(v float64) bool { return v < 0.8 }, "recovery (ratio < 0.8)"},
		{"difference", "ldp-op-basic", "", func(v float64) bool { return v > 0.95 }, "accuracy > 0.95"},
		{"shape", "fedmf", "", func(v float64) bool { return v > 0.95 }, "accuracy > 0.95"},
		{"server-h", "mixture", "", func(v float64) bool { return v > 0.1 }, "δ̂ > 0.1 (exact ≈ 0.19)"},
		{"grid", "sgld-mf", "", func(v float64) bool { return v > 0.95 }, "accuracy > 0.95"},
	}
	for _, w := range want {
		found := false
		for _, r := range rep.Results {
			if r.Attack == w.attack && r.Method == w.method && r.Case == w.cas && r.Role == Control {
				found = true
				if !w.check(r.Value) {
					t.Errorf("%s on %s: %s %.4g, want %s", w.attack, w.method, r.Metric, r.Value, w.what)
				}
			}
		}
		if !found {
			t.Errorf("no control %s in attack %s", w.method, w.attack)
		}
	}
	// The average attack's controls learn more the longer they watch.
	for _, r := range rep.Results {
		if r.Attack == "average" && r.Role == Control {
			if len(r.Curve) < 2 || !(r.Curve[len(r.Curve)-1].Value > r.Curve[0].Value+0.02) {
				t.Errorf("average on %s: accuracy does not grow with the rounds: %+v", r.Method, r.Curve)
			}
		}
	}
}

// TestJudge checks the verdict rules on hand-made rows.
func TestJudge(t *testing.T) {
	tests := []struct {
		role          Role
		higher        bool
		v, lo, hi, bd float64
		want          Status
	}{
		{Control, true, 0.9, 0.85, 0.95, 0.6, Broken},
		{Control, true, 0.62, 0.58, 0.66, 0.6, Failed}, // interval reaches the bound
		{Control, false, 0.1, 0.05, 0.2, 0.98, Broken},
		{Control, false, 0.97, 0.95, 0.99, 0.98, Failed},
		{Protected, true, 0.5, 0.45, 0.55, 0.6, Within},
		{Protected, true, 0.61, 0.59, 0.63, 0.6, Within}, // not significant
		{Protected, true, 0.7, 0.65, 0.75, 0.6, Failed},
		{Protected, false, 1, 0.99, 1, 0.98, Within},
		{Protected, false, 0.5, 0.4, 0.6, 0.98, Failed},
		{Finding, true, 1, 1, 1, 0.5, Info},
	}
	for _, tc := range tests {
		r := Result{Role: tc.role, HigherLeaks: tc.higher, Value: tc.v, Lo: tc.lo, Hi: tc.hi, Bound: tc.bd}
		r.judge()
		if r.Status != tc.want {
			t.Errorf("%s higher=%v %.2f [%.2f, %.2f] bound %.2f: %s, want %s", tc.role, tc.higher, tc.v, tc.lo, tc.hi, tc.bd, r.Status, tc.want)
		}
	}
	r := Result{Role: Protected, HigherLeaks: true, Value: 0, Lo: 0, Hi: 0, Bound: 1, extraFail: "second condition"}
	r.judge()
	if r.Status != Failed || !strings.Contains(r.Note, "second condition") {
		t.Errorf("extraFail: %s, note %q", r.Status, r.Note)
	}
}

func TestWilson(t *testing.T) {
	tests := []struct {
		k, n   int
		lo, hi float64 // reference values (Wilson 1927; R prop.test without correction)
	}{
		{0, 10, 0, 0.2775},
		{5, 10, 0.2366, 0.7634},
		{10, 10, 0.7225, 1},
		{81, 263, 0.2553, 0.3662},
	}
	for _, tc := range tests {
		lo, hi := Wilson(tc.k, tc.n)
		if math.Abs(lo-tc.lo) > 5e-4 || math.Abs(hi-tc.hi) > 5e-4 {
			t.Errorf("Wilson(%d, %d) = [%.4f, %.4f], want [%.4f, %.4f]", tc.k, tc.n, lo, hi, tc.lo, tc.hi)
		}
	}
	if lo, hi := Wilson(0, 0); lo != 0 || hi != 1 {
		t.Errorf("Wilson(0, 0) = [%v, %v], want [0, 1]", lo, hi)
	}
}

func TestMomentsRatio(t *testing.T) {
	var exact, none, constant moments
	for i := range 1000 {
		y := float64(i % 7)
		exact.add(2*y+1, y) // an affine image: calibrated away
		none.add(float64((i*7919)%13), y)
		constant.add(3, y)
	}
	if r := exact.ratio(); r > 1e-6 {
		t.Errorf("affine guesses: ratio %v, want 0", r)
	}
	if r := none.ratio(); r < 0.95 {
		t.Errorf("unrelated guesses: ratio %v, want ≈ 1", r)
	}
	if r := constant.ratio(); r != 1 {
		t.Errorf("constant guesses: ratio %v, want 1", r)
	}
	clusters := []moments{exact, exact, exact}
	v, lo, hi := bootRatio(clusters, 50, 1)
	if v > 1e-6 || lo > v+1e-9 || hi < v-1e-9 {
		t.Errorf("bootRatio of exact clusters: %v [%v, %v]", v, lo, hi)
	}
}

// TestSDMFModelMatchesTranscript checks the attacker's model of SDMF
// against what sdcf.Train sends: the parameters recomputed from the
// transcript header and each user's h give eq. (12)'s z for every user,
// and the uploads of the run average z items.
func TestSDMFModelMatchesTranscript(t *testing.T) {
	e, err := newEnv(Config{Quick: true, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	cfg := sdmfShapeConfig(e, 20)
	var rr map[int]dp.TwoStageRR
	var z, items, ups float64
	err = observe(context.Background(), sdcfRun(context.Background(), e.data, cfg), func(h protocol.TranscriptHeader, rec *protocol.Record) error {
		if rr == nil {
			if rr, err = sdmfRR(e.data, h); err != nil {
				return err
			}
			if z, err = metaFloat(h, "z"); err != nil {
				return err
			}
		}
		for _, up := range rec.Uploads {
			items += float64(len(up.Items))
			ups++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	byUser := e.data.ByUser()
	raters := 0
	for u := range e.data.NumUsers() {
		if byUser.RowLen(u) > 0 {
			raters++
		}
	}
	if len(rr) != raters || raters == 0 {
		t.Errorf("parameters for %d users, %d have ratings", len(rr), raters)
	}
	for u, p := range rr {
		h := float64(byUser.RowLen(u))
		ps, qs := p.SendProbs()
		if got := h*qs + (float64(e.data.NumItems())-h)*ps; math.Abs(got-z) > 1e-6*z {
			t.Fatalf("user %d: expected uploads %g, want z = %g", u, got, z)
		}
		if math.Abs(p.PRREpsilon(int(h))-2*cfg.EpsI) > 1e-9 {
			t.Fatalf("user %d: ε_P %g, want %g", u, p.PRREpsilon(int(h)), 2*cfg.EpsI)
		}
	}
	if got := items / ups; math.Abs(got-z) > 0.05*z {
		t.Errorf("the run sent %.1f items per upload, the model says z = %.1f", got, z)
	}
}

// TestRedrawnControlRedraws checks the prr-redrawn control: a restart
// draws a new B' (a client that forgot its PRR state), while sdcf's B'
// is a pure function of the kept secret (dp's TestPRRDeterministicAndRates).
func TestRedrawnControlRedraws(t *testing.T) {
	e, err := newEnv(Config{Quick: true, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	sim, err := newSendSim(e.data, rrRedrawn, 4, 1, avgEpsI, avgEpsP, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	same := 0
	for _, c := range sim.clients {
		before := slices.Clone(c.ones)
		c.epoch = 1
		c.drawB()
		if slices.Equal(before, c.ones) {
			same++
		}
	}
	if same > len(sim.clients)/10 {
		t.Errorf("%d of %d clients kept B' across a restart", same, len(sim.clients))
	}
	fresh, err := newSendSim(e.data, rrFresh, 4, 0, avgEpsI, avgEpsP, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range fresh.clients {
		if !slices.Equal(c.ones, c.items) {
			t.Fatalf("fresh RR: client %d randomizes from %d items, not its %d rated ones", c.id, len(c.ones), len(c.items))
		}
	}
}

// TestInversionTwoRoundPath runs the inversion on sdcf's SGLD MF without
// the item-offset coordinate, where one round does not fix ‖u‖: the
// two-round solve and the sign resolution must still break it.
func TestInversionTwoRoundPath(t *testing.T) {
	e, err := newEnv(Config{Quick: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	cfg := sdcf.DefaultConfig(sdcf.Squared, false)
	cfg.Dim, cfg.ItemBias, cfg.Temp, cfg.Rounds, cfg.Seed = 10, false, 0, 5, 1
	r, err := invertSDCF(context.Background(), e, "sdmf", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ratio %.4f [%.4f, %.4f]", r.Value, r.Lo, r.Hi)
	if !strings.Contains(r.Note, "two-round") || !(r.Hi < 0.1) {
		t.Errorf("two-round inversion of SGLD MF: ratio %.4f [%.4f, %.4f]; %s", r.Value, r.Lo, r.Hi, r.Note)
	}
}

func TestRunRejectsUnknownNames(t *testing.T) {
	for _, cfg := range []Config{{Attack: "nope"}, {Method: "nope"}, {Attack: "server-h", Method: "dpmf"}} {
		if _, err := Run(context.Background(), cfg); !errors.Is(err, ErrUsage) {
			t.Errorf("%+v: error %v, want ErrUsage", cfg, err)
		}
	}
	empty := &ratings.Dataset{Name: "empty", Scale: ratings.Stars5}
	if _, err := Run(context.Background(), Config{Data: empty, Attack: "server-h"}); !errors.Is(err, ErrUsage) {
		t.Errorf("empty data: error %v, want ErrUsage", err)
	}
}

// TestMethodFilterKeepsControls checks that one method's audit still runs
// its attacks' controls.
func TestMethodFilterKeepsControls(t *testing.T) {
	rep, err := Run(context.Background(), Config{Quick: true, Seed: 1, Attack: "server-h", Method: "gamma"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rep.Results {
		got = append(got, r.Method+"/"+string(r.Role))
	}
	if !slices.Equal(got, []string{"mixture/control", "gamma/protected"}) {
		t.Errorf("rows %v, want the control and the method", got)
	}
}

func TestMarkdown(t *testing.T) {
	rep := quickAudit(t)
	var b bytes.Buffer
	if err := rep.Markdown(&b, "privrec audit --all --quick"); err != nil {
		t.Fatal(err)
	}
	s := b.String()
	for _, want := range []string{"`privrec audit --all --quick`", "**Passed**", "| inversion | fedmf | control |", "## server-h:", "rounds observed", "audit simulation", "sdcf.Train SDMF"} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}
