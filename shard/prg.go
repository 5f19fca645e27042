package shard

import "github.com/privrec/privrec/secagg"

// Unmask removes the mask streams from sum, which holds the words
// [off, off+len(sum)) of the sum of the masked inputs, and reduces it
// modulo 2^bits, in place, on every core (secagg.RemoveMasks).
func Unmask(sum []uint32, off int, streams []secagg.MaskStream, bits int) {
	if err := secagg.RemoveMasks(sum, off, streams); err != nil {
		panic(err) // unreachable: offsets are shard starts, never negative
	}
	mask := uint32(1<<bits - 1)
	for i := range sum {
		sum[i] &= mask
	}
}
