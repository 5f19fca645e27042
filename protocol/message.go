package protocol

import (
	"errors"
	"fmt"
)

// ErrMessage is wrapped by every error about a malformed Broadcast or
// Upload.
var ErrMessage = errors.New("protocol: malformed message")

// Phases of a round, in Broadcast.Phase.
const (
	// PhaseSetup is a round before training: clients announce what the
	// server needs to know to provision noise (Upload.Items and
	// Upload.Counts, no values).
	PhaseSetup = "setup"
	// PhaseTrain is a training round: clients upload contributions
	// computed against the broadcast factors.
	PhaseTrain = "train"
	// PhaseFinal is the last round: clients update their private state
	// against the final broadcast and upload nothing (nil).
	PhaseFinal = "final"
)

// Broadcast is what the server sends to every client at the start of a
// round. It is plain data.
type Broadcast struct {
	Round    int    // round number, from 0
	Phase    string // PhaseSetup, PhaseTrain or PhaseFinal
	Dim      int    // latent dimension K
	NumItems int    // size of the item index space
	// Items lists the items whose rows V carries; nil means all items
	// 0..NumItems-1 in order.
	Items []int32
	// V holds len(Items)·Dim (or NumItems·Dim) item factors, row-major.
	V []float32
	// Counts, when not nil, holds one public count per item of Items (or
	// per item index): the number of clients that announced the item.
	Counts []int32
	// Aux, when not nil, holds method-specific public per-item vectors,
	// AuxDim values per item of Items (or per item index): for example the
	// server's mixing variables h of the papers' distributed noise.
	Aux    []float32
	AuxDim int
	// Params carries public scalar hyperparameters ("lr", "lambda", …).
	Params map[string]float64
	// Words, when positive, asks for dense integer uploads (AggMasked):
	// Upload.Words of this length, values mod 2^Bits.
	Words int
	Bits  int
}

// Rows returns the number of item rows the broadcast carries.
func (b *Broadcast) Rows() int {
	if b.Items != nil {
		return len(b.Items)
	}
	return b.NumItems
}

// Row returns the factors of the k-th item row.
func (b *Broadcast) Row(k int) []float32 { return b.V[k*b.Dim : (k+1)*b.Dim] }

// Param returns Params[name], or def when it is absent.
func (b *Broadcast) Param(name string, def float64) float64 {
	if v, ok := b.Params[name]; ok {
		return v
	}
	return def
}

// Validate checks the lengths and indices of b.
func (b *Broadcast) Validate() error {
	if b.Dim < 0 || b.NumItems < 0 || b.AuxDim < 0 {
		return fmt.Errorf("%w: broadcast round %d: Dim %d, NumItems %d, AuxDim %d", ErrMessage, b.Round, b.Dim, b.NumItems, b.AuxDim)
	}
	switch b.Phase {
	case PhaseSetup, PhaseTrain, PhaseFinal:
	default:
		return fmt.Errorf("%w: broadcast round %d: unknown phase %q", ErrMessage, b.Round, b.Phase)
	}
	rows := b.Rows()
	for k, i := range b.Items {
		if i < 0 || int(i) >= b.NumItems {
			return fmt.Errorf("%w: broadcast round %d: Items[%d] = %d outside [0, %d)", ErrMessage, b.Round, k, i, b.NumItems)
		}
	}
	if b.V != nil && len(b.V) != rows*b.Dim {
		return fmt.Errorf("%w: broadcast round %d: len(V) = %d, want %d rows × %d", ErrMessage, b.Round, len(b.V), rows, b.Dim)
	}
	if b.Counts != nil && len(b.Counts) != rows {
		return fmt.Errorf("%w: broadcast round %d: len(Counts) = %d, want %d", ErrMessage, b.Round, len(b.Counts), rows)
	}
	if b.Words < 0 || (b.Words > 0 && (b.Bits < 1 || b.Bits > 32)) {
		return fmt.Errorf("%w: broadcast round %d: Words %d, Bits %d", ErrMessage, b.Round, b.Words, b.Bits)
	}
	if b.Aux != nil && len(b.Aux) != rows*b.AuxDim {
		return fmt.Errorf("%w: broadcast round %d: len(Aux) = %d, want %d rows × %d", ErrMessage, b.Round, len(b.Aux), rows, b.AuxDim)
	}
	return nil
}

// Upload is what one client sends to the server in one round: sparse
// per-item contributions. It is plain data.
type Upload struct {
	Client int // the sender's client ID
	Round  int // the round it answers
	// Items lists the items the client contributes to, each at most once.
	Items []int32
	// Values holds len(Items)·Dim values, row-major, parallel to Items
	// (nil in a setup round). Dim is the broadcast's unless the method
	// says otherwise.
	Values []float32
	// Counts, when not nil, holds one count per item of Items (how many
	// ratings the contribution covers).
	Counts []int32
	// Scalars carries method-specific per-client numbers (for example a
	// client's loss, for monitoring), nil when unused.
	Scalars []float64
	// Words, in a round whose broadcast asks for them, is the client's
	// integer vector mod 2^Broadcast.Bits over every coordinate of the
	// round (the method says which): dense (Broadcast.Words values), or,
	// with Items, only the rows of the listed items, Broadcast.Words /
	// NumItems words each, the others zero. The transport masks the dense
	// vector in either case, so the server never learns which rows were
	// given; under AggMasked it receives only the sum, as one upload.
	Words []uint32
}

// Validate checks u against the broadcast it answers.
func (u *Upload) Validate(b *Broadcast) error {
	if u.Round != b.Round {
		return fmt.Errorf("%w: upload of client %d: round %d answers broadcast round %d", ErrMessage, u.Client, u.Round, b.Round)
	}
	for k, i := range u.Items {
		if i < 0 || int(i) >= b.NumItems {
			return fmt.Errorf("%w: upload of client %d round %d: Items[%d] = %d outside [0, %d)", ErrMessage, u.Client, u.Round, k, i, b.NumItems)
		}
	}
	if u.Values != nil && len(u.Values) != len(u.Items)*b.Dim {
		return fmt.Errorf("%w: upload of client %d round %d: len(Values) = %d, want %d items × %d", ErrMessage, u.Client, u.Round, len(u.Values), len(u.Items), b.Dim)
	}
	if u.Words != nil {
		want := b.Words
		if u.Items != nil {
			// Rows of the given items: the round's words must split
			// into NumItems rows (DenseWords places them by item).
			if b.NumItems <= 0 || b.Words%b.NumItems != 0 {
				return fmt.Errorf("%w: upload of client %d round %d: words by item, and the round's %d words are not %d rows", ErrMessage, u.Client, u.Round, b.Words, b.NumItems)
			}
			want = len(u.Items) * (b.Words / b.NumItems)
		}
		if b.Words <= 0 || len(u.Words) != want {
			return fmt.Errorf("%w: upload of client %d round %d: %d words, the broadcast asks for %d (%d rows given)", ErrMessage, u.Client, u.Round, len(u.Words), want, len(u.Items))
		}
	}
	if u.Words != nil && b.Bits < 32 {
		lim := uint32(1) << b.Bits
		for k, w := range u.Words {
			if w >= lim {
				return fmt.Errorf("%w: upload of client %d round %d: word %d = %d is not below 2^%d", ErrMessage, u.Client, u.Round, k, w, b.Bits)
			}
		}
	}
	if u.Counts != nil && len(u.Counts) != len(u.Items) {
		return fmt.Errorf("%w: upload of client %d round %d: len(Counts) = %d, want %d", ErrMessage, u.Client, u.Round, len(u.Counts), len(u.Items))
	}
	if n, ok := b.Params[ParamScalars]; ok && float64(len(u.Scalars)) > n {
		return fmt.Errorf("%w: upload of client %d round %d: %d scalars, the broadcast allows %g", ErrMessage, u.Client, u.Round, len(u.Scalars), n)
	}
	return nil
}

// ParamScalars is the Broadcast.Params key of a round whose uploads carry
// more than a few Scalars (dp-als's dense statistics on its float paths):
// the most Upload.Scalars a valid upload of the round holds. Validate
// refuses more, and a deployment sizes its cap on an upload's bytes by
// it. Absent, a round's uploads carry at most a few scalars.
const ParamScalars = "scalars"

// Scalars returns the most Upload.Scalars a valid upload of b carries
// (ParamScalars), 0 when b does not say.
func (b *Broadcast) Scalars() int {
	n := b.Param(ParamScalars, 0)
	if !(n > 0) {
		return 0
	}
	return int(min(n, 1<<40))
}

// DenseWords returns a new copy of u's words as the dense vector of the
// round b (Upload.Words: rows given for Items are placed at their items'
// offsets, the rest is zero).
func (u *Upload) DenseWords(b *Broadcast) []uint32 {
	out := make([]uint32, b.Words)
	if u.Items == nil {
		copy(out, u.Words)
		return out
	}
	stride := b.Words / b.NumItems
	for k, j := range u.Items {
		copy(out[int(j)*stride:(int(j)+1)*stride], u.Words[k*stride:(k+1)*stride])
	}
	return out
}

// Row returns the values of the k-th item of u for dimension dim.
func (u *Upload) Row(k, dim int) []float32 { return u.Values[k*dim : (k+1)*dim] }
