package secagg

import (
	"errors"
	"fmt"
	"io"

	"github.com/cloudflare/circl/group"
	"github.com/cloudflare/circl/secretsharing"
)

// Shamir sharing uses circl's secretsharing over the scalar field of
// Ristretto255 (a prime of 253 bits): a 16-byte seed, read as a
// little-endian integer, is a scalar, and the share for client v is the
// polynomial evaluated at v+1.
var field = group.Ristretto255

// ErrShares is returned (wrapped) when shares do not reconstruct a valid
// seed: some share was wrong.
var ErrShares = errors.New("secagg: shares are inconsistent")

func seedScalar(seed *[SeedSize]byte) group.Scalar {
	var b [ShareSize]byte
	copy(b[:], seed[:])
	s := field.NewScalar()
	if err := s.UnmarshalBinary(b[:]); err != nil {
		panic(err) // unreachable: 2^128 is far below the group order
	}
	return s
}

func shareX(v uint32) group.Scalar { return field.NewScalar().SetUint64(uint64(v) + 1) }

// shareSeed returns Shamir shares of seed with threshold t (any t of them
// recover it) for the holders ids, in order.
func shareSeed(rand io.Reader, seed *[SeedSize]byte, t int, ids []uint32) ([][]byte, error) {
	ss := secretsharing.New(rand, uint(t-1), seedScalar(seed))
	out := make([][]byte, len(ids))
	for i, v := range ids {
		b, err := ss.ShareWithID(shareX(v)).Value.MarshalBinary()
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

// recoverSeed reconstructs a seed from at least t shares, the share of
// holders[i] being values[i]. Holders must be distinct.
func recoverSeed(t int, holders []uint32, values [][]byte) ([SeedSize]byte, error) {
	var seed [SeedSize]byte
	if len(holders) < t {
		return seed, fmt.Errorf("secagg: %d shares, need %d", len(holders), t)
	}
	sh := make([]secretsharing.Share, t)
	for i := range sh {
		v := field.NewScalar()
		if err := v.UnmarshalBinary(values[i]); err != nil {
			return seed, fmt.Errorf("%w: share from %d is not a scalar", ErrShares, holders[i])
		}
		sh[i] = secretsharing.Share{ID: shareX(holders[i]), Value: v}
	}
	s, err := secretsharing.Recover(uint(t-1), sh)
	if err != nil {
		return seed, err
	}
	b, err := s.MarshalBinary()
	if err != nil {
		return seed, err
	}
	for _, x := range b[SeedSize:] {
		if x != 0 {
			return seed, fmt.Errorf("%w: reconstructed value is not a seed", ErrShares)
		}
	}
	copy(seed[:], b)
	return seed, nil
}
