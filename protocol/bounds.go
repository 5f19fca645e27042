package protocol

import "errors"

// Bounds on unmasked sums. Under secure aggregation (AggMasked) the server
// never sees one client's vector, so without per-client range proofs it
// cannot check that each client's words are in range: one client adding
// 2^28 to a coordinate moves every value of V it touches, and one client
// inflating its arrival words makes the noise look complete. What the
// server can check is the sum: honest clients quantize their contributions
// to a bounded range and add noise shares whose sum has a known law, so
// every coordinate of an honest sum lies within a bound that fails only
// with a stated (tiny) probability. A sum outside it came from at least
// one client that is not honest; the round releases nothing.
//
// What stays unverifiable: a hostile client whose words keep the sum
// within the bounds. It can still add up to the slack of each bound (at
// most the honest clients' own maximal contribution, arrivals × clip ×
// scale, plus the noise tail), omit its noise share, set arrival words for
// items it did not rate (up to the announced counts), or inflate the
// setup counts up to the number of setup inputs, which thins every honest
// client's noise share. Only per-client range proofs (or trusted
// clients) close that.

// ErrOutOfBounds marks an aggregate that honest clients could not have
// produced (except with the stated tail probability); the round releases
// nothing.
var ErrOutOfBounds = errors.New("protocol: sum out of bounds")

// SumTail is the probability, per round, that a SumChecker of this module
// refuses a sum that honest clients produced: its noise bounds hold for
// every coordinate of the round at once except with at most this
// probability (a union bound over the round's coordinates), and its other
// bounds hold always.
const SumTail = 0x1p-40

// SumChecker is a server of masked rounds that can check an unmasked sum
// before folding it. CheckSum must not change the server's state; it
// returns an error wrapping ErrOutOfBounds naming the first violated bound
// (round, word index, item, value, bound).
//
// round is the round whose Broadcast the server last returned; sum is the
// transport's single summed upload (Client −1, Words the dense sum mod
// 2^Bits); inputs is the number of masked vectors in the sum (the
// secure-aggregation protocol knows it; see SumInputs). An error that
// does not wrap ErrOutOfBounds (a malformed sum) stops the run.
type SumChecker interface {
	CheckSum(round int, sum *Upload, inputs int) error
}

// SumInputs is implemented by a transport whose Exchange, in a round
// whose broadcast asks for Words, returns one summed upload: SumInputs
// returns the number of masked vectors in the sum the last Exchange
// returned (the clients whose masked inputs the secure-aggregation
// protocol took). RunTransport passes it to SumChecker.CheckSum; for a
// transport that does not implement it, it passes NumClients, an upper
// bound (the check is then looser, never stricter).
type SumInputs interface {
	SumInputs() int
}

// maskedSum returns the single summed upload of a masked round (Client
// −1 with Words), or nil.
func maskedSum(b *Broadcast, ups []*Upload) *Upload {
	if b.Words <= 0 || len(ups) != 1 || ups[0] == nil || ups[0].Client != -1 || ups[0].Words == nil {
		return nil
	}
	return ups[0]
}
