package shard

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/privrec/privrec/secagg"
)

// TestUnmaskWorkers checks the parallel Unmask against expanding the
// streams one by one, for stream counts around the worker count.
func TestUnmaskWorkers(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 2, 3, 17} {
		streams := make([]secagg.MaskStream, n)
		for i := range streams {
			for j := range streams[i].Key {
				streams[i].Key[j] = byte(r.Uint32())
			}
			streams[i].Sub = i%2 == 0
		}
		sum := make([]uint32, 1003)
		for i := range sum {
			sum[i] = r.Uint32()
		}
		want := slices.Clone(sum)
		for _, s := range streams {
			addRange(want, &s.Key, 77, s.Sub)
		}
		for i := range want {
			want[i] &= 1<<20 - 1
		}
		Unmask(sum, 77, streams, 20)
		if !slices.Equal(sum, want) {
			t.Fatalf("%d streams: parallel Unmask differs", n)
		}
	}
}

// addRange adds (sub=false) or subtracts words [off, off+len(dst)) of
// key's mask stream into dst: the tests' reference for a shard's range.
func addRange(dst []uint32, key *[16]byte, off int, sub bool) {
	if err := secagg.AddMaskRange(dst, key, off, sub); err != nil {
		panic(err)
	}
}
