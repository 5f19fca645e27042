package webclient

import (
	"context"
	"crypto/ed25519"
	crand "crypto/rand"
	"encoding/json"
	"strings"
	"testing"

	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/secagg"
)

// nopFetch is a Fetcher the policy tests never call.
type nopFetch struct{}

func (nopFetch) Fetch(_ context.Context, _, _ string, _ []byte) (int, []byte, error) {
	return 500, nil, nil
}

// TestActivePolicy: with an authority pinned and a certificate for a
// roster of 1000, the page refuses, before any key leaves it, a passive
// plan, a plan above the roster and K, T that a lying server could
// break; a round whose noise shares are not calibrated by a roster, or
// by one above the certified, or by a share fraction above the pinned
// one; and a survivor set below the floor. Without an authority it
// refuses an active plan. (deploy's TestActivePolicy, for the page.)
func TestActivePolicy(t *testing.T) {
	_, authority, _ := ed25519.GenerateKey(crand.Reader)
	plan, _ := json.Marshal(map[string]any{"method": "dp-ease", "config": map[string]string{"secagg": "masked"}, "aggregation": "masked",
		"catalog": map[string]any{"itemIds": []string{"1", "2"}}, "scale": map[string]any{"min": 1, "max": 5, "step": 1}})
	c, err := New(nil, plan)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.checkPlan(secagg.Params{N: 10, K: 4, T: 3, Bits: 32, Len: 1, Active: true}); err == nil || !strings.Contains(err.Error(), "no enrolment authority") {
		t.Errorf("an active plan without a pinned authority: %v", err)
	}
	if err := c.Pin(Trust{AuthorityURL: "https://authority.example", AuthorityKey: authority.Public().(ed25519.PublicKey), MinShare: 0.8, Fetch: nopFetch{}}); err != nil {
		t.Fatal(err)
	}
	c.SetCredential("7.secret-secret-secret")
	id, err := NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := id.public()
	id.Cert = secagg.Certify(authority, "run", 7, 1000, pub).Marshal()
	if err := c.SetIdentity(id); err != nil || !c.Certified() {
		t.Fatalf("SetIdentity: %v", err)
	}
	k, th, _ := secagg.ChooseParamsActive(1000, 0.25, secagg.DefaultCollusion)
	if err := c.checkPlan(secagg.Params{N: 1000, K: k, T: th, Bits: 32, Len: 1, Active: true}); err != nil {
		t.Fatalf("ChooseParamsActive's plan refused: %v", err)
	}
	kp, tp, _ := secagg.ChooseParams(1000, 0.25, secagg.DefaultCollusion)
	for _, tc := range []struct {
		name string
		p    secagg.Params
		want string
	}{
		{"passive", secagg.Params{N: 1000, K: k, T: th, Bits: 32, Len: 1}, "not the active"},
		{"T=1", secagg.Params{N: 1000, K: k, T: 1, Bits: 32, Len: 1, Active: true}, "can unmask"},
		{"honest-but-curious K, T", secagg.Params{N: 1000, K: kp, T: tp, Bits: 32, Len: 1, Active: true}, "can unmask"},
		{"above the roster", secagg.Params{N: 1001, K: k, T: th, Bits: 32, Len: 1, Active: true}, "certified roster"},
	} {
		if err := c.checkPlan(tc.p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	b := func(params map[string]float64, counts []int32) *protocol.Broadcast {
		return &protocol.Broadcast{Round: 1, Phase: protocol.PhaseTrain, Dim: 1, NumItems: 2, Words: 2, Bits: 32, Params: params, Counts: counts}
	}
	for _, tc := range []struct {
		name string
		b    *protocol.Broadcast
		want string // "" for accepted
	}{
		{"a roster calibration", b(map[string]float64{protocol.ParamRoster: 1000, protocol.ParamMinShare: 0.8}, nil), ""},
		{"no roster", b(nil, nil), "not by a roster"},
		{"a roster above the certified", b(map[string]float64{protocol.ParamRoster: 1001}, nil), "above the certified"},
		{"a count above the roster", b(map[string]float64{protocol.ParamRoster: 1000}, []int32{5, 1001}), "raters of item 1"},
		{"a share fraction above the pinned", b(map[string]float64{protocol.ParamRoster: 1000, protocol.ParamMinShare: 0.9}, nil), "above the pinned 0.8"},
	} {
		err := c.checkBroadcast(tc.b)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	bitmap := func(n int) []byte {
		bm := make([]byte, 125)
		for v := range n {
			bm[v/8] |= 1 << (v % 8)
		}
		return bm
	}
	if err := c.checkSurvivors(bitmap(800)); err != nil {
		t.Errorf("800 survivors of 1000 at a floor of 0.8: %v", err)
	}
	if err := c.checkSurvivors(bitmap(799)); err == nil || !strings.Contains(err.Error(), "refusing to reveal") {
		t.Errorf("799 survivors of 1000 at a floor of 0.8: %v", err)
	}
}

// TestCohortPlans: the page takes part in cohort runs with
// participation limits, which it enforces itself (TestCohortRules), and
// refuses in them what it refuses in any run: aggregation that is not
// masked, and a participation no run can honour. (Before, it refused
// every cohort plan: it kept no per-round record of its participations.)
func TestCohortPlans(t *testing.T) {
	tests := []struct {
		method string
		config map[string]string
		agg    string
		want   string // "" for accepted, else a word of the refusal
	}{
		{"dp-als", map[string]string{"secagg": "masked"}, "masked", ""},
		{"dp-als", map[string]string{"secagg": "masked", "cohort": "100"}, "masked", ""},
		{"dp-als", map[string]string{"secagg": "masked", "rounds-per-user": "2"}, "masked", ""},
		{"dp-als", map[string]string{"secagg": "masked", "min-gap": "3"}, "masked", ""},
		{"dp-als", map[string]string{"secagg": "masked", "cohort": "100", "rounds-per-user": "2", "min-gap": "3"}, "masked", ""},
		{"dp-ease", map[string]string{"secagg": "masked"}, "masked", ""},
		{"dp-ease", map[string]string{"secagg": "masked", "cohort": "100", "cohort-rounds": "3"}, "masked", ""},
		{"dp-als", map[string]string{"secagg": "ideal", "cohort": "100", "rounds-per-user": "2"}, "sum", "masked"},
		{"dp-als", map[string]string{"secagg": "off", "cohort": "100"}, "plain", "masked"},
		{"dp-als", map[string]string{"secagg": "masked", "cohort": "-1"}, "masked", "Cohort = -1"},
		{"dp-als", map[string]string{"secagg": "masked", "rounds-per-user": "-2"}, "masked", "RoundsPerUser = -2"},
	}
	for _, tt := range tests {
		plan, _ := json.Marshal(map[string]any{"method": tt.method, "config": tt.config, "aggregation": tt.agg,
			"catalog": map[string]any{"itemIds": []string{"1", "2"}}, "scale": map[string]any{"min": 1, "max": 5, "step": 1}})
		c, err := New(nil, plan)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s %v: refused: %v", tt.method, tt.config, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s %v (aggregation %s): New: %v; want a refusal naming %q", tt.method, tt.config, tt.agg, err, tt.want)
		case err == nil && tt.config["cohort"] != "" && c.part.Cohort == 0:
			t.Errorf("%s %v: the page reads no cohort", tt.method, tt.config)
		}
	}
}
