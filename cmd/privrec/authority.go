package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/privrec/privrec/secagg"
)

// The enrolment authority of secure aggregation against a server that
// lies: an Ed25519 key held by the enrolling party (a vendor, an app's
// publisher), never by the aggregator. Keys and certificates are stored as
// one line of standard base64: the private key's 32-byte seed
// (authority.key, mode 0600), the public key (authority.pub), a
// certificate (secagg.Certificate.Marshal).

func (a *app) authorityCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "authority",
		Short: "Enrolment authority for secure aggregation against a lying server",
		Long: `authority manages the enrolment authority whose certificates bind clients'
long-term identity keys in secure aggregation's active protocol (privrec
serve --secagg-active). The enrolling party — not the server's operator —
runs it with its own key; clients pin the public key (privrec client
--authority-key) and refuse neighbours whose keys it did not certify.

  privrec authority keygen --out DIR      writes DIR/authority.key and DIR/authority.pub
  privrec authority certify --key DIR/authority.key --run R --client ID --roster N --identity PUB
                                          prints the certificate of identity key PUB for
                                          client ID, the ID the server assigned it at enrolment

A vendor enrolling its own users certifies them in process: privrec client
--certify-with DIR/authority.key.`,
	}
	var out string
	keygen := &cobra.Command{
		Use:   "keygen",
		Short: "Make an authority key pair",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return errors.New("--out DIR is required")
			}
			if err := os.MkdirAll(out, 0o700); err != nil {
				return err
			}
			pub, priv, err := ed25519.GenerateKey(rand.Reader)
			if err != nil {
				return err
			}
			kf := filepath.Join(out, "authority.key")
			if err := os.WriteFile(kf, []byte(base64.StdEncoding.EncodeToString(priv.Seed())+"\n"), 0o600); err != nil {
				return err
			}
			pf := filepath.Join(out, "authority.pub")
			if err := os.WriteFile(pf, []byte(base64.StdEncoding.EncodeToString(pub)+"\n"), 0o644); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "authority key %s (keep it from the server's operator), public key %s (clients: --authority-key)\n", kf, pf)
			return nil
		},
	}
	keygen.Flags().StringVar(&out, "out", "", "directory for authority.key and authority.pub")
	var (
		keyFile, run, identity string
		client, roster         uint32
	)
	certify := &cobra.Command{
		Use:   "certify",
		Short: "Certify a client's identity public key for a run",
		RunE: func(cmd *cobra.Command, _ []string) error {
			priv, err := readAuthorityKey(keyFile)
			if err != nil {
				return err
			}
			pub, err := base64.StdEncoding.DecodeString(strings.TrimSpace(identity))
			if err != nil || len(pub) != ed25519.PublicKeySize {
				return fmt.Errorf("--identity: want a base64 Ed25519 public key")
			}
			if roster == 0 || client >= roster {
				return fmt.Errorf("--client %d --roster %d: want a client ID below a positive roster size", client, roster)
			}
			c := secagg.Certify(priv, run, client, roster, pub)
			fmt.Fprintln(a.stdout, base64.StdEncoding.EncodeToString(c.Marshal()))
			return nil
		},
	}
	f := certify.Flags()
	f.StringVar(&keyFile, "key", "", "the authority's private key file (authority keygen)")
	f.StringVar(&run, "run", "", "the run label the certificate is valid for")
	f.Uint32Var(&client, "client", 0, "the client ID")
	f.Uint32Var(&roster, "roster", 0, "the number of clients certified for the run")
	f.StringVar(&identity, "identity", "", "the client's Ed25519 identity public key (base64)")
	cmd.AddCommand(keygen, certify)
	return cmd
}

// readAuthorityKey reads an authority private key file of keygen.
func readAuthorityKey(path string) (ed25519.PrivateKey, error) {
	return readEd25519Key("authority key", path)
}

// readAuthorityPub reads an authority public key file of keygen.
func readAuthorityPub(path string) (ed25519.PublicKey, error) {
	return readEd25519Pub("authority public key", path)
}
