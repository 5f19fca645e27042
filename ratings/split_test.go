package ratings

import (
	"cmp"
	"errors"
	"math"
	"slices"
	"strconv"
	"testing"
)

// triple is one rating for hand-built test datasets.
type triple struct {
	u, i int32
	v    float32
}

// fromTriples builds a dataset over nu users and ni items.
func fromTriples(tb testing.TB, nu, ni int, ts []triple) *Dataset {
	tb.Helper()
	d := &Dataset{Name: "hand", Scale: Stars5}
	for j := 0; j < nu; j++ {
		d.UserIDs = append(d.UserIDs, "u"+strconv.Itoa(j))
	}
	for j := 0; j < ni; j++ {
		d.ItemIDs = append(d.ItemIDs, "i"+strconv.Itoa(j))
		d.ItemTitles = append(d.ItemTitles, "title "+strconv.Itoa(j))
	}
	for _, t := range ts {
		d.Users = append(d.Users, t.u)
		d.Items = append(d.Items, t.i)
		d.Values = append(d.Values, t.v)
	}
	if err := d.Validate(); err != nil {
		tb.Fatal(err)
	}
	return d
}

// synth returns a synthetic dataset with skewed item popularity and
// exponentially distributed user activity, so that some users and items
// have few ratings.
func synth(tb testing.TB, users, items, perUser int, seed uint64) *Dataset {
	tb.Helper()
	d, err := Synthetic(SyntheticConfig{
		Users: users, Items: items, Rank: 3, PerUser: perUser, MinPerUser: 1,
		Zipf: 0.8, Noise: 0.3, Scale: Stars5,
	}, seed)
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// triples returns the ratings of d sorted, as a multiset.
func triples(d *Dataset) []triple {
	ts := make([]triple, d.Len())
	for k := range ts {
		ts[k] = triple{d.Users[k], d.Items[k], d.Values[k]}
	}
	slices.SortFunc(ts, cmpTriple)
	return ts
}

func cmpTriple(a, b triple) int {
	if c := cmp.Compare(a.u, b.u); c != 0 {
		return c
	}
	if c := cmp.Compare(a.i, b.i); c != 0 {
		return c
	}
	return cmp.Compare(a.v, b.v)
}

// checkPartition fails unless parts share d's index space and together
// hold exactly the ratings of d, each in exactly one part.
func checkPartition(t *testing.T, d *Dataset, parts ...*Dataset) {
	t.Helper()
	var all []triple
	for p, part := range parts {
		if part.NumUsers() != d.NumUsers() || part.NumItems() != d.NumItems() {
			t.Fatalf("part %d has %d users and %d items, parent %d and %d", p, part.NumUsers(), part.NumItems(), d.NumUsers(), d.NumItems())
		}
		if err := part.Validate(); err != nil {
			t.Fatalf("part %d: %v", p, err)
		}
		all = append(all, triples(part)...)
	}
	slices.SortFunc(all, cmpTriple)
	if !slices.Equal(all, triples(d)) {
		t.Fatalf("parts hold %d ratings, not the %d of the parent exactly", len(all), d.Len())
	}
}

// checkOrder fails unless the ratings of sub appear in d in the same order
// (sub is an ordered subsequence of d).
func checkOrder(t *testing.T, d, sub *Dataset) {
	t.Helper()
	k := 0
	for j := range sub.Values {
		for k < d.Len() && (d.Users[k] != sub.Users[j] || d.Items[k] != sub.Items[j] || d.Values[k] != sub.Values[j]) {
			k++
		}
		if k == d.Len() {
			t.Fatalf("rating %d of the subset is out of the parent's order", j)
		}
		k++
	}
}

func sameData(a, b *Dataset) bool {
	return slices.Equal(a.Users, b.Users) && slices.Equal(a.Items, b.Items) && slices.Equal(a.Values, b.Values)
}

func TestHoldout(t *testing.T) {
	d := synth(t, 200, 300, 20, 1)
	for _, frac := range []float64{0.01, 0.2, 0.5, 0.8, 0.9, 0.99} {
		t.Run(strconv.FormatFloat(frac, 'g', -1, 64), func(t *testing.T) {
			sp, err := Holdout(d, frac, 7)
			if err != nil {
				t.Fatal(err)
			}
			checkPartition(t, d, sp.Train, sp.Test)
			checkOrder(t, d, sp.Train)
			checkOrder(t, d, sp.Test)
			if want := int(math.Round(frac * float64(d.Len()))); sp.Train.Len() != want {
				t.Errorf("train has %d ratings, want round(%g·%d) = %d", sp.Train.Len(), frac, d.Len(), want)
			}
		})
	}
}

func TestHoldoutErrors(t *testing.T) {
	d := synth(t, 20, 30, 5, 1)
	one := fromTriples(t, 1, 1, []triple{{0, 0, 3}})
	tests := []struct {
		name string
		d    *Dataset
		frac float64
	}{
		{"zero", d, 0},
		{"one", d, 1},
		{"negative", d, -0.5},
		{"above one", d, 1.5},
		{"NaN", d, math.NaN()},
		{"empty train", d, 1e-9},
		{"empty test", d, 1 - 1e-9},
		{"single rating", one, 0.5},
		{"empty dataset", fromTriples(t, 1, 1, nil), 0.5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Holdout(tc.d, tc.frac, 1); !errors.Is(err, ErrBadParameter) {
				t.Errorf("Holdout(frac=%g) error = %v, want ErrBadParameter", tc.frac, err)
			}
		})
	}
}

// TestHoldoutUniform checks that every rating lands in the training set
// with probability trainFrac. Over 2000 seeds the count for each of 10
// ratings is Binomial(2000, 0.3) with sd 20.5; the bound of 6 sd fails a
// correct sampler with probability below 1e-8, and the seeds are fixed.
func TestHoldoutUniform(t *testing.T) {
	var ts []triple
	for i := int32(0); i < 10; i++ {
		ts = append(ts, triple{i % 3, i, 1 + float32(i%5)})
	}
	d := fromTriples(t, 3, 10, ts)
	const runs, frac = 2000, 0.3
	n := d.Len()
	count := make([]int, n)
	for s := range uint64(runs) {
		sp, err := Holdout(d, frac, s)
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range sp.Train.Items { // item i is rating i
			count[i]++
		}
	}
	p := math.Round(frac*float64(n)) / float64(n)
	mean, sd := runs*p, math.Sqrt(runs*p*(1-p))
	for k, c := range count {
		if math.Abs(float64(c)-mean) > 6*sd {
			t.Errorf("rating %d in train %d times of %d, want %.0f ± %.0f", k, c, runs, mean, 6*sd)
		}
	}
}

func TestLeaveKOut(t *testing.T) {
	d := synth(t, 300, 200, 15, 2)
	perUser, _ := d.Counts()
	for _, k := range []int{1, 2, 5, 10} {
		t.Run("k="+strconv.Itoa(k), func(t *testing.T) {
			sp, err := LeaveKOut(d, k, 3)
			if err != nil {
				t.Fatal(err)
			}
			checkPartition(t, d, sp.Train, sp.Test)
			checkOrder(t, d, sp.Train)
			checkOrder(t, d, sp.Test)
			trainU, _ := sp.Train.Counts()
			testU, _ := sp.Test.Counts()
			eligible := 0
			for u, n := range perUser {
				want := 0
				if n > k {
					want = k
					eligible++
				}
				if testU[u] != want || trainU[u] != n-want {
					t.Fatalf("user %d with %d ratings: %d train, %d test, want %d test", u, n, trainU[u], testU[u], want)
				}
			}
			if eligible == 0 || eligible == len(perUser) {
				t.Fatalf("test data has %d of %d eligible users; want some on each side", eligible, len(perUser))
			}
		})
	}
}

func TestLeaveOneOutIsLeaveKOut1(t *testing.T) {
	d := synth(t, 50, 40, 6, 3)
	a, err := LeaveOneOut(d, 9)
	if err != nil {
		t.Fatal(err)
	}
	b, err := LeaveKOut(d, 1, 9)
	if err != nil {
		t.Fatal(err)
	}
	if !sameData(a.Test, b.Test) || !sameData(a.Train, b.Train) {
		t.Error("LeaveOneOut differs from LeaveKOut(k=1) with the same seed")
	}
}

// TestLeaveKOutUniform checks that each of a user's ratings is left out
// with probability k/n: Binomial(3000, 0.3) per rating, sd 25, bound 6 sd.
func TestLeaveKOutUniform(t *testing.T) {
	var ts []triple
	for i := int32(0); i < 10; i++ {
		ts = append(ts, triple{0, i, 1 + float32(i%5)})
	}
	d := fromTriples(t, 1, 10, ts)
	const runs, k = 3000, 3
	count := make([]int, 10)
	for s := range uint64(runs) {
		sp, err := LeaveKOut(d, k, s)
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range sp.Test.Items {
			count[i]++
		}
	}
	p := float64(k) / 10
	mean, sd := runs*p, math.Sqrt(runs*p*(1-p))
	for i, c := range count {
		if math.Abs(float64(c)-mean) > 6*sd {
			t.Errorf("item %d left out %d times of %d, want %.0f ± %.0f", i, c, runs, mean, 6*sd)
		}
	}
}

func TestLeaveKOutErrors(t *testing.T) {
	d := fromTriples(t, 2, 3, []triple{{0, 0, 1}, {0, 1, 2}, {1, 2, 3}})
	for _, k := range []int{-1, 0, 2, 3, 100} {
		if _, err := LeaveKOut(d, k, 1); !errors.Is(err, ErrBadParameter) {
			t.Errorf("LeaveKOut(k=%d) error = %v, want ErrBadParameter", k, err)
		}
	}
	if _, err := LeaveKOut(d, 1, 1); err != nil {
		t.Errorf("LeaveKOut(k=1) on a user with 2 ratings: %v", err)
	}
}

func TestKFold(t *testing.T) {
	d := synth(t, 100, 80, 10, 4)
	small := fromTriples(t, 2, 2, []triple{{0, 0, 1}, {0, 1, 2}, {1, 0, 3}})
	tests := []struct {
		name string
		d    *Dataset
		k    int
	}{
		{"2 folds", d, 2},
		{"5 folds", d, 5},
		{"10 folds", d, 10},
		{"7 folds", d, 7},
		{"k = n", small, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			folds, err := KFold(tc.d, tc.k, 5)
			if err != nil {
				t.Fatal(err)
			}
			if len(folds) != tc.k {
				t.Fatalf("%d folds, want %d", len(folds), tc.k)
			}
			tests := make([]*Dataset, len(folds))
			lo, hi := tc.d.Len()/tc.k, (tc.d.Len()+tc.k-1)/tc.k
			for f, sp := range folds {
				checkPartition(t, tc.d, sp.Train, sp.Test)
				checkOrder(t, tc.d, sp.Test)
				if n := sp.Test.Len(); n < lo || n > hi {
					t.Errorf("fold %d has %d ratings, want %d..%d", f, n, lo, hi)
				}
				tests[f] = sp.Test
			}
			checkPartition(t, tc.d, tests...)
		})
	}
}

func TestKFoldErrors(t *testing.T) {
	d := fromTriples(t, 2, 2, []triple{{0, 0, 1}, {0, 1, 2}, {1, 0, 3}})
	for _, k := range []int{-1, 0, 1, 4} {
		if _, err := KFold(d, k, 1); !errors.Is(err, ErrBadParameter) {
			t.Errorf("KFold(k=%d) error = %v, want ErrBadParameter", k, err)
		}
	}
}

func TestSubsampleUsers(t *testing.T) {
	d := synth(t, 200, 150, 12, 5)
	perUser, _ := d.Counts()
	for _, frac := range []float64{0.01, 0.2, 0.5, 0.8, 1} {
		t.Run(strconv.FormatFloat(frac, 'g', -1, 64), func(t *testing.T) {
			s, err := SubsampleUsers(d, frac, 6)
			if err != nil {
				t.Fatal(err)
			}
			if s.NumUsers() != d.NumUsers() || s.NumItems() != d.NumItems() {
				t.Fatal("subsample changed the index space")
			}
			checkOrder(t, d, s)
			got, _ := s.Counts()
			for u, n := range perUser {
				want := 0
				if n > 0 {
					want = max(1, int(math.Round(frac*float64(n))))
				}
				if got[u] != want {
					t.Fatalf("user %d with %d ratings keeps %d, want %d", u, n, got[u], want)
				}
			}
			if frac == 1 && !sameData(s, d) {
				t.Error("frac = 1 is not the identity")
			}
		})
	}
	for _, frac := range []float64{0, -1, 1.01, math.NaN()} {
		if _, err := SubsampleUsers(d, frac, 1); !errors.Is(err, ErrBadParameter) {
			t.Errorf("SubsampleUsers(frac=%g) error = %v, want ErrBadParameter", frac, err)
		}
	}
}

// TestDeterminism runs every random operation twice with one seed and once
// with another: the first two must agree, the third must differ.
func TestDeterminism(t *testing.T) {
	d := synth(t, 100, 80, 10, 6)
	flat := func(ds ...*Dataset) *Dataset {
		out := &Dataset{}
		for _, x := range ds {
			out.Users = append(append(out.Users, x.Users...), -1)
			out.Items = append(out.Items, x.Items...)
			out.Values = append(out.Values, x.Values...)
		}
		return out
	}
	ops := []struct {
		name string
		run  func(seed uint64) (*Dataset, error)
	}{
		{"Holdout", func(s uint64) (*Dataset, error) { sp, err := Holdout(d, 0.8, s); return flat(sp.Train, sp.Test), err }},
		{"LeaveKOut", func(s uint64) (*Dataset, error) { sp, err := LeaveKOut(d, 2, s); return flat(sp.Train, sp.Test), err }},
		{"KFold", func(s uint64) (*Dataset, error) {
			f, err := KFold(d, 3, s)
			if err != nil {
				return nil, err
			}
			return flat(f[0].Test, f[1].Test, f[2].Test), nil
		}},
		{"SubsampleUsers", func(s uint64) (*Dataset, error) { return SubsampleUsers(d, 0.5, s) }},
		{"PartitionUsers", func(s uint64) (*Dataset, error) { p, err := PartitionUsers(d, 3, s); return flat(p...), err }},
		{"PartitionItems", func(s uint64) (*Dataset, error) { p, err := PartitionItems(d, 3, s); return flat(p...), err }},
		{"Synthetic", func(s uint64) (*Dataset, error) {
			return Synthetic(SyntheticConfig{Users: 30, Items: 40, Rank: 2, PerUser: 5, Zipf: 1, Noise: 0.5}, s)
		}},
	}
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			a, err := op.run(42)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := op.run(42)
			c, _ := op.run(43)
			if !sameData(a, b) {
				t.Error("same seed gave different results")
			}
			if sameData(a, c) {
				t.Error("seeds 42 and 43 gave the same result")
			}
		})
	}
}
