package topn

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
)

// easeReference is EASE as first written (before the in-place inverse,
// the compaction of items without interactions and the parallel
// Gramian): a mat.Cholesky of the whole Gramian and its InverseTo. It is
// the yardstick of TestEASEMatchesReference and BenchmarkEASE.
func easeReference(train *ratings.Dataset, lambda float64) (*model.Model, error) {
	n, nu := train.NumItems(), train.NumUsers()
	rows := binaryRows(train.ByUser())
	g := mat.NewSymDense(n, nil)
	raw := g.RawSymmetric().Data
	for _, r := range rows {
		for a, i := range r {
			row := raw[int(i)*n:]
			for _, j := range r[a:] {
				row[j]++
			}
		}
	}
	for i := range n {
		raw[i*n+i] += lambda
	}
	var ch mat.Cholesky
	if !ch.Factorize(g) {
		return nil, errors.New("ease: Gram matrix not positive definite")
	}
	var p mat.SymDense
	if err := ch.InverseTo(&p); err != nil {
		return nil, err
	}
	v := make([]float32, n*n)
	for i := range n {
		pii := p.At(i, i)
		vi := v[i*n : i*n+n]
		for j := range n {
			if j != i {
				vi[j] = float32(-p.At(j, i) / pii)
			}
		}
	}
	u := make([]float32, nu*n)
	for k, r := range rows {
		for _, i := range r {
			u[k*n+int(i)] = 1
		}
	}
	return &model.Model{Dim: n, NumUsers: nu, NumItems: n, U: u, V: v, Ranking: true, Scale: train.Scale}, nil
}

// randomBinary returns users × items one-class ratings with a skewed item
// popularity (item i drawn with weight 1/(i+1)), the last empty items
// having no rating at all, and duplicate (user, item) pairs, which EASE
// must count once.
func randomBinary(users, items, perUser, empty int, seed uint64) *ratings.Dataset {
	r := rand.New(rand.NewPCG(seed, 7))
	b := ratings.NewBuilder("random", ratings.Scale{Min: 1, Max: 5, Step: 1})
	// Name every item first so that the empty ones exist in the index.
	for i := range items {
		b.Add("u0", "i"+strconv.Itoa(i), 1)
	}
	live := items - empty
	for u := 1; u < users; u++ {
		for range 1 + r.IntN(2*perUser) {
			i := int(float64(live) * math.Pow(r.Float64(), 2))
			b.Add("u"+strconv.Itoa(u), "i"+strconv.Itoa(i), float32(1+r.IntN(5)))
		}
	}
	d := b.Dataset()
	// Drop user u0's ratings of the empty items: keep them in the index only.
	var keep []int
	for k := range d.Len() {
		if int(d.Items[k]) < live || d.Users[k] != 0 {
			keep = append(keep, k)
		}
	}
	return d.Subset(keep)
}

// TestEASEMatchesReference: the fast EASE gives the first version's item
// factors up to float32 rounding, with any number of workers, and the
// items without a training interaction get zero scores.
func TestEASEMatchesReference(t *testing.T) {
	for _, tc := range []struct {
		users, items, perUser, empty, workers int
		lambda                                float64
	}{
		{users: 60, items: 40, perUser: 6, empty: 0, workers: 1, lambda: 5},
		{users: 200, items: 150, perUser: 12, empty: 17, workers: 3, lambda: 50},
		{users: 300, items: 257, perUser: 20, empty: 60, workers: 0, lambda: 500},
	} {
		t.Run(fmt.Sprintf("%dx%d-empty%d-w%d", tc.users, tc.items, tc.empty, tc.workers), func(t *testing.T) {
			d := randomBinary(tc.users, tc.items, tc.perUser, tc.empty, uint64(tc.items))
			if d.NumItems() != tc.items {
				t.Fatalf("%d items in the index, want %d", d.NumItems(), tc.items)
			}
			ref, err := easeReference(d, tc.lambda)
			if err != nil {
				t.Fatal(err)
			}
			got, err := easeWorkers(context.Background(), d, tc.lambda, tc.workers)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.U, ref.U) {
				t.Fatal("user factors differ")
			}
			var maxAbs, maxDiff float64
			for k := range ref.V {
				maxAbs = max(maxAbs, math.Abs(float64(ref.V[k])))
				maxDiff = max(maxDiff, math.Abs(float64(got.V[k]-ref.V[k])))
			}
			if maxAbs == 0 || maxDiff > 1e-5*maxAbs {
				t.Errorf("item factors differ by up to %g (largest |B| %g)", maxDiff, maxAbs)
			}
			for i := tc.items - tc.empty; i < tc.items; i++ {
				for u := range int32(d.NumUsers()) {
					if s := got.PredictRaw(u, int32(i)); s != 0 {
						t.Fatalf("item %d without interactions scores %v for user %d", i, s, u)
					}
				}
			}
		})
	}
}

// BenchmarkEASE fits EASE on 1,500 items (1,400 with interactions) and
// 3,000 users, with the first version (reference) and the current one.
func BenchmarkEASE(b *testing.B) {
	d := randomBinary(3000, 1500, 40, 100, 1)
	b.Run("reference", func(b *testing.B) {
		for range b.N {
			if _, err := easeReference(d, 500); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("current", func(b *testing.B) {
		for range b.N {
			if _, err := EASE(context.Background(), d, 500); err != nil {
				b.Fatal(err)
			}
		}
	})
}
