// Package authority is the enrolment authority of secure aggregation's
// active protocol (secagg, "Against a server that lies") as a party of
// its own: it certifies clients' long-term identity keys for a run, and
// it is not the aggregator.
//
// # The trust split
//
// The aggregator (privrec serve --secagg-active) assigns client IDs at
// enrolment and runs the rounds; it never holds the authority's key, so
// it cannot mint identities: a lying aggregator that invented clients,
// or swapped a client's keys for its own, would need certificates it
// cannot make. The authority holds the key and certifies one identity key
// per client ID, ever, recorded in an append-only ledger; it sees no
// rating and no upload. Clients pin the authority's public key (privrec
// client --authority-key) and refuse any neighbour without its
// certificate.
//
// One-time enrolment codes tie the two: the authority makes them
// (privrec authority codes), hands each to one device, and gives the
// aggregator only their SHA-256 hashes (privrec enroll-codes --import), so
// the aggregator never sees a code and cannot use one. A device enrols
// at the aggregator with its code, receives its client ID, and asks the
// authority (Service, over HTTPS) to certify its identity key for that
// ID, with the same code. The authority certifies one identity per code,
// ever, and one key per client ID; both are in the ledger, synced to disk
// before it answers, so refusals survive a restart.
//
// Known limit: the authority cannot check that the client ID a code
// holder names is the one the aggregator assigned to that code (it never
// talks to the aggregator). A code holder can thus ask for another ID
// than its own: the authority certifies it if no key is certified for
// that ID yet, and the rightful holder of the ID is then refused (409)
// and cannot take part; such a certificate does not let the aggregator
// or the code holder unmask anyone, but it denies one client its place.
// One code still yields one identity, so a code holder cannot certify
// more than one client.
//
// A vendor enrolling many users with the shared token has them certified
// in a batch instead: its client writes one request line per user
// (privrec client --identity DIR), the authority certifies them offline
// (privrec authority certify --batch, with the same ledger).
//
// # HTTP API
//
//	GET  /v1/authority  200 application/json {"key": base64 Ed25519 public key, "run": run, "roster": N}
//	POST /v1/certify    application/json {"code": code, "client": client ID, "key": base64 Ed25519 public key}
//	                    200 application/json {"certificate": base64 secagg.Certificate.Marshal()}
//	                    403 unknown or used code, 409 another key certified for the client ID,
//	                    400 malformed, 429 rate limited (text/plain reason); bodies at most 4 KiB.
//
// The ledger is a text file, one certified identity a line:
//
//	<code SHA-256 hex, or - for a batch> <client ID> <identity public key, base64>
package authority
