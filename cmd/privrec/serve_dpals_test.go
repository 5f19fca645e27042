package main

import (
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
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
	data := syntheticTSV(t, 5)
	d, _, err := ratings.Load(data, ratings.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var dataMean float64
	for _, v := range d.Values {
		dataMean += float64(v)
	}
	dataMean /= float64(d.Len())
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	out, _, err := run(t, "enroll-codes", "--state", state, "-n", "1")
	if err != nil {
		t.Fatal(err)
	}
	code := strings.TrimSpace(out)
	// The device: a new user rating five catalog items low.
	mine := filepath.Join(dir, "mine.csv")
	var b strings.Builder
	b.WriteString("userId,movieId,rating\n")
	rated := map[string]bool{}
	for _, j := range []int{0, 3, 7, 11, 19} {
		fmt.Fprintf(&b, "me,%s,2\n", d.ItemIDs[j])
		rated[d.ItemIDs[j]] = true
	}
	if err := os.WriteFile(mine, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	const vendor = 150
	prm := filepath.Join(dir, "model.prm")
	common := []string{"--seed", "7", "--scale", "1,5,1"}
	var wg sync.WaitGroup
	errs := make([]error, 3)
	outs := make([]string, 3)
	wg.Add(1)
	go func() {
		defer wg.Done()
		outs[0], _, errs[0] = run(t, append([]string{"serve", "--method", "dp-als", "--secagg", "masked", "--eps", "20",
			"--dev-tls", "--state", state, "--listen", addr, "--items", data, "--min-clients", fmt.Sprint(vendor + 1),
			"--enroll-quiet", "1s", "--round-timeout", "2m", "--linger", "5s", "--out", prm}, common...)...)
	}()
	cert := devCert(t, state)
	url := "https://" + addr
	wg.Add(2)
	go func() {
		defer wg.Done()
		outs[1], _, errs[1] = run(t, append([]string{"client", "--server", url, "--ca", cert, "--code", code,
			"--ratings", mine, "--top", "5", "--json"}, common...)...)
	}()
	go func() {
		defer wg.Done()
		outs[2], _, errs[2] = run(t, append([]string{"client", "--server", url, "--ca", cert,
			"--token-file", filepath.Join(state, "enroll-token"), "--simulate", fmt.Sprint(vendor),
			"--data", data, "--split", "random:0.9"}, common...)...)
	}()
	wg.Wait()
	for k, err := range errs {
		if err != nil {
			t.Fatalf("%s: %v", []string{"serve", "device client", "vendor client"}[k], err)
		}
	}
	var recs []model.Recommendation
	if err := json.Unmarshal([]byte(outs[1]), &recs); err != nil {
		t.Fatalf("device output: %v\n%s", err, outs[1])
	}
	if len(recs) != 5 {
		t.Fatalf("%d recommendations, want 5:\n%s", len(recs), outs[1])
	}
	for _, r := range recs {
		if rated[r.Item] || r.Rating == nil || *r.Rating < 1 || *r.Rating > 5 || math.IsNaN(float64(r.Score)) {
			t.Errorf("recommendation %+v: want an unrated item rated on 1..5", r)
		}
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
	var nonzero int
	for _, x := range m.BI {
		if x != 0 {
			nonzero++
		}
	}
	if math.Abs(float64(m.Mean)-dataMean) > 0.3 || len(m.BI) != m.NumItems || nonzero == 0 {
		t.Fatalf("published mean %v (data %v), %d item biases (%d nonzero) for %d items", m.Mean, dataMean, len(m.BI), nonzero, m.NumItems)
	}
	folded, _, _, err := (&app{stdout: &strings.Builder{}, stderr: &strings.Builder{}}).foldIn(m, mine, 1, false)
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

// devCert waits until a privrec serve --dev-tls with this --state has
// written its certificate (at most 60 s) and returns its path.
func devCert(t *testing.T, state string) string {
	t.Helper()
	cert := filepath.Join(state, "tls", "cert.pem")
	for k := 0; ; k++ {
		if st, err := os.Stat(cert); err == nil && st.Size() > 0 {
			return cert
		}
		if k == 600 {
			t.Fatal("the server wrote no certificate in 60 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
