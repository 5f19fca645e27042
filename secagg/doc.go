// Package secagg implements secure aggregation in the style of SecAgg+
// (Bell et al., CCS 2020), the sparse-graph version of the protocol of
// Bonawitz et al. (CCS 2017): a server learns the sum modulo 2^b of the
// clients' vectors and nothing else about any single vector, while
// clients may drop out at any point of the round.
//
// # Concept
//
// Each client u adds to its vector x_u a self mask PRG(b_u) and, for each
// neighbour v in a sparse public graph, a pairwise mask ±PRG(s_uv), where
// s_uv comes from an X25519 agreement between u's and v's mask keys and
// the sign is + for u < v and − for u > v. Summed over all clients the
// pairwise masks cancel. Before masking, u Shamir-shares (threshold T)
// among its neighbours both b_u and the seed from which its mask private
// key is derived, each share encrypted (AES-GCM under an X25519 agreement
// of separate encryption keys) so the relaying server cannot read it.
// When the sum arrives, the server asks each surviving client for shares
// of the self-mask seed of every surviving neighbour and of the mask-key
// seed of every neighbour that dropped before uploading; with T shares of
// each it removes the self masks and the pairwise masks that no longer
// cancel. A client never reveals both shares of one neighbour, so no
// vector is ever unmasked alone.
//
// The round has four message rounds, each a pair of plain structs (see
// messages.go): AdvertiseKeys (U1 survive), ShareKeys (U2), MaskedInput
// (U3, whose inputs are summed) and Unmasking; the active protocol adds
// a commitment round before the keys and a consistency round before the
// unmasking. Client and Server are
// small explicit state machines; any protocol error makes the party abort
// and release nothing further.
//
// # One driver for every transport
//
// The step sequence is written once, on both sides, and every caller
// uses it: the Connect server and command-line client (package deploy),
// the browser client (webclient), the audits and Simulate. A client is
// driven by Client.Start, which returns its first Message, and
// Client.Next, which takes the server's Reply to its last message and
// returns the next one (nil when done); a transport only encodes them. A
// Session is the server's side: it takes each client's message of the
// open Step (Add, refusing late, early and repeated ones), closes the
// step at a deadline or when everyone expected has sent (Await, Close),
// and hands out the replies (Release, Reply); the caller records what it
// must between Close and Release. An Aggregator (package shard) may sum
// the masked inputs in the Server's place. ChooseParams and
// ProvisionedDropout choose the parameters; DropoutMargin is the one
// provisioning margin.
//
// # No client can stop a session
//
// One client, or a fraction γ of them, must not be able to stop a round.
// The server refuses an advertised key of small order (ErrLowOrder: every
// agreement with it is zero), so such a client drops out at the first
// step. Every encrypted share opens with its dealer's commitments to the
// two shares it carries (SHA-256, in the clear, bound into the AEAD's
// associated data; CiphertextSize), which the holder checks. A check
// round between ShareKeys and MaskedInput (Client.CheckShares,
// Server.AddCheck, Server.FinishCheck) handles shares that fail: each
// client reports the neighbours whose ciphertexts do not open or do not
// match their commitments. A report, which the server cannot check,
// costs only the reporter: it holds no share of the reported client and
// is never asked for one, and the two still mask with each other, so no
// pairwise mask is dropped on anyone's word. A client is excluded
// (SharesDelivery.Excluded: treated as dropped before its masked input)
// only when fewer than T of its remaining neighbours hold valid shares of
// it: a dealer of garbage; a liar excludes nobody unless K−T others report
// the same client.
//
// In the unmasking the server checks every revealed share against its
// dealer's commitment. A wrong one is refused (ErrCheat) and its sender
// named in Server.Cheaters: it had opened and accepted that share in the
// check round, so the refusal is proof; the seed comes from the other
// holders. A seed with more than T shares is reconstructed twice, from two
// subsets; shares that disagree (all of them the dealer's committed ones)
// name the dealer, and Result fails (ErrShares), as it would for any
// sum the server cannot unmask. Under the active protocol the server also
// checks every certificate and signature (SetVerifier): a bad
// advertisement, or a commitment never opened, leaves its sender in
// Server.Unrevealed and fails the session at its keys step (the graph
// needs every committed nonce), so a caller runs the round's next session
// without it; a bad consistency signature is refused, and its sender not
// asked for shares, instead of being relayed to abort its neighbours.
// TestLiarsCannotStopARound: 10 liars of 1,000 (false reports against
// every neighbour, wrong shares, a masked input and no reveal) and the
// round releases the sum of all 1,000 inputs.
//
// # One masked input per client per round
//
// Two sums of the same vectors over different survivor sets reveal the
// vectors of the clients in between: whoever runs a round must never let
// a client's vector enter a second session of it. The deploy package
// enforces this on both sides: a client sends its masked vector of a
// round at most once, in whatever session; the server records durably
// that a round's masked step opened before any vector can arrive, and
// after a restart releases that session's stored sum or skips the round,
// never opening another session of it. Sessions that fail before the
// masked step (too few keys, shares or checks) may be retried under
// fresh keys: no vector has left a client.
//
// # Graph and parameters
//
// Neighbours are given by a Harary graph H(K, N): the clients are placed
// on a ring in an order drawn from the public round seed and each is
// joined to the K/2 nearest on either side, so every client does work and
// sends bytes in proportion to K, not N. ChooseParams picks the smallest K
// and, for it, the largest T such that, for a random graph and with at
// most a fraction γ (collusion) of clients corrupt and a fraction δ
// (dropout) dropping at any point of the round,
//
//   - secrecy: except with probability 2^-40, no honest client has T
//     corrupt neighbours, so the corrupt clients and the server cannot
//     reconstruct an honest client's seeds from their own shares;
//   - connectivity: except with probability 2^-40, the honest surviving
//     clients remain connected in the graph (cutting the ring needs two
//     runs of K/2 consecutive removed clients), so the pairwise masks
//     among them reveal only their total;
//   - correctness: except with probability 2^-20, every client keeps T
//     surviving neighbours and the round does not abort.
//
// Together: a server colluding with γN clients learns, from an honest
// run, only the sum of the honest survivors' inputs (plus what it can
// subtract from the corrupt ones). The bounds are computed exactly with
// the hypergeometric law of a client's neighbourhood and a union bound
// over clients; TestChooseParams prints them. For example (δ = dropout,
// γ = collusion):
//
//	n       δ     γ     K    T
//	1000    0.10  0.10  46   26
//	1000    0.30  0.10  88   36
//	6040    0.10  0.10  52   30
//	6040    0.30  0.10  106  43
//	10000   0.10  0.10  54   31
//	10000   0.30  0.10  106  43
//	10000   0.30  0.20  182  87
//
// That is the honest-but-curious protocol (Params.Active unset): the
// server follows the protocol and colludes with clients. Against a server
// that deviates it does not hold — with no cryptographic attack: the keys
// are not bound to identities (the server substitutes a target's
// neighbours' keys and reads its shares), the server tells some of a
// client's neighbours it survived and others it dropped (the split
// attack, which needs 2T ≤ K + c with c corrupt neighbours: in the δ =
// 0.1 rows above 2T−K is 6–8; at δ ≥ 0.25 it is negative and no corrupt
// client is needed), it chooses the graph seed and the position order,
// and K and T. The active protocol below closes these.
//
// # Against a server that lies
//
// Params.Active selects the protocol for an active server that colludes
// with at most a fraction γ of the certified clients (TestAttack* mount
// each attack against the real Client; each recovers a client's input
// exactly on the honest-but-curious protocol and fails here):
//
//   - Identities the server cannot mint. Each client holds a long-term
//     Ed25519 key, certified (Certify) by an enrolment authority the
//     server does not control, for a run, a client ID and a roster size.
//     Every AdvertiseKeys is signed over (session context, round seed,
//     position, client ID, both keys); a client verifies each neighbour's
//     certificate under its pinned authority key, that it names the
//     client ID of that position (IDs distinct, so one identity fills one
//     position) and the signature. A bad one aborts the client's session
//     (ErrIdentity) rather than making the neighbour a dropout: only the
//     server or a relay can produce it, and a server caught lying gets
//     nothing further. TestAttackKeySubstitution.
//   - A graph the server cannot choose (commit, then reveal). Each client
//     first sends only a hiding commitment to its advertisement and a
//     fresh 32-byte nonce (Client.Commit, Server.AddCommit); the server
//     fixes the set of commitments and sends every committed client its
//     hash (Server.FinishCommit, CommitSetHash, 32 B) before any client
//     reveals (Client.Reveal); the server takes only the advertisement a
//     client committed to. The graph seed is GraphSeed: a hash of the
//     round seed and of the opened set — every committed advertisement's
//     digest and nonce, sorted by position — which every client receives
//     whole (68 B per client), checks against the commitment-set hash it
//     saw before revealing and against its own advertisement, and checks
//     each neighbour's delivered keys against; a committed neighbour
//     whose keys are withheld is an abort, and so, at the server, is a
//     committed client that does not reveal. The positions are fixed
//     (and signed) before any key is. So the seed is fixed before any
//     honest nonce is known and unknown until all are: neither the server
//     nor its corrupt clients can steer it by re-drawing keys or leaving
//     clients out after the reveals (TestAttackGrindSeed: each such edit
//     changes a committed value and is refused). What remains is
//     aborting a session after the reveals and trying again: one draw of
//     the seed per session, and the deploy package's clients take part in
//     at most 5 sessions of a round (log2 5 ≈ 2.3 of the 40 bits).
//   - Parameters the server cannot weaken. ChooseParamsActive adds to
//     ChooseParams' conditions n·P[corrupt neighbours ≥ 2T−K] ≤ 2^-40: the
//     split attack needs T shares of each kind of u's seeds from u's K
//     neighbours, each honest one revealing one kind, so it needs 2T ≤ K
//   - c. Clients recompute the condition (CheckActiveParams) with their
//     own γ and the certified roster before any key leaves them.
//   - A consistency round (Bonawitz et al. 2017, round 4, per
//     neighbourhood). After the masked inputs, each survivor signs the
//     survivor set U3 (a bitmap over positions) it is told of
//     (Client.Consistency), after checking that it is itself in U3 and
//     that every neighbour listed there sent it valid shares. Unmask then
//     reveals only according to that signed set (the server's own lists
//     are ignored), and only with valid signatures of the same set from
//     at least T neighbours that it lists as survivors; any bad signature
//     aborts (ErrInconsistent). With T > (K+c)/2 no two groups of a
//     neighbourhood can each gather T agreeing signatures for different
//     sets, so the signatures make the server's equivocation fail closed
//     and attributable; the counting bound above is what makes the split
//     attack impossible. TestAttackSplit at ρ = 0.8 and ρ = 1.
//
// The threat model of the active protocol, in short. Who: a server that
// may deviate arbitrarily, colluding with at most a fraction γ of the N
// clients of the certified roster, chosen before the session's
// commitments (static corruption); an enrolment authority the server does
// not control, trusted only to certify one identity key per client ID of
// the run; honest clients that pin the authority's key, γ, the roster and
// (in the deploy package) their survivor floor ρ, ε, δ and the rounds.
//
// What holds, except with probability 2^-40 per session over the graph
// (less the ≈ 2.3 bits of at most 5 sessions a round): the server and its
// coalition learn about the honest clients' inputs nothing beyond the sum
// of the honest inputs in each released sum (key substitution, the split
// attack, a chosen or ground graph, weak K or T all fail, and every
// attempt that needs a lie the clients can see aborts the session and is
// attributable); a released sum holds at least ρ·N inputs (the deploy
// package's clients refuse to sign a smaller survivor set), and each
// honest input enters at most one released sum of a round (deploy).
//
// What does not hold: the sum's integrity — a corrupt client may upload
// any vector (callers bound the sum: protocol.SumChecker) and the server
// may release a wrong sum, or none, with no proof either way;
// availability — the server can abort any session and drop any honest
// client down to the floor; the noise of corrupt clients, which may
// withhold their shares: the deploy package's clients draw their shares
// from the roster they pin (protocol.ParamRoster), never from counts the
// server announces, so a released sum carries at least 1 − γ/ρ of the
// calibrated noise (the README gives the ε); adaptive corruption (the
// bounds assume the corrupt set does not depend on the graph seed); and
// an authority that certifies identities for the server (Sybils beyond
// γ void every bound).
//
// In both protocols: the corrupt set must not depend on the graph seed
// (static corruption, fixed before the round's keys); a client may upload
// any vector, so callers bound the unmasked sum instead
// (protocol.SumChecker: arrivals at most the announced counts, each
// coordinate within arrivals times the clip plus the noise tail), and a
// lying client can still move the sum anywhere inside those bounds and
// withhold its noise share. A dealer of shares that do not lie on one
// polynomial is named (Cheaters) but makes its session fail after the
// masked inputs, once: verifiable secret sharing (Feldman commitments)
// would catch it before them, and is not implemented.
//
// # Cryptographic choices
//
// Keys: per round, each client draws a 16-byte mask-key seed (its X25519
// mask key pair is derived from it with HKDF-SHA256, so the seed is what
// is Shamir-shared), an X25519 encryption key pair (crypto/ecdh) and a
// 16-byte self-mask seed. All derivations use crypto/hkdf with the round
// seed as salt and labels naming the purpose and the client pair.
//
// Shamir sharing is circl's secretsharing over the Ristretto255 scalar
// field: a 16-byte seed is a scalar, the share of client v is the
// polynomial at v+1. A reconstruction that is not a 16-byte value, or a
// mask key that does not match its advertised public key, is reported as
// ErrShares, so wrong shares do not silently corrupt the sum. The server
// reconstructs its seeds in batches over the same field with its own
// Montgomery arithmetic and one inversion a batch (lagrange.go), which
// gives the same values as circl's interpolation at a fraction of its
// cost.
//
// PRG: AES-128-CTR (crypto/aes, crypto/cipher; AES-NI), with the keystream
// generated into a reusable 16 KiB buffer and added into the vector (32
// words at a time with AVX2 on amd64; words little endian): no allocation
// per element. AddMaskRange expands any range [a, b) of a stream alone,
// the CTR counter starting at the block of word a. Measured on this
// machine (shared 2-core AMD EPYC VM, Go 1.26, expanding and adding 2^20
// words, BenchmarkPRGCandidates, several runs): AES-128-CTR 1.8–3.3 GB/s,
// math/rand/v2 ChaCha8 1.0–1.3 GB/s, golang.org/x/crypto/chacha20
// 0.50–0.66 GB/s. AES-128-CTR is both the fastest and a standard PRF-based
// PRG; ChaCha8 has a reduced round count and is designed as a fast random
// source rather than a vetted stream cipher.
//
// # Costs
//
// BenchmarkRound (go test -run XXX -bench Round -benchtime=1x ./secagg)
// runs whole rounds sequentially in one process with L = 37060 words
// (ML-1M: 3706 items × 10 factors), 10% of clients dropping before the
// masked input, K and T from ChooseParams(n, 0.1, 0.1):
//
//	                           n = 1000 (K=46 T=26)   n = 6040 (K=52 T=30)   n = 10000 (K=54 T=31)
//	client AdvertiseKeys       0.09 ms                0.09 ms                0.09 ms
//	client ShareKeys           2.4 ms                 2.8 ms                 2.7 ms
//	client MaskedInput         4.2 ms                 4.5 ms                 4.8 ms
//	client Unmask              0.007 ms               0.007 ms               0.006 ms
//	server, whole round        0.75 s                 5.3 s                  9.1 s
//	up per client: vector      148 244 B              148 244 B              148 244 B
//	up per client: the rest    6 851 B                7 734 B                8 028 B
//	down per client            8 784 B                9 928 B                10 309 B
//
// BenchmarkRoundActive runs the active protocol beside this one at the
// deploy package's parameters; its figures are in the README (at n =
// 1,000 and δ = 0.15 the active K is 138 against 54, and a client's time
// about 5 times larger, mostly the larger K and the Ed25519 checks).
//
// A client's cost is O(K·L) words of PRG and 2K X25519 agreements,
// independent of n; the vector itself (4·L bytes, or b·L/8 packed)
// dominates its traffic; the protocol adds about 150 B up and 190 B down
// per neighbour.
// The server's time is dominated by removing the pairwise masks of
// dropped clients (one agreement and one L-word expansion per edge from a
// dropped client to a survivor) and the self masks of survivors. Result
// (unmask.go) reconstructs all seeds in batches, derives every PRG key,
// then expands the keys on all cores, each worker adding every key into
// one range of coordinates of the sum at a time. The table's server row
// predates that; the figures after it are in docs/results/secagg/unmask.md.
//
// # Arithmetic
//
// All vectors are uint32 taken modulo 2^Bits: additions wrap modulo 2^32
// and are masked to Bits at the end, which is exact because 2^Bits
// divides 2^32. Callers quantize their values (and leave headroom so that
// the true sum over N clients does not wrap).
package secagg
