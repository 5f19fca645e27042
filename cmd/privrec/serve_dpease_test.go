package main

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/privrec/privrec/model"
)

// TestServeDPEaseMasked: privrec serve --method dp-ease runs at its
// default aggregation here, masked (SecAgg+ with the devices' Skellam
// shares), without --insecure, over loopback TLS in test mode: a vendor's
// users and one device joining with its own ratings file (client
// --ratings), which prints a ranked list of catalog items it did not
// rate, the same list recommend --model --ratings gives afterwards from
// the published model; the published model's ε, by the server's accounting of the
// Skellam shares that arrived, is the target's (within 2%, at most it).
func TestServeDPEaseMasked(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a served dp-ease run")
	}
	r := newDeviceRun(t, 6, []int{1, 4, 9, 16}, 5)
	rated := r.rated
	const vendor = 120
	device, vendorOut := r.run(t, []string{"--method", "dp-ease", "--eps", "5", "--top-items", "20"}, vendor,
		[]string{"--split", "random:0.9", "--json"}, []string{"--seed", "3", "--scale", "1,5,1"})
	prm := r.prm
	// --seed without the method's --seeded: the devices' shares still
	// came from the run's seed (deploy's test mode), and the vendor's
	// report must say so, not claim crypto/rand.
	var vendorRep struct {
		Privacy struct{ Note string }
	}
	if err := json.Unmarshal([]byte(vendorOut), &vendorRep); err != nil {
		t.Fatalf("vendor output: %v\n%s", err, vendorOut)
	}
	if n := vendorRep.Privacy.Note; !strings.HasPrefix(n, "TEST MODE") || strings.Contains(n, "crypto/rand (no seed") {
		t.Errorf("vendor's privacy note in test mode: %q", n)
	}
	var recs []model.Recommendation
	if err := json.Unmarshal([]byte(device), &recs); err != nil {
		t.Fatalf("device output: %v\n%s", err, device)
	}
	if len(recs) != 5 {
		t.Fatalf("%d recommendations, want 5:\n%s", len(recs), device)
	}
	for k, r := range recs {
		if rated[r.Item] || r.Rating != nil || (k > 0 && r.Score > recs[k-1].Score) {
			t.Errorf("recommendation %+v: want an unrated item, ranked, without a rating", r)
		}
	}
	// The same list afterwards, from the published model alone (recommend
	// --model --ratings folds the device's history in as the device did).
	after, _, err := run(t, "recommend", "--model", prm, "--ratings", r.mine, "-n", "5", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var again []model.Recommendation
	if err := json.Unmarshal([]byte(after), &again); err != nil {
		t.Fatalf("recommend output: %v\n%s", err, after)
	}
	if !reflect.DeepEqual(again, recs) {
		t.Errorf("recommend --model --ratings after the run:\n%s\nthe device's list in the run:\n%s", after, device)
	}
	f, err := os.Open(prm)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := model.ReadModel(f)
	if err != nil {
		t.Fatal(err)
	}
	// The server's own accounting (dpease.Server.Spent: the Skellam
	// releases with the shares that arrived, all of them here).
	p := m.Privacy
	if !(p.EpsTotal > 4.9 && p.EpsTotal <= 5) || !(p.EpsRound > 0 && p.EpsRound <= p.EpsTotal) || p.Neighbouring == "" {
		t.Errorf("published privacy: ε %v in total, %v per round, neighbouring %q", p.EpsTotal, p.EpsRound, p.Neighbouring)
	}
}
