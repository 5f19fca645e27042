package deploy

import (
	"bytes"
	"context"
	"crypto/ed25519"
	crand "crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"reflect"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"time"

	"connectrpc.com/connect"

	fedv1 "github.com/privrec/privrec/gen/privrec/federation/v1"
	"github.com/privrec/privrec/gen/privrec/federation/v1/federationv1connect"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
	"github.com/privrec/privrec/secagg"
)

// ClientConfig configures a Session.
type ClientConfig struct {
	// URL is the server's base URL, e.g. https://127.0.0.1:7070, or
	// several comma-separated: the front-ends of one run (privrec
	// front), over which the clients spread and which a call that cannot
	// reach one moves on from (failover).
	URL string
	// Methods resolves the method the server's plan names (the clients
	// run only methods it knows; method.Protocol knows every registered
	// one). Required.
	Methods func(name string) (protocol.Method, error)
	// HTTP is the HTTP client, with the TLS roots that trust the server;
	// nil means http.DefaultClient.
	HTTP *http.Client
	// Token is the enrolment secret of a vendor; Code, used instead, is a
	// one-time enrolment code for one device (it enrols one client).
	Token string
	Code  string
	// Seeded selects the reproducible test mode: client k draws in round t
	// from rng.New(Seed, k, t), as the in-process transport does, and
	// says so in every upload. Otherwise every client draws each round
	// from a stream seeded by crypto/rand that the server never learns.
	Seeded bool
	Seed   uint64
	// Workers bounds the clients computing and uploading at once; <= 0
	// means 64.
	Workers int
	// Retry bounds how long one call is retried through network failures
	// and server restarts; <= 0 means 10 minutes.
	Retry  time.Duration
	Logger *slog.Logger
	// Progress, when not nil, is called after each round the clients
	// answered.
	Progress func(Progress)
	// Insecure lets the clients send plain uploads to a server whose plan
	// does not run secure aggregation for a method whose privacy rests on
	// it, and take part in masked rounds of the honest-but-curious
	// protocol without a pinned Authority; without it they refuse both
	// (the server would read every upload, or could unmask one by lying).
	Insecure bool
	// Dropout simulates devices that go offline: each training round each
	// client independently sits the round out (computes and sends nothing)
	// with this probability. Every client answers the setup round, where
	// the server counts who takes part. For tests and load tests.
	Dropout float64
	// Population, when not nil, simulates devices that come and go, for
	// load tests of cohort runs (privrec client --population): each
	// client is online in a round by a diurnal curve of its time zone,
	// leaves for good by churn, enrols late, or goes offline after its
	// encrypted shares (Population). An offline client does not offer to
	// join a cohort and answers nothing. Dropout still applies on top.
	// Not with OneParty or Code; late arrivals not with an Authority.
	Population *Population

	// Authority is the public key of the enrolment authority the clients
	// pin (privrec client --authority-key). When set, every masked round
	// must run secagg's active protocol (SecAggPlan.active), each
	// neighbour's keys must carry a certificate of this authority, and
	// the plan's K and T must withstand a lying server colluding with
	// Collusion of the certified roster (secagg.CheckActiveParams).
	Authority ed25519.PublicKey
	// Certifier is the authority's private key when this process is the
	// enrolling party and certifies its own clients' identity keys (a
	// vendor enrolling its users; the dev authority of a walkthrough).
	// Authority defaults to its public key.
	Certifier ed25519.PrivateKey
	// Identities holds the clients' identity keys and the authority's
	// certificates of them, made before the session (the authority kept
	// its key: privrec authority certify, or its service), by client ID:
	// the ID the server assigns at enrolment, the same in every session
	// of a plan with Memory. Each is checked (CheckIdentity) against
	// Authority, Run and Roster before any key leaves. It takes
	// Certifier's place.
	Identities map[uint32]Identity
	// Run is the run label in the certificates; Roster the number of
	// clients the authority certifies for the run (0: the clients of this
	// session). A plan with more positions than Roster is refused.
	Run    string
	Roster int
	// Collusion is the fraction of the certified roster the clients
	// assume may collude with the server (0: secagg.DefaultCollusion).
	Collusion float64
	// MinShare, in (0, 1], is the fraction of the certified roster the
	// clients assume take part in a masked round: a broadcast that asks
	// them to draw their noise shares for a larger fraction
	// (protocol.ParamMinShare, so smaller shares) is refused, and below it
	// of survivors a client reveals no share. 0 means DefaultFloor: room
	// for a tenth of the roster to drop out, or to sit a session out,
	// without stopping the round.
	MinShare float64
	// Pin holds configuration values the clients require of the run's
	// plan (e.g. eps, delta, epochs, secagg): a plan whose configuration
	// differs from itself with these values set is refused at Dial.
	Pin map[string]string
	// Memory, when not empty, is a directory (privrec client --state)
	// where the session keeps, per plan (protocol.PlanDigest: the
	// method, its configuration, the scale and the catalog, not the
	// server's address), what its clients must not forget across
	// restarts: their enrolment secrets, so that they enrol again as the
	// same client IDs, whether they answered the setup phase and the last
	// round they answered. It is written durably before any answer leaves
	// the process, and a restarted session answers no round it answered
	// before, whichever server asks. Two runs of one plan are one run to
	// the memory: a second run of the same plan needs another directory.
	Memory string
	// OneParty makes the session one secure-aggregation party for all
	// its clients (privrec client --simulate --one-party): a vendor that
	// holds its users' ratings enrols one identity for len(clients)
	// users (EnrollRequest.users), computes each user's answer as that
	// user's device would (the same code, the same random streams), adds
	// the users' integer vectors mod 2^Bits and sends that one masked
	// vector a round. The server sees the same sums as with one identity
	// per user. Every round that takes uploads must be masked (a plain
	// upload is one user's); Dropout and Code do not apply.
	OneParty bool
	// Users, for a OneParty session under a pinned Authority, is the
	// number of users of the whole run (over every party) the party
	// accepts its users' noise shares be calibrated for: a round whose
	// roster (protocol.ParamRoster) or counts exceed it is refused, as
	// Roster does for a session of one identity per user (with OneParty,
	// Roster and the certificates count parties).
	Users int
	// LeaveWhenSpent, in a cohort run, ends Run once the plan's
	// participation limits let none of the clients answer a later
	// training round: Run then returns the newest release (the interim
	// model after the last round the server finished, or the final model
	// once the run is done) instead of waiting for the end of the run. A
	// device online for minutes leaves with its list (privrec client
	// --ratings); run again later with the same Memory, it answers
	// nothing more and reads a newer release.
	LeaveWhenSpent bool
}

// Progress describes a round the clients answered.
type Progress struct {
	Round   int
	Phase   string
	Masked  bool          // the round ran secure aggregation
	Took    time.Duration // from the broadcast's arrival to the answers' end
	Clients int           // the clients of the session that took part
	// EpsTotal and Delta are the run's total ε at δ in the server's
	// ledger when the round opened (the rounds before it), as the server
	// reports it: 0 when it accounts nothing, -1 when unbounded. The
	// clients' own report at the end comes from their accountant.
	EpsTotal, Delta float64
}

// Session is a connection to a server and the run's public plan.
type Session struct {
	cfg  ClientConfig
	api  federationv1connect.FederationServiceClient
	plan *fedv1.HelloResponse
	log  *slog.Logger
	// needMasked: the run's method is private only against a server that
	// sees sums, so uploads go through secure aggregation or not at all.
	needMasked bool
	// resend, for the red-team test's control only, disables the rule
	// that a client sends its masked vector of a round once.
	resend bool
	// lie, for the red-team tests only, rewrites client id's message
	// before it leaves (nil: the client sends nothing more this session).
	lie func(id uint32, c *secagg.Client, m secagg.Message) secagg.Message
	// ids holds each client's certified identity (active protocol), by
	// client ID.
	ids map[uint32]*identity
	// setup is the round of the run's setup phase once the clients
	// answered it (-1 before): they answer one setup per run.
	setup int
	// creds and idsOf are the clients' credentials and IDs once enrolled
	// (Enrol).
	creds []string
	idsOf []uint32
	// users is the clients a OneParty session enrolled its one identity
	// for (0 otherwise).
	users int
	// rounds is the number of rounds of the plan (protocol.Method.Rounds):
	// the clients answer no round numbered past it.
	rounds int
	// digest names the plan (protocol.PlanDigest); mem, when not nil,
	// is the session's memory of it (ClientConfig.Memory).
	digest string
	mem    *memory
	// part is the plan's participation limits; trained the training
	// rounds each client answered (the memory's, when there is one); take
	// the clients answering the round being answered (nil: all).
	part    protocol.Participation
	trained [][]int
	take    []bool
	// pop is the simulated population (ClientConfig.Population; nil
	// without), drawn from popSeed; phase is the phase of the round
	// being answered.
	pop     *popState
	popSeed uint64
	phase   string
}

// identity is one client's long-term identity key and its certificate.
type identity struct {
	key  ed25519.PrivateKey
	cert *secagg.Certificate
}

// Identity is a client's long-term Ed25519 identity key in secagg's
// active protocol and the enrolment authority's certificate of it.
type Identity struct {
	Key  ed25519.PrivateKey
	Cert *secagg.Certificate
}

// CheckIdentity checks that id is client's identity for run: its
// certificate verifies under the authority's key, names this client ID,
// this key, this run and, when roster > 0, this roster.
func CheckIdentity(authority ed25519.PublicKey, run string, roster, client uint32, id Identity) error {
	c := id.Cert
	switch {
	case c == nil:
		return fmt.Errorf("deploy: client %d has no certificate", client)
	case len(id.Key) != ed25519.PrivateKeySize:
		return fmt.Errorf("deploy: client %d's identity key is not an Ed25519 private key", client)
	}
	if err := c.Verify(authority); err != nil {
		return fmt.Errorf("deploy: client %d's certificate: %w (is it from another authority than the pinned one?)", client, err)
	}
	switch {
	case c.Client != client:
		return fmt.Errorf("deploy: the certificate for client %d names client %d", client, c.Client)
	case !bytes.Equal(c.Key, id.Key.Public().(ed25519.PublicKey)):
		return fmt.Errorf("deploy: client %d's certificate is of another identity key than the one it holds", client)
	case c.Run != run:
		return fmt.Errorf("deploy: client %d's certificate is for run %q, this run is %q", client, c.Run, run)
	case roster > 0 && c.Roster != roster:
		return fmt.Errorf("deploy: client %d's certificate is for a roster of %d, pinned %d", client, c.Roster, roster)
	case c.Client >= c.Roster:
		return fmt.Errorf("deploy: client %d's certificate is for a roster of %d, which it is not in", client, c.Roster)
	}
	return nil
}

// Dial connects to the server and reads its plan, retrying while it is
// unreachable.
func Dial(ctx context.Context, cfg ClientConfig) (*Session, error) {
	if cfg.Methods == nil {
		return nil, errors.New("deploy: ClientConfig.Methods is nil: the clients cannot resolve the run's method")
	}
	if cfg.HTTP == nil {
		cfg.HTTP = http.DefaultClient
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 64
	}
	if cfg.Retry <= 0 {
		cfg.Retry = 10 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Identities != nil && cfg.Authority == nil {
		return nil, errors.New("deploy: ClientConfig.Identities without the authority's public key to check them against (--authority-key)")
	}
	if cfg.Authority == nil && cfg.Certifier != nil {
		cfg.Authority = cfg.Certifier.Public().(ed25519.PublicKey)
	}
	if cfg.Collusion <= 0 {
		cfg.Collusion = secagg.DefaultCollusion
	}
	if cfg.OneParty {
		switch {
		case cfg.Code != "":
			return nil, errors.New("deploy: a one-time code enrols one device; a party of many users enrols with the vendor token")
		case cfg.Dropout > 0:
			return nil, errors.New("deploy: a party holds its users' ratings and answers for all of them: Dropout does not apply")
		case cfg.Authority != nil && cfg.Users <= 0:
			return nil, errors.New("deploy: a party under a pinned authority needs the run's total users (ClientConfig.Users, --users-roster) to check the noise calibration against: the certified roster counts parties")
		}
	}
	popSeed, err := checkPopulation(&cfg)
	if err != nil {
		return nil, err
	}
	s := &Session{cfg: cfg, log: cfg.Logger, setup: -1, popSeed: popSeed,
		api: newAPI(cfg.HTTP, cfg.URL)}
	err = s.retry(ctx, "hello", func(ctx context.Context) error {
		resp, err := s.api.Hello(ctx, connect.NewRequest(&fedv1.HelloRequest{}))
		if err == nil {
			s.plan = resp.Msg
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if s.cfg.Seeded && !s.plan.GetTestMode() {
		return nil, errors.New("deploy: --seed asks for the reproducible test mode, and the server is not in it")
	}
	if err := s.checkAggregation(); err != nil {
		return nil, err
	}
	if err := s.checkPins(); err != nil {
		return nil, err
	}
	if err := s.planRounds(); err != nil {
		return nil, err
	}
	return s, nil
}

// planRounds reads the number of rounds of the plan, names the plan, and
// opens the session's memory of it.
func (s *Session) planRounds() error {
	spec, cfg, err := s.Method()
	if err != nil {
		return err
	}
	if s.rounds, err = spec.Rounds(cfg); err != nil {
		return fmt.Errorf("deploy: the server's plan of %s: %w", spec.Name(), err)
	}
	if s.rounds < 1 {
		return fmt.Errorf("deploy: the server's plan of %s has %d rounds", spec.Name(), s.rounds)
	}
	s.digest = protocol.PlanDigest(spec.Name(), spec.Text(cfg), s.Catalog().Scale, s.plan.GetCatalog().GetItemIds())
	if s.part = spec.Participation(cfg); s.part.Validate() != nil {
		return fmt.Errorf("deploy: the server's plan of %s: %w", spec.Name(), s.part.Validate())
	}
	if s.cfg.Memory == "" {
		return nil
	}
	if s.mem, err = openMemory(s.cfg.Memory, s.digest, spec.Name()); err != nil {
		return err
	}
	s.setup, s.trained = s.mem.rounds.Setup, s.mem.rounds.Trained
	return nil
}

// Rounds returns the number of rounds of the run's plan
// (protocol.Method.Rounds): the clients answer no round numbered past it.
func (s *Session) Rounds() int { return s.rounds }

// PlanDigest returns the name of the run's plan (protocol.PlanDigest).
func (s *Session) PlanDigest() string { return s.digest }

// checkPins refuses a plan whose configuration differs from what the
// clients pinned (ClientConfig.Pin): the plan's configuration with the
// pinned values set must be the plan's configuration.
func (s *Session) checkPins() error {
	if len(s.cfg.Pin) == 0 {
		return nil
	}
	spec, cfg, err := s.Method()
	if err != nil {
		return err
	}
	merged := maps.Clone(s.plan.GetConfig())
	if merged == nil {
		merged = map[string]string{}
	}
	maps.Copy(merged, s.cfg.Pin)
	delete(merged, "aggregation") // the plan's, not a configuration key
	want, err := spec.Configure(merged)
	if err != nil {
		return fmt.Errorf("deploy: the pinned configuration: %w", err)
	}
	if !reflect.DeepEqual(cfg, want) {
		return fmt.Errorf("deploy: the server's plan of %s is outside the pinned configuration %v (the plan: %v): refusing", spec.Name(), s.cfg.Pin, s.plan.GetConfig())
	}
	if a, ok := s.cfg.Pin["aggregation"]; ok && a != s.plan.GetAggregation() {
		return fmt.Errorf("deploy: the server's plan says aggregation %q, pinned %q: refusing", s.plan.GetAggregation(), a)
	}
	return nil
}

// checkBroadcast is the clients' policy on a new round's broadcast. They
// answer one setup phase per run, whatever the server. And, when an
// authority is pinned, on the quantities that calibrate their noise
// shares: a
// masked round must carry a roster calibration (protocol.ParamRoster R,
// every client adding a share drawn for ⌊ρ·R⌋ clients to every noised
// coordinate, whatever counts the server announces) with R at most the
// certified roster; no count (an item's raters n_j, LDP-OP's and DP-ALS's
// client count) above the roster; and no ParamMinShare ρ above
// ClientConfig.MinShare. A server that inflated R, n_j or ρ would shrink
// every share (μ/⌊ρ·n_j⌋ on the count-calibrated path); within these
// checks a share is at least μ/⌊MinShare·roster⌋.
func (s *Session) checkBroadcast(b *protocol.Broadcast, clients int) error {
	// Dial always sets rounds (at least 1); a Session literal of a unit
	// test of the other rules has none.
	if s.rounds > 0 && (b.Round < 0 || b.Round >= s.rounds) {
		return fmt.Errorf("%w: deploy: round %d is past the plan's rounds (the plan of %s has %d, numbered 0 to %d): refusing (each answer spends privacy)", protocol.ErrMessage, b.Round, s.plan.GetMethod(), s.rounds, s.rounds-1)
	}
	if b.Phase == protocol.PhaseSetup {
		// A setup's answers say what a client has (HDPMF's: the
		// indicator of its rated items): a second setup phase, later in
		// the run, would have them say it again.
		if s.setup >= 0 && s.setup != b.Round {
			return fmt.Errorf("%w: deploy: round %d is a second setup phase (the run's setup was round %d): refusing", protocol.ErrMessage, b.Round, s.setup)
		}
		s.setup = b.Round
	}
	if s.cfg.Authority == nil {
		return nil
	}
	roster := s.cfg.Roster
	if roster <= 0 {
		roster = clients
	}
	if s.cfg.OneParty {
		// The certified roster counts parties; the noise shares are
		// drawn for users.
		roster = s.cfg.Users
	}
	if s.part.Cohort > 0 && b.Phase != protocol.PhaseFinal {
		// A round's sum holds one cohort: the shares are drawn for it.
		roster = min(roster, s.part.Cohort)
	}
	if b.Words > 0 {
		switch r, ok := b.Params[protocol.ParamRoster]; {
		case !ok || protocol.Roster(b) == 0:
			return fmt.Errorf("deploy: masked round %d calibrates the noise shares by the server's counts, not by a roster (%s = %g): refusing (a server could shrink every share)", b.Round, protocol.ParamRoster, r)
		case protocol.Roster(b) > roster:
			return fmt.Errorf("deploy: round %d calibrates the noise shares for a roster of %d clients, above the certified %d: refusing (it would shrink every share)", b.Round, protocol.Roster(b), roster)
		}
	}
	for j, c := range b.Counts {
		if int(c) > roster {
			return fmt.Errorf("deploy: round %d announces %d raters of item %d, above the certified roster of %d: refusing (it would shrink every noise share)", b.Round, c, j, roster)
		}
	}
	if n, ok := b.Params["clients"]; ok && n > float64(roster) {
		return fmt.Errorf("deploy: round %d announces %g clients, above the certified roster of %d: refusing", b.Round, n, roster)
	}
	floor := floorOr(s.cfg.MinShare)
	if rho, ok := b.Params[protocol.ParamMinShare]; ok && rho > floor {
		return fmt.Errorf("deploy: round %d asks for noise shares calibrated for %g of the clients, above the pinned %g: refusing", b.Round, rho, floor)
	}
	return nil
}

// checkAggregation refuses a plan whose aggregation is weaker than the
// method's privacy needs: a method private only against a server that
// sees sums (its default aggregation is secure) must run masked over the
// network, where "sum" would mean the server process reads every upload.
// The plan's aggregation must also be what its own configuration says.
func (s *Session) checkAggregation() error {
	spec, cfg, err := s.Method()
	if err != nil {
		return err
	}
	agg := s.plan.GetAggregation()
	want := aggregationName(spec.Aggregation(cfg))
	if agg != want {
		return fmt.Errorf("deploy: the server's plan says aggregation %q, its configuration of %s says %q: refusing an inconsistent plan", agg, spec.Name(), want)
	}
	needs := spec.NeedsSums()
	if needs && agg != "masked" && !s.cfg.Insecure {
		return fmt.Errorf("deploy: %s is private only against a server that sees sums, and this server runs aggregation %q (it would read every upload): refusing; --insecure overrides", spec.Name(), agg)
	}
	s.needMasked = needs && !s.cfg.Insecure
	return nil
}

// Method returns the run's method and its typed configuration, as the
// server published them.
func (s *Session) Method() (protocol.Method, any, error) {
	spec, err := s.cfg.Methods(s.plan.GetMethod())
	if err != nil {
		return nil, nil, err
	}
	cfg, err := spec.Configure(s.plan.GetConfig())
	if err != nil {
		return nil, nil, fmt.Errorf("deploy: the server's config: %w", err)
	}
	return spec, cfg, nil
}

// Catalog returns the run's public item catalog and scale.
func (s *Session) Catalog() Catalog {
	sc := s.plan.GetScale()
	return Catalog{
		ItemIDs: s.plan.GetCatalog().GetItemIds(), Titles: s.plan.GetCatalog().GetTitles(),
		Scale: ratings.Scale{Min: float32(sc.GetMin()), Max: float32(sc.GetMax()), Step: float32(sc.GetStep())},
	}
}

// retryable reports whether err may pass by itself: the network, a
// server restarting, a round not open yet. (A connection reset by a
// dying server reads as canceled; retry only checks it while the
// caller's context is live.)
func retryable(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeUnavailable, connect.CodeDeadlineExceeded, connect.CodeUnknown, connect.CodeCanceled,
		connect.CodeAborted, connect.CodeResourceExhausted, connect.CodeInternal:
		return true
	}
	return false
}

// unreachable reports whether err means the server could not be reached
// or answered from a failing network path, rather than a round that is
// simply not open yet.
func unreachable(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeUnavailable:
		var ce *connect.Error
		return !errors.As(err, &ce) || ce.Meta().Get("Content-Type") == "" // no answer from a server
	case connect.CodeUnknown, connect.CodeDeadlineExceeded, connect.CodeCanceled, connect.CodeInternal:
		return true
	}
	return false
}

// retry calls f until it succeeds, fails for good, or cfg.Retry passes,
// backing off from 50 ms to 2 s with jitter.
func (s *Session) retry(ctx context.Context, what string, f func(context.Context) error) error {
	start := time.Now()
	deadline := start.Add(s.cfg.Retry)
	wait := 50 * time.Millisecond
	var told time.Time // when the person was last told
	for {
		err := f(ctx)
		if err == nil || !retryable(err) || ctx.Err() != nil {
			if err == nil && !told.IsZero() {
				s.log.Warn("server reachable again", "call", what, "after", time.Since(start).Round(time.Second))
			}
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("deploy: %s: gave up after %v: %w", what, s.cfg.Retry, err)
		}
		// Say so within seconds when the server cannot be reached (not
		// for a round that is merely not open yet), then every 10 s with
		// the time left.
		if unreachable(err) && time.Since(start) > time.Second && time.Since(told) > 10*time.Second {
			told = time.Now()
			s.log.Warn("cannot reach the server; retrying", "server", s.cfg.URL, "call", what, "err", err,
				"gives_up_in", time.Until(deadline).Round(time.Second))
		}
		s.log.Debug("retrying", "call", what, "err", err, "wait", wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait/2 + rand.N(wait/2+1)):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

func withCred[T any](msg *T, cred string) *connect.Request[T] {
	req := connect.NewRequest(msg)
	req.Header().Set("Authorization", "Bearer "+cred)
	return req
}

// Run enrols clients (the server assigns their IDs, in the order of
// clients, which is the upload order; a client's own ID only labels its
// random streams), answers every round for them until the server is
// done, and returns the published model (item factors and catalog; the
// clients' state stays with them).
// A round answered before a server restart is answered again with the
// same upload, never recomputed: the clients' state advances once per
// round and no fresh noise is drawn for a round already released.
func (s *Session) Run(ctx context.Context, clients []protocol.Client) (*model.Model, error) {
	if len(clients) == 0 {
		return nil, errors.New("deploy: no clients")
	}
	creds, ids, err := s.enrol(ctx, clients)
	if err != nil {
		return nil, err
	}
	if err := s.certify(ids); err != nil {
		return nil, err
	}
	lead, err := s.lead()
	if err != nil {
		return nil, err
	}
	// One identity per client, or one for them all (OneParty): cache,
	// dense and sentMasked are by identity.
	cache := make([]*fedv1.UploadRequest, len(creds))
	var dense [][]uint32 // a masked round's vectors, nil for a client sitting it out
	// sentMasked[k] is the last round for which client k may have sent
	// its masked vector: it never sends another for that round, in any
	// session, so that no two released sums of a round differ by a
	// known set of clients.
	sentMasked := make([]int, len(creds))
	for k := range sentMasked {
		sentMasked[k] = -1
	}
	last, boot, session := -1, "", ""
	// joined are the clients taken into the cohort of round joinedRound.
	var joined []bool
	joinedRound := -1
	sessions := 0 // sessions of round last the clients took part in
	// answered is the last round the clients answered before this
	// process (ClientConfig.Memory): they answer none of those again.
	answered := -1
	if s.mem != nil {
		answered = s.mem.rounds.Last
	}
	for {
		var resp *fedv1.GetRoundResponse
		err := s.retry(ctx, "get round", func(ctx context.Context) error {
			r, err := s.api.GetRound(ctx, withCred(&fedv1.GetRoundRequest{After: int32(last), Boot: boot, Session: session}, lead))
			if err == nil {
				resp = r.Msg
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		if resp.GetState() == fedv1.RunState_RUN_STATE_DONE {
			return s.model(ctx, lead, false)
		}
		if s.leaves(resp) {
			return s.model(ctx, lead, true)
		}
		if s.pop != nil {
			// Late arrivals enrol once the run reaches their round.
			r := max(int(resp.GetGathering().GetRound()), int(resp.GetBroadcast().GetRound()))
			if err := s.arrive(ctx, r); err != nil {
				return nil, err
			}
		}
		if g := resp.GetGathering(); g != nil && resp.GetBroadcast() == nil && int(g.GetRound()) > last {
			var wait string
			joinedRound = int(g.GetRound())
			if joined, wait, err = s.joinCohort(ctx, last, g, creds); err != nil {
				return nil, err
			}
			if wait == "" {
				// None of the clients may, or was taken: the round goes
				// on without them.
				last, boot, session = int(g.GetRound()), resp.GetBoot(), ""
				continue
			}
			if resp, err = s.awaitOpen(ctx, last, int(g.GetRound()), wait); err != nil {
				return nil, err
			}
			if resp.GetState() == fedv1.RunState_RUN_STATE_DONE {
				return s.model(ctx, lead, false)
			}
		}
		w := resp.GetBroadcast()
		if w == nil {
			continue
		}
		r := int(w.GetRound())
		began := time.Now()
		if r <= answered && r != last {
			if r < answered {
				return nil, fmt.Errorf("deploy: round %d of this plan was already answered (the memory %s says rounds up to %d were, by an earlier session, to this server or another): refusing to answer it again (it would spend the privacy of the round twice); a new run of the same plan needs another --state", r, s.cfg.Memory, answered)
			}
			// The round the clients answered last before a restart: they
			// wait for the next one.
			s.log.Info("round already answered before a restart; waiting for the next", "round", r)
			last, boot, session = r, resp.GetBoot(), resp.GetSecagg().GetSession()
			continue
		}
		if plan := resp.GetSecagg(); plan != nil {
			switch {
			case r < last:
				return nil, fmt.Errorf("deploy: the server went back from round %d to %d: its state was lost", last, r)
			case r == last && plan.GetSession() == session:
				continue
			case r > last:
				b, err := fromWireBroadcast(w)
				if err != nil {
					return nil, fmt.Errorf("deploy: broadcast of round %d: %w", r, err)
				}
				if err := s.checkBroadcast(b, len(clients)); err != nil {
					return nil, err
				}
				s.phase = b.Phase
				if s.take = s.takers(b, joined, joinedRound); s.take != nil && !slices.Contains(s.take, true) {
					last, boot, session = r, resp.GetBoot(), plan.GetSession()
					continue // not in the round's cohort, or over the limits
				}
				if s.cfg.OneParty {
					dense, err = s.answerParty(b, clients)
				} else {
					dense, err = s.answerMasked(b, clients)
				}
				if err != nil {
					return nil, err
				}
				if err := s.remember(b); err != nil {
					return nil, err
				}
				last, sessions = r, 0
			default:
				s.log.Info("new secure-aggregation session of the round; clients that sent their masked vector sit it out", "round", r, "session", plan.GetSession())
			}
			// Against a server that lies, a session it aborts after the
			// reveals is one more draw of the graph seed: the clients
			// take part in at most maxSessions sessions of a round.
			if sessions++; s.cfg.Authority != nil && sessions > maxSessions {
				s.log.Warn("the server opened more sessions of the round than the clients accept; sitting it out", "round", r, "sessions", sessions, "max", maxSessions)
				boot, session = resp.GetBoot(), plan.GetSession()
				continue
			}
			boot, session = resp.GetBoot(), plan.GetSession()
			took := 0 // counted first: a vector is dropped once its masked copy is sent
			for _, v := range dense {
				if v != nil {
					took++
				}
			}
			if err := s.secureAggregate(ctx, r, plan, clients, ids, dense, creds, sentMasked); err != nil {
				return nil, err
			}
			if s.cfg.OneParty && took > 0 {
				took = len(clients)
			}
			s.progress(r, resp, true, began, took)
			continue
		}
		session = ""
		switch {
		case r < last:
			return nil, fmt.Errorf("deploy: the server went back from round %d to %d: its state was lost", last, r)
		case r == last && resp.GetBoot() == boot:
			continue // nothing new within the poll
		case r == last: // the server restarted in this round: send the same uploads again
			s.log.Info("round reopened after a server restart; sending the same uploads again", "round", r)
		default:
			b, err := fromWireBroadcast(w)
			if err != nil {
				return nil, fmt.Errorf("deploy: broadcast of round %d: %w", r, err)
			}
			if err := s.checkBroadcast(b, len(clients)); err != nil {
				return nil, err
			}
			s.phase = b.Phase
			if s.take = s.takers(b, joined, joinedRound); s.take != nil && !slices.Contains(s.take, true) {
				last, boot = r, resp.GetBoot()
				continue // not in the round's cohort, or over the limits
			}
			if s.cfg.OneParty {
				err = s.answerPlainParty(ctx, b, clients, cache)
			} else {
				err = s.answer(ctx, b, clients, cache)
			}
			if err != nil {
				return nil, err
			}
			if s.needMasked && slices.ContainsFunc(cache, func(u *fedv1.UploadRequest) bool { return u.GetSparse() != nil }) {
				return nil, fmt.Errorf("deploy: the server asks for plain uploads in round %d, and %s's privacy rests on secure aggregation: refusing", r, s.plan.GetMethod())
			}
			if err := s.remember(b); err != nil {
				return nil, err
			}
			last = r
		}
		boot = resp.GetBoot()
		if err := s.send(ctx, r, cache, creds); err != nil {
			return nil, err
		}
		took := nonNil(cache)
		if s.cfg.OneParty && took > 0 {
			took = len(clients)
		}
		s.progress(r, resp, false, began, took)
	}
}

// remember records in the session's memory, if it has one, that the
// clients answer b's round, before any of the answers leaves.
func (s *Session) remember(b *protocol.Broadcast) error {
	var trained [][]int
	if b.Phase == protocol.PhaseTrain && (s.part.Limited() || s.part.Cohort > 0) {
		trained = trainedCopy(s.trained, len(s.creds), b.Round, s.take)
	}
	if s.mem != nil {
		if err := s.mem.answer(b.Round, b.Phase == protocol.PhaseSetup, trained); err != nil {
			return err
		}
	}
	if trained != nil {
		s.trained = trained
	}
	return nil
}

// progress reports round r, whose response was resp and which n of the
// session's clients answered, to ClientConfig.Progress.
func (s *Session) progress(r int, resp *fedv1.GetRoundResponse, masked bool, began time.Time, n int) {
	if s.cfg.Progress != nil {
		s.cfg.Progress(Progress{Round: r, Phase: resp.GetBroadcast().GetPhase(), Masked: masked, Took: time.Since(began), Clients: n,
			EpsTotal: resp.GetEpsTotal(), Delta: resp.GetDelta()})
	}
}

// nonNil counts the non-nil entries of xs.
func nonNil[T any](xs []*T) int {
	n := 0
	for _, x := range xs {
		if x != nil {
			n++
		}
	}
	return n
}

// enrol enrols every client, in chunks, and returns each client's
// credential and the ID the server assigned it. The server assigns IDs
// consecutively in the order of one call's secrets, so the clients' IDs
// keep their order (the upload order); with only this session's clients
// enrolled they are 0, 1, ..., as in the in-process run. A OneParty
// session enrols one identity for all its clients.
func (s *Session) enrol(ctx context.Context, clients []protocol.Client) ([]string, []uint32, error) {
	n, users := len(clients), 0
	if s.cfg.OneParty {
		n, users = 1, len(clients)
	}
	if s.creds != nil {
		if len(s.creds) != n || s.users != users {
			return nil, nil, fmt.Errorf("deploy: the session enrolled %d clients, and runs %d", max(len(s.creds), s.users), len(clients))
		}
		return s.creds, s.idsOf, nil
	}
	if s.cfg.Code != "" && len(clients) != 1 {
		return nil, nil, fmt.Errorf("deploy: an enrolment code enrols one client, not %d (a vendor enrols with the token)", len(clients))
	}
	creds := make([]string, n)
	ids := make([]uint32, n)
	draw := func() string {
		var b [24]byte
		crand.Read(b[:])
		return base64.RawURLEncoding.EncodeToString(b[:])
	}
	// With a memory the secrets are written before they are sent, so
	// that a restarted session enrols again as the same client IDs (a
	// retry with the same secrets).
	all := make([]string, n)
	if s.mem != nil {
		var err error
		if all, err = s.mem.secrets(n, draw); err != nil {
			return nil, nil, err
		}
	} else {
		for k := range all {
			all[k] = draw()
		}
	}
	// A simulated population enrols its late arrivals later
	// (Session.arrive).
	var idx []int
	now := s.initPopulation(clients)
	for k := range n {
		if now == nil || now[k] {
			idx = append(idx, k)
		}
	}
	if err := s.enrolInto(ctx, idx, all, creds, ids, users); err != nil {
		return nil, nil, err
	}
	if s.pop != nil {
		s.pop.secrets = all
	}
	s.creds, s.idsOf, s.users = creds, ids, users
	return creds, ids, nil
}

// enrolSome enrols the session's clients idx, whose secrets are in all,
// after the session's first enrolment (late arrivals).
func (s *Session) enrolSome(ctx context.Context, idx []int, all []string) error {
	return s.enrolInto(ctx, idx, all, s.creds, s.idsOf, s.users)
}

// enrolInto enrols the clients idx (in that order) with their secrets in
// all, in chunks, and sets each one's credential and the ID the server
// assigned it in creds and ids.
func (s *Session) enrolInto(ctx context.Context, idx []int, all []string, creds []string, ids []uint32, users int) error {
	const chunk = 10000
	for lo := 0; lo < len(idx); lo += chunk {
		part := idx[lo:min(lo+chunk, len(idx))]
		secrets := make([]string, len(part))
		for j, k := range part {
			secrets[j] = all[k]
		}
		var got []*fedv1.Credential
		err := s.retry(ctx, "enrol", func(ctx context.Context) error {
			req := &fedv1.EnrollRequest{Token: s.cfg.Token, Secrets: secrets, Users: uint32(users)}
			if s.cfg.Code != "" {
				req.Token, req.Code = "", s.cfg.Code
			}
			resp, err := s.api.Enroll(ctx, connect.NewRequest(req))
			if err == nil {
				got = resp.Msg.GetCredentials()
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("deploy: enrol: %w", err)
		}
		if len(got) != len(secrets) {
			return fmt.Errorf("deploy: enrol: %d credentials for %d clients", len(got), len(secrets))
		}
		for j, c := range got {
			if want := strconv.FormatUint(uint64(c.GetClientId()), 10) + "." + secrets[j]; c.GetToken() != want {
				return fmt.Errorf("deploy: enrol: credential %d is not client %d's with the secret sent", part[j], c.GetClientId())
			}
			creds[part[j]], ids[part[j]] = c.GetToken(), c.GetClientId()
		}
	}
	return nil
}

// UseIdentities sets the clients' certified identities
// (ClientConfig.Identities) once they are known, after Enrol; Run checks
// them before any key leaves.
func (s *Session) UseIdentities(ids map[uint32]Identity) error {
	if s.cfg.Authority == nil {
		return errors.New("deploy: identities without the authority's public key to check them against (--authority-key)")
	}
	s.cfg.Identities = ids
	return nil
}

// Enrol enrols the clients and returns the IDs the server assigned them,
// in the clients' order (one ID for them all with OneParty), without
// answering any round: for a party that
// must have its clients' identity keys certified under those IDs before
// it takes part (ClientConfig.Identities). Run, in this session, uses the
// same enrolment; a later process enrols again as the same IDs only with
// the same Memory.
func (s *Session) Enrol(ctx context.Context, clients []protocol.Client) ([]uint32, error) {
	if len(clients) == 0 {
		return nil, errors.New("deploy: no clients")
	}
	_, ids, err := s.enrol(ctx, clients)
	if err == nil && s.pop != nil && len(s.pop.pending) > 0 {
		return nil, errors.New("deploy: Enrol enrols every client now, and the simulated population has late arrivals")
	}
	return ids, err
}

// certify draws each client's long-term identity key and has the
// session's authority (ClientConfig.Certifier) certify it for the run,
// under the client ID the server assigned (ids[k] for the k-th client).
func (s *Session) certify(ids []uint32) error {
	if s.cfg.Authority == nil {
		return nil
	}
	if s.cfg.Identities != nil {
		return s.useIdentities(ids)
	}
	if s.cfg.Certifier == nil {
		return errors.New("deploy: an authority key is pinned and this process holds no certifier key to certify its clients' identities (the enrolling party certifies them: privrec authority)")
	}
	if !bytes.Equal(s.cfg.Certifier.Public().(ed25519.PublicKey), s.cfg.Authority) {
		return errors.New("deploy: the certifier key is not the pinned authority's")
	}
	roster := s.cfg.Roster
	if roster <= 0 {
		if s.cfg.OneParty {
			return errors.New("deploy: a party certifying its own identity needs the number of parties the authority certifies for the run (ClientConfig.Roster, --roster): it is one of them")
		}
		roster = len(ids)
	}
	s.ids = make(map[uint32]*identity, len(ids))
	for _, id := range ids {
		pub, priv, err := ed25519.GenerateKey(crand.Reader)
		if err != nil {
			return err
		}
		s.ids[id] = &identity{key: priv, cert: secagg.Certify(s.cfg.Certifier, s.cfg.Run, id, uint32(roster), pub)}
	}
	return nil
}

// useIdentities takes each client's identity from
// ClientConfig.Identities, checked against the pinned authority, the run
// and the roster (the certificates' when none is pinned).
func (s *Session) useIdentities(ids []uint32) error {
	roster := uint32(max(s.cfg.Roster, 0))
	s.ids = make(map[uint32]*identity, len(ids))
	for _, id := range ids {
		idn, ok := s.cfg.Identities[id]
		if !ok {
			return fmt.Errorf("deploy: client %d (as the server enrolled it) has no certified identity: its identity key is certified under another client ID, or not at all", id)
		}
		if err := CheckIdentity(s.cfg.Authority, s.cfg.Run, roster, id, idn); err != nil {
			return err
		}
		if roster == 0 {
			roster = idn.Cert.Roster
		}
		s.ids[id] = &identity{key: idn.Key, cert: idn.Cert}
	}
	if s.cfg.Roster <= 0 {
		s.cfg.Roster = int(roster)
	}
	return nil
}

// answer runs every client's Round on b and keeps the wire uploads.
func (s *Session) answer(ctx context.Context, b *protocol.Broadcast, clients []protocol.Client, cache []*fedv1.UploadRequest) error {
	err := s.roundAll(b, clients, func(k int, up *protocol.Upload, online bool) error {
		cache[k] = nil
		if online {
			cache[k] = toWireUpload(b.Round, up, s.cfg.Seeded)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return ctx.Err()
}

// roundAll runs every client's Round on b, on the session's workers, each
// client on its own stream (seeded in test mode, from crypto/rand
// otherwise), and hands keep each client's answer; online is false for a
// client sitting the round out (ClientConfig.Dropout, or offline in its
// Population). It returns the
// first error of a client or of keep.
func (s *Session) roundAll(b *protocol.Broadcast, clients []protocol.Client, keep func(k int, up *protocol.Upload, online bool) error) error {
	var mu sync.Mutex
	var first error
	parallel(len(clients), s.cfg.Workers, func(k int) {
		c := clients[k]
		var err error
		// A client that panics on a broadcast (a bug the broadcast's
		// validation missed) fails the round; it must not take down the
		// process and every other client with it.
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("client panicked", "client", c.ID(), "round", b.Round, "panic", p, "stack", string(debug.Stack()))
				err = fmt.Errorf("panic in Round: %v", p)
			}
			if err != nil {
				mu.Lock()
				first = cmpErr(first, fmt.Errorf("deploy: client %d round %d: %w", c.ID(), b.Round, err))
				mu.Unlock()
			}
		}()
		if (s.take != nil && !s.take[k]) || !s.online(k, b.Round) || (b.Phase != protocol.PhaseSetup && s.dropped(c.ID(), b.Round)) {
			err = keep(k, nil, false)
		} else {
			var seed [32]byte
			if s.cfg.Seeded {
				seed = rng.Seed(s.cfg.Seed, uint64(c.ID()), uint64(b.Round))
			} else {
				crand.Read(seed[:]) // never fails (crypto/rand)
			}
			var up *protocol.Upload
			if up, err = c.Round(b, rand.New(rand.NewChaCha8(seed))); err == nil {
				err = keep(k, up, true)
			}
		}
	})
	return first
}

// model fetches the published model; with interim, the newest release:
// the final model once the run is done, else the latest interim one.
func (s *Session) model(ctx context.Context, cred string, interim bool) (*model.Model, error) {
	var raw []byte
	err := s.retry(ctx, "get model", func(ctx context.Context) error {
		resp, err := s.api.GetModel(ctx, withCred(&fedv1.GetModelRequest{Interim: interim}, cred))
		if err == nil {
			raw = resp.Msg.GetModel()
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	m, err := model.ReadModel(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("deploy: published model: %w", err)
	}
	return m, nil
}

// parallel calls f on every k in [0, n) from up to workers goroutines,
// one k at a time so that a slow upload holds up one worker only.
func parallel(n, workers int, f func(k int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range next {
				f(k)
			}
		}()
	}
	for k := range n {
		next <- k
	}
	close(next)
	wg.Wait()
}
