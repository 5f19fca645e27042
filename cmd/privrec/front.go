package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/privrec/privrec/deploy"
)

func (a *app) frontCmd() *cobra.Command {
	var (
		coordinator, coordinatorCA  string
		listen, cert, key           string
		natsURL, natsRun            string
		natsAuth                    natsFlags
		maxUploadMiB                int
		tokenFile                   string
		uploadTimeout, writeTimeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "front",
		Short: "Serve a sharded run's clients and publish their masked vectors to NATS JetStream",
		Long: `front is a front-end of a sharded run (privrec serve --nats): a stateless
process that serves the clients' API over TLS in the server's place, so
that the masked vectors — nearly all of a masked round's bytes — pass
through several front-ends instead of the one server (the coordinator).

Every call is passed to the server at --coordinator as it came, except a
client's masked vector: the front-end asks the server (with the client's
own credential) whether the client may send one now, and under which
shard round and position, before it reads the call's body and before it
publishes anything; the call is capped at the size the server would
take. It then publishes the vector's pieces to the run's JetStream
streams and commits them (as the server does without front-ends), and
sends the step on to the server, which counts the client's admitted
commit as its masked vector and answers it. A front-end keeps nothing:
killed at any moment, it costs only the calls it held, whose clients
send them again through another front-end (privrec client --server
takes several URLs, comma-separated); a masked vector sent again is
published under the same message ids and counted once.

On a cluster set up with privrec nats-config --front-ends N, connect with
a front-end's seed (--nats-nkey DIR/front-I.nk): it may publish pieces
and commits of the run, and nothing else.

--front-token-file is the server's STATE/front-token: the front-end sends
it with each call beside the caller's address, so that the server limits
failed enrolments by the caller's address. Without it, the server counts
them by this front-end's, and a stranger flooding Enroll through it holds
up every enrolment through it.`,
		Example: `  privrec serve ... --dev-tls --state run1 --listen 127.0.0.1:7070 --nats nats://127.0.0.1:4222 --nats-run ml1m --shards 2 ...
  privrec front --coordinator https://127.0.0.1:7070 --coordinator-ca run1/tls/cert.pem \
    --listen 127.0.0.1:7071 --tls-cert run1/tls/cert.pem --tls-key run1/tls/key.pem \
    --nats nats://127.0.0.1:4222 --nats-run ml1m --nats-nkey natsauth/front-0.nk --front-token-file run1/front-token
  privrec client --server https://127.0.0.1:7071,https://127.0.0.1:7072 --ca run1/tls/cert.pem ...`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case coordinator == "":
				return errors.New("--coordinator URL (the server of privrec serve --nats) is required")
			case natsURL == "":
				return errors.New("--nats URL (the run's NATS cluster) is required")
			case maxUploadMiB < 1:
				return errors.New("--max-upload-mib: want at least 1")
			}
			tc, err := deploy.ServerTLS(cert, key, false, "")
			if err != nil {
				return err
			}
			hc, err := deploy.HTTPClient(coordinatorCA)
			if err != nil {
				return err
			}
			nc, err := natsAuth.connect(natsURL)
			if err != nil {
				return err
			}
			defer nc.Close()
			log := slog.New(slog.NewJSONHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
			var token string
			if tokenFile != "" {
				raw, err := os.ReadFile(tokenFile)
				if err != nil {
					return fmt.Errorf("--front-token-file: %w", err)
				}
				if token = strings.TrimSpace(string(raw)); token == "" {
					return fmt.Errorf("--front-token-file %s is empty", tokenFile)
				}
			} else {
				log.Warn("no --front-token-file: the server counts failed enrolments by this front-end's address, so a stranger's flood through it holds up every enrolment through it; give it the server's STATE/front-token")
			}
			f, err := deploy.NewFront(deploy.FrontConfig{Coordinator: coordinator, HTTP: hc, Conn: nc, Run: natsRun, Token: token,
				MaxUploadBytes: maxUploadMiB << 20, UploadTimeout: uploadTimeout, WriteTimeout: writeTimeout, Logger: log})
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			log.Info("front-end serving", "addr", ln.Addr().String(), "coordinator", coordinator, "nats_run", natsRun)
			err = f.Serve(cmd.Context(), ln, tc)
			log.Info("front-end stopped", "published", f.Published())
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&coordinator, "coordinator", "", "the run's server (privrec serve --nats), e.g. https://10.0.0.1:7070")
	f.StringVar(&coordinatorCA, "coordinator-ca", "", "trust the server certificate(s) in this PEM file (e.g. STATE/tls/cert.pem of serve --dev-tls)")
	f.StringVar(&listen, "listen", "127.0.0.1:7071", "address to listen on")
	f.StringVar(&cert, "tls-cert", "", "TLS certificate file (PEM) the clients check (required)")
	f.StringVar(&key, "tls-key", "", "TLS key file (PEM)")
	f.StringVar(&natsURL, "nats", "", "the run's NATS JetStream cluster (comma-separated URLs)")
	f.StringVar(&natsRun, "nats-run", "privrec", "the run's name on the cluster (serve --nats-run)")
	natsAuth.register(f)
	f.StringVar(&tokenFile, "front-token-file", "", "the server's STATE/front-token (serve --nats writes it): the front-end forwards each caller's address with it, so that failed enrolments are limited by the caller's address")
	f.IntVar(&maxUploadMiB, "max-upload-mib", 64, "refuse requests larger than this many MiB (SecAgg calls are capped tighter, at the size the server takes)")
	f.DurationVar(&uploadTimeout, "upload-timeout", 2*time.Minute, "give up publishing one client's masked vector after this long")
	f.DurationVar(&writeTimeout, "write-timeout", 10*time.Minute, "answer every call within this; it must exceed the server's (serve --write-timeout: by default 4 × --round-timeout plus a minute)")
	return cmd
}
