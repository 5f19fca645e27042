package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/privrec/privrec/deploy"
	"github.com/privrec/privrec/dpals"
	"github.com/privrec/privrec/dpease"
	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/hdpmf"
	"github.com/privrec/privrec/internal/progress"
	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/secagg"
)

func (a *app) clientCmd() *cobra.Command {
	var (
		df        dataFlags
		server    string
		ca        string
		tokenFile string
		code      string
		codeFile  string
		simulate  string
		split     string
		seed      uint64
		asJSON    bool
		workers   int
		idOffset  int
		dropout   float64
		popSpec   string
		insecure  bool
		mine      string
		top       int
		authPub   string
		certWith  string
		devAuth   bool
		run       string
		roster    int
		collusion float64
		minShare  float64
		pins      map[string]string
		proto     string
		memory    string
		idf       identityFlags
		oneParty  bool
		part      string
		users     int
		stay      bool
	)
	cmd := &cobra.Command{
		Use:   "client",
		Short: "Take part in a server's run as the users of a dataset",
		Long: `client connects to a privrec server (privrec serve), learns the method and
its public configuration from it, and takes part in every round as the
users of the training part of --data (--simulate all, or the first N of
them): a vendor holding many users is one such process. The users' ratings
and vectors never leave it; the server receives only each round's uploads.

When the server is done the client fetches the published item factors,
joins them with its users' vectors and evaluates the model on the test
part, printing what privrec evaluate prints (--json: the same object).

--protocol strong[:F] measures the lists as new users see them (Liang et
al.'s strong generalisation, as privrec evaluate --protocol strong): F of
--data's users (default 0.1) are held out and take no part in the run;
after it, each of them folds in on their own device against the published
model only, from 80% of their ratings, and ranks every other item; the
client prints Recall and NDCG at 10 and 20 of those lists. With --seed, in
test mode, the figures equal evaluate --protocol strong's with the same
method flags (a ranking model that records how a new user folds in:
pop, dp-pop, ease, ials, dp-ease).

--seed N selects the reproducible test mode (the server must have been
started with --seed N too): the split, the users' initial state and every
round's noise come from N, as in privrec evaluate --seed N, whose numbers
this run then equals. Without --seed the users draw from crypto/rand and
the server never learns their streams; the split uses seed 1.

--ratings FILE takes part as one user instead (one user's ratings, read
like --data: by the header's column names, else as user,item,rating;
items by the catalog's IDs, ratings on its scale; --skip-bad skips and
counts items the catalog lacks and malformed lines) and
prints that user's top --top recommendations when the run is done; the
user's ratings and vector never leave the process. One user can join an
hdpmf run; the other methods' clients calibrate their noise over a
population of users and take part only as a vendor's (--simulate).

A vendor (--simulate) enrols its users with the shared token
(--token-file STATE/enroll-token); one user (--ratings) enrols with a
one-time code from the operator (--code or --code-file; privrec
enroll-codes issues them), or with the token where the operator hands it
out.

The client retries through network failures and server restarts, and
answers a round reopened after a restart with the same upload it sent
before. It answers no round past the plan's count (the method's rounds for
the plan's configuration), whatever the server says.

--state DIR keeps, per plan (a digest of the method, its configuration, the
scale and the catalog; not the server's address), what the client must not
forget across its own restarts: the enrolment secrets (a restarted client
enrols again as the same client IDs), whether it answered the setup phase,
and the last round it answered. It is written to disk before any answer
leaves the process, and a client restarted with the same --state answers
no round it answered before, to this server or to another running the same
plan. Two runs of one plan are one run to the memory: a second run of the
same plan needs a new --state.

Against a server that runs the active protocol (serve's default), and
without --insecure, the clients refuse every other protocol;
--authority-key PUB pins the enrolment authority, and the clients' identity
keys need its certificates. The authority keeps its key:

  a vendor's users, in two runs of one command:
    privrec client ... --authority-key PUB --run R --state S --identity D
        enrols, draws one identity key per user (D/identities.json, 0600),
        writes D/requests.txt and stops, saying what the authority runs:
    privrec authority certify --key authority.key --run R --roster N \
        --batch D/requests.txt --ledger certified.txt > D/certificates.txt
    the same client command again: it enrols as the same client IDs (--state),
        checks the certificates (this authority, ID, key, run, roster), takes part
  a device, in one command, with its one-time code and the authority's
  service (privrec authority serve):
    privrec client ... --code C --ratings F --authority-key PUB --run R \
        --state S --identity D --authority-url URL [--authority-ca CA]

--certify-with authority.key certifies in process instead, for a process
that is itself the enrolling party: it holds the authority's key and could
mint identities.

--one-party (with --simulate) makes the vendor one secure-aggregation
party instead of one client per user: it enrols one identity that answers
for all its users (the server counts them as users: the roster, the
participation floor, the masked inputs, the ledger), computes every user's
upload exactly as that user's device would (the same code; with --seed the
same random streams, labelled by the user's index in --data), adds them
mod 2^32 and sends that one masked vector a round. The server unmasks the
same sums as with one client per user, so the model is the same; the
vendor's cost no longer grows with its users' identities (one key
agreement, one masked vector). Only masked runs (secagg=masked). --part I/N
takes the I-th of N contiguous shares of --data's users, so that N vendor
processes with the same --data and --seed hold disjoint users and the run
equals the in-process one; each then evaluates on its own users' test
ratings. Who is trusted: the vendor holds its users' ratings already and
adds each user's noise share itself; the server sees only the sum over the
parties. With few parties, a vendor that colludes with the server learns
the sum of the other parties' users, protected only by their own noise
shares (see deploy's documentation). Under an authority (--authority-key)
each party's certificate is one of --roster parties, and --users-roster
pins the run's total users its noise shares may be calibrated for.

--population SPEC (with --simulate) simulates devices that come and go, for
load tests of cohort runs (serve --cohort): round r is the simulated hour
start + r·hours (UTC) and each device, in its own time zone, is online with
the diurnal curve's probability at its local hour (lowest at 04:00, highest
at 20:00); an offline device does not offer to join the round's cohort and
answers nothing. After each round a device leaves for good with the churn
probability; a late fraction enrols only after a given round; and in each
training round a device taking part goes offline after sending its
encrypted shares, before its masked input, with the drop-after-shares
probability (the server must then reconstruct its pairwise masks). With
--seed every draw is a function of (seed, device, round). SPEC is
comma-separated NAME:VALUE fields:

` + deploy.PopulationHelp + `

A simulating client (--simulate) counts its bytes to and from the server by
device and prints them at the end on stderr: per device (mean, median, 99th
percentile, most) the HTTP bodies and headers before HTTP/2's header
compression and TLS, and the connections' totals with everything.`,
		Example: `  privrec client --server https://127.0.0.1:7070 --ca run1/tls/cert.pem \
      --token-file run1/enroll-token --simulate all --data ml-latest-small --split random:0.9 --json
  privrec client --server https://127.0.0.1:7070 --ca run1/tls/cert.pem \
      --code-file my-code.txt --ratings my-ratings.csv --top 10`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if server == "" {
				return errors.New("--server is required")
			}
			if (simulate == "") == (mine == "") {
				return errors.New("give one of --ratings FILE (one user) and --simulate all|N (a dataset's users)")
			}
			if codeFile != "" {
				if code != "" {
					return errors.New("give one of --code and --code-file")
				}
				raw, err := os.ReadFile(codeFile)
				if err != nil {
					return fmt.Errorf("--code-file: %w", err)
				}
				code = strings.TrimSpace(string(raw))
			}
			switch {
			case (tokenFile == "") == (code == ""):
				return errors.New("give one of --token-file (a vendor's token) and --code/--code-file (a device's one-time code)")
			case code != "" && mine == "":
				return errors.New("--code enrols one client: use it with --ratings; a vendor's --simulate enrols with --token-file")
			}
			limit := -1
			if simulate != "all" && simulate != "" {
				n, err := strconv.Atoi(simulate)
				if err != nil || n < 1 {
					return fmt.Errorf("--simulate %q: want all or a positive count", simulate)
				}
				limit = n
			}
			var tok []byte
			if tokenFile != "" {
				var err error
				if tok, err = os.ReadFile(tokenFile); err != nil {
					return fmt.Errorf("--token-file: %w", err)
				}
			}
			hc, err := deploy.HTTPClient(ca)
			if err != nil {
				return err
			}
			test := cmd.Flags().Changed("seed")
			level := slog.LevelWarn
			if a.verbose {
				level = slog.LevelDebug
			}
			log := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: level}))
			// Progress: a bar on a terminal, a log line per round otherwise.
			bar := progress.New(a.stderr, -1, "waiting for the first round", "rounds")
			defer bar.Finish()
			report := func(p deploy.Progress) {
				how := "plain"
				if p.Masked {
					how = "secure aggregation"
				}
				eps := ""
				switch {
				case p.EpsTotal < 0:
					eps = ", ε so far unbounded"
				case p.EpsTotal > 0 && p.Delta > 0:
					eps = fmt.Sprintf(", ε so far %.3g at δ %.0e", p.EpsTotal, p.Delta)
				case p.EpsTotal > 0:
					eps = fmt.Sprintf(", ε so far %.3g", p.EpsTotal)
				}
				if bar != nil {
					bar.Describe(fmt.Sprintf("round %d (%s, %s): %.1f s, %s%s", p.Round, p.Phase, how, p.Took.Seconds(), nClients(p.Clients), eps))
					bar.Add(1)
					return
				}
				fmt.Fprintf(a.stderr, "round %d (%s, %s) answered by %s in %.2f s%s\n", p.Round, p.Phase, how, nClients(p.Clients), p.Took.Seconds(), eps)
			}
			ccfg := deploy.ClientConfig{URL: server, Methods: method.Protocol, HTTP: hc, Token: strings.TrimSpace(string(tok)), Code: code,
				Seeded: test, Seed: seed, Workers: workers, Logger: log, Dropout: dropout, Insecure: insecure, Progress: report,
				Run: run, Roster: roster, Collusion: collusion, MinShare: minShare, Pin: pins, Memory: memory,
				OneParty: oneParty, Users: users, LeaveWhenSpent: mine != "" && !stay}
			if stay && mine == "" {
				return errors.New("--stay keeps one device until the run's end: use it with --ratings")
			}
			if popSpec != "" {
				if simulate == "" {
					return errors.New("--population simulates a population of devices: use it with --simulate")
				}
				p, err := deploy.ParsePopulation(popSpec)
				if err != nil {
					return fmt.Errorf("--population: %w", err)
				}
				ccfg.Population = &p
			}
			var traffic *deploy.Traffic
			if simulate != "" {
				ccfg.HTTP, traffic = deploy.CountTraffic(hc)
			}
			if oneParty && simulate == "" {
				return errors.New("--one-party takes part as a vendor's users: use it with --simulate")
			}
			if part != "" && simulate == "" {
				return errors.New("--part takes a share of a dataset's users: use it with --simulate")
			}
			if err := clientAuthority(&ccfg, authPub, certWith, devAuth, log); err != nil {
				return err
			}
			if memory == "" && !insecure {
				log.Warn("no --state: what these clients answer is remembered only while this process runs; restarted, they would answer a replay of the run's rounds again (each answer spends privacy). Give --state DIR to remember it")
			}
			idf.code, idf.pinned, idf.run, idf.roster, idf.stateDir = code, ccfg.Authority, run, roster, memory
			if err := idf.check(); err != nil {
				return err
			}
			if idf.dir != "" && ccfg.Certifier != nil {
				return errors.New("--identity: the authority certifies the identities and keeps its key: drop --certify-with and --dev-authority")
			}
			sess, err := deploy.Dial(ctx, ccfg)
			if err != nil {
				return err
			}
			// prepare has the clients' identities certified before
			// they run (--identity); stop: the authority certifies
			// them first.
			prepare := func(list []protocol.Client) (bool, error) {
				if idf.dir == "" {
					return false, nil
				}
				return a.identify(ctx, sess, list, &idf)
			}
			served, cfg, err := sess.Method()
			if err != nil {
				return err
			}
			spec, err := method.Lookup(served.Name())
			if err != nil {
				return err
			}
			claimNotice(a.stderr, served.Name(), served.Claim(cfg))
			if mine != "" {
				return a.oneUser(cmd, sess, spec, cfg, mine, df.skipBad, seed, test, top, asJSON, prepare)
			}
			df.catalog = spec.Catalog
			d, err := a.load(&df)
			if err != nil {
				return err
			}
			cat := sess.Catalog()
			if !slices.Equal(d.ItemIDs, cat.ItemIDs) {
				return fmt.Errorf("--data %s has %d items, and the server's catalog %d in another order or set: start the server with --items %s", df.data, d.NumItems(), len(cat.ItemIDs), df.data)
			}
			if d.Scale.Declared() != cat.Scale.Declared() {
				return fmt.Errorf("--data %s is on scale %v, the server's catalog on %v", df.data, d.Scale.Declared(), cat.Scale.Declared())
			}
			splitSeed, clientSeed := seed, seed
			if !test {
				splitSeed = 1
				var b [8]byte
				if _, err := rand.Read(b[:]); err != nil {
					return err
				}
				clientSeed = binary.LittleEndian.Uint64(b[:])
			}
			strong, frac, err := parseProtocol(proto)
			if err != nil {
				return err
			}
			if strong {
				if part != "" {
					return errors.New("--protocol strong holds users out of the run; --part splits them among vendors: give one of them")
				}
				if cmd.Flags().Changed("split") {
					return errors.New("--protocol strong splits --data by users; leave out --split")
				}
				return a.servedStrong(cmd, sess, spec, cfg, d, &df, frac, splitSeed, clientSeed, limit, asJSON, prepare)
			}
			sp, err := parseSplitFlag(split, &df)
			if err != nil {
				return err
			}
			splits, err := sp(d, splitSeed)
			if err != nil {
				return err
			}
			spl := splits[0]
			cls, err := spec.NewClients(cfg, spl.Train, clientSeed)
			if err != nil {
				return err
			}
			list := cls.List
			if limit >= 0 && limit < len(list) {
				list = list[:limit]
			}
			var lo, hi int
			if lo, hi, err = parsePart(part, len(list)); err != nil {
				return err
			}
			if part != "" {
				list = list[lo:hi]
				spl.Test = usersOf(spl.Test, list)
			}
			if idOffset > 0 {
				list = offsetIDs(list, idOffset)
			}
			if stop, err := prepare(list); stop || err != nil {
				return err
			}
			start := time.Now()
			pub, err := sess.Run(ctx, list)
			if err != nil {
				return err
			}
			printTraffic(a, traffic, len(list))
			m, res, err := cls.Finish(pub.V)
			if err != nil {
				return err
			}
			secs := time.Since(start).Seconds()
			fields := spec.Fields(cfg)
			rep := evalReport{Dataset: df.data, Ratings: d.Len(), Users: d.NumUsers(), Items: d.NumItems(),
				Method: spec.Name, Config: method.JSON(fields), Split: split, Seed: seed,
				Settings: spec.Name + " " + method.String(fields)}
			if res != nil {
				if test && res.Privacy.Unit != "" && res.Privacy.Unit != "none" && !strings.Contains(res.Privacy.Note, "TEST MODE") {
					// --seed: every device's noise came from the run's
					// seed (deploy.ClientConfig.Seeded), whatever the
					// method's own config says.
					res.Privacy.Note = method.TestModeNote + "; " + res.Privacy.Note
				}
				rep.Privacy = &res.Privacy
			}
			e := eval.Rating(m, spl.Test)
			run := runResult{Seed: seed, Train: spl.Train.Len(), Test: spl.Test.Len(),
				RMSE: e.RMSE, MSE: e.MSE, MAE: e.MAE, TrainSeconds: secs}
			rep.Summary = map[string]eval.Summary{"train_seconds": eval.Summarize([]float64{secs})}
			rep.TrainSeconds = secs
			rankK := 0
			if spec.Ranks {
				// A ranking-only method's scores are not ratings: it is
				// judged by its lists, as privrec evaluate does.
				rankK = defaultRankK
				relev := defaultRelevant(d.Scale)
				rep.Relevant, rep.RelevantNote = &relev, relevanceNote(relev, true, d.Scale)
				rk := eval.Rank(m, spl.Train, rankable(spl.Train, spl.Test), rankK, float32(relev))
				setRanking(&run, rk, func(key string, v float64) { rep.Summary[key] = eval.Summarize([]float64{v}) })
				rep.RankNote = fmt.Sprintf("no RMSE, MSE or MAE: %s is a ranking-only method, its scores order items and are not ratings", spec.Name)
			} else {
				rep.Summary["rmse"], rep.Summary["mse"], rep.Summary["mae"] = eval.Summarize([]float64{e.RMSE}), eval.Summarize([]float64{e.MSE}), eval.Summarize([]float64{e.MAE})
				rep.RMSE, rep.MSE, rep.MAE = e.RMSE, e.MSE, e.MAE
			}
			rep.Runs = []runResult{run}
			if asJSON {
				enc := json.NewEncoder(a.stdout)
				enc.SetIndent("", "  ")
				if spec.Ranks {
					return enc.Encode(rankOnly(&rep))
				}
				return enc.Encode(rep)
			}
			return printReport(a, &rep, rankK)
		},
	}
	df.register(cmd.Flags())
	f := cmd.Flags()
	f.StringVar(&server, "server", "", "the server's URL, e.g. https://127.0.0.1:7070, or several comma-separated: the front-ends of a sharded run (privrec front), which the clients spread over and fail over between")
	f.StringVar(&ca, "ca", "", "trust the server certificate(s) in this PEM file (e.g. STATE/tls/cert.pem of --dev-tls)")
	f.StringVar(&tokenFile, "token-file", "", "file holding a vendor's enrolment secret (the server's STATE/enroll-token)")
	f.StringVar(&code, "code", "", "with --ratings: a one-time enrolment code from the operator (privrec enroll-codes)")
	f.StringVar(&codeFile, "code-file", "", "with --ratings: file holding a one-time enrolment code")
	f.StringVar(&simulate, "simulate", "", "take part as the users of --data's training part: all, or the first N")
	f.StringVar(&split, "split", "random:0.9", "how to split --data into the users' training ratings and the test part")
	f.Uint64Var(&seed, "seed", 0, "reproducible test mode: seed of the split, the users' state and their noise (the server needs --seed too); unset: crypto randomness, split seed 1")
	f.BoolVar(&asJSON, "json", false, "print one JSON object")
	f.IntVar(&workers, "workers", 64, "users computing and uploading at once")
	f.IntVar(&idOffset, "id-offset", 0, "enrol the users under client IDs shifted by this much, so that several vendor processes can join one run (load tests)")
	f.StringVar(&mine, "ratings", "", "take part as one user with the ratings in this file (columns by header name, else item,rating or user,item,rating; one user) and print their recommendations")
	f.BoolVar(&stay, "stay", false, "with --ratings in a cohort run: stay until the run ends and print the list from the final model (by default the device leaves once its participation limits let it answer no later round, with the list from the newest release)")
	f.IntVar(&top, "top", 10, "with --ratings: how many recommendations to print (as privrec recommend does: score is the raw score that ranks, rating the score clamped to the scale)")
	f.BoolVar(&insecure, "insecure", false, "send plain uploads to a server that does not run secure aggregation for a method whose privacy rests on it (the server reads every upload)")
	f.StringVar(&authPub, "authority-key", "", "pin this enrolment authority (authority.pub of privrec authority keygen): masked rounds must run the active protocol (serve --secagg-active) and every neighbour's keys carry its certificate")
	f.StringVar(&certWith, "certify-with", "", "the authority's private key (authority.key), only for a process that is itself the enrolling party: it certifies its own users' identity keys and pins its public key; whoever runs it can then mint identities (others: --identity, the authority keeps its key)")
	f.StringVar(&idf.dir, "identity", "", "directory of the clients' identity keys (identities.json, 0600) and certificates: with --authority-key, --run and --state; a first run enrols and writes requests.txt for privrec authority certify --batch, the same command again takes part with certificates.txt")
	f.StringVar(&idf.url, "authority-url", "", "with --identity and --code: the authority's service (privrec authority serve): the device has its identity certified there in this command; its key must be --authority-key's")
	f.StringVar(&idf.ca, "authority-ca", "", "trust the authority service's certificate(s) in this PEM file")
	f.BoolVar(&devAuth, "dev-authority", false, "DEV ONLY: certify this process's users with a throwaway authority made here (no other process can join the run's active protocol)")
	f.StringVar(&run, "run", "", "the run label in the identity certificates")
	f.IntVar(&roster, "roster", 0, "the number of clients the authority certifies for the run (default: the users of this process); a plan with more positions is refused")
	f.Float64Var(&minShare, "min-share", 0, "with an authority: refuse a round that calibrates the noise shares for more than this fraction of the certified roster (a server inflating it shrinks every share), and reveal no share below it of survivors (0: 0.9)")
	f.StringToStringVar(&pins, "pin", nil, "configuration the plan must have, e.g. --pin eps=1,delta=1e-6,epochs=20,aggregation=masked: a plan outside it is refused")
	f.Float64Var(&collusion, "collusion", secagg.DefaultCollusion, "the fraction of the certified roster assumed to collude with the server: the plan's K and T must withstand it")
	f.StringVar(&proto, "protocol", "random", "with --simulate: random (the --split) or strong[:F]: F of the users (default 0.1) held out of the run fold in against the published model and are ranked, as evaluate --protocol strong")
	f.StringVar(&memory, "state", "", "directory where the client remembers, per plan, its enrolment secrets and the rounds it answered, so that a restart answers no round twice (a second run of the same plan needs a new --state)")
	f.Float64Var(&dropout, "dropout", 0, "simulate devices going offline: each user sits each training round out with this probability (load and dropout tests)")
	f.StringVar(&popSpec, "population", "", "with --simulate: devices that come and go (load tests of cohort runs), e.g. diurnal:0.3-0.9,zones:3,churn:0.01,late:0.2@3,drop-after-shares:0.1; the fields are in the command's help")
	f.BoolVar(&oneParty, "one-party", false, "with --simulate: take part as one secure-aggregation party that sends the sum of its users' masked vectors (one identity for all of them; masked runs only)")
	f.StringVar(&part, "part", "", "with --simulate: take part as the I-th of N contiguous shares of the users, I/N (1-based), e.g. 2/3: N vendor processes with the same --data and --seed hold disjoint users, each user labelled by its index in --data")
	f.IntVar(&users, "users-roster", 0, "with --one-party and --authority-key: the run's total users (over every party) the noise shares may be calibrated for; a larger roster is refused")
	_ = f.MarkDeprecated("id-offset", "the server assigns client IDs now; it only shifts the users' random-stream labels")
	return cmd
}

// servedStrong is client --simulate --protocol strong: the users of d not
// held out (eval.StrongSplit at splitSeed) take part in the run; then each
// held-out user folds in against the published model alone, as a new
// user's device does, and is ranked (rankStrong).
func (a *app) servedStrong(cmd *cobra.Command, sess *deploy.Session, spec method.Spec, cfg any, d *ratings.Dataset, df *dataFlags,
	frac float64, splitSeed, clientSeed uint64, limit int, asJSON bool, prepare func([]protocol.Client) (bool, error)) error {
	train, fold, test, err := eval.StrongSplit(d, frac, strongFoldFrac, splitSeed)
	if err != nil {
		return err
	}
	cls, err := spec.NewClients(cfg, train, clientSeed)
	if err != nil {
		return err
	}
	list := cls.List
	if limit >= 0 && limit < len(list) {
		list = list[:limit]
	}
	if stop, err := prepare(list); stop || err != nil {
		return err
	}
	start := time.Now()
	pub, err := sess.Run(cmd.Context(), list)
	if err != nil {
		return err
	}
	secs := time.Since(start).Seconds()
	rep, rks, err := rankStrong(pub, fold, test, eval.DefaultKs, defaultRelevant(d.Scale))
	if err != nil {
		return fmt.Errorf("%w: the published %s model has no fold-in rule for a new user", err, spec.Name)
	}
	rep.Dataset, rep.Method, rep.HeldOut, rep.Seed, rep.Train, rep.TrainSeconds =
		df.data, spec.Name+" "+method.String(spec.Fields(cfg)), frac, splitSeed, train.Len(), secs
	return a.printStrong(rep, rks, asJSON)
}

// offsetClient is a client enrolled under a shifted ID.
type offsetClient struct {
	protocol.Client
	off int
}

// ID is the client's own ID shifted: it labels the client's random
// streams (the server assigns the ID the client enrols under).
func (c offsetClient) ID() int { return c.Client.ID() + c.off }

// parsePart reads --part I/N for n users and returns the I-th of N
// contiguous shares [lo, hi); "" is every user.
func parsePart(part string, n int) (lo, hi int, err error) {
	if part == "" {
		return 0, n, nil
	}
	a, b, ok := strings.Cut(part, "/")
	i, err1 := strconv.Atoi(a)
	k, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || k < 1 || i < 1 || i > k {
		return 0, 0, fmt.Errorf("--part %q: want I/N with 1 ≤ I ≤ N, e.g. 2/3", part)
	}
	if k > n {
		return 0, 0, fmt.Errorf("--part %q: %d shares of %d users", part, k, n)
	}
	return (i - 1) * n / k, i * n / k, nil
}

// usersOf returns the ratings of test whose users are among list's
// clients (by client ID, the user's index).
func usersOf(test *ratings.Dataset, list []protocol.Client) *ratings.Dataset {
	mine := make(map[int32]bool, len(list))
	for _, c := range list {
		mine[int32(c.ID())] = true
	}
	var keep []int
	for k, u := range test.Users {
		if mine[u] {
			keep = append(keep, k)
		}
	}
	return test.Subset(keep)
}

func offsetIDs(list []protocol.Client, off int) []protocol.Client {
	out := make([]protocol.Client, len(list))
	for k, c := range list {
		out[k] = offsetClient{c, off}
	}
	return out
}

// oneUser takes part in the run as the one user whose ratings are in
// path, and prints that user's recommendations from the final model: the
// user's vector never leaves this process.
func (a *app) oneUser(cmd *cobra.Command, sess *deploy.Session, spec method.Spec, cfg any, path string, skipBad bool, seed uint64, test bool, top int, asJSON bool,
	prepare func([]protocol.Client) (bool, error)) error {
	// Only methods whose client needs nothing of the other users: the
	// HDPMF family's DPMF floor and PDPMF threshold, LDP-OP's noise split
	// and SDCF's z are computed over the population (the vendor case).
	// A dp-als device needs only its own ratings and the broadcasts;
	// dp-ease's uploads its own indicators (with its Skellam share,
	// drawn for the clients counted at setup, on the masked path).
	_, isDPALS := cfg.(*dpals.Config)
	_, isEase := cfg.(*dpease.Config)
	if c, ok := cfg.(*hdpmf.Config); !isDPALS && !isEase && (!ok || (c.Variant != hdpmf.HDPMF && c.Variant != hdpmf.HDPMFR)) {
		return fmt.Errorf("--ratings: the server runs %s, whose clients calibrate their noise over a population of users; one user takes part only in hdpmf, dp-als, dp-biases and dp-ease runs (use --simulate for a vendor's users)", spec.Name)
	}
	cat := sess.Catalog()
	one, err := a.oneUserRatings(path, cat.ItemIDs, "the server's catalog", cat.Scale, skipBad)
	if err != nil {
		return err
	}
	one.Name, one.Scale, one.ItemTitles = path, cat.Scale, cat.Titles
	rated := make([]string, len(one.Items))
	for k, i := range one.Items {
		rated[k] = cat.ItemIDs[i]
	}
	clientSeed := seed
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	if !test {
		clientSeed = binary.LittleEndian.Uint64(b[:])
	}
	cls, err := spec.NewClients(cfg, one, clientSeed)
	if err != nil {
		return err
	}
	// Streams of its own in test mode, apart from a vendor's users'
	// (the server assigns the client ID it enrols under).
	id := 1<<24 + int(binary.LittleEndian.Uint32(b[:])%(1<<29))
	list := offsetIDs(cls.List, id)
	if stop, err := prepare(list); stop || err != nil {
		return err
	}
	pub, err := sess.Run(cmd.Context(), list)
	if err != nil {
		return err
	}
	var m *model.Model
	if r := pub.Release; r != nil {
		fmt.Fprintf(a.stderr, "your list is from the release after round %d, which covers %d users: this device has answered every round its participation limits allow, and the run goes on (the same command later, with the same --state, answers nothing more and prints a newer list; --stay waits for the final model)\n", r.Round, r.Users)
		// No final round reached the clients' state: the device folds
		// itself in against the release, by the model's own rule (a
		// dp-als model: the device's solve), with its ratings on the
		// catalog's scale, on which the server publishes.
		m, err = pub.FoldIn(one.UserIDs[0], one.Items, one.Values, 1)
	} else {
		m, _, err = cls.Finish(pub.V)
	}
	if err != nil {
		return err
	}
	recs, err := m.RecommendUser(one.UserIDs[0], top, rated)
	if err != nil {
		return err
	}
	return printRecommendations(a.stdout, recs, asJSON)
}

// federatedNames lists the methods with a client/server protocol.
func federatedNames() []string {
	var out []string
	for _, s := range method.All() {
		if s.Federated != nil {
			out = append(out, s.Name)
		}
	}
	return out
}

// clientAuthority sets the client's pinned authority and certifier from
// --authority-key, --certify-with and --dev-authority.
func clientAuthority(c *deploy.ClientConfig, pubFile, keyFile string, dev bool, log *slog.Logger) error {
	if dev {
		if pubFile != "" || keyFile != "" {
			return errors.New("--dev-authority makes its own authority: drop --authority-key and --certify-with")
		}
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return err
		}
		log.Warn("DEV AUTHORITY: this process certifies its own users with a throwaway key; use privrec authority keygen and --certify-with in a deployment")
		c.Certifier = priv
		return nil
	}
	if keyFile != "" {
		priv, err := readAuthorityKey(keyFile)
		if err != nil {
			return err
		}
		c.Certifier = priv
	}
	if pubFile != "" {
		pub, err := readAuthorityPub(pubFile)
		if err != nil {
			return err
		}
		c.Authority = pub
	}
	return nil
}

// printTraffic prints, on stderr, what t counted of a simulating client's
// n devices' exchanges with the server (nothing when t is nil).
func printTraffic(a *app, t *deploy.Traffic, n int) {
	if t == nil {
		return
	}
	s := t.Summary()
	kb := func(x float64) string { return fmt.Sprintf("%.1f KB", x/1000) }
	fmt.Fprintf(a.stderr, "traffic: %d of %d devices exchanged bytes with the server (HTTP bodies and headers, before header compression and TLS)\n", s.Clients, n)
	fmt.Fprintf(a.stderr, "traffic per device: sent mean %s, median %s, p99 %s, most %s; received mean %s, median %s, p99 %s, most %s\n",
		kb(s.SentMean), kb(s.SentMedian), kb(s.SentP99), kb(float64(s.SentMax)), kb(s.RecvMean), kb(s.RecvMedian), kb(s.RecvP99), kb(float64(s.RecvMax)))
	fmt.Fprintf(a.stderr, "traffic in total: devices sent %.1f MB, received %.1f MB; the session's own (hello, enrolment) %.1f MB, %.1f MB; on the connections (TLS included) %.1f MB, %.1f MB\n",
		float64(s.ClientsSent)/1e6, float64(s.ClientsRecv)/1e6, float64(s.SessionSent)/1e6, float64(s.SessionRecv)/1e6, float64(s.WireSent)/1e6, float64(s.WireRecv)/1e6)
}

// nClients is "1 client" or "n clients".
func nClients(n int) string {
	if n == 1 {
		return "1 client"
	}
	return fmt.Sprintf("%d clients", n)
}
