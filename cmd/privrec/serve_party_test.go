package main

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"testing"
)

// TestServeOneParty: ml-latest-small's users split among 3 vendor
// processes (client --simulate all --one-party --part I/3), each one
// secure-aggregation party of a served masked dp-als run in test mode:
// the test RMSE over every user, combined from the 3 vendors' own test
// ratings, equals evaluate's with the same flags to 1e-9, and the 3
// vendors' test ratings are the whole test part.
func TestServeOneParty(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a served dp-als run with 3 vendors")
	}
	common := []string{"--seed", "3"}
	method := []string{"--method", "dp-als", "--secagg", "masked", "--bias-rounds", "2", "--init-items", "20"}
	data := []string{"--data", "ml-latest-small", "--split", "random:0.9"}
	ref, _, err := run(t, append(append(append([]string{"evaluate"}, method...), data...), append(common, "--json")...)...)
	if err != nil {
		t.Fatal(err)
	}
	var want evalReport
	if err := json.Unmarshal([]byte(ref), &want); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "state")
	addr := freeAddr(t)
	served := make(chan error, 1)
	go func() {
		args := append([]string{"serve"}, method...)
		args = append(args, "--secagg-active=false", "--insecure", "--dev-tls", "--state", state, "--listen", addr,
			"--items", "ml-latest-small", "--min-clients", "610", "--enroll-quiet", "1s", "--round-timeout", "2m", "--linger", "2s")
		out, _, err := run(t, append(args, common...)...)
		if err != nil {
			err = fmt.Errorf("serve: %w\n%s", err, out)
		}
		served <- err
	}()
	cert := devCert(t, state)
	outs, errs := make([]string, 3), make([]error, 3)
	var wg sync.WaitGroup
	for k := range 3 {
		wg.Go(func() {
			args := []string{"client", "--insecure", "--server", "https://" + addr, "--ca", cert,
				"--token-file", filepath.Join(state, "enroll-token"), "--simulate", "all", "--one-party",
				"--part", fmt.Sprintf("%d/3", k+1), "--json"}
			outs[k], _, errs[k] = run(t, append(append(args, data...), common...)...)
		})
	}
	wg.Wait()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	var se float64
	var n int
	for k, out := range outs {
		if errs[k] != nil {
			t.Fatalf("vendor %d: %v", k+1, errs[k])
		}
		var rep evalReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("vendor %d: %v\n%s", k+1, err, out)
		}
		r := rep.Runs[0]
		se += r.MSE * float64(r.Test)
		n += r.Test
	}
	if n != want.Runs[0].Test {
		t.Fatalf("the vendors evaluated %d test ratings, the whole test part has %d", n, want.Runs[0].Test)
	}
	got := math.Sqrt(se / float64(n))
	if math.Abs(got-want.RMSE) > 1e-9 {
		t.Fatalf("test RMSE %v over 3 one-party vendors, %v in process", got, want.RMSE)
	}
	t.Logf("test RMSE %.16f over 3 one-party vendors (%d test ratings), %.16f in process", got, n, want.RMSE)
}
