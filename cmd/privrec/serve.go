package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/privrec/privrec/deploy"
	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/shard"
)

func (a *app) serveCmd() *cobra.Command {
	var (
		mfl             methodFlags
		natsAuth        natsFlags
		items, scale    string
		listen, state   string
		cert, key, out  string
		releases        string
		devTLS          bool
		secaggActive    bool
		authorityKey    string
		runName         string
		seed            uint64
		minClients      int
		roundTimeout    time.Duration
		enrollQuiet     time.Duration
		linger          time.Duration
		minParticipants float64
		maxAbs          float64
		maxUploadMiB    int
		cpuProfile      string
		insecure        bool
		maxClients      int
		enrollRate      float64
		enrollBurst     int
		maxPolls        int
		maxStreams      int
		idleTimeout     time.Duration
		writeTimeout    time.Duration
		natsURL         string
		natsRun         string
		shards          int
		aggKeys         []string
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a method's server over the network: public item factors only",
		Long: `serve runs the server half of a federated method (privrec methods --json
lists which have one): it serves the public item catalog, waits for
clients to enrol, runs the method's rounds over Connect (gRPC, gRPC-Web and
HTTP/JSON clients all work) and publishes the final model, which holds the
item factors and nothing about any user.

State — the method server's state at the last round boundary, the round
number, the ledger of released rounds, the enrolment and the uploads folded
— lives in bbolt under --state and is committed with fsync at every round
boundary: kill the server at any moment and start it again with the same
flags, and it resumes; clients retry across the restart and answer the
reopened round with the same upload, so nothing is counted twice and no
noise is drawn twice.

Enrolment: a device enrols with a one-time code (privrec enroll-codes
issues them: each enrols one client, once, as a party of its own); a
vendor holding many users as one party enrols them with the shared
secret in STATE/enroll-token (created if absent), and its clients count
as one party in the colluding fraction secure aggregation is provisioned
for. At most --max-clients clients enrol, and Enroll calls are limited to
--enroll-rate a second (bursts of --enroll-burst).

Limits at the door: every call that needs a credential is refused before
its body is read when it has none; each call's body is capped (Upload and
SecAgg by the open round's size, at most --max-upload-mib), gzip included;
a credential holds at most --max-polls GetRound calls waiting at once;
connections idle for --idle-timeout are closed, a request's header must
arrive within 10 s, and a call must be answered within --write-timeout
(default: the longer of the 20 s long poll and four --round-timeout, the
longest a secure-aggregation step waits, plus a minute); an HTTP/2
connection carries at most --max-streams calls at once.

--seed starts the reproducible test mode: the server's randomness comes
from the seed and it accepts uploads drawn from seeded streams; without it
the server refuses them.

A round closes when every enrolled client answered, or at --round-timeout
with at least --min-participants of them; below that it is not released
and waits on. Uploads that are late, duplicate, malformed, of the wrong
shape, non-finite or out of range (|value| > --max-abs) are refused with an
error saying why, counted in /metrics by reason, and change nothing.

Cohorts: dp-als and dp-ease configured with --cohort N run over a
population rather than a roster. Each round first gathers its cohort, the
first N clients that offer to join, and runs with them alone (floor,
secure-aggregation session and noise shares counted on the cohort);
enrolment stays open, so devices that arrive late join later cohorts.
Each client offers only the rounds its plan's limits allow (dp-als:
--rounds-per-user, --min-gap; dp-ease: one round of each statistic),
which it remembers across restarts, so the run's user-level ε holds
whichever clients this server takes. The ledger records each round's
cohort beside the population.

Continual release: after every training round whose aggregate was
released, while the run goes on, the server publishes an interim model,
what its state holds now, with a release block saying which round it
reads and how many users (the ledger's users column). Clients ask for it
with GetModel{interim: true}; --releases DIR also writes each one as
DIR/round-NNNN.model. A release is computed from aggregates the server
already received, so it costs no ε; its privacy block has the ε spent so
far. A restarted server publishes its latest release again.

Aggregation: the HDPMF family, LDP-OP, RSMF, dp-als, dp-biases and dp-ease
run with --secagg masked by default here: each round's uploads are quantized
integer vectors over every coordinate of the round (every item; LDP-OP: every
named position; dp-als: every statistic of the release; dp-ease: every item's
count, then every pair of the top items),
aggregated by the SecAgg+ protocol between the clients and the server
(key agreement, encrypted Shamir shares, masked vectors, unmasking of the
survivors' sum), so the server learns each round's sum and nothing else,
with distributed Skellam noise. Methods without an integer path (the
SDCF family's uploads are randomized locally) keep their default. --secagg
off lets the server read single uploads of a method whose privacy rests on
sums only with --insecure, and so does --secagg ideal: over the network
"ideal" means this process reads every upload. Clients refuse such a plan
unless they are given --insecure too.

The protocol of masked rounds is the one against a server that lies
(--secagg-active, the default): clients hold identity keys certified by an
enrolment authority the operator does not control (privrec authority), sign
their keys, and check a consistency round. This server checks every
certificate and signature too, with the authority's public key and the run's
name (--authority-key, --run: required), so a client sending a bad one only
drops itself out. --secagg-active=false runs the honest-but-curious protocol,
and --secagg-active without --authority-key relays signatures unchecked: both
only with --insecure (clients refuse the first unless --insecure too).

Masked rounds: each client sends its masked vector of a round at most
once, ever. A round whose secure aggregation fails before any masked
vector was taken is retried under fresh keys; once the masked step has
opened (recorded durably first), the round is released from that session
or skipped for good, across restarts too: a restart never aggregates the
same vectors again under another survivor set. A round releases its sum
only with at least --min-participants of the enrolled clients' vectors in
it; below that it waits up to three more deadlines and is then skipped.
A client whose key is of small order, or whose shares two neighbours
report as failing authentication, is banned from later rounds; one
report excludes it from that round only.

Sharded aggregation (--nats URL): masked rounds are aggregated by
--shards aggregator processes (privrec aggregate --nats URL --run
--nats-run --shard s, started apart, before or after the server) over the
NATS JetStream cluster at URL instead of in this process. Clients see no
difference: the server runs the key, share and unmasking steps over
Connect as without it, receives each masked vector, publishes its pieces
by shard to JetStream on the client's behalf (JetStream only ever holds
masked pieces) and takes the sum from the aggregators' results. Each
secure-aggregation session is a shard round (1, 2, …); one that ends
without a sum is aborted and the aggregators go on. The bbolt state
under --state stays the server's own (model, ledger, crash records); a
--nats-run name belongs to one --state. Only the server and the
aggregators may publish on the run's subjects (the cluster's
permissions): anyone else could forge pieces and spoil the sum. Each
aggregator signs its results (privrec aggregate keygen, --sign-key);
--aggregator-keys gives their public key files in shard order (comma-
separated, or the flag repeated), and a result not signed by its shard's
key for the run, round and shard is logged and refused. --nats without
--aggregator-keys is refused unless --insecure. privrec nats-config
writes the cluster's users and least-privilege permissions for a run
(the server connects with --nats-nkey DIR/coordinator.nk). Front-ends
(privrec front --coordinator this server's URL) can carry the masked
vectors instead: clients call them, and each publishes its clients'
pieces after asking this server, which counts the admitted commits.
Give each front-end the secret in STATE/front-token (created with
--nats; privrec front --front-token-file): with it, the front-end
forwards each caller's address, and failed enrolments are limited by the
caller's address, not the front-end's.`,
		Example: `  privrec serve --method hdpmf --dev-tls --state run1 --listen 127.0.0.1:7070
  privrec client --server https://127.0.0.1:7070 --ca run1/tls/cert.pem \
      --token-file run1/enroll-token --simulate all --data ml-latest-small
  privrec enroll-codes --state run2 -n 100 > codes.txt   # before serve, for devices`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := mfl.validate(); err != nil {
				return err
			}
			if state == "" {
				return errors.New("--state DIR is required")
			}
			if mfl.spec.Federated == nil {
				return fmt.Errorf("--method %s has no client/server protocol; serve runs: %s", mfl.spec.Name, strings.Join(federatedNames(), ", "))
			}
			if err := serveAggregation(&mfl, insecure); err != nil {
				return err
			}
			if mfl.spec.Federated.Aggregation(mfl.cfg) == protocol.AggMasked && cmd.Flags().Changed("min-clients") && minClients < 2 {
				return fmt.Errorf("--min-clients %d: a masked run needs at least 2 clients (secure aggregation of one vector is that vector); give the number of clients that will join before the first round, e.g. 611 for a browser and a vendor's 610 users", minClients)
			}
			// The secrets before the TLS pair, which scripts wait for.
			token, err := secretFile(state, "enroll-token")
			if err != nil {
				return err
			}
			var frontToken string
			if natsURL != "" {
				if frontToken, err = secretFile(state, "front-token"); err != nil {
					return err
				}
			}
			tc, err := deploy.ServerTLS(cert, key, devTLS, state)
			if err != nil {
				return err
			}
			df := dataFlags{data: items, header: "auto", scale: scale, catalog: mfl.spec.Catalog}
			d, err := a.load(&df)
			if err != nil {
				return fmt.Errorf("--items: %w", err)
			}
			if d.Scale.Inferred {
				return fmt.Errorf("--items %s: the rating scale is not declared; give it with --scale MIN,MAX[,STEP]", items)
			}
			var sharded *deploy.Sharded
			if natsURL != "" {
				keys, err := aggregatorKeys(aggKeys, shards, insecure)
				if err != nil {
					return err
				}
				nc, err := natsAuth.connect(natsURL)
				if err != nil {
					return err
				}
				defer nc.Close()
				sharded = &deploy.Sharded{Conn: nc, Config: shard.Config{Run: natsRun, Shards: shards, AggregatorKeys: keys}}
			} else if cmd.Flags().Changed("shards") || cmd.Flags().Changed("nats-run") || len(aggKeys) > 0 {
				return errors.New("--shards, --nats-run and --aggregator-keys need --nats")
			}
			masked := mfl.spec.Federated.Aggregation(mfl.cfg) == protocol.AggMasked
			if err := activePolicy(masked, secaggActive, authorityKey, runName, insecure); err != nil {
				return err
			}
			secaggActive = secaggActive && masked
			var authority ed25519.PublicKey
			if authorityKey != "" {
				if authority, err = readAuthorityPub(authorityKey); err != nil {
					return err
				}
			}
			reg := prometheus.NewRegistry()
			reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
			log := slog.New(slog.NewJSONHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
			m, err := method.Protocol(mfl.spec.Name)
			if err != nil {
				return err
			}
			if releases != "" {
				if err := os.MkdirAll(releases, 0o755); err != nil {
					return fmt.Errorf("--releases: %w", err)
				}
			}
			srv, err := deploy.NewServer(deploy.ServerConfig{
				Method: m, Config: mfl.cfg, Seed: seed, TestMode: cmd.Flags().Changed("seed"),
				Catalog:  deploy.Catalog{ItemIDs: d.ItemIDs, Titles: d.ItemTitles, Scale: d.Scale, Side: d.Side},
				StateDir: state, Token: token, MinClients: minClients, EnrollQuiet: enrollQuiet,
				RoundTimeout: roundTimeout, MinParticipants: minParticipants, MaxAbs: maxAbs, ActiveSecAgg: secaggActive,
				Authority: authority, Run: runName,
				MaxUploadBytes: maxUploadMiB << 20, Logger: log, Metrics: deploy.NewMetrics(reg),
				OnPublish: func(raw []byte) error { // at the end of the run, before --linger
					if out == "" {
						return nil
					}
					m, err := model.ReadModel(bytes.NewReader(raw))
					if err != nil {
						return err
					}
					if err := m.Save(out); err != nil {
						return err
					}
					log.Info("model written", "path", out)
					return nil
				},
				OnRelease: func(round int, raw []byte) error {
					if releases == "" {
						return nil
					}
					m, err := model.ReadModel(bytes.NewReader(raw))
					if err != nil {
						return err
					}
					return m.Save(filepath.Join(releases, fmt.Sprintf("round-%04d.model", round)))
				},
				MaxClients: maxClients, EnrollRate: enrollRate, EnrollBurst: enrollBurst, MaxPolls: maxPolls,
				MaxStreams: maxStreams, IdleTimeout: idleTimeout, WriteTimeout: writeTimeout, Sharded: sharded, FrontToken: frontToken,
			})
			if err != nil {
				return err
			}
			defer srv.Close()
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return err
				}
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer func() {
					pprof.StopCPUProfile()
					f.Close()
				}()
			}
			log.Info("serving", "addr", ln.Addr().String(), "method", mfl.spec.Name, "items", len(d.ItemIDs),
				"state", state, "test_mode", cmd.Flags().Changed("seed"))
			return srv.Serve(cmd.Context(), ln, tc, reg, linger)
		},
	}
	mfl.register(cmd.Flags(), a.args)
	serveMaskedDefault(cmd.Flags(), &mfl)
	cmd.SetFlagErrorFunc(mfl.flagError)
	mfl.nameFlagsInErrors(cmd)
	f := cmd.Flags()
	f.StringVar(&items, "items", "ml-latest-small", "the public item catalog: a dataset (as --data elsewhere) whose items and titles are served")
	f.StringVar(&scale, "scale", "", `the public rating scale "min,max[,step]" (default: the catalog dataset's published scale)`)
	f.StringVar(&listen, "listen", "127.0.0.1:7070", "address to listen on")
	f.StringVar(&state, "state", "", "state directory (required): bbolt state, enrolment token, dev TLS pair")
	f.StringVar(&cert, "tls-cert", "", "TLS certificate file (PEM)")
	f.StringVar(&key, "tls-key", "", "TLS key file (PEM)")
	f.StringVar(&authorityKey, "authority-key", "", "with --secagg-active: the enrolment authority's public key (authority.pub): the server checks every client's certificate and signatures itself, so a client sending a bad one drops only itself out instead of aborting its neighbours")
	f.StringVar(&runName, "run", "", "with --authority-key: the run name the authority certifies identities for (clients: the same --run)")
	f.BoolVar(&secaggActive, "secagg-active", true, "run masked rounds with the protocol against a lying server: certified, signed keys (clients: --authority-key), a graph from the committed keys, a consistency round, larger K and T; =false (the honest-but-curious protocol) needs --insecure")
	f.BoolVar(&devTLS, "dev-tls", false, "make a self-signed pair for localhost in STATE/tls (clients: --ca STATE/tls/cert.pem)")
	f.StringVar(&out, "out", "", "write the final model here (model format, for privrec recommend)")
	f.StringVar(&releases, "releases", "", "write each interim model (continual release) into this directory as round-NNNN.model")
	f.Uint64Var(&seed, "seed", 0, "reproducible test mode: seed the server and accept seeded client uploads")
	f.IntVar(&minClients, "min-clients", 1, "enrolled clients to wait for before the first round (a masked run waits for at least 2): count every client, a vendor's users one each (a --one-party vendor counts its users too)")
	f.DurationVar(&enrollQuiet, "enroll-quiet", 2*time.Second, "start once no enrolment arrived for this long (and --min-clients are in)")
	f.DurationVar(&roundTimeout, "round-timeout", time.Minute, "a round's deadline")
	f.Float64Var(&minParticipants, "min-participants", 0, "fraction of enrolled clients a round needs at its deadline to be released (0: 0.9 under the active protocol, room for a tenth to drop out or sit a session out; 1 under the honest-but-curious one)")
	f.Float64Var(&maxAbs, "max-abs", 1e8, "refuse uploads with a value beyond ±this (a sanity bound against overflow, not robust aggregation)")
	f.IntVar(&maxUploadMiB, "max-upload-mib", 64, "refuse requests larger than this many MiB (decompressed; Upload and SecAgg are capped tighter by the round's size)")
	f.IntVar(&maxClients, "max-clients", 100000, "enrol at most this many clients (codes and token together; a --one-party vendor counts its users)")
	f.Float64Var(&enrollRate, "enroll-rate", 20, "Enroll calls a second, over all callers; the excess is refused (clients retry)")
	f.IntVar(&enrollBurst, "enroll-burst", 100, "Enroll calls allowed in a burst")
	f.IntVar(&maxPolls, "max-polls", 4, "GetRound calls one credential may have waiting at once")
	f.IntVar(&maxStreams, "max-streams", 250, "concurrent calls on one HTTP/2 connection")
	f.DurationVar(&idleTimeout, "idle-timeout", 30*time.Second, "close connections idle this long")
	f.DurationVar(&writeTimeout, "write-timeout", 0, "answer every call within this (0: the longer of the 20 s long poll and 4 × --round-timeout, plus a minute; it must exceed both)")
	f.BoolVar(&insecure, "insecure", false, "with --secagg off or ideal: let the server read single uploads of a method whose privacy rests on secure aggregation; with --secagg-active=false: run the honest-but-curious protocol; with --secagg-active and no --authority-key: relay certificates and signatures unchecked; with --nats and no --aggregator-keys: take unsigned shard results")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the server to this file (go tool pprof reads it)")
	f.StringVar(&natsURL, "nats", "", "aggregate masked rounds on this NATS JetStream cluster (comma-separated URLs) with privrec aggregate processes, not in this process")
	natsAuth.register(f)
	f.StringVar(&natsRun, "nats-run", "privrec", "with --nats: the run's name on the cluster (the aggregators' --run); one per --state")
	f.IntVar(&shards, "shards", 1, "with --nats: the number of shards, one privrec aggregate --shard s each")
	f.StringSliceVar(&aggKeys, "aggregator-keys", nil, "with --nats: the aggregators' public key files (privrec aggregate keygen), one a shard in shard order, comma-separated or the flag repeated; a result not signed by its shard's key is refused")
	f.DurationVar(&linger, "linger", time.Minute, "after the run, keep serving the final model this long (0: until SIGTERM)")
	return cmd
}

// serveMaskedDefault makes masked (secure aggregation over the network)
// the default of --secagg where the method has the integer path, before
// the flags are parsed, so that --help states the aggregation the server
// runs when --secagg is not given.
func serveMaskedDefault(fs *pflag.FlagSet, mfl *methodFlags) {
	fl := fs.Lookup("secagg")
	if fl == nil || !mfl.spec.Has("secagg") {
		return
	}
	was := fl.Value.String()
	if err := mfl.spec.Set(mfl.cfg, "secagg", "masked"); err != nil {
		return
	}
	if _, err := mfl.spec.NewServer(mfl.cfg, 2, ratings.Scale{Min: 1, Max: 5, Step: 1}, 1); err != nil {
		_ = mfl.spec.Set(mfl.cfg, "secagg", was) // no integer path: keep the default
		return
	}
	fl.DefValue = fl.Value.String()
}

// serveAggregation refuses --secagg off or ideal for a method whose
// privacy rests on secure aggregation unless --insecure.
func serveAggregation(mfl *methodFlags, insecure bool) error {
	fed := mfl.spec.Federated
	def := fed.Aggregation(mfl.spec.New())
	if !mfl.spec.Has("secagg") {
		return nil
	}
	switch agg := fed.Aggregation(mfl.cfg); {
	case !def.Secure() || insecure || agg == protocol.AggMasked:
	case agg == protocol.AggOff:
		return fmt.Errorf("--secagg off: %s is private only against a server that sees sums; the server would read single uploads. Add --insecure to do it anyway", mfl.spec.Name)
	default:
		return fmt.Errorf("--secagg ideal: over the network the ideal functionality is the server process reading every upload and adding them; %s is private only against a server that sees sums. Use --secagg masked (the default here), or add --insecure to do it anyway (clients then need --insecure too)", mfl.spec.Name)
	}
	return nil
}

// activePolicy is serve's policy on the secure-aggregation protocol of a
// masked run: the active protocol, with the server checking certificates
// and signatures (--authority-key, --run), unless --insecure. The
// honest-but-curious protocol holds only against a server that follows
// it; without the checks a client with a bad signature makes its honest
// neighbours abort every session of a round, so one client could stop
// the run.
func activePolicy(masked, active bool, authorityKey, run string, insecure bool) error {
	switch {
	case authorityKey != "" && run == "":
		return errors.New("--authority-key needs --run, the run name the authority certifies identities for (clients: the same --run)")
	case authorityKey == "" && run != "":
		return errors.New("--run names the run for --authority-key")
	case authorityKey != "" && !active:
		return errors.New("--authority-key checks the active protocol's certificates: drop --secagg-active=false")
	case !masked || insecure:
		return nil
	case !active:
		return errors.New("--secagg-active=false runs the honest-but-curious secure-aggregation protocol, which a server that lies can break (key substitution, the split attack); clients refuse it unless they say --insecure. Add --insecure to run it anyway")
	case authorityKey == "":
		return errors.New("masked rounds run the active protocol, whose identities an enrolment authority certifies: give its public key (--authority-key, from privrec authority keygen) and --run, so that this server checks every certificate and signature (without them one client with a bad signature stops every session of a round). Add --insecure to relay them unchecked")
	}
	return nil
}

// aggregatorKeys reads serve's --aggregator-keys: one public key file a
// shard, in shard order. None is refused unless insecure.
func aggregatorKeys(files []string, shards int, insecure bool) ([]ed25519.PublicKey, error) {
	switch {
	case len(files) == 0 && insecure:
		return nil, nil
	case len(files) == 0:
		return nil, errors.New("--nats needs --aggregator-keys: the aggregators' public key files (privrec aggregate keygen), one a shard; without them anyone who may publish on the cluster can forge a shard's result. Add --insecure to take unsigned results anyway")
	case len(files) != shards:
		return nil, fmt.Errorf("--aggregator-keys: %d files for --shards %d, want one a shard in shard order", len(files), shards)
	}
	keys := make([]ed25519.PublicKey, len(files))
	for s, f := range files {
		k, err := readEd25519Pub(fmt.Sprintf("--aggregator-keys (shard %d)", s), f)
		if err != nil {
			return nil, err
		}
		for t := range s {
			if bytes.Equal(keys[t], k) {
				return nil, fmt.Errorf("--aggregator-keys: %s (shard %d) is the key of shard %d too; each aggregator needs its own", f, s, t)
			}
		}
		keys[s] = k
	}
	return keys, nil
}

// secretFile returns the secret in DIR/NAME (enroll-token,
// front-token), creating it (0600) if absent.
func secretFile(dir, name string) (string, error) {
	path := filepath.Join(dir, name)
	b, err := os.ReadFile(path)
	if err == nil {
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return "", fmt.Errorf("%s is empty", path)
		}
		return tok, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	var raw [24]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	tok := base64.RawURLEncoding.EncodeToString(raw[:])
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(tok+"\n"), 0o600); err != nil {
		return "", err
	}
	return tok, os.Rename(tmp, path)
}
