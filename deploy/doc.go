// Package deploy runs a federated method of the registry over the
// network: a server that holds only public data, and clients that keep
// their ratings.
//
// # Server
//
// Server wraps a method's server half (a protocol.Stateful: the public
// item factors and the method's public state) and is the
// protocol.Transport its round loop exchanges broadcasts and uploads over.
// It serves the federation service of proto/privrec/federation/v1 over
// Connect (gRPC, gRPC-Web and HTTP/JSON) with TLS, and the browser page of
// package web. A run has three phases: enrolment (each client registers a
// secret of its own, with a one-time code or a vendor's token; the server
// assigns its ID and keeps only the secret's hash), rounds (Run: each
// round's broadcast, the clients' uploads or secure-aggregation steps, the
// method's Aggregate), and publication (the final model, served for a
// while). Every round boundary is one bbolt transaction in the state
// directory — the method server's snapshot, the ledger entry (who took
// part, the ε so far), the folded clients — so a server killed at any
// moment resumes the run where it stopped, bit for bit.
//
// # Front-ends
//
// With sharded aggregation (Sharded: masked rounds summed by aggregator
// processes on NATS JetStream) the masked vectors, nearly all of a
// round's bytes, can bypass the server: Front is a stateless front-end
// (privrec front) that serves the clients' API in the server's place,
// passes every call on to the server but the masked vector, which it
// publishes to JetStream itself once the server has checked the client's
// credential and named its shard round and position (ShardTicket), and
// then has the server count. Clients list several front-ends
// (ClientConfig.URL, comma-separated), spread over them and move to
// another when one cannot be reached; a masked vector sent again
// through another front-end is counted once.
//
// # Client
//
// Session is a client's connection: it reads the run's public plan
// (Hello), enrols, and answers rounds for one device's ratings
// (client --ratings) or for a vendor's many users (client --simulate),
// with the same method client code as the in-process simulation. Before
// it uploads anything it checks the plan against what the method's claim
// needs (the aggregation, the noise calibration, the secure-aggregation
// parameters) and refuses a plan that would weaken it. Each answer spends
// privacy, so the clients answer only the rounds of the plan
// (protocol.Method.Rounds) and, with ClientConfig.Memory, never a plan's
// round twice, across their own restarts and whichever server asks
// (the memory is kept per protocol.PlanDigest and written before any
// answer leaves). Against a server that lies (secagg's active protocol)
// each client's identity key carries the enrolment authority's
// certificate: made by the authority, which keeps its key (package
// authority; ClientConfig.Identities, checked by CheckIdentity), or in
// process by a party that is itself the authority (Certifier).
//
// # Cohorts: a population, not a roster
//
// A method whose configuration names participation limits
// (protocol.Method.Participation) runs over a population. With a cohort
// size N, each round first gathers its cohort: the server announces the
// round (GetRoundResponse.gathering) and takes the first N clients that
// offer to join; the round then runs with them alone — its uploads or
// its secure-aggregation session, its floor of participants, and the
// roster its noise shares are drawn for (protocol.ParamRoster = N) are
// the cohort's — and enrolled clients outside it are not waited for.
// Enrolment stays open while such a run runs: a device that arrives late
// joins the next cohort with room. The final round, which releases
// nothing, asks every client and closes at its deadline.
//
// The guarantee does not rest on how the server chooses. A client offers
// a training round only if the plan's limits allow it (at most MaxRounds
// training rounds a run, MinGap apart), given the rounds it answered,
// which its memory keeps across restarts; and it answers only a round
// whose cohort it was taken into while the cohort was gathered,
// whatever the round's plan names. So a user's data enters at most
// MaxRounds released sums, and the method's user-level ε composes that
// many participations, without amplification by sampling. What the
// server still chooses is who is in a cohort: under the active protocol
// the secure-aggregation parameters are checked against every colluding
// client of the certified roster sitting in one cohort (secagg.CheckPlan
// with the roster's colluding count), which a small cohort of a large
// roster cannot satisfy — cohorts drawn by a seed the clients can check
// are not built yet.
//
// # Continual release
//
// While a run goes on, the server publishes an interim model after each
// training round whose aggregate was released: the model its state holds
// now (protocol.Stateful.Factors, the biases of a protocol.Biased
// method), built as the final one is, whose model.Release says which
// round it reads and how many users (the ledger's Users: the distinct
// users of the released training rounds so far). A device that arrives
// after training started, or whose participation is spent, folds itself
// in against the latest release (GetModel with interim set) rather than
// waiting for the end. A release is post-processing of the aggregates
// the server holds: it costs no ε, and its privacy block has the ε spent
// so far. A restarted server publishes its latest release again from its
// snapshot.
//
// # A vendor as one party
//
// A vendor that already holds its users' ratings need not take part as
// one client identity per user. With ClientConfig.OneParty (privrec
// client --simulate --one-party) its session enrols one identity that
// answers for its users (EnrollRequest.users, recorded durably by the
// server), runs every user's method client exactly as that user's device
// would (the same code; in test mode the same stream rng.New(seed, k, t),
// k the user's index in the vendor's data, as in process), adds the
// users' integer vectors — each already clipped, quantized and carrying
// that user's Skellam noise share and arrival word — modulo the word
// size, and takes part in each masked round as one secure-aggregation
// party with that one vector. The server counts users, not parties,
// wherever a count enters the calibration or a check: the roster
// (protocol.RosterSetter, protocol.ParamRoster), MinClients and
// MaxClients, the participation floor (checked on the users of the
// surviving parties), the masked inputs a SumChecker bounds the arrivals
// by, and the ledger's enrolled, participants and uploads. The sum it
// unmasks is bit for bit the sum over the users, so the model is the one
// of one identity per user (and of the in-process run). Only masked runs:
// a party's plain upload is refused, since it would count as one user's.
//
// The privacy claim is unchanged for its unit, a user (all of one user's
// ratings): each user's contribution is clipped per user and carries its
// own noise share, drawn for the run's users, whoever sends it. Who is
// trusted: the vendor holds its users' ratings already, computes their
// contributions and adds their noise honestly (a vendor that omits its
// users' noise weakens only its own users' protection, as their devices
// could); the server sees only the sum over the parties. With a handful
// of parties secure aggregation's collusion assumption speaks of
// parties: with 3, one vendor is a third of the parties, not the tenth
// secagg.DefaultCollusion provisions for, and the server warns about it
// at the start (Server.warnParties). What a vendor colluding with the
// server learns is the sum of the other parties' users, its own
// contribution and noise subtracted: that sum carries only the others'
// noise shares. With ML-1M's 6,040 users in equal thirds, dp-als's ε = 1
// (δ = 10⁻⁶) then reads 1.24 against that coalition (4,027 of 6,040
// shares; 1.17 under the active protocol's floor of 0.9, where each
// share is drawn for 5,436 users), and 1.81 for the users of the one
// party left when the other two collude. That is no weaker than the same
// vendors enrolling one identity per user, where a vendor equally knows
// its users' inputs; what a lone vendor never learns is another party's
// vector apart from the sum: secure aggregation among 3 parties runs on
// the complete graph with threshold 2 (K = 2, T = 2), so a vendor holds
// one share of each other party's seeds and a server that follows the
// protocol hands it no second one (under the active protocol, nor does a
// server that lies about who dropped out). Every
// party must survive a round (at the default floor of 0.9, ⌈0.9 · 3⌉ =
// 3, and in users a third of them missing is below any floor above
// two thirds): a party is a server process, not a device that drops out.
// Under the active protocol the parties' certificates count parties
// (ClientConfig.Roster) and each party pins the run's users
// (ClientConfig.Users), the roster its noise shares may be drawn for.
//
// # Who is trusted
//
// Nobody with the ratings. The server follows the protocol or not: for a
// method whose privacy rests on sums (HDPMF, LDP-OP, DP-ALS, dp-ease)
// uploads go through secure aggregation (package secagg, SecAgg+, with
// distributed discrete noise on the integer path), so the server sees only
// sums, and with the active protocol (certified identities from an
// authority, commit-reveal seeds, a consistency round) a server that lies
// about keys, graphs or dropouts learns no single input; secagg's package
// documentation states that threat model and its limits. Sharded
// aggregation on NATS JetStream (package shard) splits the sum across
// aggregators with the same guarantees; shard's documentation states what
// the message store may do. The ε of a run is the method's claim,
// accounted by the server in its ledger from what actually arrived and
// checked by each client against the plan it was given.
package deploy
