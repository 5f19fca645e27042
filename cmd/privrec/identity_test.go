package main

import (
	"context"
	"crypto/ed25519"
	crand "crypto/rand"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/privrec/privrec/authority"
)

// TestAuthorityServicePinned: a device checks the service it asks for a
// certificate against the authority key it pins (--authority-key) and
// the run: a service reporting another key or run is refused.
func TestAuthorityServicePinned(t *testing.T) {
	pub, key, _ := ed25519.GenerateKey(crand.Reader)
	other, _, _ := ed25519.GenerateKey(crand.Reader)
	led, err := authority.OpenLedger(filepath.Join(t.TempDir(), "l.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	svc, err := authority.New(authority.Config{Key: key, Run: "r1", Roster: 4, Ledger: led})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewTLSServer(svc)
	defer ts.Close()
	for _, c := range []struct {
		name   string
		pinned ed25519.PublicKey
		run    string
		want   string
	}{
		{"pinned", pub, "r1", ""},
		{"another key", other, "r1", "reports authority key"},
		{"another run", pub, "r2", "certifies for run"},
	} {
		err := checkService(context.Background(), ts.Client(), ts.URL, c.pinned, c.run)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// TestAuthorityCodesImport: privrec authority codes writes the codes
// (0600) and their hashes; enroll-codes --import takes the hashes into the
// aggregator's state, skips them the second time, and a malformed hash
// file is refused naming its line.
func TestAuthorityCodesImport(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "codes")
	if _, _, err := run(t, "authority", "codes", "--out", out, "-n", "4"); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(out, "codes.txt")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("codes.txt: %v, %v; want mode 0600", st, err)
	}
	if _, _, err := run(t, "authority", "codes", "--out", out, "-n", "4"); err == nil {
		t.Fatal("codes made twice into one folder")
	}
	hashes := filepath.Join(out, "code-hashes.txt")
	state := filepath.Join(dir, "state")
	for _, want := range []string{"imported 4 code hashes (0 already there)", "imported 0 code hashes (4 already there)"} {
		_, errOut, err := run(t, "enroll-codes", "--state", state, "--import", hashes)
		if err != nil || !strings.Contains(errOut, want) {
			t.Fatalf("import: %v, %q; want %q", err, errOut, want)
		}
	}
	bad := filepath.Join(dir, "bad.txt")
	if err := os.WriteFile(bad, []byte("# hashes\n"+strings.Repeat("ab", 32)+"\nnot-a-hash\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "enroll-codes", "--state", state, "--import", bad); err == nil || !strings.Contains(err.Error(), "bad.txt:3") {
		t.Fatalf("a malformed hash file: %v, want an error naming line 3", err)
	}
}
