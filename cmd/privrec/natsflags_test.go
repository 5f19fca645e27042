package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// TestNATSFlagsAuthenticate: against an embedded cluster that lists one
// user nkey, serve's and aggregate's --nats-nkey connects with that
// user's seed and is refused with none, another user's seed, or half of
// a client certificate.
func TestNATSFlagsAuthenticate(t *testing.T) {
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := user.PublicKey()
	ns := startNATS(t, &server.Options{Nkeys: []*server.NkeyUser{{Nkey: pub}}})
	seedFile := func(kp nkeys.KeyPair) string {
		seed, _ := kp.Seed()
		p := filepath.Join(t.TempDir(), "user.nk")
		if err := os.WriteFile(p, seed, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	stranger, _ := nkeys.CreateUser()
	for _, tc := range []struct {
		name string
		f    natsFlags
		ok   bool
	}{
		{"the user's seed", natsFlags{nkey: seedFile(user)}, true},
		{"no credential", natsFlags{}, false},
		{"another user's seed", natsFlags{nkey: seedFile(stranger)}, false},
		{"a certificate without its key", natsFlags{nkey: seedFile(user), cert: "c.pem"}, false},
		{"creds and nkey", natsFlags{nkey: seedFile(user), creds: "u.creds"}, false},
	} {
		nc, err := tc.f.connect(ns.ClientURL())
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok %v", tc.name, err, tc.ok)
		}
		if nc != nil {
			nc.Close()
		}
	}
}

// startNATS starts an embedded NATS server with opts on 127.0.0.1 (a
// free port, no signal handlers) and shuts it down when the test ends.
func startNATS(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	opts.Host, opts.Port, opts.NoSigs = "127.0.0.1", -1, true
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(30 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(ns.Shutdown)
	return ns
}
