package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// runCtx is run with a context the caller cancels (a long-running
// command: privrec authority serve).
func runCtx(ctx context.Context, args ...string) (string, string, error) {
	var out, errb bytes.Buffer
	root := newRoot(&out, &errb, args)
	err := root.ExecuteContext(ctx)
	return out.String(), errb.String(), err
}

// TestServedIdentitiesFromAuthority: an active run (serve
// --secagg-active) whose clients hold no authority key. The authority
// makes the codes (the aggregator imports only their hashes) and serves
// certification over HTTPS apart from the aggregator; a vendor's users
// are certified in a batch between two runs of one client command (the
// first enrols and writes requests.txt, the second takes part); a
// device enrols with its code and has its identity certified by the
// service in one command. Both complete the run together.
func TestServedIdentitiesFromAuthority(t *testing.T) {
	if testing.Short() {
		t.Skip("a served run")
	}
	const vendor = 30
	roster := fmt.Sprint(vendor + 1)
	r := newDeviceRun(t, 11, []int{1, 4, 9, 16, 25}, 5)
	dir := t.TempDir()
	auth, codes, state, authState := filepath.Join(dir, "auth"), filepath.Join(dir, "codes"), filepath.Join(dir, "state"), filepath.Join(dir, "authstate")
	for _, args := range [][]string{
		{"authority", "keygen", "--out", auth},
		{"authority", "codes", "--out", codes, "-n", "3"},
		{"enroll-codes", "--state", state, "--import", filepath.Join(codes, "code-hashes.txt")},
	} {
		if out, errOut, err := run(t, args...); err != nil {
			t.Fatalf("%v: %v\n%s%s", args, err, out, errOut)
		}
	}
	raw, err := os.ReadFile(filepath.Join(codes, "codes.txt"))
	if err != nil {
		t.Fatal(err)
	}
	code := strings.Fields(string(raw))[0]
	pub, key, ledger := filepath.Join(auth, "authority.pub"), filepath.Join(auth, "authority.key"), filepath.Join(auth, "certified.txt")

	// The authority's service.
	authAddr := freeAddr(t)
	actx, acancel := context.WithCancel(context.Background())
	authDone := make(chan error, 1)
	go func() {
		_, _, err := runCtx(actx, "authority", "serve", "--key", key, "--run", "r1", "--roster", roster,
			"--codes", filepath.Join(codes, "code-hashes.txt"), "--ledger", ledger, "--dev-tls", "--state", authState, "--listen", authAddr)
		authDone <- err
	}()
	t.Cleanup(func() { acancel(); <-authDone })
	authCA := devCert(t, authState)

	// The aggregator.
	addr := freeAddr(t)
	served := make(chan error, 1)
	go func() {
		_, errOut, err := run(t, "serve", "--method", "hdpmf", "--epochs", "2", "--authority-key", pub, "--run", "r1", "--dev-tls", "--state", state,
			"--listen", addr, "--items", r.data, "--min-clients", roster, "--enroll-quiet", "1s", "--round-timeout", "2m",
			"--linger", "5s", "--out", r.prm, "--seed", "1", "--scale", "1,5,1")
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, errOut)
		}
		served <- err
	}()
	cert := devCert(t, state)
	select {
	case err := <-served:
		t.Fatalf("serve stopped: %v", err)
	case <-time.After(time.Second):
	}
	url := "https://" + addr
	common := []string{"--server", url, "--ca", cert, "--authority-key", pub, "--run", "r1", "--seed", "1", "--scale", "1,5,1"}

	// The vendor's first run: enrol, draw identity keys, write the
	// requests, stop.
	vstate, vid := filepath.Join(dir, "vendor-state"), filepath.Join(dir, "vendor-id")
	vendorArgs := append([]string{"client", "--token-file", filepath.Join(state, "enroll-token"), "--simulate", fmt.Sprint(vendor),
		"--data", r.data, "--state", vstate, "--identity", vid}, common...)
	out, errOut, err := run(t, vendorArgs...)
	if err != nil {
		t.Fatalf("vendor's first run: %v\n%s", err, errOut)
	}
	if !strings.Contains(out, "privrec authority certify") || !strings.Contains(out, "requests.txt") {
		t.Fatalf("the first run does not say what to run:\n%s", out)
	}
	if st, err := os.Stat(filepath.Join(vid, "identities.json")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("identities.json: %v, %v; want mode 0600", st, err)
	}
	// The authority certifies the batch, with its ledger.
	certs, errOut, err := run(t, "authority", "certify", "--key", key, "--run", "r1", "--roster", roster,
		"--batch", filepath.Join(vid, "requests.txt"), "--ledger", ledger)
	if err != nil {
		t.Fatalf("authority certify --batch: %v\n%s", err, errOut)
	}
	if n := len(strings.Fields(certs)); n != vendor {
		t.Fatalf("%d certificates for %d users", n, vendor)
	}
	if err := os.WriteFile(filepath.Join(vid, "certificates.txt"), []byte(certs), 0o600); err != nil {
		t.Fatal(err)
	}

	// The vendor's second run and the device, together.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	outs := make([]string, 2)
	wg.Go(func() { outs[0], _, errs[0] = run(t, vendorArgs...) })
	time.Sleep(time.Second) // the vendor re-enrols before the device completes the roster
	wg.Go(func() {
		outs[1], _, errs[1] = run(t, append([]string{"client", "--code", code, "--ratings", r.mine, "--top", "5", "--json",
			"--state", filepath.Join(dir, "dev-state"), "--identity", filepath.Join(dir, "dev-id"),
			"--authority-url", "https://" + authAddr, "--authority-ca", authCA}, common...)...)
	})
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case err := <-served:
		t.Fatalf("serve stopped before its clients: %v", err)
	}
	for k, err := range errs {
		if err != nil {
			t.Fatalf("%s: %v", []string{"vendor's second run", "device"}[k], err)
		}
	}
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}
	var recs []map[string]any
	if err := json.Unmarshal([]byte(outs[1]), &recs); err != nil || len(recs) == 0 {
		t.Fatalf("the device's recommendations: %v\n%s", err, outs[1])
	}
	led, err := os.ReadFile(ledger)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(led)), "\n")
	batch := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "- ") {
			batch++
		}
	}
	if len(lines) != vendor+1 || batch != vendor {
		t.Fatalf("the ledger holds %d identities, want %d (the batch's and the device's):\n%s", len(lines), vendor+1, led)
	}
	// The same batch with another key for a client ID is refused.
	reqs, err := os.ReadFile(filepath.Join(vid, "requests.txt"))
	if err != nil {
		t.Fatal(err)
	}
	first := strings.Fields(string(reqs))
	other := filepath.Join(dir, "other.txt")
	devKey := ""
	for _, l := range lines {
		if !strings.HasPrefix(l, "- ") {
			devKey = strings.Fields(l)[2]
		}
	}
	if err := os.WriteFile(other, []byte(first[0]+" "+devKey+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "authority", "certify", "--key", key, "--run", "r1", "--roster", roster, "--batch", other, "--ledger", ledger); err == nil ||
		!strings.Contains(err.Error(), "another identity key") {
		t.Fatalf("a second key for client %s: %v, want it refused", first[0], err)
	}
}
