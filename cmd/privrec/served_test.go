package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/privrec/privrec/ratings"
)

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
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

// deviceRun is a served run over loopback TLS in test mode: a vendor's
// simulated users of data and one device joining with its own ratings
// file (client --ratings) of a new user "me".
type deviceRun struct {
	data  string           // the vendor's ratings and the catalog
	d     *ratings.Dataset // data, loaded
	mine  string           // the device's ratings file
	rated map[string]bool  // the items the device rated
	prm   string           // the published model
	// deviceArgs are added to the device's command; deviceLog is its
	// stderr once run.
	deviceArgs []string
	deviceLog  string
}

// newDeviceRun writes synthetic data (syntheticTSV with seed) and a
// device's file rating items (indices into the catalog) at rating.
func newDeviceRun(t *testing.T, seed uint64, items []int, rating int) *deviceRun {
	t.Helper()
	r := &deviceRun{data: syntheticTSV(t, seed), rated: map[string]bool{}}
	var err error
	if r.d, _, err = ratings.Load(r.data, ratings.LoadOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	r.mine, r.prm = filepath.Join(dir, "mine.csv"), filepath.Join(dir, "model.prm")
	var b strings.Builder
	b.WriteString("userId,movieId,rating\n")
	for _, j := range items {
		fmt.Fprintf(&b, "me,%s,%d\n", r.d.ItemIDs[j], rating)
		r.rated[r.d.ItemIDs[j]] = true
	}
	if err := os.WriteFile(r.mine, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return r
}

// run serves method flags (serve) with vendor+1 clients expected, then
// runs the device (client --ratings --top 5 --json) and the vendor's
// vendor users (client --simulate, with vendorArgs) against it, every
// command with common; it returns the device's and the vendor's output.
// A server that fails stops the test at once (its clients would retry
// until the test's deadline).
func (r *deviceRun) run(t *testing.T, serve []string, vendor int, vendorArgs, common []string) (device, vendorOut string) {
	t.Helper()
	state := filepath.Join(t.TempDir(), "state")
	out, _, err := run(t, "enroll-codes", "--state", state, "-n", "1")
	if err != nil {
		t.Fatal(err)
	}
	code := strings.TrimSpace(out)
	addr := freeAddr(t)
	errs := make([]error, 3)
	outs := make([]string, 3)
	served := make(chan struct{})
	go func() {
		defer close(served)
		// The honest-but-curious protocol, which both sides take only
		// with --insecure: these runs test what the clients receive.
		// serve's own flags come last, so that they may set another
		// --round-timeout.
		args := []string{"serve", "--secagg-active=false", "--insecure", "--dev-tls", "--state", state, "--listen", addr,
			"--items", r.data, "--min-clients", fmt.Sprint(vendor + 1), "--enroll-quiet", "1s", "--round-timeout", "2m",
			"--linger", "5s", "--out", r.prm}
		args = append(args, serve...)
		outs[0], _, errs[0] = run(t, append(args, common...)...)
	}()
	cert := devCert(t, state)
	url := "https://" + addr
	var wg sync.WaitGroup
	wg.Go(func() {
		args := append([]string{"client", "--insecure", "--server", url, "--ca", cert, "--code", code,
			"--ratings", r.mine, "--top", "5", "--json"}, r.deviceArgs...)
		outs[1], r.deviceLog, errs[1] = run(t, append(args, common...)...)
	})
	wg.Go(func() {
		args := append([]string{"client", "--insecure", "--server", url, "--ca", cert, "--token-file", filepath.Join(state, "enroll-token"),
			"--simulate", fmt.Sprint(vendor), "--data", r.data}, vendorArgs...)
		outs[2], _, errs[2] = run(t, append(args, common...)...)
	})
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
	return outs[1], outs[2]
}
