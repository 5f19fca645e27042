package protocol

import (
	"fmt"
	"math"
	"strings"
)

// Aggregation is how the server receives a round's uploads.
type Aggregation int

const (
	// AggOff: the server reads every client's upload.
	AggOff Aggregation = iota
	// AggIdeal: the ideal functionality of secure aggregation
	// (SecureSum): the server receives only per-item sums of the float
	// uploads. It is exact in process; a deployment must realize it.
	AggIdeal
	// AggMasked: secure aggregation for real (package secagg, SecAgg+):
	// each client uploads an integer vector mod 2^Bits over every
	// coordinate of the round, masked so that only the sum can be
	// recovered (MaskedSum).
	AggMasked
)

// String returns "off", "ideal" or "masked".
func (a Aggregation) String() string {
	switch a {
	case AggOff:
		return "off"
	case AggIdeal:
		return "ideal"
	case AggMasked:
		return "masked"
	}
	return fmt.Sprintf("Aggregation(%d)", int(a))
}

// ParseAggregation reads "off", "ideal" or "masked"; "false" and "true",
// the values of the boolean secagg of earlier versions, mean off and
// ideal.
func ParseAggregation(s string) (Aggregation, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "off", "false":
		return AggOff, nil
	case "ideal", "true":
		return AggIdeal, nil
	case "masked":
		return AggMasked, nil
	}
	return 0, fmt.Errorf("aggregation %q: want masked, ideal or off", s)
}

// Secure reports whether the server sees only sums.
func (a Aggregation) Secure() bool { return a != AggOff }

// SecureIf returns AggIdeal when secure is set and AggOff otherwise.
func SecureIf(secure bool) Aggregation {
	if secure {
		return AggIdeal
	}
	return AggOff
}

// ParamMinShare is the Broadcast.Params key a deployment sets, in a masked
// round, to the smallest fraction ρ of an item's raters whose noise shares
// must arrive for the round to be released: a client then draws its share
// of distributed noise among ⌊ρ·n⌋ rather than n raters, so that any ρ·n
// arriving shares carry the calibrated noise (more arriving only add
// noise). Absent, ρ is 1.
const ParamMinShare = "secagg-min-share"

// ParamRoster is the Broadcast.Params key a deployment sets, in a masked
// round, to a number R of clients that calibrates the round's noise in
// place of any count the server announces (an item's raters, the clients
// counted at setup): every client then adds to every noised coordinate of
// its dense vector — whether or not it has data there — a Skellam share
// drawn for ⌊ρ·R⌋ clients (ρ = ParamMinShare), so that any ⌊ρ·R⌋ shares
// in the sum carry the calibrated noise. Clients that pin R (the certified
// roster of secagg's active protocol) refuse a larger one, so a server
// cannot shrink the shares by announcing counts. Absent, methods
// calibrate by their own counts.
const ParamRoster = "secagg-roster"

// Roster returns b's ParamRoster, 0 when absent or not a positive whole
// number.
func Roster(b *Broadcast) int {
	r := b.Param(ParamRoster, 0)
	if !(r >= 1 && r <= 1<<31 && r == math.Floor(r)) {
		return 0
	}
	return int(r)
}

// MinShare returns b's ParamMinShare ρ, 1 when absent or outside (0, 1].
func MinShare(b *Broadcast) float64 {
	rho := b.Param(ParamMinShare, 1)
	if !(rho > 0 && rho <= 1) {
		return 1
	}
	return rho
}

// NoiseShares returns the number of clients a client's noise share in b's
// round is drawn for: ⌊ρ·N⌋, at least 1, with ρ = MinShare(b) and N the
// roster when b carries one (Roster), else n, the method's own count.
func NoiseShares(b *Broadcast, n int) int {
	if r := Roster(b); r > 0 {
		n = r
	}
	return max(1, int(math.Floor(MinShare(b)*float64(n))))
}

// SumInputsSetter is a method server that wants to know how many clients'
// masked vectors a round's single summed upload holds (a figure the
// secure-aggregation protocol knows and the sum does not show).
// RunTransport calls SetSumInputs just before Aggregate of such a round,
// with the same figure it passes to SumChecker.CheckSum.
type SumInputsSetter interface {
	SetSumInputs(round, inputs int)
}

// NoiseCoverage is implemented by a method server whose masked rounds
// tell it how many clients' noise shares arrived (an arrival count in the
// summed words). After Aggregate, NoiseCoverage returns, for the last
// round, the fraction of its calibrated noise that arrived when every
// client drew its share for a fraction rho of the clients
// (ParamMinShare; 1 when absent), capped at 1, and the ε at the method's
// δ of that round alone with the noise that arrived. ok is false when the
// round carried no noise, and after a round that folded no sum (one its
// SumChecker refused: RoundInfo.Rejected).
//
// The arrival counts are words of the masked sum like any other, so the
// figure assumes every client in the sum sends its arrival word exactly
// where it adds its noise share. A SumChecker refuses sums whose arrivals
// exceed the number of masked inputs or the counts announced at setup,
// which bounds what a lying client can make the figure read; each
// method's NoiseCoverage says what remains.
type NoiseCoverage interface {
	NoiseCoverage(rho float64) (coverage, eps float64, ok bool)
}

// Spent is a server that accounts, by the method's own accountant, the
// privacy its released rounds spent so far with the noise that actually
// arrived (Rényi DP for the integer path, at the method's δ). ok is false
// when the method does not account on the server.
type Spent interface {
	Spent() (eps, delta float64, ok bool)
}

// RoundSpent is a server that reports the ε of the round it aggregated
// last, taken alone, by the method's own accountant at the δ Spent
// reports (0 for a pure-DP method). ok is false when that round released
// nothing private (a setup round, a skipped or refused one).
type RoundSpent interface {
	RoundSpent() (eps float64, ok bool)
}
