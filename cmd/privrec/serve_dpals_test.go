package main

import (
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/privrec/privrec/model"
)

// TestServeDPALSOneUser: a served dp-als run (masked, loopback TLS, test
// mode) with a vendor's users and one device joining with its own ratings
// file (client --ratings): the device prints recommendations of catalog
// items it did not rate, on the scale; the published model carries the
// released global mean and item biases (near the data's), and a user
// folded in against it (privrec recommend --ratings) is predicted near
// their own ratings, not a global mean too high.
func TestServeDPALSOneUser(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a served dp-als run")
	}
	r := newDeviceRun(t, 5, []int{0, 3, 7, 11, 19}, 2) // a new user rating five catalog items low
	d, rated := r.d, r.rated
	var dataMean float64
	for _, v := range d.Values {
		dataMean += float64(v)
	}
	dataMean /= float64(d.Len())
	const vendor = 150
	device, _ := r.run(t, []string{"--method", "dp-als", "--secagg", "masked", "--eps", "20"}, vendor,
		[]string{"--split", "random:0.9"}, []string{"--seed", "7", "--scale", "1,5,1"})
	prm := r.prm
	checkDeviceList(t, device, rated)
	f, err := os.Open(prm)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := model.ReadModel(f)
	if err != nil {
		t.Fatal(err)
	}
	var nonzero int
	for _, x := range m.BI {
		if x != 0 {
			nonzero++
		}
	}
	if math.Abs(float64(m.Mean)-dataMean) > 0.3 || len(m.BI) != m.NumItems || nonzero == 0 {
		t.Fatalf("published mean %v (data %v), %d item biases (%d nonzero) for %d items", m.Mean, dataMean, len(m.BI), nonzero, m.NumItems)
	}
	folded, _, _, err := (&app{stdout: &strings.Builder{}, stderr: &strings.Builder{}}).foldIn(m, r.mine, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	var se float64
	for j := range m.NumItems {
		if rated[m.ItemIDs[j]] {
			e := float64(folded.Predict(0, int32(j))) - 2
			se += e * e
		}
	}
	if rmse := math.Sqrt(se / 5); rmse > 0.5 {
		t.Errorf("fold-in against the published model predicts the device's own ratings (all 2) with RMSE %.3f", rmse)
	}
}

// TestServeDPALSCohortDeviceLeaves: in a served dp-als cohort run (2
// rounds per user), the device (client --ratings) answers its rounds,
// leaves while the run goes on and prints its list from the newest
// release, folded in by the device's rule against the interim model;
// it says which release. (Before, leaving ended in "dpals: the run did
// not reach its final round": the list came from the clients' final
// round only.)
func TestServeDPALSCohortDeviceLeaves(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a served dp-als cohort run")
	}
	r := newDeviceRun(t, 5, []int{0, 3, 7, 11, 19}, 2)
	r.deviceArgs = []string{"--state", t.TempDir()}
	const vendor = 60
	// The vendor joins one client at a time (--workers 1), so that the
	// device is taken into the first cohort. The final round closes at
	// its deadline (the device left): 30 s, not the harness's 2 minutes.
	device, _ := r.run(t, []string{"--method", "dp-als", "--secagg", "masked", "--eps", "20", "--cohort", "20",
		"--rounds-per-user", "2", "--bias-rounds", "2", "--rounds", "2", "--init-items", "10", "--round-timeout", "30s"}, vendor,
		[]string{"--split", "random:0.9", "--workers", "1"}, []string{"--seed", "7", "--scale", "1,5,1"})
	if !strings.Contains(r.deviceLog, "your list is from the release after round") {
		t.Fatalf("the device did not leave with a release:\n%s", r.deviceLog)
	}
	checkDeviceList(t, device, r.rated)
}

// checkDeviceList checks a device's printed list (client --ratings --top
// 5 --json): five items it did not rate, each rated on 1..5.
func checkDeviceList(t *testing.T, device string, rated map[string]bool) {
	t.Helper()
	var recs []model.Recommendation
	if err := json.Unmarshal([]byte(device), &recs); err != nil {
		t.Fatalf("device output: %v\n%s", err, device)
	}
	if len(recs) != 5 {
		t.Fatalf("%d recommendations, want 5:\n%s", len(recs), device)
	}
	for _, rec := range recs {
		if rated[rec.Item] || rec.Rating == nil || *rec.Rating < 1 || *rec.Rating > 5 || math.IsNaN(float64(rec.Score)) {
			t.Errorf("recommendation %+v: want an unrated item rated on 1..5", rec)
		}
	}
}
