package model

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/privrec/privrec/accountant/rdp"
)

// TestSaveLoadKeepsReleases checks that a saved model keeps the releases
// of a ledger-accounted run (dp-als), in order.
func TestSaveLoadKeepsReleases(t *testing.T) {
	m := handModel(true)
	m.Method = "dp-als"
	m.Privacy = Privacy{Unit: "user", Trusted: "nobody", EpsRound: 1, EpsTotal: 1, Delta: 1e-6,
		Releases: []rdp.Release{
			{Name: "global mean", Count: 1, L2: 2.2, Sigma: 70, Rho: 0.0005},
			{Name: "round 1: item residual sums", Count: 1, L2: 1.1, Sigma: 16.6, Rho: 0.0022},
		}}
	path := filepath.Join(t.TempDir(), "m.prm")
	if err := m.Save(path); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Privacy, m.Privacy) {
		t.Errorf("privacy after Load(Save(m)) = %+v, want %+v", got.Privacy, m.Privacy)
	}
}
