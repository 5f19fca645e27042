package ratings

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/privrec/privrec/rng"
)

// ErrBadParameter is wrapped by the errors of splits, filters, partitions
// and the synthetic generator when a parameter is out of range.
var ErrBadParameter = errors.New("bad parameter")

// Stream labels for rng.New: each random operation of this package draws
// from its own stream, so that, for example, a holdout and a k-fold split
// with the same seed are independent.
const (
	streamHoldout uint64 = 0x7261_7469_6e67_0001 + iota // "rating" + n
	streamLeaveKOut
	streamKFold
	streamSubsample
	streamPartitionUsers
	streamPartitionItems
	streamSynthetic
	streamValidation
)

// Split is a train/test pair in one index space: user u and item i mean
// the same thing in Train, Test and the dataset they were split from.
type Split struct{ Train, Test *Dataset }

func badParam(format string, args ...any) error {
	return fmt.Errorf("ratings: %w: %s", ErrBadParameter, fmt.Sprintf(format, args...))
}

// Holdout splits the ratings of d at random into a training set of
// round(trainFrac · Len) ratings and a test set of the rest. Every subset of
// that size is equally likely. Both sets keep the order of d. trainFrac must
// lie in (0, 1) and both sets must be non-empty.
func Holdout(d *Dataset, trainFrac float64, seed uint64) (Split, error) {
	if !(trainFrac > 0 && trainFrac < 1) { // also rejects NaN
		return Split{}, badParam("holdout: train fraction %g not in (0,1)", trainFrac)
	}
	n := d.Len()
	nTrain := int(math.Round(trainFrac * float64(n)))
	if nTrain == 0 || nTrain == n {
		return Split{}, badParam("holdout: train fraction %g of %d ratings leaves an empty train or test set", trainFrac, n)
	}
	r := rng.New(seed, streamHoldout)
	train := make([]int, 0, nTrain)
	test := make([]int, 0, n-nTrain)
	// Selection sampling (Knuth's Algorithm S): rating k goes to train with
	// probability (train places left) / (ratings left), which picks a
	// uniformly random subset of exactly nTrain ratings in one pass.
	need := nTrain
	for k := 0; k < n; k++ {
		if r.IntN(n-k) < need {
			train = append(train, k)
			need--
		} else {
			test = append(test, k)
		}
	}
	return Split{Train: d.Subset(train), Test: d.Subset(test)}, nil
}

// LeaveKOut moves k random ratings of each user to the test set and keeps
// the rest in the training set. A user with k or fewer ratings keeps all of
// them in the training set and has no test ratings, so that every test user
// can be modelled. The HDPMF protocol is LeaveKOut(MinCounts(d, 20, 0), 10,
// seed). It fails if k < 1 or no user has more than k ratings.
func LeaveKOut(d *Dataset, k int, seed uint64) (Split, error) {
	if k < 1 {
		return Split{}, badParam("leave-k-out: k = %d, want k >= 1", k)
	}
	byUser := d.ByUser()
	r := rng.New(seed, streamLeaveKOut)
	inTest := make([]bool, d.Len())
	nTest := 0
	for u := 0; u < byUser.Rows(); u++ {
		a, b := byUser.Ptr[u], byUser.Ptr[u+1]
		if b-a <= k {
			continue
		}
		selectK(r, byUser.Pos[a:b], k, inTest)
		nTest += k
	}
	if nTest == 0 {
		return Split{}, badParam("leave-k-out: k = %d, but no user has more than %d ratings", k, k)
	}
	return splitMask(d, inTest, nTest), nil
}

// LeaveOneOut is LeaveKOut with k = 1.
func LeaveOneOut(d *Dataset, seed uint64) (Split, error) {
	return LeaveKOut(d, 1, seed)
}

// selectK marks k uniformly chosen positions of pos in mark, by selection
// sampling over the row.
func selectK(r *rand.Rand, pos []int32, k int, mark []bool) {
	n := len(pos)
	for j := 0; j < n && k > 0; j++ {
		if r.IntN(n-j) < k {
			mark[pos[j]] = true
			k--
		}
	}
}

// splitMask returns the ratings not marked as Train and the marked ones as
// Test, both in the order of d.
func splitMask(d *Dataset, inTest []bool, nTest int) Split {
	train := make([]int, 0, d.Len()-nTest)
	test := make([]int, 0, nTest)
	for k, t := range inTest {
		if t {
			test = append(test, k)
		} else {
			train = append(train, k)
		}
	}
	return Split{Train: d.Subset(train), Test: d.Subset(test)}
}

// KFold assigns the ratings of d at random to k folds whose sizes differ by
// at most one and returns k splits: split f has fold f as its Test set and
// the other folds as its Train set. Every rating is in exactly one Test set.
// k must lie in [2, Len].
func KFold(d *Dataset, k int, seed uint64) ([]Split, error) {
	n := d.Len()
	if k < 2 || k > n {
		return nil, badParam("k-fold: k = %d, want 2 <= k <= %d (the number of ratings)", k, n)
	}
	// Balanced labels 0..k-1, shuffled: a uniformly random assignment
	// among those with fold sizes floor(n/k) or ceil(n/k).
	fold := make([]int32, n)
	for j := range fold {
		fold[j] = int32(j % k)
	}
	r := rng.New(seed, streamKFold)
	for i := n - 1; i > 0; i-- { // Fisher-Yates
		j := r.IntN(i + 1)
		fold[i], fold[j] = fold[j], fold[i]
	}

	size := make([]int, k)
	for _, f := range fold {
		size[f]++
	}
	splits := make([]Split, k)
	train := make([]int, 0, n)
	test := make([]int, 0, n/k+1)
	for f := range splits {
		train, test = train[:0], test[:0]
		for j, g := range fold {
			if int(g) == f {
				test = append(test, j)
			} else {
				train = append(train, j)
			}
		}
		splits[f] = Split{Train: d.Subset(train), Test: d.Subset(test)}
	}
	return splits, nil
}

// SubsampleUsers keeps round(frac · n_u), but at least one, random ratings
// of every user u with n_u ratings and drops the others, for sparsity
// sweeps (HDPMF Fig. 6-7). The result shares d's index space and keeps its
// order. frac must lie in (0, 1]; frac = 1 returns a copy of d.
func SubsampleUsers(d *Dataset, frac float64, seed uint64) (*Dataset, error) {
	if !(frac > 0 && frac <= 1) {
		return nil, badParam("subsample users: fraction %g not in (0,1]", frac)
	}
	byUser := d.ByUser()
	r := rng.New(seed, streamSubsample)
	keep := make([]bool, d.Len())
	nKeep := 0
	for u := 0; u < byUser.Rows(); u++ {
		a, b := byUser.Ptr[u], byUser.Ptr[u+1]
		if a == b {
			continue
		}
		m := max(1, int(math.Round(frac*float64(b-a))))
		selectK(r, byUser.Pos[a:b], m, keep)
		nKeep += m
	}
	idx := make([]int, 0, nKeep)
	for k, ok := range keep {
		if ok {
			idx = append(idx, k)
		}
	}
	return d.Subset(idx), nil
}
