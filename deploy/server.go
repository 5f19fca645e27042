package deploy

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	fedv1 "github.com/privrec/privrec/gen/privrec/federation/v1"
	"github.com/privrec/privrec/gen/privrec/federation/v1/federationv1connect"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/shard"
)

// Catalog is the public item list of a run.
type Catalog struct {
	ItemIDs []string
	Titles  []string // parallel to ItemIDs, or nil
	Scale   ratings.Scale
	// Side locates the items' public side features, for a method whose
	// server needs them (SD-FM's item attributes), or is nil.
	Side *ratings.SideSource
}

// ServerConfig configures a Server.
type ServerConfig struct {
	// Method is the method to run (method.Protocol gives one by name);
	// Config its typed configuration (a pointer of the type
	// Method.Configure returns).
	Method protocol.Method
	Config any
	// Seed seeds the server's own randomness. TestMode marks a seed given
	// for reproducible tests: only then are uploads drawn from seeded
	// streams accepted. Without TestMode, NewServer draws Seed from
	// crypto/rand when it is 0.
	Seed     uint64
	TestMode bool
	Catalog  Catalog
	// StateDir holds the durable state; a server restarted on the same
	// directory resumes the run.
	StateDir string
	// Token is the enrolment secret of a vendor holding many users as one
	// party; devices enrol with one-time codes (IssueCodes) instead.
	Token string
	// MaxClients caps the enrolled users, over the token and the codes
	// (default 100,000): an identity counts one, a party enrolled for w
	// users (EnrollRequest.users) counts w.
	MaxClients int
	// EnrollRate and EnrollBurst limit Enroll calls, over all callers
	// together, to EnrollRate a second with bursts of EnrollBurst
	// (defaults 20/s and 100); the excess is refused with
	// ResourceExhausted before its body is read.
	EnrollRate  float64
	EnrollBurst int
	// FrontToken is the secret the run's front-ends send (FrontConfig.
	// Token) with every call they pass on. A call that carries it is
	// counted, for the limit on failed enrolments by address, by the
	// caller's address the front-end forwards (X-Forwarded-For), not by
	// the front-end's. Empty, or a call without it: the connection's
	// address, whatever headers the call has.
	FrontToken string
	// MinClients is the number of enrolled clients the first round waits
	// for (at least 1, and at least 2 in a masked run: secure aggregation
	// of one vector is that vector); the run starts once that many are
	// enrolled and no enrolment arrived for EnrollQuiet.
	MinClients  int
	EnrollQuiet time.Duration
	// RoundTimeout is a round's deadline: after it the round closes with
	// the uploads it has if at least MinParticipants (a fraction of the
	// enrolled clients, in (0, 1]) answered; otherwise it is not released
	// and waits on, one more RoundTimeout at a time. 0 means DefaultFloor
	// under ActiveSecAgg, else 1 (every client).
	RoundTimeout    time.Duration
	MinParticipants float64
	// ActiveSecAgg runs masked rounds with secagg's protocol against a
	// server that lies (signed, certified keys; a graph seeded by the
	// committed key set; a consistency round; ChooseParamsActive). Clients
	// that pin an enrolment authority refuse masked rounds without it.
	ActiveSecAgg bool
	// Authority and Run, under ActiveSecAgg, make the server check every
	// client's certificate (of that enrolment authority, for that run)
	// and signatures itself (secagg.Verifier): a client sending a bad one
	// then drops only itself out, and sits out the round's next session,
	// instead of making its honest neighbours abort. Without them the
	// server relays what it gets and only the clients check.
	Authority ed25519.PublicKey
	Run       string
	// MaxAbs bounds every uploaded value; MaxUploadBytes bounds a request
	// on the wire and decompressed (default 64 MiB; Upload and SecAgg are
	// capped tighter, by the open round's size, see Handler).
	MaxAbs         float64
	MaxUploadBytes int
	// Poll bounds how long GetRound waits for a new round; MaxPolls caps
	// the GetRound calls one credential may have waiting at once (default
	// 4: a vendor's process polls with one credential at a time); the
	// excess is refused with ResourceExhausted.
	Poll     time.Duration
	MaxPolls int
	// The HTTP server's limits (Serve). ReadHeaderTimeout bounds reading
	// a request's header (default 10 s), IdleTimeout how long a
	// connection may sit with no request (default 30 s). WriteTimeout
	// bounds a call from its header to the end of its answer and must
	// exceed the longest wait of a call: a GetRound long poll (Poll) and
	// a SecAgg step (up to 1+maxWaits round deadlines); its default is
	// the longer of the two plus a minute. ReadTimeout bounds reading a
	// whole request; it defaults to WriteTimeout, because on HTTP/1.1
	// net/http cancels a call whose connection passes its read deadline,
	// long polls included. MaxStreams caps the concurrent streams of an
	// HTTP/2 connection (default 250).
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	MaxStreams        int
	// Logger receives structured logs; nil means slog.Default().
	Logger *slog.Logger
	// Metrics, when not nil, is updated as the run goes.
	Metrics *Metrics
	// Sharded, when not nil, runs the aggregation of masked rounds on
	// NATS JetStream (see Sharded); nil keeps it in this process.
	Sharded *Sharded
	// OnPublish, when not nil, is called with the final model file as
	// soon as the run is done (before any linger), e.g. to write it out;
	// an error ends Run with it (the model stays published in the state).
	OnPublish func(model []byte) error
	// OnRelease, when not nil, is called with every interim model file
	// the run publishes (continual release: after each training round
	// whose aggregate was released, while the run goes on; Model.Release
	// says which round and how many users), and again with the latest one
	// when a restarted server resumes; an error ends Run with it.
	OnRelease func(round int, model []byte) error
}

func (c *ServerConfig) defaults() {
	if c.MinClients < 1 {
		c.MinClients = 1
	}
	if c.EnrollQuiet <= 0 {
		c.EnrollQuiet = 2 * time.Second
	}
	if c.RoundTimeout <= 0 {
		c.RoundTimeout = time.Minute
	}
	if !(c.MinParticipants > 0) || c.MinParticipants > 1 {
		// The active protocol leaves room for one absent client, as its
		// clients' survivor floor does (DefaultFloor); the
		// honest-but-curious one, for tests and measurements, waits
		// for every client so that its sums equal the in-process ones.
		c.MinParticipants = 1
		if c.ActiveSecAgg {
			c.MinParticipants = DefaultFloor
		}
	}
	if !(c.MaxAbs > 0) {
		c.MaxAbs = 1e8
	}
	if c.Poll <= 0 {
		c.Poll = 20 * time.Second
	}
	if c.MaxPolls <= 0 {
		c.MaxPolls = 4
	}
	if c.MaxClients <= 0 {
		c.MaxClients = 100000
	}
	if !(c.EnrollRate > 0) {
		c.EnrollRate = 20
	}
	if c.EnrollBurst <= 0 {
		c.EnrollBurst = 100
	}
	if c.MaxUploadBytes <= 0 {
		c.MaxUploadBytes = 64 << 20
	}
	if c.ReadHeaderTimeout <= 0 {
		c.ReadHeaderTimeout = 10 * time.Second
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = max(c.Poll, (1+maxWaits)*c.RoundTimeout) + time.Minute
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = c.WriteTimeout
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 30 * time.Second
	}
	if c.MaxStreams <= 0 {
		c.MaxStreams = 250
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// plan is the durable public description of a run.
type plan struct {
	Method      string            `json:"method"`
	Config      map[string]string `json:"config"`
	Seed        uint64            `json:"seed"`
	TestMode    bool              `json:"test_mode"`
	ItemIDs     []string          `json:"item_ids"`
	Titles      []string          `json:"titles,omitempty"`
	Scale       ratings.Scale     `json:"scale"`
	Aggregation string            `json:"aggregation"`
	Started     bool              `json:"started"`
}

// Server is the network side of a run: it holds the method's server (the
// public item factors and nothing else), serves the federation protocol
// over Connect (Handler), and is the protocol.Transport its round loop
// (Run) exchanges broadcasts and uploads over.
type Server struct {
	federationv1connect.UnimplementedFederationServiceHandler

	cfg  ServerConfig
	log  *slog.Logger
	st   *store
	plan *plan
	srv  protocol.Stateful
	met  *Metrics
	tok  [32]byte
	boot string // this incarnation's id, fresh at every start

	gate *gate // the HTTP limits ahead of the handlers (http.go)

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced on every state change
	state    fedv1.RunState
	enrolled map[uint32][32]byte
	byHash   map[[32]byte]uint32 // the enrolled clients by credential hash
	nextID   uint32              // the ID the next enrolled client gets
	party    map[uint32]string   // who enrolled each client: partyVendor, a party's or a code's party
	// weight holds the users of each client enrolled as a party of more
	// than one (EnrollRequest.users); every other client answers for one.
	weight  map[uint32]int
	lastEnr time.Time
	slots   map[uint32]int // client id → position in the upload order
	order   []uint32       // client ids in upload order
	// The open round.
	open     bool
	round    int
	closed   int // the last round whose uploads were collected, -1 for none
	bc       *protocol.Broadcast
	wire     *fedv1.Broadcast
	ups      []*protocol.Upload
	answered []bool
	nAnswer  int           // the users that answered (a party's count; Users)
	all      chan struct{} // closed when every client answered
	// shares[j] counts the clients that announced item j at setup (the
	// shares its noise is split into); one entry, the number of clients
	// that answered setup, for a method whose setup names no items.
	shares   []int32
	sa       *saRound // the open round's secure aggregation, nil when none
	rejected map[string]int
	model    []byte
	// Masked rounds: the masked vectors in the released sum, and why the
	// round was skipped ("" when released).
	maskedInputs int
	skipped      string
	// banned clients take no part in later masked rounds.
	banned map[uint32]bool
	// sitOut are the clients that sit out the next session of round
	// sitOutRound: under the active protocol, those that committed to
	// keys and did not reveal them (the round loop alone touches it).
	sitOut      map[uint32]bool
	sitOutRound int
	// unbounded: a refused sum made the run's total ε unbounded.
	unbounded bool
	// epsTotal and delta are the last ledger entry's total ε and δ,
	// epsRound the largest round's ε.
	epsTotal, delta, epsRound float64
	// members are the clients whose vectors are in the masked setup
	// round's sum: only they take part in later masked rounds, whose sums
	// are bounded by the setup's counts (nil: every client).
	members map[uint32]bool
	// covered holds the clients whose uploads a released training round
	// folded: the users the model published so far reads.
	// coveredUsers counts their users (a party counts its users).
	covered      map[uint32]bool
	coveredUsers int
	// interim is the latest interim release (continual release), nil
	// before the first or once the final model is published.
	interim []byte
	// js and shardCfg reach the sharded run (nil without Sharded);
	// shardDone is the last shard round whose sum this incarnation took
	// (the round loop alone touches it).
	js        jetstream.JetStream
	shardCfg  shard.Config
	shardDone uint64
	// part is the method's participation limits; part.Cohort > 0 makes
	// a cohort run (cohort.go). gather is the cohort being gathered (nil
	// when none); cohort the open round's (nil: every client); expect the
	// answers that close an open plain round.
	part   protocol.Participation
	gather *gathering
	cohort map[uint32]bool
	expect int
	// testCohort, when set by a test, may change a gathered cohort (a
	// server that lies about who joined); s.mu is held.
	testCohort func(b *protocol.Broadcast, cohort map[uint32]bool)
	// testHook, when set by a test, is called at points of a round
	// ("masked": a masked step opened, recorded durably; "sum": the
	// unmasked sum of a masked round, before its release; "answered
	// step N": the clients of a masked round were released from step N).
	testHook func(event string, round int, sum []uint32)
}

// NewServer opens the state directory and builds the method's server,
// restored from the last committed round when the directory holds one.
// A directory created for another method, configuration or catalog is an
// error.
func NewServer(cfg ServerConfig) (*Server, error) {
	cfg.defaults()
	if cfg.Method == nil {
		return nil, errors.New("deploy: no method")
	}
	if cfg.Token == "" {
		return nil, errors.New("deploy: no enrolment token")
	}
	if !cfg.TestMode && cfg.Seed == 0 {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		cfg.Seed = uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
			uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
	}
	st, err := openStore(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	var boot [9]byte
	if _, err := rand.Read(boot[:]); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, st: st, met: cfg.Metrics, tok: hashToken(cfg.Token),
		boot: base64.RawURLEncoding.EncodeToString(boot[:]), changed: make(chan struct{}), state: fedv1.RunState_RUN_STATE_ENROLLING}
	if err := s.restore(); err != nil {
		st.Close()
		return nil, err
	}
	if s.plan.Aggregation == "masked" && s.cfg.MinClients < 2 {
		s.cfg.MinClients = 2
	}
	s.part = s.cfg.Method.Participation(s.cfg.Config)
	if err := s.checkCohort(); err != nil {
		st.Close()
		return nil, err
	}
	if cfg.Sharded != nil {
		if err := s.setupSharded(); err != nil {
			st.Close()
			return nil, err
		}
	}
	s.gate = newGate(s)
	return s, nil
}

// restore reconciles the stored plan with the configuration and loads the
// enrolment and the method server's last snapshot.
func (s *Server) restore() error {
	agg := aggregationName(s.cfg.Method.Aggregation(s.cfg.Config))
	want := &plan{
		Method: s.cfg.Method.Name(), Config: s.cfg.Method.Text(s.cfg.Config), Seed: s.cfg.Seed, TestMode: s.cfg.TestMode,
		ItemIDs: s.cfg.Catalog.ItemIDs, Titles: s.cfg.Catalog.Titles, Scale: s.cfg.Catalog.Scale, Aggregation: agg,
	}
	have, err := s.st.plan()
	if err != nil {
		return err
	}
	if have == nil {
		if err := s.st.putPlan(want); err != nil {
			return err
		}
		have = want
	} else if d := planDiff(have, want); d != "" {
		return fmt.Errorf("%w: %s was created for another run (%s); use a new --state directory", ErrState, s.cfg.StateDir, d)
	}
	s.plan = have
	cfg, err := s.cfg.Method.Configure(have.Config)
	if err != nil {
		return fmt.Errorf("%w: stored config: %w", ErrState, err)
	}
	s.cfg.Config = cfg
	items := &ratings.Dataset{Name: "catalog", Scale: have.Scale, ItemIDs: have.ItemIDs, ItemTitles: have.Titles, Side: s.cfg.Catalog.Side}
	if s.srv, err = s.cfg.Method.Server(cfg, items, have.Seed); err != nil {
		return err
	}
	if s.enrolled, err = s.st.enrolled(); err != nil {
		return err
	}
	s.byHash = make(map[[32]byte]uint32, len(s.enrolled))
	for id, h := range s.enrolled {
		s.byHash[h] = id
		s.nextID = max(s.nextID, id+1)
	}
	if s.party, err = s.st.parties(); err != nil {
		return err
	}
	if s.weight, err = s.st.weights(); err != nil {
		return err
	}
	if s.banned, err = s.st.bans(); err != nil {
		return err
	}
	led, err := s.st.ledger()
	if err != nil {
		return err
	}
	s.covered = map[uint32]bool{}
	for _, e := range led {
		s.unbounded = s.unbounded || e.EpsTotal < 0
		s.epsTotal, s.delta, s.epsRound = e.EpsTotal, e.Delta, max(s.epsRound, e.Eps)
		if covers(e) {
			ids, err := s.st.folded(e.Round)
			if err != nil {
				return err
			}
			for _, id := range ids {
				s.cover(id)
			}
		}
	}
	s.met.restore(led)
	if have.Aggregation == "masked" {
		ids, err := s.st.folded(0)
		if err != nil {
			return err
		}
		if len(ids) > 0 {
			s.members = make(map[uint32]bool, len(ids))
			for _, id := range ids {
				s.members[id] = true
			}
		}
	}
	if have.Started { // enrolment closed before the restart: the same roster
		if err := s.setRoster(); err != nil {
			return fmt.Errorf("%w: %w", ErrState, err)
		}
	}
	cp, err := s.st.checkpoint()
	if err != nil {
		return err
	}
	if cp.Snapshot != nil {
		if err := s.srv.UnmarshalBinary(cp.Snapshot); err != nil {
			return fmt.Errorf("%w: server snapshot: %w", ErrState, err)
		}
		if s.srv.Round() != cp.Round {
			return fmt.Errorf("%w: snapshot is at round %d, the checkpoint at %d", ErrState, s.srv.Round(), cp.Round)
		}
	}
	s.round, s.closed = cp.Round, cp.Round-1
	s.model, s.shares = cp.Model, cp.Shares
	switch {
	case cp.Model != nil:
		s.state = fedv1.RunState_RUN_STATE_DONE
	case have.Started:
		s.state = fedv1.RunState_RUN_STATE_RUNNING
	}
	s.met.setEnrolled(s.usersLocked())
	s.met.setParties(s.partiesLocked())
	return nil
}

// aggregationName is the plan's name of an aggregation: "none" (the
// server reads single uploads), "sum" (the ideal functionality: over the
// network, the server process adds plain uploads) or "masked" (SecAgg+).
func aggregationName(a protocol.Aggregation) string {
	switch a {
	case protocol.AggIdeal:
		return "sum"
	case protocol.AggMasked:
		return "masked"
	}
	return "none"
}

// planDiff names the first difference between the stored plan and the
// requested one, "" when they agree.
func planDiff(have, want *plan) string {
	switch {
	case have.Method != want.Method:
		return "method " + have.Method
	case !maps.Equal(have.Config, want.Config):
		return fmt.Sprintf("config %v", have.Config)
	case have.TestMode != want.TestMode || (have.TestMode && have.Seed != want.Seed):
		return fmt.Sprintf("test mode %v, seed %d", have.TestMode, have.Seed)
	case !slices.Equal(have.ItemIDs, want.ItemIDs):
		return fmt.Sprintf("a catalog of %d items", len(have.ItemIDs))
	case have.Scale != want.Scale:
		return fmt.Sprintf("scale %v", have.Scale)
	}
	return ""
}

// Close closes the state store.
func (s *Server) Close() error { return s.st.Close() }

// notify wakes every waiter; s.mu must be held.
func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Ledger returns the ledger of folded rounds.
func (s *Server) Ledger() ([]LedgerEntry, error) { return s.st.ledger() }

// Model returns the published final model file, nil before the run is
// done.
func (s *Server) Model() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.model
}
