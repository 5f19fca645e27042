package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
)

// TestServeDPEaseMasked: privrec serve --method dp-ease runs at its
// default aggregation here, masked (SecAgg+ with the devices' Skellam
// shares), without --insecure, over loopback TLS in test mode: a vendor's
// users and one device joining with its own ratings file (client
// --ratings), which prints a ranked list of catalog items it did not
// rate; the published model's ε, by the server's accounting of the
// Skellam shares that arrived, is the target's (within 2%, at most it).
func TestServeDPEaseMasked(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a served dp-ease run")
	}
	data := syntheticTSV(t, 6)
	d, _, err := ratings.Load(data, ratings.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	out, _, err := run(t, "enroll-codes", "--state", state, "-n", "1")
	if err != nil {
		t.Fatal(err)
	}
	code := strings.TrimSpace(out)
	mine := filepath.Join(dir, "mine.csv")
	var b strings.Builder
	b.WriteString("userId,movieId,rating\n")
	rated := map[string]bool{}
	for _, j := range []int{1, 4, 9, 16} {
		fmt.Fprintf(&b, "me,%s,5\n", d.ItemIDs[j])
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
	const vendor = 120
	prm := filepath.Join(dir, "model.prm")
	common := []string{"--seed", "3", "--scale", "1,5,1"}
	var wg sync.WaitGroup
	errs := make([]error, 3)
	outs := make([]string, 3)
	served := make(chan struct{})
	go func() {
		defer close(served)
		outs[0], _, errs[0] = run(t, append([]string{"serve", "--method", "dp-ease", "--eps", "5", "--top-items", "20",
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
			"--data", data, "--split", "random:0.9", "--json"}, common...)...)
	}()
	// A server that fails stops the test at once (its clients would
	// retry until the test's deadline).
	clientsDone := make(chan struct{})
	go func() { wg.Wait(); close(clientsDone) }()
	select {
	case <-clientsDone:
	case <-served:
		if errs[0] != nil {
			t.Fatalf("serve: %v\n%s", errs[0], outs[0])
		}
		<-clientsDone
	}
	<-served
	for k, err := range errs {
		if err != nil {
			t.Fatalf("%s: %v", []string{"serve", "device client", "vendor client"}[k], err)
		}
	}
	// --seed without the method's --seeded: the devices' shares still
	// came from the run's seed (deploy's test mode), and the vendor's
	// report must say so, not claim crypto/rand.
	var vendorRep struct {
		Privacy struct{ Note string }
	}
	if err := json.Unmarshal([]byte(outs[2]), &vendorRep); err != nil {
		t.Fatalf("vendor output: %v\n%s", err, outs[2])
	}
	if n := vendorRep.Privacy.Note; !strings.HasPrefix(n, "TEST MODE") || strings.Contains(n, "crypto/rand (no seed") {
		t.Errorf("vendor's privacy note in test mode: %q", n)
	}
	var recs []model.Recommendation
	if err := json.Unmarshal([]byte(outs[1]), &recs); err != nil {
		t.Fatalf("device output: %v\n%s", err, outs[1])
	}
	if len(recs) != 5 {
		t.Fatalf("%d recommendations, want 5:\n%s", len(recs), outs[1])
	}
	for k, r := range recs {
		if rated[r.Item] || r.Rating != nil || (k > 0 && r.Score > recs[k-1].Score) {
			t.Errorf("recommendation %+v: want an unrated item, ranked, without a rating", r)
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
	// The server's own accounting (dpease.Server.Spent: the Skellam
	// releases with the shares that arrived, all of them here).
	p := m.Privacy
	if !(p.EpsTotal > 4.9 && p.EpsTotal <= 5) || !(p.EpsRound > 0 && p.EpsRound <= p.EpsTotal) || p.Neighbouring == "" {
		t.Errorf("published privacy: ε %v in total, %v per round, neighbouring %q", p.EpsTotal, p.EpsRound, p.Neighbouring)
	}
}
