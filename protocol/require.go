package protocol

import (
	"fmt"
	"math"
)

// Need is what a client requires of a broadcast before it reads it: the
// shape of its catalog and which optional fields it will index. A client
// checks every broadcast with Require before use, so that a hostile or
// broken server gets an error, never a panic in the client's process.
type Need struct {
	// Dim and NumItems are the latent dimension and catalog size the
	// client was built for; the broadcast must carry exactly these.
	Dim, NumItems int
	// V asks for item factors: len(Items)·Dim of them, or, with Whole,
	// every item's (Items nil, NumItems·Dim values).
	V, Whole bool
	// Counts asks for one count per row, none negative.
	Counts bool
	// AuxDim, when positive, asks for Aux with exactly this AuxDim.
	AuxDim int
	// Params names parameters that must be present.
	Params []string
	// Words bounds the words a masked round may ask for: the most the
	// client sends in it (0: the round is not masked). A transport
	// allocates Words per client, so a hostile count must not get
	// through.
	Words int
}

// Require checks b against n and that b is well formed (Validate): the
// round is not negative, V, Aux and every parameter are finite, and the
// fields n asks for are present and sized. The error wraps ErrMessage.
func (b *Broadcast) Require(n Need) error {
	if b == nil {
		return fmt.Errorf("%w: no broadcast", ErrMessage)
	}
	if err := b.Validate(); err != nil {
		return err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: broadcast round %d (%s): %s", ErrMessage, b.Round, b.Phase, fmt.Sprintf(format, args...))
	}
	switch {
	case b.Round < 0:
		return bad("negative round")
	case b.Dim != n.Dim || b.NumItems != n.NumItems:
		return bad("%d items × %d, the client expects %d × %d", b.NumItems, b.Dim, n.NumItems, n.Dim)
	case n.V && b.V == nil && b.Rows()*b.Dim > 0:
		return bad("no V")
	case n.Whole && b.Items != nil:
		return bad("V covers %d of %d items, the client needs them all", len(b.Items), b.NumItems)
	case n.Counts && b.Counts == nil && b.Rows() > 0:
		return bad("no counts")
	case n.AuxDim > 0 && b.AuxDim != n.AuxDim:
		return bad("AuxDim %d, want %d", b.AuxDim, n.AuxDim)
	case n.AuxDim > 0 && b.Aux == nil && b.Rows() > 0:
		return bad("no Aux")
	case b.Words > n.Words:
		return bad("asks for %d words, the client sends at most %d", b.Words, n.Words)
	}
	for _, name := range n.Params {
		if _, ok := b.Params[name]; !ok {
			return bad("no parameter %q", name)
		}
	}
	for name, x := range b.Params {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return bad("parameter %q is %v", name, x)
		}
	}
	if k, ok := nonFinite(b.V); !ok {
		return bad("V[%d] is %v", k, b.V[k])
	}
	if k, ok := nonFinite(b.Aux); !ok {
		return bad("Aux[%d] is %v", k, b.Aux[k])
	}
	for k, c := range b.Counts {
		if c < 0 {
			return bad("Counts[%d] = %d", k, c)
		}
	}
	return nil
}

// nonFinite returns the first index of a NaN or infinite value of x and
// false, or true when every value is finite.
func nonFinite(x []float32) (int, bool) {
	for k, v := range x {
		if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
			return k, false
		}
	}
	return 0, true
}
