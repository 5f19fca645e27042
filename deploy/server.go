package deploy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/privrec/privrec/dp"
	fedv1 "github.com/privrec/privrec/gen/privrec/federation/v1"
	"github.com/privrec/privrec/gen/privrec/federation/v1/federationv1connect"
	"github.com/privrec/privrec/hdpmf"
	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/model"
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
	// Method is the registry name of the method to run; Config its typed
	// configuration (a pointer of the type the method's New returns).
	Method string
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
	// MaxClients caps the enrolled identities, over the token and the
	// codes (default 100,000).
	MaxClients int
	// EnrollRate and EnrollBurst limit Enroll calls, over all callers
	// together, to EnrollRate a second with bursts of EnrollBurst
	// (defaults 20/s and 100); the excess is refused with
	// ResourceExhausted before its body is read.
	EnrollRate  float64
	EnrollBurst int
	// MinClients is the number of enrolled clients the first round waits
	// for (at least 1, and at least 2 in a masked run: secure aggregation
	// of one vector is that vector); the run starts once that many are
	// enrolled and no enrolment arrived for EnrollQuiet.
	MinClients  int
	EnrollQuiet time.Duration
	// RoundTimeout is a round's deadline: after it the round closes with
	// the uploads it has if at least MinParticipants (a fraction of the
	// enrolled clients, in (0, 1]) answered; otherwise it is not released
	// and waits on, one more RoundTimeout at a time.
	RoundTimeout    time.Duration
	MinParticipants float64
	// ActiveSecAgg runs masked rounds with secagg's protocol against a
	// server that lies (signed, certified keys; a graph seeded by the
	// committed key set; a consistency round; ChooseParamsActive). Clients
	// that pin an enrolment authority refuse masked rounds without it.
	ActiveSecAgg bool
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
		c.MinParticipants = 1
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
	spec method.Spec
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
	party    map[uint32]string   // who enrolled each client: partyVendor or a code's party
	lastEnr  time.Time
	slots    map[uint32]int // client id → position in the upload order
	order    []uint32       // client ids in upload order
	// The open round.
	open     bool
	round    int
	closed   int // the last round whose uploads were collected, -1 for none
	bc       *protocol.Broadcast
	wire     *fedv1.Broadcast
	ups      []*protocol.Upload
	answered []bool
	nAnswer  int
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
	// unbounded: a refused sum made the run's total ε unbounded.
	unbounded bool
	// epsTotal and delta are the last ledger entry's total ε and δ,
	// epsRound the largest round's ε.
	epsTotal, delta, epsRound float64
	// members are the clients whose vectors are in the masked setup
	// round's sum: only they take part in later masked rounds, whose sums
	// are bounded by the setup's counts (nil: every client).
	members map[uint32]bool
	// js and shardCfg reach the sharded run (nil without Sharded);
	// shardDone is the last shard round whose sum this incarnation took
	// (the round loop alone touches it).
	js        jetstream.JetStream
	shardCfg  shard.Config
	shardDone uint64
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
	spec, err := method.Lookup(cfg.Method)
	if err != nil {
		return nil, err
	}
	if spec.Federated == nil {
		return nil, fmt.Errorf("deploy: method %s has no client/server protocol", cfg.Method)
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
	s := &Server{cfg: cfg, spec: spec, log: cfg.Logger, st: st, met: cfg.Metrics, tok: hashToken(cfg.Token),
		boot: base64.RawURLEncoding.EncodeToString(boot[:]), changed: make(chan struct{}), state: fedv1.RunState_RUN_STATE_ENROLLING}
	if err := s.restore(); err != nil {
		st.Close()
		return nil, err
	}
	if s.plan.Aggregation == "masked" && s.cfg.MinClients < 2 {
		s.cfg.MinClients = 2
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
	agg := aggregationName(s.spec.Federated.Aggregation(s.cfg.Config))
	want := &plan{
		Method: s.cfg.Method, Config: s.spec.Text(s.cfg.Config), Seed: s.cfg.Seed, TestMode: s.cfg.TestMode,
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
	cfg, err := s.spec.Configure(have.Config)
	if err != nil {
		return fmt.Errorf("%w: stored config: %w", ErrState, err)
	}
	s.cfg.Config = cfg
	items := &ratings.Dataset{Name: "catalog", Scale: have.Scale, ItemIDs: have.ItemIDs, ItemTitles: have.Titles, Side: s.cfg.Catalog.Side}
	if s.srv, err = s.spec.NewServerFor(cfg, items, have.Seed); err != nil {
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
	if s.banned, err = s.st.bans(); err != nil {
		return err
	}
	led, err := s.st.ledger()
	if err != nil {
		return err
	}
	for _, e := range led {
		s.unbounded = s.unbounded || e.EpsTotal < 0
		s.epsTotal, s.delta, s.epsRound = e.EpsTotal, e.Delta, max(s.epsRound, e.Eps)
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
	s.met.setEnrolled(len(s.enrolled))
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

// Run waits for enrolment, then runs the method's rounds until it is done,
// committing the state at every round boundary, and publishes the final
// model. It returns ctx's error when ctx ends first: the open round is
// abandoned and a restart resumes from the last committed one.
func (s *Server) Run(ctx context.Context) error {
	if m := s.Model(); m != nil {
		s.log.Info("run already done", "rounds", s.round)
		if s.cfg.OnPublish != nil {
			return s.cfg.OnPublish(m)
		}
		return nil
	}
	if err := s.waitEnrolment(ctx); err != nil {
		return err
	}
	var tr protocol.Transport = (*transport)(s)
	if s.plan.Aggregation == "sum" {
		tr = protocol.NewSecureSum(tr)
	}
	start := time.Now()
	opt := protocol.RunOptions{StartRound: s.srv.Round(), OnRound: func(info protocol.RoundInfo) error {
		return s.fold(info, time.Since(start))
	}}
	if err := protocol.RunTransport(ctx, s.srv, tr, opt); err != nil {
		s.mu.Lock()
		s.open = false
		s.notify()
		s.mu.Unlock()
		return err
	}
	return s.publish()
}

// waitEnrolment returns once enough clients enrolled and enrolment was
// quiet for a while, and closes enrolment.
func (s *Server) waitEnrolment(ctx context.Context) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		s.mu.Lock()
		started := s.state == fedv1.RunState_RUN_STATE_RUNNING
		ready := len(s.enrolled) >= s.cfg.MinClients && time.Since(s.lastEnr) >= s.cfg.EnrollQuiet
		if ready && !started {
			s.plan.Started = true
			if err := s.st.putPlan(s.plan); err != nil {
				s.mu.Unlock()
				return err
			}
			if err := s.setRoster(); err != nil {
				s.mu.Unlock()
				return err
			}
			s.state = fedv1.RunState_RUN_STATE_RUNNING
			started = true
			s.log.Info("enrolment closed; run starts", "clients", len(s.enrolled), "parties", s.partiesLocked())
			s.warnParties()
		}
		if started {
			s.order = slices.Sorted(maps.Keys(s.enrolled))
			s.slots = make(map[uint32]int, len(s.order))
			for k, id := range s.order {
				s.slots[id] = k
			}
			s.notify()
			s.mu.Unlock()
			return nil
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// setRoster tells a method server whose budget split depends on the
// public roster (protocol.RosterSetter) the enrolled count, once
// enrolment has closed.
func (s *Server) setRoster() error {
	if rs, ok := s.srv.(protocol.RosterSetter); ok {
		return rs.SetRoster(len(s.enrolled))
	}
	return nil
}

// fold commits the round just aggregated: the server's snapshot, the
// ledger entry and the ids of the folded uploads, in one transaction.
func (s *Server) fold(info protocol.RoundInfo, _ time.Duration) error {
	snap, err := s.srv.MarshalBinary()
	if err != nil {
		return fmt.Errorf("deploy: snapshot after round %d: %w", info.Round, err)
	}
	s.mu.Lock()
	var folded []uint32
	for k, ok := range s.answered {
		if ok {
			folded = append(folded, s.order[k])
		}
	}
	e := LedgerEntry{
		Round: info.Round, Phase: info.Phase, Enrolled: len(s.order), Participants: s.nAnswer,
		Rejected: maps.Clone(s.rejected), Seconds: info.Elapsed.Seconds(), Time: time.Now().UTC(),
	}
	e.Parties = s.partiesLocked()
	for _, u := range s.ups {
		if u != nil {
			e.Uploads++
		}
	}
	if s.maskedInputs >= 0 { // a masked round: the masked vectors in the released sum
		e.Uploads, e.Skipped = s.maskedInputs, s.skipped
		if info.Phase == protocol.PhaseSetup && e.Skipped == "" {
			s.members = map[uint32]bool{}
			for _, id := range folded {
				s.members[id] = true
			}
		}
	}
	if info.Rejected != nil {
		// A client lied about its vector, so the arrival words that
		// bound the noise in the sum cannot be trusted: no finite ε.
		e.Refused, e.Eps = info.Rejected.Error(), -1
	}
	var shares []int32
	switch s.plan.Aggregation {
	case "sum":
		switch info.Phase {
		case protocol.PhaseSetup:
			shares = announced(s.ups, len(s.plan.ItemIDs))
			s.shares = shares
		case protocol.PhaseTrain:
			e.Coverage = coverage(s.ups, s.shares)
			if c, ok := s.cfg.Config.(*hdpmf.Config); ok && c.Variant != hdpmf.Plain {
				// The proven unit is one user's rating values, each
				// device's upload clipped to UserClip ratings' worth:
				// C times a rating's ε (none without a clip).
				e.Eps = c.UserClip * dp.PartialSharesLoss(e.Coverage, c.Eps, c.Dim)
				if math.IsInf(e.Eps, 1) || c.UserClip == 0 || !c.Aggregation.Secure() {
					e.Eps = -1
				}
			}
		}
	case "masked":
		if e.Skipped == "" && e.Refused == "" {
			e.Coverage, e.Eps = s.maskedCoverage(info.Phase)
		}
	}
	s.account(&e)
	s.mu.Unlock()
	if e.Refused != "" {
		s.log.Error("unmasked sum out of bounds: refused, nothing released", "round", e.Round, "err", e.Refused)
		s.met.refuseSum()
	}
	if e.Coverage > 0 && e.Coverage < 1 {
		s.log.Warn("dropouts weakened the noise of this round", "round", e.Round, "noise_coverage", e.Coverage, "eps", e.Eps)
	}
	if err := s.st.commit(e, snap, folded, shares); err != nil {
		return fmt.Errorf("deploy: commit round %d: %w", info.Round, err)
	}
	s.met.roundDone(e)
	s.log.Info("round folded", "round", e.Round, "phase", e.Phase, "participants", e.Participants,
		"enrolled", e.Enrolled, "uploads", e.Uploads, "seconds", e.Seconds)
	return nil
}

// account fills e's privacy figures, so that every private round carries
// its ε and every entry the run's total so far: the round's ε alone from
// the method when it reports one (protocol.RoundSpent) and nothing set it
// from the noise that arrived; the total from the method's own accountant
// (protocol.Spent), or else the rounds' ε added up (basic composition, an
// upper bound). The total is -1 from the first round without a finite
// bound on. s.mu is held.
func (s *Server) account(e *LedgerEntry) {
	released := e.Skipped == "" && e.Refused == ""
	if rs, ok := s.srv.(protocol.RoundSpent); ok && released && e.Eps == 0 {
		if eps, ok := rs.RoundSpent(); ok {
			e.Eps = eps
			if math.IsInf(eps, 1) || math.IsNaN(eps) {
				e.Eps = -1
			}
		}
	}
	sp, ok := s.srv.(protocol.Spent)
	var eps, delta float64
	if ok {
		eps, delta, ok = sp.Spent()
	}
	switch {
	case ok:
		e.EpsTotal, e.Delta = eps, delta
	case e.Eps != 0 || s.epsTotal != 0:
		e.EpsTotal, e.Delta = s.epsTotal+max(e.Eps, 0), s.delta
	}
	if e.Refused != "" || e.Eps < 0 || s.unbounded || math.IsInf(e.EpsTotal, 1) || math.IsNaN(e.EpsTotal) {
		e.EpsTotal, s.unbounded = -1, true
	}
	s.epsTotal, s.delta, s.epsRound = e.EpsTotal, e.Delta, max(s.epsRound, e.Eps)
}

// maskedCoverage asks the method server, if it counts the noise shares
// of its masked rounds (protocol.NoiseCoverage: HDPMF's family, LDP-OP),
// for a training round's noise coverage and ε; each client drew its share
// for a fraction ρ = MinParticipants of its peers. ε is -1 when none
// arrived. s.mu is held.
func (s *Server) maskedCoverage(phase string) (cov, eps float64) {
	nc, ok := s.srv.(protocol.NoiseCoverage)
	if !ok || phase != protocol.PhaseTrain {
		return 0, 0
	}
	if cov, eps, ok = nc.NoiseCoverage(min(1, s.cfg.MinParticipants)); !ok {
		return 0, 0
	}
	if math.IsInf(eps, 1) || math.IsNaN(eps) {
		eps = -1
	}
	return cov, eps
}

// announced returns the shares of each item's noise: the clients that
// named it in the setup round, or, when no setup upload names items, one
// entry with the number of clients that answered setup.
func announced(ups []*protocol.Upload, numItems int) []int32 {
	n := make([]int32, numItems)
	var clients int32
	named := false
	for _, u := range ups {
		if u == nil {
			continue
		}
		clients++
		for _, j := range u.Items {
			n[j]++
			named = true
		}
	}
	if !named {
		return []int32{clients}
	}
	return n
}

// coverage returns the smallest fraction of an item's noise shares that
// arrived, over the items some upload named (1 when shares is unknown).
func coverage(ups []*protocol.Upload, shares []int32) float64 {
	if len(shares) == 0 {
		return 1
	}
	cov := 1.0
	if len(shares) == 1 { // one pool of shares: the clients that answered
		var got int32
		for _, u := range ups {
			if u != nil {
				got++
			}
		}
		if got > 0 && shares[0] > 0 {
			cov = math.Min(1, float64(got)/float64(shares[0]))
		}
		return cov
	}
	arrived := make([]int32, len(shares))
	for _, u := range ups {
		if u == nil {
			continue
		}
		for _, j := range u.Items {
			arrived[j]++
		}
	}
	for j, a := range arrived {
		if a > 0 && shares[j] > 0 {
			cov = math.Min(cov, float64(a)/float64(shares[j]))
		}
	}
	return cov
}

// publish builds the final model from the server's V and the public
// catalog, stores it and announces the end of the run.
func (s *Server) publish() error {
	v, dim := s.srv.Factors()
	m := &model.Model{
		Dim: dim, NumItems: len(s.plan.ItemIDs), V: slices.Clone(v),
		Default: (s.plan.Scale.Min + s.plan.Scale.Max) / 2, Scale: s.plan.Scale, Ranking: s.spec.Ranks,
		ItemIDs: s.plan.ItemIDs, ItemTitles: s.plan.Titles,
		Method: s.cfg.Method, Config: method.JSON(s.spec.Fields(s.cfg.Config)), Privacy: s.spent(),
	}
	if ind, ok := s.srv.(protocol.Indicating); ok && len(ind.UserItems())+1 == dim {
		m.UserItems = slices.Clone(ind.UserItems())
	}
	if bs, ok := s.srv.(protocol.Biased); ok {
		// The released mean and item biases, mapped from the scale the
		// server trained on to the catalog's as Fit maps its model.
		if mean, bi, ok := bs.Biases(); ok && len(bi) == m.NumItems {
			m.Mean, m.Default, m.BI = mean, mean, slices.Clone(bi)
			m.Affine(method.FromInternal(s.plan.Scale))
		}
	}
	var buf bytes.Buffer
	if _, err := m.WriteTo(&buf); err != nil {
		return fmt.Errorf("deploy: final model: %w", err)
	}
	if err := s.st.publish(buf.Bytes()); err != nil {
		return err
	}
	s.mu.Lock()
	s.model = buf.Bytes()
	s.state = fedv1.RunState_RUN_STATE_DONE
	s.notify()
	s.mu.Unlock()
	s.log.Info("run done; model published", "bytes", buf.Len())
	if s.cfg.OnPublish != nil {
		return s.cfg.OnPublish(buf.Bytes())
	}
	return nil
}

// spent is the method's claim with what the run spent by the ledger: the
// largest round's ε, the total at δ (-1, said in the note, when
// unbounded) and the aggregation that ran.
func (s *Server) spent() model.Privacy {
	p := s.spec.Claim
	s.mu.Lock()
	p.EpsRound, p.EpsTotal, p.Delta = s.epsRound, s.epsTotal, s.delta
	s.mu.Unlock()
	p.Aggregation = s.spec.Federated.Aggregation(s.cfg.Config).String()
	note := "ε as the server's ledger accounted the released rounds"
	if p.EpsTotal < 0 {
		note = "ε unbounded (-1): a round's sum was refused, or its arriving noise bounded nothing; see the ledger"
	}
	if p.Note != "" {
		note = p.Note + "; " + note
	}
	p.Note = note
	return p
}

// transport is the Server seen as a protocol.Transport.
type transport Server

func (t *transport) NumClients() int { return len(t.order) }

// SumInputs returns the number of masked vectors in the last masked
// round's sum (protocol.SumInputs), which bounds its arrivals.
func (t *transport) SumInputs() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return max(0, t.maskedInputs)
}
func (t *transport) Close() error { return nil }

// Exchange opens round b, waits until every enrolled client answered or
// the deadline passed with enough answers, and returns the uploads in
// client order.
func (t *transport) Exchange(ctx context.Context, b *protocol.Broadcast) ([]*protocol.Upload, error) {
	s := (*Server)(t)
	if s.plan.Aggregation == "masked" && b.Words > 0 {
		return s.exchangeMasked(ctx, b)
	}
	s.mu.Lock()
	s.sa, s.maskedInputs, s.skipped = nil, -1, ""
	s.mu.Unlock()
	w := toWireBroadcast(b)
	w.V, w.Aux = slices.Clone(w.V), slices.Clone(w.Aux) // the method may change them after the round
	s.mu.Lock()
	n := len(s.order)
	s.round, s.bc, s.wire, s.open = b.Round, b, w, true
	s.ups = make([]*protocol.Upload, n)
	s.answered = make([]bool, n)
	s.nAnswer = 0
	s.rejected = map[string]int{}
	all := make(chan struct{})
	s.all = all
	s.notify()
	s.mu.Unlock()
	s.met.roundOpened(b.Round)

	timer := time.NewTimer(s.cfg.RoundTimeout)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-all:
		case <-timer.C:
			s.mu.Lock()
			got := s.nAnswer
			s.mu.Unlock()
			// The final round releases nothing (uploads are refused in
			// it), so it needs no floor.
			if b.Phase != protocol.PhaseFinal && float64(got) < s.cfg.MinParticipants*float64(n) {
				s.log.Warn("round below its minimum at the deadline: not released, waiting on",
					"round", b.Round, "answered", got, "enrolled", n, "min_fraction", s.cfg.MinParticipants)
				timer.Reset(s.cfg.RoundTimeout)
				continue
			}
		}
		break
	}
	s.mu.Lock()
	s.open, s.closed = false, b.Round
	ups := s.ups
	s.mu.Unlock()
	return ups, nil
}

// Hello returns the public plan.
func (s *Server) Hello(ctx context.Context, _ *connect.Request[fedv1.HelloRequest]) (*connect.Response[fedv1.HelloResponse], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.plan
	return connect.NewResponse(&fedv1.HelloResponse{
		Method: p.Method, Config: p.Config, TestMode: p.TestMode, State: s.state, Round: int32(s.round),
		Catalog:     &fedv1.Catalog{ItemIds: p.ItemIDs, Titles: p.Titles},
		Scale:       &fedv1.Scale{Min: float64(p.Scale.Min), Max: float64(p.Scale.Max), Step: float64(p.Scale.Step)},
		Aggregation: p.Aggregation,
		Enrolled:    int32(len(s.enrolled)), MinClients: int32(s.cfg.MinClients),
	}), nil
}

// maxEnrol bounds the clients one Enroll call may create: the vendor
// client sends 10,000 a call, and a call's body is capped at enrolBytes.
const maxEnrol = 20000

// partyVendor is the party of every client enrolled with the shared token.
const partyVendor = "vendor"

// Enroll checks the token or the one-time code and issues one credential
// per secret the caller sent (one, with a secret of the server's, when it
// sent none). The server assigns the client IDs, consecutive in the
// order of the secrets and above every ID enrolled before: nobody picks
// one, so no two callers can ask for the same. A code enrols one client,
// once, as a party of its own; the token enrols any number of clients,
// all of the party "vendor". A retry with the same secrets (and code)
// succeeds with the same IDs.
func (s *Server) Enroll(ctx context.Context, req *connect.Request[fedv1.EnrollRequest]) (*connect.Response[fedv1.EnrollResponse], error) {
	secrets := req.Msg.GetSecrets()
	party := partyVendor
	var code *[32]byte
	if c := req.Msg.GetCode(); c != "" {
		h := hashToken(c)
		code = &h
		party = "code:" + hex.EncodeToString(h[:6])
		if len(secrets) > 1 {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("an enrolment code enrols one client, not %d", len(secrets)))
		}
	} else if tok := req.Msg.GetToken(); !sameHash(hashToken(tok), s.tok) {
		s.met.reject("enrol-token")
		if strings.HasPrefix(tok, CodePrefix) {
			return nil, connect.NewError(connect.CodeUnauthenticated, errors.New("wrong enrolment token (this is a one-time code: send it as the code)"))
		}
		return nil, connect.NewError(connect.CodeUnauthenticated, errors.New("wrong enrolment token"))
	}
	if len(secrets) > maxEnrol {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%d clients in one call; at most %d", len(secrets), maxEnrol))
	}
	fromClient := len(secrets) > 0
	if !fromClient {
		var secret [24]byte
		if _, err := rand.Read(secret[:]); err != nil {
			return nil, connect.NewError(connect.CodeInternal, err)
		}
		secrets = []string{base64.RawURLEncoding.EncodeToString(secret[:])}
	}
	hashes := make([][32]byte, len(secrets))
	seen := make(map[[32]byte]bool, len(secrets))
	for k, sec := range secrets {
		if len(sec) < 16 {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("secret %d: %d characters; at least 16", k, len(sec)))
		}
		hashes[k] = hashToken(sec)
		if seen[hashes[k]] {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("secret %d sent twice in one call", k))
		}
		seen[hashes[k]] = true
	}
	creds := func(ids []uint32) *connect.Response[fedv1.EnrollResponse] {
		out := make([]*fedv1.Credential, len(ids))
		for k, id := range ids {
			out[k] = &fedv1.Credential{ClientId: id, Token: strconv.FormatUint(uint64(id), 10) + "." + secrets[k]}
		}
		return connect.NewResponse(&fedv1.EnrollResponse{Credentials: out})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if code != nil {
		id, cred, spent, err := s.st.codeUse(*code)
		switch {
		case errors.Is(err, errNoCode):
			s.met.reject("enrol-code")
			return nil, connect.NewError(connect.CodeUnauthenticated, errors.New("unknown enrolment code"))
		case err != nil:
			return nil, connect.NewError(connect.CodeInternal, err)
		case spent:
			if fromClient && sameHash(hashes[0], cred) {
				return creds([]uint32{id}), nil // a retry
			}
			s.met.reject("enrol-code")
			return nil, connect.NewError(connect.CodePermissionDenied, errors.New("enrolment code already used"))
		}
	}
	// A retry of a call that enrolled its clients (its answer was lost):
	// every secret is enrolled already, by this party.
	var again []uint32
	for _, h := range hashes {
		if id, ok := s.byHash[h]; ok && s.party[id] == party && code == nil {
			again = append(again, id)
		} else if ok {
			return nil, connect.NewError(connect.CodeAlreadyExists, errors.New("a secret of this call is enrolled already: a new client sends a fresh secret, a retry the same secrets as the call it repeats"))
		}
	}
	switch {
	case fromClient && len(again) == len(hashes):
		return creds(again), nil
	case len(again) > 0:
		return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("%d of the %d secrets of this call are enrolled already: a retry sends the same secrets as the call it repeats, a new client a fresh secret", len(again), len(hashes)))
	}
	if s.state != fedv1.RunState_RUN_STATE_ENROLLING {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("enrolment is closed: the run started with %s; a client joins a run before its first round (start the server with --min-clients N to wait for N clients, or join the next run)", clientsWord(len(s.enrolled))))
	}
	if n := len(s.enrolled) + len(hashes); n > s.cfg.MaxClients {
		// Not ResourceExhausted: clients retry that, and the cap stays.
		s.met.reject("enrol-cap")
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("%d clients would be enrolled; this server takes at most %d", n, s.cfg.MaxClients))
	}
	if uint64(s.nextID)+uint64(len(hashes)) > math.MaxUint32 {
		return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("no client IDs left"))
	}
	ids := make([]uint32, len(hashes))
	for k := range ids {
		ids[k] = s.nextID + uint32(k)
	}
	switch err := s.st.enrol(ids, hashes, party, code); {
	case errors.Is(err, errNoCode):
		return nil, connect.NewError(connect.CodeUnauthenticated, err)
	case errors.Is(err, errCodeSpent):
		return nil, connect.NewError(connect.CodePermissionDenied, err)
	case err != nil:
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	for k, id := range ids {
		s.enrolled[id] = hashes[k]
		s.byHash[hashes[k]] = id
		s.party[id] = party
	}
	s.nextID += uint32(len(ids))
	s.lastEnr = time.Now()
	s.met.setEnrolled(len(s.enrolled))
	s.met.setParties(s.partiesLocked())
	return creds(ids), nil
}

// Parties returns the number of distinct parties among the enrolled
// clients: each client enrolled with a one-time code is a party of its
// own, and every client enrolled with the shared token belongs to one
// party, the vendor that holds those users. This, not the number of
// client ids, is the population the colluding fraction γ of secure
// aggregation (Collusion, secagg.ChooseParams) speaks of: a vendor's ids
// count as one party in γ, since the vendor knows all of their inputs.
func (s *Server) Parties() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.partiesLocked()
}

// warnParties warns, for a masked run, about every party that holds more
// than the colluding fraction γ of the clients that secure aggregation
// is provisioned for: the ids of one party (a vendor's token) count as
// one party, so should it collude with the server, secure aggregation
// hides from them only the other parties' clients. The warning says what
// that means and what to do, in words an operator reads in the log.
// s.mu is held.
func (s *Server) warnParties() {
	if s.plan.Aggregation != "masked" || len(s.enrolled) == 0 {
		return
	}
	held := map[string]int{}
	for _, p := range s.party {
		held[p]++
	}
	for p, n := range held {
		if float64(n) > Collusion*float64(len(s.enrolled)) {
			rest := fmt.Sprintf("the other %d clients sent, protected only by the noise they added themselves", len(s.enrolled)-n)
			if len(s.enrolled)-n == 1 {
				rest = "the one other client sent, protected only by the noise it added itself"
			}
			s.log.Warn(fmt.Sprintf("party %q holds %d of the %d clients, more than the %g%% that secure aggregation assumes may collude with the server", p, n, len(s.enrolled), 100*Collusion),
				"meaning", fmt.Sprintf("if this party and the server colluded, they could subtract its %d clients' inputs (and noise) from each released sum and read what %s", n, rest),
				"what_to_do", "nothing if this party is trusted not to collude with the server (a simulation, the operator's own users); otherwise enrol more independent parties (devices with one-time codes: privrec enroll-codes) so that none holds more than that share",
				"party", p, "clients", n, "of", len(s.enrolled), "gamma", Collusion)
		}
	}
}

// partiesLocked is Parties with s.mu held.
func (s *Server) partiesLocked() int {
	seen := map[string]bool{}
	for _, p := range s.party {
		seen[p] = true
	}
	return len(seen)
}

// authenticate returns the client id of the request's bearer credential.
func (s *Server) authenticate(h http.Header) (uint32, error) {
	cred, ok := strings.CutPrefix(h.Get("Authorization"), "Bearer ")
	if !ok {
		return 0, connect.NewError(connect.CodeUnauthenticated, errors.New("no bearer credential"))
	}
	idText, secret, ok := strings.Cut(cred, ".")
	id, err := strconv.ParseUint(idText, 10, 32)
	if !ok || err != nil {
		return 0, connect.NewError(connect.CodeUnauthenticated, errors.New("malformed credential"))
	}
	s.mu.Lock()
	want, enrolled := s.enrolled[uint32(id)]
	s.mu.Unlock()
	if !enrolled || !sameHash(hashToken(secret), want) {
		return 0, connect.NewError(connect.CodeUnauthenticated, errors.New("unknown credential"))
	}
	return uint32(id), nil
}

// GetRound returns the open round at once when it is later than after or
// the caller saw round after from another incarnation of the server, and
// otherwise waits, up to Poll, for the next change.
func (s *Server) GetRound(ctx context.Context, req *connect.Request[fedv1.GetRoundRequest]) (*connect.Response[fedv1.GetRoundResponse], error) {
	if _, err := s.authenticate(req.Header()); err != nil {
		s.met.reject("auth")
		return nil, err
	}
	after, boot, session := int(req.Msg.GetAfter()), req.Msg.GetBoot(), req.Msg.GetSession()
	wait := time.NewTimer(s.cfg.Poll)
	defer wait.Stop()
	for {
		s.mu.Lock()
		resp := &fedv1.GetRoundResponse{State: s.state, Boot: s.boot, EpsTotal: s.epsTotal, Delta: s.delta,
			Enrolled: int32(len(s.enrolled)), MinClients: int32(s.cfg.MinClients)}
		ready := s.state == fedv1.RunState_RUN_STATE_DONE
		if s.open && (s.round > after || boot != s.boot || (s.sa != nil && session != "" && s.sa.session != session)) {
			resp.Broadcast, ready = s.wire, true
			if s.sa != nil {
				resp.Secagg = s.sa.plan
			}
		}
		ch := s.changed
		s.mu.Unlock()
		if ready {
			return connect.NewResponse(resp), nil
		}
		select {
		case <-ctx.Done():
			return nil, connect.NewError(connect.CodeCanceled, ctx.Err())
		case <-wait.C:
			return connect.NewResponse(resp), nil
		case <-ch:
		}
	}
}

// admitted is the open round as a client's message for it found it.
type admitted struct {
	pos   int // the client's position in the upload order
	round int
	b     *protocol.Broadcast
	sa    *saRound // the round's secure aggregation (masked rounds)
}

// admit checks, under one lock, that round r is the open one (and, with
// masked, that it runs secure aggregation) and that client id takes part:
// a closed round is late, one not open yet is early (not an error of the
// client's: the round opens later, or again after a restart once the
// server has reloaded its clients; retry), and a stranger is refused.
func (s *Server) admit(id uint32, r int, masked bool) (admitted, error) {
	s.mu.Lock()
	at := admitted{round: s.round, b: s.bc, sa: s.sa}
	open, closed := s.open, s.closed
	pos, member := s.slots[id]
	s.mu.Unlock()
	at.pos = pos
	switch {
	case r <= closed:
		return at, s.rejectErr(connect.CodeFailedPrecondition, "late", "round %d is closed", r)
	case r > at.round || !open || (masked && at.sa == nil):
		return at, s.rejectErr(connect.CodeUnavailable, "early", "round %d is not open yet", r)
	case !member:
		return at, s.rejectErr(connect.CodePermissionDenied, "not-member", "client %d is not part of this run", id)
	}
	return at, nil
}

// rejectErr counts a refused upload by reason and returns its error.
func (s *Server) rejectErr(code connect.Code, reason, format string, a ...any) error {
	s.met.reject(reason)
	s.mu.Lock()
	if s.rejected != nil {
		s.rejected[reason]++
	}
	s.mu.Unlock()
	return connect.NewError(code, fmt.Errorf("upload refused (%s): %s", reason, fmt.Sprintf(format, a...)))
}

// Upload checks one client's answer to the open round and keeps it for
// the round's aggregation. A refused upload changes nothing.
func (s *Server) Upload(ctx context.Context, req *connect.Request[fedv1.UploadRequest]) (*connect.Response[fedv1.UploadResponse], error) {
	id, err := s.authenticate(req.Header())
	if err != nil {
		s.met.reject("auth")
		return nil, err
	}
	msg := req.Msg
	if msg.GetMeta().GetSeeded() && !s.plan.TestMode {
		return nil, s.rejectErr(connect.CodePermissionDenied, "seeded", "drawn from seeded streams, and this server is not in test mode")
	}
	if msg.GetMasked() != nil {
		return nil, s.rejectErr(connect.CodeUnimplemented, "masked", "this server does not run secure aggregation")
	}
	at, err := s.admit(id, int(msg.GetRound()), false)
	if err != nil {
		return nil, err
	}
	k, round, b := at.pos, at.round, at.b
	u := fromWireUpload(int(id), msg)
	if reason, err := s.check(b, u); err != nil {
		return nil, s.rejectErr(connect.CodeInvalidArgument, reason, "%v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.open || s.round != round {
		s.met.reject("late")
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("upload refused (late): round %d closed", round))
	}
	if s.answered[k] {
		s.met.reject("duplicate")
		s.rejected["duplicate"]++
		return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("upload refused (duplicate): client %d already answered round %d", id, round))
	}
	s.ups[k], s.answered[k] = u, true
	s.nAnswer++
	if s.nAnswer == len(s.order) {
		close(s.all)
	}
	s.met.accept()
	return connect.NewResponse(&fedv1.UploadResponse{}), nil
}

// check validates u (nil: an empty answer) against broadcast b and the
// server's bounds, returning the reason of a refusal.
func (s *Server) check(b *protocol.Broadcast, u *protocol.Upload) (string, error) {
	if u == nil {
		return "", nil
	}
	if err := u.Validate(b); err != nil {
		return "shape", err
	}
	if b.Phase == protocol.PhaseSetup && u.Values != nil {
		return "shape", fmt.Errorf("values in a setup round")
	}
	if b.Phase == protocol.PhaseFinal {
		return "shape", fmt.Errorf("an upload in the final round")
	}
	if i, dup := duplicate(u.Items); dup {
		return "shape", fmt.Errorf("item %d named twice", i)
	}
	for k, c := range u.Counts {
		if c < 0 || c > 1 {
			return "range", fmt.Errorf("count %d of item %d: one client counts 0 or 1 per item", c, u.Items[k])
		}
	}
	lim := s.cfg.MaxAbs
	for k, v := range u.Values {
		if a := math.Abs(float64(v)); !(a <= lim) { // also NaN
			if math.IsNaN(a) || math.IsInf(a, 0) {
				return "non-finite", fmt.Errorf("value %d is %v", k, v)
			}
			return "range", fmt.Errorf("value %d = %g outside ±%g", k, v, lim)
		}
	}
	for k, v := range u.Scalars {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return "non-finite", fmt.Errorf("scalar %d is %v", k, v)
		}
	}
	return "", nil
}

// duplicate returns an item named twice in items. Clients send their
// items in increasing order; others are checked on a sorted copy.
func duplicate(items []int32) (int32, bool) {
	sorted := true
	for k := 1; k < len(items); k++ {
		if items[k] <= items[k-1] {
			sorted = false
			break
		}
	}
	if sorted {
		return 0, false
	}
	c := slices.Clone(items)
	slices.Sort(c)
	for k := 1; k < len(c); k++ {
		if c[k] == c[k-1] {
			return c[k], true
		}
	}
	return 0, false
}

// GetModel returns the final model once the run is done.
func (s *Server) GetModel(ctx context.Context, req *connect.Request[fedv1.GetModelRequest]) (*connect.Response[fedv1.GetModelResponse], error) {
	if _, err := s.authenticate(req.Header()); err != nil {
		return nil, err
	}
	m := s.Model()
	if m == nil {
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("the run is not done"))
	}
	return connect.NewResponse(&fedv1.GetModelResponse{Model: m}), nil
}
