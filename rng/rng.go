// Package rng gives privrec its random streams.
//
// Experiments need streams that are reproducible bit for bit: New derives a
// ChaCha8 stream from a seed and a path of stream labels (a client index, a
// round, a purpose), so every client, round and purpose gets its own
// independent stream and a result does not depend on how work is scheduled
// across goroutines. Deployment needs noise nobody can predict: Crypto
// returns a generator backed by crypto/rand.
//
// Code that draws noise takes a *rand.Rand and never uses math/rand's
// global functions.
package rng

import (
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"
)

// Seed returns the 32-byte ChaCha8 seed for seed and path. Distinct (seed,
// path) pairs give independent seeds.
func Seed(seed uint64, path ...uint64) [32]byte {
	buf := make([]byte, 0, 8*(len(path)+2))
	buf = binary.LittleEndian.AppendUint64(buf, seed)
	buf = binary.LittleEndian.AppendUint64(buf, uint64(len(path)))
	for _, p := range path {
		buf = binary.LittleEndian.AppendUint64(buf, p)
	}
	return sha256.Sum256(buf)
}

// New returns a reproducible generator for seed and path.
func New(seed uint64, path ...uint64) *rand.Rand {
	return rand.New(rand.NewChaCha8(Seed(seed, path...)))
}

// Crypto returns a generator whose every draw comes from crypto/rand, for
// noise in deployment. It is slower than New and cannot be replayed.
func Crypto() *rand.Rand { return rand.New(cryptoSource{}) }

type cryptoSource struct{}

func (cryptoSource) Uint64() uint64 {
	var b [8]byte
	crand.Read(b[:]) // crypto/rand.Read never returns an error (Go 1.24+).
	return binary.LittleEndian.Uint64(b[:])
}
