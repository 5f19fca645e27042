// Package webclient is the client half of a privrec run in a person's
// browser: one person's ratings, kept on the device, answer the rounds of
// a dp-ease run (package dpease: a ranking model) or a dp-als run (package
// dpals: a rating model) through masked secure aggregation (package
// secagg), and the person's recommendations are computed on the device
// from the published item statistics and their own history: dp-ease's
// list is ranked by the person's indicator against the published
// item-item weights, with no predicted rating (the run trained none);
// dp-als's by the person's vector, with its predicted rating.
//
// It speaks the federation service in Connect's JSON encoding over a
// Transport (the browser's fetch in package wasm, net/http in tests) and
// sends, for a masked round, only the steps of secure aggregation: its
// public keys, its encrypted Shamir shares, its masked vector and the
// shares it reveals. A plain round (dp-als's final one) is answered with
// an upload without payload. No rating, rated item or unmasked statistic
// leaves the device.
//
// Privacy: the method's claim (dp-ease's and dp-als's are the same in
// kind), user-level (ε, δ) joint DP for adding or removing one person's
// whole rating history, against a server that sees only the sums of
// secure aggregation. ε and δ are the run's upper bound, from its public
// configuration. Which server that is depends on the protocol:
//
//   - Without a pinned authority, the honest-but-curious SecAgg+
//     protocol: the server follows it and at most the provisioned
//     fraction of clients collude with it. The page refuses an active
//     plan (it has no certified identity).
//   - With one (Client.Pin: the enrolment authority's URL and its
//     Ed25519 public key), secagg's active protocol, against a server
//     that lies: the page draws an Ed25519 identity key (crypto/rand),
//     has the authority certify it at enrolment for the client ID the
//     aggregator assigned (Client.Certify: the certificate is checked
//     against the pinned key, the client ID and the page's own key
//     before it is kept), signs its key advertisements, commits to them
//     before the graph seed is fixed, and signs the survivor set in the
//     consistency round, with privrec client --authority-key's checks:
//     K and T withstand the pinned collusion of the certified roster,
//     no plan larger than that roster, noise shares calibrated by it,
//     and no share revealed below the pinned survivor floor. The page
//     then refuses a plan that is not active. It takes part in one
//     session of a round at most (privrec client in up to 5, while no
//     masked vector has left), so a server that aborts sessions after
//     the reveals gets no second draw of the graph seed from it.
//
// The trust split, said plainly: the active protocol protects the person
// against the aggregator only if the aggregator cannot choose what the
// page pins. A page served by the aggregator (privrec serve's /) runs
// whatever script the aggregator sends, and that script could pin any
// authority key, or none, or send the ratings in the clear. Against a
// lying server the page itself, or at least its configuration with the
// pinned key, must come from the enrolment authority (which serves the
// page, or hands out the link that carries the key) or be pinned by the
// person (a saved copy, a browser extension, a reviewed build); with a
// page from the aggregator, the claim is the honest-but-curious one,
// whatever the page says.
//
// The page answers each round of a plan once, across reloads: it
// remembers, per plan (a digest of its method, configuration, scale and
// catalog), the setup round and the last round it answered (Memory), and
// saves that memory durably (Store: IndexedDB in the page) before any
// answer leaves. It refuses a round numbered past the plan's round count
// (computed from the configuration, Client.Rounds), a second setup round,
// and, silently, any round it already answered, including to a server
// that serves the same plan again (a replay). The page's IndexedDB, and
// so this memory, belongs to the page's origin: a replay served from
// another origin (host or port) finds a page that remembers nothing, but
// also holds none of the person's ratings, which they would have to
// enter again. Two tabs of the page would each keep a copy; the page
// lets one tab take part at a time (the Web Locks API) and gives the
// client the stored memory afresh when it joins.
//
// Cohort runs (a plan with protocol.Participation: --cohort, and for
// dp-als --rounds-per-user and --min-gap) rest on each device enforcing
// its own limits, as privrec client does: the page's memory also keeps,
// per plan, the training rounds it answered (PlanMemory.Trained, saved
// before any answer leaves); it offers to join (GetRound with join) only
// a round's cohort its limits allow given those rounds, and answers only
// a round whose cohort it asked to join and was taken into while the
// cohort was gathered. A server that names it in a round's plan
// otherwise, or asks for a training round its limits refuse, gets
// nothing from it, across reloads. The final round takes no cohort.
// Once its limits let it answer no later training round and the round
// it answered last is over, the page leaves the run with the newest
// release (GetModel with interim: the model after the last round the
// server finished, or the final model) and computes its list from it
// (Result.Release says which round it reads and how many users).
package webclient
