package protocol

import (
	"context"
	"fmt"

	"github.com/privrec/privrec/rng"
)

// MaskedSum wraps a transport so that, in a round whose broadcast asks
// for dense integer uploads (Broadcast.Words), the server receives only
// the sum mod 2^Bits of the clients' Words, as one upload with Client =
// −1: secure aggregation for real (AggMasked). Rounds without Words are
// summed as SecureSum does.
//
// With Protocol set, the sum is computed by running a secure-aggregation
// protocol in process (secagg.SimulateSum runs package secagg's SecAgg+:
// every uploading client advertises keys, shares its seeds with its
// neighbours, masks its vector, and the server unmasks the sum). Without
// it, MaskedSum adds the vectors mod 2^Bits directly: the secagg tests
// show the protocol's result is exactly that sum, so the server's output
// is the same bytes, at a fraction of the cost, which is what
// experiments use. Package protocol itself carries no cryptography.
type MaskedSum struct {
	inner Transport
	ideal *SecureSum // sums the rounds without words; its inner is unused
	seed  uint64
	// Protocol, when not nil, runs a secure-aggregation protocol in
	// process for each sum of two or more vectors.
	Protocol SumProtocol

	sum    Upload
	out    [1]*Upload
	inputs int // masked vectors in the last Exchange's sum
}

// SumProtocol computes the sum mod 2^bits of a round's dense integer
// vectors by running a secure-aggregation protocol in process, with the
// round's public seed (of its neighbour graph). secagg.SimulateSum is
// package secagg's SecAgg+.
type SumProtocol func(seed [32]byte, bits int, inputs [][]uint32) ([]uint32, error)

// NewMaskedSum returns inner wrapped so that Exchange returns only sums;
// seed labels the public round seeds of the neighbour graphs.
func NewMaskedSum(inner Transport, seed uint64) *MaskedSum {
	return &MaskedSum{inner: inner, ideal: &SecureSum{}, seed: seed}
}

// NumClients returns the number of clients of the inner transport.
func (m *MaskedSum) NumClients() int { return m.inner.NumClients() }

// Close closes the inner transport.
func (m *MaskedSum) Close() error { return m.inner.Close() }

// SumInputs implements SumInputs: the number of client vectors in the
// sum the last Exchange returned (0 after a round without words).
func (m *MaskedSum) SumInputs() int { return m.inputs }

// Exchange runs the round on the inner transport and returns one summed
// upload (none when no client sent anything). The returned upload is
// reused by the next Exchange.
func (m *MaskedSum) Exchange(ctx context.Context, b *Broadcast) ([]*Upload, error) {
	m.inputs = 0
	ups, err := m.inner.Exchange(ctx, b)
	if err != nil {
		return nil, err
	}
	if b.Words <= 0 {
		return m.ideal.add(b, ups)
	}
	var given []*Upload
	for _, u := range ups {
		if u == nil {
			continue
		}
		if err := u.Validate(b); err != nil {
			return nil, err
		}
		if u.Words == nil || u.Values != nil || u.Counts != nil {
			return nil, fmt.Errorf("%w: upload of client %d round %d: a masked round takes words only", ErrMessage, u.Client, u.Round)
		}
		if u.Items != nil && b.Words%b.NumItems != 0 {
			return nil, fmt.Errorf("%w: upload of client %d round %d: rows of words, and %d words do not split into %d rows", ErrMessage, u.Client, u.Round, b.Words, b.NumItems)
		}
		given = append(given, u)
	}
	if len(given) == 0 {
		return m.out[:0], nil
	}
	var total []uint32
	if m.Protocol != nil && len(given) >= 2 {
		inputs := make([][]uint32, len(given))
		for k, u := range given {
			inputs[k] = u.DenseWords(b)
		}
		if total, err = m.Protocol(rng.Seed(m.seed, streamMaskGraph, uint64(b.Round)), b.Bits, inputs); err != nil {
			return nil, fmt.Errorf("protocol: secure aggregation of round %d: %w", b.Round, err)
		}
	} else {
		total = sumWords(b, given)
	}
	m.sum = Upload{Client: -1, Round: b.Round, Words: total}
	m.inputs = len(given)
	m.out[0] = &m.sum
	return m.out[:], nil
}

// sumWords adds the uploads' (dense) vectors mod 2^Bits: the bytes the
// unmasking of the real protocol yields, without materializing the dense
// vectors of row uploads.
func sumWords(b *Broadcast, ups []*Upload) []uint32 {
	total := make([]uint32, b.Words)
	for _, u := range ups {
		if u.Items == nil {
			for k, x := range u.Words {
				total[k] += x
			}
			continue
		}
		stride := b.Words / b.NumItems
		for k, j := range u.Items {
			dst := total[int(j)*stride : (int(j)+1)*stride]
			for d, x := range u.Words[k*stride : (k+1)*stride] {
				dst[d] += x
			}
		}
	}
	if b.Bits < 32 {
		mask := uint32(1)<<b.Bits - 1
		for k := range total {
			total[k] &= mask
		}
	}
	return total
}

// streamMaskGraph labels the public seeds of the rounds' neighbour graphs.
const streamMaskGraph = 0x4d41534b // "MASK"
