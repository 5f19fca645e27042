package dp

import (
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"

	"github.com/privrec/privrec/rng"
)

// tableLaw reconstructs, from the alias columns alone, the probability of
// every outcome as an exact multiple of 2^−64 (outcome tailMark is the
// tail); it fails the test if the columns do not partition 2^64.
func tableLaw(t *testing.T, s *SkellamTable) map[int32]uint64 {
	t.Helper()
	capacity := s.mask + 1
	law := map[int32]uint64{}
	var total uint64
	for _, c := range s.cols {
		if c.thresh > capacity {
			t.Fatalf("threshold %d above the column capacity %d", c.thresh, capacity)
		}
		law[c.lo] += c.thresh
		law[c.hi] += capacity - c.thresh
		total += capacity
	}
	if total != 0 { // 2^64 wraps to 0
		t.Fatalf("columns hold %d, want 2^64", total)
	}
	return law
}

var tableMeans = []float64{0.001, 0.05, 0.5, 3, 20, 50, 500}

// TestSkellamTablePMF checks the table's law, read exactly off its alias
// columns, against the log-space convolution skellamPMF: every bulk
// outcome to a relative 10^−9 (plus the 2^−64 grid), and the tail outcome
// against the exact tail beyond t, which is below 2^−60.
func TestSkellamTablePMF(t *testing.T) {
	for _, m := range append([]float64{1e-30, 1e-9, 2000, MaxSkellamTableMean}, tableMeans...) {
		s, err := NewSkellamTable(m)
		if err != nil {
			t.Fatalf("m = %g: %v", m, err)
		}
		law := tableLaw(t, s)
		half, _ := skellamHalfPMF(m)
		w := s.t + int64(40*math.Sqrt(m)) + 40
		var exact map[int64]float64
		if m <= 2000 {
			exact = skellamPMF(m, -w, w)
		}
		var exactTail float64
		for k := -w; k <= w; k++ {
			if exact == nil {
				break
			}
			if k < -s.t || k > s.t {
				exactTail += exact[k]
			}
		}
		for k := -s.t; k <= s.t; k++ {
			got := math.Ldexp(float64(law[int32(k)]), -64)
			if len(law) == 1 {
				got = 1 // the point mass: 2^64 wrapped to 0
			}
			if half[abs64(k)] >= 0x1p-63 && got == 0 {
				t.Errorf("m = %g: outcome %d has no mass", m, k)
			}
			if exact == nil {
				continue
			}
			if d := math.Abs(got - exact[k]); d > 1e-9*exact[k]+0x1p-63 {
				t.Errorf("m = %g: P(%d) = %.17g, want %.17g", m, k, got, exact[k])
			}
		}
		gotTail := math.Ldexp(float64(law[tailMark]), -64)
		if gotTail > skellamTableTail {
			t.Errorf("m = %g: tail mass %g > 2^−60", m, gotTail)
		}
		if exact != nil && math.Abs(gotTail-exactTail) > 1e-6*exactTail+0x1p-63 {
			t.Errorf("m = %g: tail mass %g, want %g", m, gotTail, exactTail)
		}
		// t is the least: widening by one less would leave ≥ 2^−60 out.
		if exact != nil && s.t > 0 && exactTail+exact[s.t]+exact[-s.t] < skellamTableTail*(1-1e-6) {
			t.Errorf("m = %g: t = %d is not the least", m, s.t)
		}
		if n := len(s.cols); n > 4096 {
			t.Errorf("m = %g: %d columns", m, n)
		}
		t.Logf("m = %g: t = %d, %d columns, %d tail entries", m, s.t, len(s.cols), len(s.tail))
	}
}

// TestSkellamTableChiSquare draws from the table and compares with the
// exact pmf, and checks that a law with 5% less variance is rejected for
// m ≥ 0.5 (power).
func TestSkellamTableChiSquare(t *testing.T) {
	const draws = 200000
	xs := make([]int64, draws)
	for _, m := range tableMeans {
		s, err := NewSkellamTable(m)
		if err != nil {
			t.Fatal(err)
		}
		s.Fill(rng.New(21, math.Float64bits(m)), xs)
		w := int64(7*math.Sqrt(2*m)) + 3
		want := skellamPMF(m, -w, w)
		stat, df := chiSquare(xs, func(k int64) float64 { return want[k] }, -w, w)
		if c := chiCrit(df, 0.001); stat > c {
			t.Errorf("m = %g: chi² = %.1f > %.1f (df %d)", m, stat, c, df)
		}
		if m >= 0.5 {
			wrong := skellamPMF(0.95*m, -w, w)
			if st, df := chiSquare(xs, func(k int64) float64 { return wrong[k] }, -w, w); st <= chiCrit(df, 0.001) {
				t.Errorf("m = %g: chi² = %.1f against Skellam(0.95m): no power", m, st)
			}
		}
	}
}

// TestSkellamTableMatchesSampleSkellam compares the table with
// SampleSkellam directly: a two-sample chi-square on the same cells.
func TestSkellamTableMatchesSampleSkellam(t *testing.T) {
	const draws = 100000
	for _, m := range []float64{0.015, 0.45, 4.5, 45} {
		s, _ := NewSkellamTable(m)
		a := make([]int64, draws)
		b := make([]int64, draws)
		s.Fill(rng.New(22, math.Float64bits(m)), a)
		FillSkellam(rng.New(23, math.Float64bits(m)), m, b)
		w := int64(5*math.Sqrt(2*m)) + 1
		ca := make([]float64, 2*w+3)
		cb := make([]float64, 2*w+3)
		cell := func(x int64) int { return int(min(max(x, -w-1), w+1) + w + 1) }
		for i := range a {
			ca[cell(a[i])]++
			cb[cell(b[i])]++
		}
		var stat float64
		df := -1
		for i := range ca {
			if ca[i]+cb[i] >= 10 {
				stat += (ca[i] - cb[i]) * (ca[i] - cb[i]) / (ca[i] + cb[i])
				df++
			}
		}
		if c := chiCrit(df, 0.001); stat > c {
			t.Errorf("m = %g: two-sample chi² = %.1f > %.1f (df %d)", m, stat, c, df)
		}
	}
}

// TestSkellamTableMoments checks mean 0 and variance 2m within five
// standard errors, as TestSkellamMoments does for FillSkellam.
func TestSkellamTableMoments(t *testing.T) {
	const draws = 200000
	buf := make([]int64, draws)
	for _, m := range append([]float64{MaxSkellamTableMean}, tableMeans...) {
		s, _ := NewSkellamTable(m)
		s.Fill(rng.New(24, math.Float64bits(m)), buf)
		checkSkellamMoments(t, m, buf)
	}
}

// TestSkellamTableSharesSum checks the distributed use: n clients' AddTo
// of Skellam(μ/n) shares sum to Skellam(μ), and Skellam(0.9μ) is rejected.
func TestSkellamTableSharesSum(t *testing.T) {
	const draws = 20000
	for _, tc := range []struct {
		mu float64
		n  int
	}{{60, 1}, {60, 300}, {120, 7}, {45, 3000}} {
		s, err := NewSkellamTable(tc.mu / float64(tc.n))
		if err != nil {
			t.Fatal(err)
		}
		r := rng.New(25, uint64(tc.n))
		sums := make([]int64, draws)
		for range tc.n {
			s.AddTo(r, sums)
		}
		checkSkellamSum(t, tc.mu, tc.n, sums)
	}
}

// scriptSource returns first, then defers to inner.
type scriptSource struct {
	first []uint64
	inner rand.Source
}

func (s *scriptSource) Uint64() uint64 {
	if len(s.first) > 0 {
		u := s.first[0]
		s.first = s.first[1:]
		return u
	}
	return s.inner.Uint64()
}

// TestSkellamTableTail exercises the tail fallback, which real draws reach
// with probability below 2^−60: a uniform that lands on the tail outcome
// gives |S| > t, and the fallback's law is the exact conditional tail.
func TestSkellamTableTail(t *testing.T) {
	for _, m := range []float64{0.05, 3, 50} {
		s, _ := NewSkellamTable(m)
		// A uniform that lands on the tail outcome.
		var u uint64
		found := false
		for i, c := range s.cols {
			base := uint64(i) << s.shift
			if c.lo == tailMark && c.thresh > 0 {
				u, found = base, true
			} else if c.hi == tailMark && c.thresh <= s.mask {
				u, found = base|s.mask, true
			}
		}
		if !found {
			t.Fatalf("m = %g: no column holds the tail", m)
		}
		src := &scriptSource{first: []uint64{u}, inner: rand.NewPCG(1, 2)}
		if x := s.Sample(rand.New(src)); abs64(x) <= s.t {
			t.Errorf("m = %g: a tail uniform gave %d, |x| ≤ t = %d", m, x, s.t)
		}
		dst := []int64{7}
		src.first = []uint64{u}
		if s.seqCum != nil { // the walk from the mode: past every threshold
			src.first = []uint64{^uint64(0)}
		}
		s.AddTo(rand.New(src), dst)
		if abs64(dst[0]-7) <= s.t {
			t.Errorf("m = %g: AddTo with a tail uniform added %d", m, dst[0]-7)
		}

		// The conditional tail law against the exact pmf.
		const draws = 50000
		r := rng.New(26, math.Float64bits(m))
		xs := make([]int64, draws)
		for i := range xs {
			xs[i] = s.sampleTail(r)
		}
		w := s.t + 40
		exact := skellamPMF(m, -w, w)
		var tail float64
		for k, p := range exact {
			if abs64(k) > s.t {
				tail += p
			}
		}
		cond := func(k int64) float64 {
			if abs64(k) <= s.t {
				return 0
			}
			return exact[k] / tail
		}
		stat, df := chiSquare(xs, cond, -w, w)
		if c := chiCrit(df, 0.001); stat > c {
			t.Errorf("m = %g: tail chi² = %.1f > %.1f (df %d)", m, stat, c, df)
		}
	}
}

func TestSkellamTableRejects(t *testing.T) {
	for _, m := range []float64{0, -1, math.NaN(), math.Inf(1), math.Inf(-1), MaxSkellamTableMean * 1.0001, 1e300} {
		if s, err := NewSkellamTable(m); err == nil || s != nil {
			t.Errorf("NewSkellamTable(%g) = %v, %v; want an error", m, s, err)
		}
		var c SkellamTables
		if s := c.Get(m); s != nil {
			t.Errorf("Get(%g) = %v, want nil", m, s)
		}
	}
	// Tiny but positive m: a point mass at 0 up to 2^−64.
	s, err := NewSkellamTable(math.SmallestNonzeroFloat64)
	if err != nil {
		t.Fatal(err)
	}
	r := rng.New(27)
	for range 100 {
		if x := s.Sample(r); x != 0 {
			t.Fatalf("m = 5e-324 gave %d", x)
		}
	}
}

func TestSkellamTableAllocs(t *testing.T) {
	r := rng.New(28)
	dst := make([]int64, 64)
	for _, m := range []float64{0.015, 45} {
		s, _ := NewSkellamTable(m)
		if a := testing.AllocsPerRun(20, func() { s.Fill(r, dst) }); a != 0 {
			t.Errorf("Fill(m = %g) allocates %.0f times", m, a)
		}
		if a := testing.AllocsPerRun(20, func() { s.AddTo(r, dst) }); a != 0 {
			t.Errorf("AddTo(m = %g) allocates %.0f times", m, a)
		}
		if a := testing.AllocsPerRun(20, func() { _ = s.Sample(r) }); a != 0 {
			t.Errorf("Sample(m = %g) allocates %.0f times", m, a)
		}
	}
}

func TestSkellamTableFillOverwrites(t *testing.T) {
	s, _ := NewSkellamTable(0.001)
	dst := []int64{1 << 40, 1 << 40, 1 << 40}
	s.Fill(rng.New(29), dst)
	for _, x := range dst {
		if abs64(x) > 10 {
			t.Errorf("Fill left %d", x)
		}
	}
}

// TestSkellamTablesCache checks sharing, concurrent use (run with -race)
// and the memory bound.
func TestSkellamTablesCache(t *testing.T) {
	var c SkellamTables
	a := c.Get(4.5)
	if a == nil || c.Get(4.5) != a || a.Mean() != 4.5 {
		t.Fatal("Get(4.5) does not return one shared table")
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			r := rng.New(30, uint64(g))
			dst := make([]int64, 10)
			for i := range 200 {
				c.Get(float64(i%50+1)/7).AddTo(r, dst)
			}
		})
	}
	wg.Wait()

	small := SkellamTables{MaxBytes: 20000}
	for i := range 300 {
		if small.Get(float64(i+1)) == nil {
			t.Fatal("Get returned nil")
		}
		if small.size > small.MaxBytes {
			t.Fatalf("cache holds %d bytes, bound %d", small.size, small.MaxBytes)
		}
	}
	var sum int
	for _, s := range small.tables {
		sum += s.bytes()
	}
	if sum != small.size {
		t.Errorf("cache size %d, tables hold %d", small.size, sum)
	}
	if big := small.Get(MaxSkellamTableMean); big == nil || small.size > small.MaxBytes {
		t.Error("a table larger than the bound is not returned uncached")
	}
}

// BenchmarkSkellamTable times one client's share of Skellam noise on a
// K = 10 row at μ/n = m, against FillSkellamShare (the same law) and the
// float path's FillGammaShares32 with the n that gives μ/n = m for
// μ = 45000 (σ = 300 quantization units in total, as in
// BenchmarkSkellamShare); ns/draw is per coordinate. "uint64" is the floor:
// the r.Uint64() calls alone that the table needs.
func BenchmarkSkellamTable(b *testing.B) {
	const dim = 10
	const mu = 45000
	r := rng.New(1)
	ints := make([]int64, dim)
	floats := make([]float32, dim)
	b.Run("uint64", func(b *testing.B) {
		var acc uint64
		for b.Loop() {
			for range dim {
				acc += r.Uint64()
			}
		}
		ints[0] = int64(acc)
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*dim), "ns/draw")
	})
	for _, m := range []float64{0.015, 0.45, 4.5, 45} {
		n := int(math.Round(mu / m))
		s, _ := NewSkellamTable(m)
		name := "m=" + strconv.FormatFloat(m, 'g', -1, 64)
		b.Run("table/"+name, func(b *testing.B) {
			for b.Loop() {
				s.AddTo(r, ints)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*dim), "ns/draw")
		})
		b.Run("share/"+name, func(b *testing.B) {
			for b.Loop() {
				FillSkellamShare(r, mu, n, ints)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*dim), "ns/draw")
		})
		b.Run("gamma32/"+name, func(b *testing.B) {
			for b.Loop() {
				FillGammaShares32(r, 1, n, floats)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*dim), "ns/draw")
		})
		b.Run("build/"+name, func(b *testing.B) {
			for b.Loop() {
				_, _ = NewSkellamTable(m)
			}
		})
	}
}
