package shard

import (
	"bytes"
	"testing"
)

// FuzzDecoders feeds arbitrary bytes to the decoders of what crosses the
// network (a commit, the mask streams, a checkpoint): they return an
// error or a value that encodes back to the same bytes, never panic.
func FuzzDecoders(f *testing.F) {
	f.Add(encodeCommit(3, 7, make([][32]byte, 2)), 2)
	f.Add(encodeStreams(nil), 1)
	f.Add(make([]byte, 17), 1)
	f.Add([]byte{1, 0, 0, 0, 2, 0xff, 1, 2, 3, 4}, 3)
	f.Fuzz(func(t *testing.T, b []byte, shards int) {
		shards = 1 + (shards&0x7fffffff)%8
		if r, u, d, err := decodeCommit(b, shards); err == nil {
			if !bytes.Equal(encodeCommit(r, u, d), b) {
				t.Fatal("commit does not round-trip")
			}
		}
		if st, err := decodeStreams(b); err == nil {
			if !bytes.Equal(encodeStreams(st), b) {
				t.Fatal("mask streams do not round-trip")
			}
		}
		if ck, err := decodeCheckpoint(b, 8*shards, 1); err == nil {
			if !bytes.Equal(ck.encode(), b) {
				t.Fatal("checkpoint does not round-trip")
			}
		}
	})
}
