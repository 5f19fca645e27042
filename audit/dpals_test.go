package audit

import (
	"context"
	"testing"
)

// TestDifferenceOnDPALSMean: the difference attack on dp-als's released
// global mean tells a target user's presence apart with noise off (the
// control) and stays within the ledger's bound with the noise on.
func TestDifferenceOnDPALSMean(t *testing.T) {
	e, err := newEnv(Config{Quick: true, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		noiseOff bool
		role     Role
		want     Status
	}{
		{true, Control, Broken},
		{false, Protected, Within},
	} {
		r, err := dpalsDiff(c.noiseOff)(context.Background(), e)
		if err != nil {
			t.Fatal(err)
		}
		r.Role = c.role
		r.judge()
		t.Logf("%s: %.4f [%.4f, %.4f] bound %.4f", r.Case, r.Value, r.Lo, r.Hi, r.Bound)
		if r.Status != c.want {
			t.Errorf("%s: status %s, want %s (%.4f [%.4f, %.4f] bound %.4f)", r.Case, r.Status, c.want, r.Value, r.Lo, r.Hi, r.Bound)
		}
	}
}

// TestInversionOnDPALSUploads: the rated-item recovery reads which items
// a client rated from its float bias-round upload (the control) and is at
// chance on the masked words the server receives under secagg=masked.
func TestInversionOnDPALSUploads(t *testing.T) {
	e, err := newEnv(Config{Quick: true, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		masked bool
		role   Role
		want   Status
	}{
		{false, Control, Broken},
		{true, Protected, Within},
	} {
		r, err := dpalsInversion(c.masked)(context.Background(), e)
		if err != nil {
			t.Fatal(err)
		}
		r.Role = c.role
		r.judge()
		t.Logf("%s: %.4f [%.4f, %.4f] bound %.4f, n = %d", r.Case, r.Value, r.Lo, r.Hi, r.Bound, r.N)
		if r.Status != c.want {
			t.Errorf("%s: status %s, want %s (%.4f [%.4f, %.4f] bound %.4f)", r.Case, r.Status, c.want, r.Value, r.Lo, r.Hi, r.Bound)
		}
	}
}
