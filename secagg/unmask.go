package secagg

import (
	"bytes"
	"crypto/ecdh"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/cloudflare/circl/dh/x25519"
)

// The server's unmasking (Result) in three passes, each spread over
// GOMAXPROCS workers that take the next piece of work from a counter:
//
//  1. reconstruct every needed seed, in batches of recoverBatch seeds that
//     share one field inversion (lagrange.go);
//  2. derive the PRG key of every mask to remove: one self mask per
//     survivor, one pairwise mask per (dropped client, surviving
//     neighbour), the X25519 agreements through circl's assembly;
//  3. expand the keys and add them into the sum, each worker owning a
//     range of coordinates (rangeWords) and expanding every key over its
//     range only (expander.addAt), straight into the sum: no accumulator
//     per worker, nothing allocated per client.
//
// Addition modulo 2^32 commutes, and every pass computes the same values
// as a straightforward loop over the clients (resultReference in the
// tests), so the result has the same bits.

const (
	recoverBatch = 64
	keyBatch     = 16
	// rangeWords is the length of the coordinate range a worker expands
	// every key over: a multiple of 4 (whole AES blocks), small enough
	// that the range of the sum stays in L1/L2 while all keys go by.
	rangeWords = 4096
)

// unmaskPlan lists what Result removes.
type unmaskPlan struct {
	p       *Params
	owners  []uint32    // survivors (self masks), then dropped clients (mask keys)
	sets    []*shareSet // their revealed shares, by owner
	nSelf   int         // owners[:nSelf] are survivors
	survOff []int       // dropped owner k's surviving neighbours: surv[survOff[k]:survOff[k+1]]
	surv    []uint32
	keys    []*AdvertiseKeys
}

// spread runs f(w, i) for i in [0, n) on GOMAXPROCS workers, w being
// the worker's index, and returns the number of workers.
func spread(n int, f func(w, i int)) int {
	workers := max(1, min(runtime.GOMAXPROCS(0), n))
	if workers == 1 {
		for i := range n {
			f(0, i)
		}
		return 1
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				f(w, i)
			}
		}()
	}
	wg.Wait()
	return workers
}

// maskKeys reconstructs the seeds and derives the keys of every mask of
// the plan: the self masks first, in owner order, then the pairwise masks
// of each dropped client with its surviving neighbours. It returns the
// error of the first owner (in plan order) whose masks cannot be derived,
// and every such owner. An owner with more than T shares is also
// reconstructed from its last T: two subsets that disagree mean shares
// that do not lie on one polynomial.
func (u *unmaskPlan) maskKeys() ([]MaskStream, []uint32, error) {
	n := len(u.owners)
	seeds := make([][SeedSize]byte, n)
	errs := make([]error, n)
	lag := make([]*lagrange, runtime.GOMAXPROCS(0))
	spread((n+recoverBatch-1)/recoverBatch, func(w, b int) {
		if lag[w] == nil {
			lag[w] = newLagrange(u.p.T)
		}
		lo, hi := b*recoverBatch, min(n, (b+1)*recoverBatch)
		lag[w].recover(u.sets[lo:hi], seeds[lo:hi], errs[lo:hi])
	})
	u.crossCheck(seeds, errs, lag)

	keys := make([]MaskStream, u.nSelf+len(u.surv))
	spread((n+keyBatch-1)/keyBatch, func(_, b int) {
		for k := b * keyBatch; k < min(n, (b+1)*keyBatch); k++ {
			if k < u.nSelf {
				if errs[k] != nil {
					errs[k] = fmt.Errorf("self mask of %d: %w", u.owners[k], errs[k])
					continue
				}
				keys[k] = MaskStream{Key: selfMaskKey(&seeds[k], &u.p.Seed, u.owners[k]), Sub: true}
				continue
			}
			errs[k] = u.pairwise(k-u.nSelf, &seeds[k], errs[k], keys[u.nSelf:])
		}
	})
	var bad []uint32
	var first error
	for k, err := range errs {
		if err != nil {
			bad = append(bad, u.owners[k])
			if first == nil {
				first = err
			}
		}
	}
	if first != nil {
		return nil, bad, first
	}
	return keys, nil, nil
}

// crossCheck reconstructs again, from its last T shares, every seed that
// has more than T, and marks (errs) those whose two reconstructions
// differ: their dealer's shares do not lie on one polynomial of degree
// T−1, so which seed is "the" seed depends on who revealed.
func (u *unmaskPlan) crossCheck(seeds [][SeedSize]byte, errs []error, lag []*lagrange) {
	var idx []int
	var alt []*shareSet
	for k, set := range u.sets {
		if n := len(set.holders); errs[k] == nil && n > u.p.T {
			idx = append(idx, k)
			alt = append(alt, &shareSet{holders: set.holders[n-u.p.T:], values: set.values[n-u.p.T:]})
		}
	}
	if len(alt) == 0 {
		return
	}
	seeds2 := make([][SeedSize]byte, len(alt))
	errs2 := make([]error, len(alt))
	spread((len(alt)+recoverBatch-1)/recoverBatch, func(w, b int) {
		if lag[w] == nil {
			lag[w] = newLagrange(u.p.T)
		}
		lo, hi := b*recoverBatch, min(len(alt), (b+1)*recoverBatch)
		lag[w].recover(alt[lo:hi], seeds2[lo:hi], errs2[lo:hi])
	})
	for j, k := range idx {
		if errs2[j] != nil || seeds2[j] != seeds[k] {
			errs[k] = fmt.Errorf("%w: the committed shares of %d do not lie on one polynomial", ErrShares, u.owners[k])
		}
	}
}

// removeMasks removes the masks of keys from sum, which holds words
// [off, off+len(sum)) of the masked sum: each worker takes a range of
// coordinates at a time and expands every key over it only.
func removeMasks(sum []uint32, off int, keys []MaskStream) {
	nr := (len(sum) + rangeWords - 1) / rangeWords
	e := make([]*expander, runtime.GOMAXPROCS(0))
	spread(nr, func(w, r int) {
		if e[w] == nil {
			e[w] = expanders.Get().(*expander)
		}
		lo, hi := r*rangeWords, min(len(sum), (r+1)*rangeWords)
		for i := range keys {
			e[w].addAt(sum[lo:hi], &keys[i].Key, off+lo, keys[i].Sub)
		}
	})
	for _, x := range e {
		if x != nil {
			expanders.Put(x)
		}
	}
}

// pairwise derives the keys of the pairwise masks between dropped owner d
// and its surviving neighbours into keys[survOff[d]:survOff[d+1]] (Sub:
// whether the survivor added the mask), from the seed
// of its mask key, or returns the error that stops Result.
func (u *unmaskPlan) pairwise(d int, seed *[SeedSize]byte, err error, keys []MaskStream) error {
	v := u.owners[u.nSelf+d]
	if err != nil {
		return fmt.Errorf("mask key of %d: %w", v, err)
	}
	priv := maskKeyFromSeed(seed, &u.p.Seed)
	if !bytes.Equal(priv.PublicKey().Bytes(), u.keys[v].MaskKey) {
		return fmt.Errorf("%w: reconstructed mask key of %d does not match its public key", ErrShares, v)
	}
	var secret, pub, shared x25519.Key
	copy(secret[:], priv.Bytes())
	for i := u.survOff[d]; i < u.survOff[d+1]; i++ {
		w := u.surv[i]
		copy(pub[:], u.keys[w].MaskKey)
		if len(u.keys[w].MaskKey) != KeySize || !x25519.Shared(&shared, &secret, &pub) || shared == (x25519.Key{}) {
			// Rare (a malformed or low-order key): crypto/ecdh gives the
			// error the reference path gives.
			pk, err := ecdh.X25519().NewPublicKey(u.keys[w].MaskKey)
			if err != nil {
				return err
			}
			k, err := pairwiseKey(priv, pk, &u.p.Seed, v, w)
			if err != nil {
				return err
			}
			keys[i] = MaskStream{Key: k, Sub: w < v}
			continue
		}
		// As pairwiseKey, from the same X25519 shared secret.
		// w added the mask if w < v, subtracted it otherwise.
		keys[i] = MaskStream{Key: key16(shared[:], u.p.Seed[:], pairInfo("pairwise mask", min(v, w), max(v, w))), Sub: w < v}
	}
	return nil
}
