package protocol

import (
	"context"
	"encoding"
	"math/rand/v2"
)

// Server is the aggregating party. It never sees client data, only
// uploads.
type Server interface {
	// Broadcast returns the message of round. The returned value must stay
	// unchanged until the next Broadcast call.
	Broadcast(round int) (*Broadcast, error)
	// Aggregate consumes the uploads of round, indexed in client order;
	// an entry is nil for a client that sent nothing. Under secure
	// aggregation (SecureSum) it receives one summed upload instead. It must not keep
	// the uploads (clients reuse them).
	Aggregate(round int, ups []*Upload) error
	// Done reports whether the protocol is over.
	Done() bool
}

// Stateful is a Server whose state between rounds can be saved and
// restored, so that a deployment survives a crash: MarshalBinary after
// Aggregate (or before the first Broadcast) captures everything the next
// Broadcast depends on; UnmarshalBinary restores it into a server built
// with the same configuration.
type Stateful interface {
	Server
	encoding.BinaryMarshaler
	encoding.BinaryUnmarshaler
	// Round returns the next round the server will broadcast.
	Round() int
	// Factors returns the public item factors V (NumItems×Dim, row-major)
	// and Dim. The caller must not modify them.
	Factors() (v []float32, dim int)
}

// RosterSetter is implemented by a Stateful server whose budget split
// depends on the public roster size, the devices enrolled in the run,
// which a deployment knows only once enrolment closes (dp-ease: its
// popularity-mode rule). The deployment calls SetRoster with the enrolled
// count when enrolment closes, before the first Broadcast, and with the
// same count when it restarts, before restoring a snapshot.
type RosterSetter interface {
	SetRoster(n int) error
}

// PartialShares is implemented by a Stateful server whose noise the
// clients add in shares to their uploads on the plain-sum path (over the
// network the server process adds plain uploads, each carrying 1/n_j of
// item j's noise): PartialSharesEps returns a training round's ε when only
// the fraction coverage of the announced shares arrived (-1: no finite
// bound), and ok false when the method's release has no noise shares to
// account (a noise-free variant). A deployment records it in its ledger.
type PartialShares interface {
	PartialSharesEps(coverage float64) (eps float64, ok bool)
}

// Biased is implemented by a Stateful server whose model predicts with a
// global mean and item biases besides the factors (dp-als, dp-biases): a
// deployment publishes them in the final model beside Factors, so that a
// device folding itself in against the published model gets the same
// item side as the clients of the run.
type Biased interface {
	// Biases returns the released global mean and the item biases
	// (NumItems of them), on the scale the server trains on. ok is false
	// before the run released them. The caller must not modify bi.
	Biases() (mean float32, bi []float32, ok bool)
}

// Indicating is implemented by a Stateful server whose item factors score
// a user by an indicator of their history on some public items (dp-ease):
// a deployment records those items in the final model
// (model.Model.UserItems), so that a device that did not take part in the
// run can score itself against the published model.
type Indicating interface {
	// UserItems returns the items a user row indicates, in the order of
	// its coordinates; nil before the run released them. The caller must
	// not modify them.
	UserItems() []int32
}

// Client is a data-holding party. It sees its own data and the broadcasts.
type Client interface {
	// ID is the client's index, unique among the clients of a run; it
	// labels its random streams and orders the uploads.
	ID() int
	// Round answers broadcast b. r is the client's random stream for this
	// round. It returns nil when the client has nothing to send. The
	// returned upload may be reused by the client's next Round call.
	Round(b *Broadcast, r *rand.Rand) (*Upload, error)
}

// Transport carries rounds between one server and its clients.
type Transport interface {
	// Exchange delivers b to every client and returns their answers in
	// client order (index k answers for the k-th client of the transport),
	// nil for a client that sent nothing. A wrapping transport such as
	// SecureSum may instead return fewer, combined uploads.
	Exchange(ctx context.Context, b *Broadcast) ([]*Upload, error)
	// NumClients returns the number of clients the transport reaches.
	NumClients() int
	// Close releases the transport's resources.
	Close() error
}
