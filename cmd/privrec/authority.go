package main

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/privrec/privrec/authority"
	"github.com/privrec/privrec/deploy"
	"github.com/privrec/privrec/internal/atomicfile"
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
  privrec authority certify --key K --run R --roster N --batch REQS --ledger certified.txt
                                          certifies every request of a client --identity run
                                          (one "ID key" a line), one certificate a line
  privrec authority codes --out A -n N    one-time enrolment codes: A/codes.txt for the
                                          devices, A/code-hashes.txt for the aggregator
                                          (privrec enroll-codes --import), which never sees a code
  privrec authority serve --key K --run R --roster N --codes A/code-hashes.txt \
      --ledger L --listen ADDR (--dev-tls --state DIR | --tls-cert C --tls-key K)
                                          the authority as an HTTPS service apart from the
                                          aggregator: a device certifies its identity key with
                                          its code (privrec client --authority-url)

The two-run flow of a vendor's users, the authority keeping its key:

  privrec client ... --authority-key authority.pub --run R --state S --identity D
      enrols, draws the identity keys (D/identities.json) and writes D/requests.txt
  privrec authority certify --key authority.key --run R --roster N \
      --batch D/requests.txt --ledger certified.txt > D/certificates.txt
  privrec client ... (the same command again)
      enrols as the same client IDs, checks the certificates and takes part

With --ledger the authority never certifies a second key for one client
ID (the ledger is appended and synced before a certificate is printed).

A process that is itself the enrolling party may certify its own users in
process (privrec client --certify-with DIR/authority.key); it holds the
authority's key and can then mint identities.`,
	}
	var out string
	keygen := &cobra.Command{
		Use:   "keygen",
		Short: "Make an authority key pair",
		RunE: func(cmd *cobra.Command, _ []string) error {
			kf, pf, err := writeKeyPair(out, "authority", os.WriteFile)
			if err != nil {
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
		batch, ledgerFile      string
	)
	certify := &cobra.Command{
		Use:   "certify",
		Short: "Certify a client's identity public key for a run",
		RunE: func(cmd *cobra.Command, _ []string) error {
			priv, err := readAuthorityKey(keyFile)
			if err != nil {
				return err
			}
			if batch != "" {
				if identity != "" || cmd.Flags().Changed("client") {
					return errors.New("--batch certifies the requests of a file: drop --client and --identity")
				}
				return a.certifyBatch(priv, run, roster, batch, ledgerFile)
			}
			pub, err := base64.StdEncoding.DecodeString(strings.TrimSpace(identity))
			if err != nil || len(pub) != ed25519.PublicKeySize {
				return fmt.Errorf("--identity: want a base64 Ed25519 public key")
			}
			if roster == 0 || client >= roster {
				return fmt.Errorf("--client %d --roster %d: want a client ID below a positive roster size", client, roster)
			}
			if ledgerFile != "" {
				led, err := authority.OpenLedger(ledgerFile)
				if err != nil {
					return err
				}
				defer led.Close()
				if err := led.Record(nil, client, pub); err != nil {
					return fmt.Errorf("--client %d: %w", client, err)
				}
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
	f.StringVar(&batch, "batch", "", "certify every request of this file (requests.txt of privrec client --identity: one \"client-ID base64-key\" a line), printing one certificate a line")
	f.StringVar(&ledgerFile, "ledger", "", "the authority's ledger (appended, synced): never certify a second key for one client ID")
	cmd.AddCommand(keygen, certify, a.authorityCodesCmd(), a.authorityServeCmd())
	return cmd
}

// certifyBatch certifies the requests of file (client --identity's
// requests.txt) and prints the certificates, one a line, after recording
// every one in the ledger, if any.
func (a *app) certifyBatch(priv ed25519.PrivateKey, run string, roster uint32, file, ledgerFile string) error {
	ids, keys, err := parseRequests(file)
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		return fmt.Errorf("--batch %s: no request", file)
	}
	if roster == 0 {
		return errors.New("--roster: give the number of clients certified for the run")
	}
	for _, id := range ids {
		if id >= roster {
			return fmt.Errorf("--batch %s: client %d is outside the roster of %d", file, id, roster)
		}
	}
	if ledgerFile != "" {
		led, err := authority.OpenLedger(ledgerFile)
		if err != nil {
			return err
		}
		defer led.Close()
		for k, id := range ids {
			if err := led.Record(nil, id, keys[k]); err != nil {
				return fmt.Errorf("--batch %s: client %d: %w (nothing printed)", file, id, err)
			}
		}
	}
	var b strings.Builder
	for k, id := range ids {
		b.WriteString(base64.StdEncoding.EncodeToString(secagg.Certify(priv, run, id, roster, keys[k]).Marshal()))
		b.WriteByte('\n')
	}
	_, err = io.WriteString(a.stdout, b.String())
	return err
}

// authorityCodesCmd is privrec authority codes.
func (a *app) authorityCodesCmd() *cobra.Command {
	var (
		out string
		n   int
	)
	cmd := &cobra.Command{
		Use:   "codes",
		Short: "Make one-time enrolment codes: the codes for the devices, their hashes for the aggregator",
		Long: `codes makes N one-time enrolment codes and writes OUT/codes.txt (mode 0600,
one code a line: hand one to each device) and OUT/code-hashes.txt (their
SHA-256, one a line in hex: for the aggregator, privrec enroll-codes
--state STATE --import OUT/code-hashes.txt, and for privrec authority serve
--codes). The aggregator never sees a code; a device enrols with it there
and has its identity certified with it here.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return errors.New("--out DIR is required")
			}
			if n < 1 {
				return fmt.Errorf("-n %d: make at least one code", n)
			}
			if err := os.MkdirAll(out, 0o700); err != nil {
				return err
			}
			var codes, hashes strings.Builder
			for range n {
				c, err := deploy.NewCode()
				if err != nil {
					return err
				}
				h := authority.HashCode(c)
				codes.WriteString(c + "\n")
				hashes.WriteString(hex.EncodeToString(h[:]) + "\n")
			}
			cf, hf := filepath.Join(out, "codes.txt"), filepath.Join(out, "code-hashes.txt")
			for _, p := range []string{cf, hf} {
				if _, err := os.Stat(p); err == nil {
					return fmt.Errorf("%s exists: codes are made once (give another --out)", p)
				}
			}
			if err := atomicfile.WriteFile(cf, []byte(codes.String()), 0o600); err != nil {
				return err
			}
			if err := atomicfile.WriteFile(hf, []byte(hashes.String()), 0o644); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "%d codes in %s (for the devices), their hashes in %s (for the aggregator: privrec enroll-codes --import, and privrec authority serve --codes)\n", n, cf, hf)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "directory for codes.txt and code-hashes.txt (required)")
	cmd.Flags().IntVarP(&n, "n", "n", 1, "how many codes to make")
	return cmd
}

// authorityServeCmd is privrec authority serve.
func (a *app) authorityServeCmd() *cobra.Command {
	var (
		keyFile, run, codes, ledgerFile, listen, origin string
		cert, key, state                                string
		devTLS                                          bool
		roster                                          uint32
		rate                                            float64
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the enrolment authority over HTTPS, apart from the aggregator",
		Long: `serve runs the enrolment authority as a service (package authority): a device
that enrolled at the aggregator with a one-time code asks it, with the same
code, to certify its identity key under the client ID the aggregator gave
it (privrec client --code C --identity D --state S --authority-key PUB
--authority-url URL). It certifies one identity per code, ever, and one key
per client ID; every certificate is in --ledger, synced before the answer,
so refusals survive a restart.

  GET  /v1/authority  {"key", "run", "roster"}
  POST /v1/certify    {"code", "client", "key"} -> {"certificate"}; 403 unknown or used
                      code, 409 another key for the ID, 400 malformed, 429 rate limited

Known limit: the authority cannot check that the client ID a code holder
names is the one the aggregator gave that code (see the package
documentation of authority).`,
		Example: `  privrec authority serve --key auth/authority.key --run r1 --roster 100 \
      --codes codes/code-hashes.txt --ledger auth/certified.txt --dev-tls --state auth \
      --listen 127.0.0.1:7443 --allow-origin https://127.0.0.1:7070`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case keyFile == "" || codes == "" || ledgerFile == "" || listen == "":
				return errors.New("--key, --codes, --ledger and --listen are required")
			case roster == 0:
				return errors.New("--roster: give the number of clients certified for the run")
			case devTLS && state == "":
				return errors.New("--dev-tls writes its pair under --state DIR: give it")
			}
			priv, err := readAuthorityKey(keyFile)
			if err != nil {
				return err
			}
			hashes, err := authority.ReadCodeHashes(codes)
			if err != nil {
				return fmt.Errorf("--codes: %w", err)
			}
			led, err := authority.OpenLedger(ledgerFile)
			if err != nil {
				return err
			}
			defer led.Close()
			svc, err := authority.New(authority.Config{Key: priv, Run: run, Roster: roster, Codes: hashes, Ledger: led,
				AllowOrigin: origin, Rate: rate})
			if err != nil {
				return err
			}
			tc, err := deploy.ServerTLS(cert, key, devTLS, state)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			hs := &http.Server{Handler: svc, TLSConfig: tc, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
				WriteTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second, MaxHeaderBytes: 16 << 10}
			fmt.Fprintf(a.stderr, "authority for run %q (roster %d, %d codes, %d identities certified) on https://%s\n", run, roster, len(hashes), led.Len(), ln.Addr())
			errc := make(chan error, 1)
			go func() { errc <- hs.ServeTLS(ln, "", "") }()
			select {
			case err := <-errc:
				return err
			case <-cmd.Context().Done():
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				return hs.Shutdown(ctx)
			}
		},
	}
	f := cmd.Flags()
	f.StringVar(&keyFile, "key", "", "the authority's private key file (authority keygen)")
	f.StringVar(&run, "run", "", "the run label of the certificates")
	f.Uint32Var(&roster, "roster", 0, "the number of clients certified for the run (client IDs below it)")
	f.StringVar(&codes, "codes", "", "the enrolment codes' hashes (code-hashes.txt of privrec authority codes)")
	f.StringVar(&ledgerFile, "ledger", "", "the ledger of certified identities (appended, synced; read at start)")
	f.StringVar(&listen, "listen", "127.0.0.1:7443", "address to listen on")
	f.StringVar(&origin, "allow-origin", "", "the one web page origin whose scripts may call the service (CORS), e.g. https://app.example")
	f.StringVar(&cert, "tls-cert", "", "TLS certificate file (PEM)")
	f.StringVar(&key, "tls-key", "", "TLS key file (PEM)")
	f.BoolVar(&devTLS, "dev-tls", false, "make a self-signed pair for localhost in STATE/tls (clients: --authority-ca STATE/tls/cert.pem)")
	f.StringVar(&state, "state", "", "with --dev-tls: the directory of the dev TLS pair")
	f.Float64Var(&rate, "rate", 20, "certifications made per second over all callers with a valid code (429 beyond); refused codes are limited per source address (20, then one every 2 s)")
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
