package deploy

import (
	"context"
	"crypto/ed25519"
	crand "crypto/rand"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/privrec/privrec/authority"
	"github.com/privrec/privrec/secagg"
)

// TestIdentityFromAuthority: clients whose identities an authority
// certified beforehand (ClientConfig.Identities: the authority kept its
// key) take part in an active run; certificates of another authority are
// refused before any key leaves, as is a certificate of another key than
// the one a client holds, and the authority's ledger refuses a second
// key for one client ID.
func TestIdentityFromAuthority(t *testing.T) {
	newKey := func() (ed25519.PublicKey, ed25519.PrivateKey) {
		pub, priv, err := ed25519.GenerateKey(crand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return pub, priv
	}
	authPub, authKey := newKey()
	_, otherKey := newKey()
	const run, roster = "run-7", 40

	// CheckIdentity, the client's check of one certificate.
	idPub, idKey := newKey()
	_, idKey2 := newKey()
	good := Identity{Key: idKey, Cert: secagg.Certify(authKey, run, 5, roster, idPub)}
	if err := CheckIdentity(authPub, run, roster, 5, good); err != nil {
		t.Fatalf("a good identity refused: %v", err)
	}
	for _, c := range []struct {
		name string
		id   Identity
		as   uint32
		want string
	}{
		{"another authority", Identity{Key: idKey, Cert: secagg.Certify(otherKey, run, 5, roster, idPub)}, 5, "another authority"},
		{"another client ID", good, 6, "names client 5"},
		{"another key than held", Identity{Key: idKey2, Cert: good.Cert}, 5, "another identity key"},
		{"another run", Identity{Key: idKey, Cert: secagg.Certify(authKey, "run-8", 5, roster, idPub)}, 5, "for run"},
		{"another roster", Identity{Key: idKey, Cert: secagg.Certify(authKey, run, 5, roster+1, idPub)}, 5, "roster"},
		{"no certificate", Identity{Key: idKey}, 5, "no certificate"},
	} {
		if err := CheckIdentity(authPub, run, roster, c.as, c.id); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error about %q", c.name, err, c.want)
		}
	}

	// The authority's ledger: one key per client ID.
	led, err := authority.OpenLedger(filepath.Join(t.TempDir(), "certified.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	if err := led.Record(nil, 5, idPub); err != nil {
		t.Fatal(err)
	}
	if err := led.Record(nil, 5, idKey2.Public().(ed25519.PublicKey)); !errors.Is(err, authority.ErrClientHasKey) {
		t.Fatalf("a second key for client 5: %v, want ErrClientHasKey", err)
	}

	// Over the network: the clients enrol, the authority certifies their
	// keys under the IDs the server gave, and they run the active
	// protocol; with another authority's certificates they refuse.
	d, spl := smallCatalog(t, roster, 150)
	_, cfg := configure(t, "hdpmf", map[string]string{"epochs": "1", "secagg": "masked"})
	for _, tc := range []struct {
		name   string
		signer ed25519.PrivateKey
		want   string // in the error; "" for a run that completes
	}{
		{"pinned authority", authKey, ""},
		{"another authority", otherKey, "another authority"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startServer(t, ServerConfig{Method: served("hdpmf"), Config: cfg, Seed: 3, TestMode: true, Catalog: catalogOf(d),
				StateDir: t.TempDir(), RoundTimeout: 5 * time.Second, ActiveSecAgg: true}, "127.0.0.1:0")
			sess := h.dial(t, true, 3)
			spec, mcfg := specOf(t, sess)
			cls, err := spec.NewClients(mcfg, spl.Train, 3)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			ids, err := sess.Enrol(ctx, cls.List)
			if err != nil {
				t.Fatal(err)
			}
			idents := map[uint32]Identity{}
			for _, id := range ids {
				pub, key := newKey()
				idents[id] = Identity{Key: key, Cert: secagg.Certify(tc.signer, run, id, roster, pub)}
			}
			sess.cfg.Authority, sess.cfg.Run, sess.cfg.Identities = authPub, run, idents
			_, err = sess.Run(ctx, cls.List)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				led, err := h.srv.Ledger()
				if err != nil {
					t.Fatal(err)
				}
				masked := 0
				for _, e := range led {
					if e.Phase != "final" && e.Skipped == "" && e.Uploads == len(ids) {
						masked++
					}
				}
				if masked == 0 {
					t.Fatalf("no masked round released with every client: %+v", led)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one about %q", err, tc.want)
			}
			t.Logf("refused: %v", err)
		})
	}
}
