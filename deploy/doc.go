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
