package model

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// TestPrivacyJSONInf checks that a Privacy with ε +Inf (no guarantee
// against the server) encodes, as "Inf", and reads back.
func TestPrivacyJSONInf(t *testing.T) {
	p := Privacy{Unit: "user's rating values", Trusted: "nobody", EpsRound: math.Inf(1), EpsTotal: math.Inf(1), Delta: 1e-6, Note: "n", Aggregation: "off"}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"eps_total":"Inf"`) || !strings.Contains(string(b), `"aggregation":"off"`) {
		t.Errorf("JSON %s", b)
	}
	var q Privacy
	if err := json.Unmarshal(b, &q); err != nil {
		t.Fatal(err)
	}
	if !math.IsInf(q.EpsTotal, 1) || q.Delta != 1e-6 || q.Unit != p.Unit || q.Aggregation != "off" {
		t.Errorf("read back %+v", q)
	}
	b, _ = json.Marshal(Privacy{EpsTotal: 2})
	if !strings.Contains(string(b), `"eps_total":2`) || strings.Count(string(b), "eps_total") != 1 {
		t.Errorf("finite JSON %s", b)
	}
}
