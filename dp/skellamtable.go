package dp

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"sync"
)

// MaxSkellamTableMean is the largest mean parameter m NewSkellamTable
// accepts. At m = 2^14 the table has 4096 columns (64 KiB); above it the
// table outgrows the L1/L2 caches it relies on, and SampleSkellam's PTRS
// costs O(1) anyway.
const MaxSkellamTableMean = 1 << 14

// skellamTableTail is the probability mass, at most, that a SkellamTable
// leaves to its tail fallback: outcomes with |k| > t for the least t whose
// two-sided tail is below it.
const skellamTableTail = 0x1p-60

// tailMark is the column value that sends a draw to the tail fallback.
const tailMark = math.MinInt32

// SkellamTable draws Skellam(m) variates for one fixed mean parameter m
// (the law of X − Y, X and Y independent Poisson(m): mean 0, variance
// 2m) at the cost of one r.Uint64() and one 16-byte table read per draw.
// It is built for the distributed Skellam mechanism, where every client
// that rated an item adds Skellam(μ/n) shares with the same μ/n: build the
// table for m = μ/n once (NewSkellamTable, or share it through
// SkellamTables) and draw from it for every client and coordinate. A
// SkellamTable is immutable after construction and safe for concurrent
// use; the generator r is not.
//
// Method. The pmf P(k) = e^{−2m} I_|k|(2m) is computed from the ratios
// I_k/I_{k−1} by backward recurrence (a continued fraction, stable and free
// of overflow) normalised by Σ_k I_k(2m) = e^{2m}. Outcomes −t…t, for the
// least t with P(|S| > t) < 2^−60, plus one "tail" outcome carrying
// P(|S| > t), get integer weights round(P·2^64) (the centre takes the
// remainder, so the weights sum to exactly 2^64) and are laid out in a
// Walker/Vose alias table of 2^b columns, built in exact integer
// arithmetic: the top b bits of the uniform draw pick a column, the
// remaining 64 − b bits are compared with the column's threshold. A draw
// that lands on the tail outcome (probability below 2^−60) picks a sign
// and then |S| by inversion over the tabulated conditional tail law
// P(k)/P(|S| > t), k > t, so the table is not a truncation: every integer
// keeps its probability.
//
// Accuracy. The law is Skellam(m) up to floating-point rounding: each of
// the 2t+2 outcomes' probabilities is a multiple of 2^−64 within 2^−65 of
// the float64 pmf (plus the centre's share of the others' rounding), the
// float64 pmf has relative error of order 10^−13, and the conditional tail
// law is drawn with a 53-bit uniform. The total variation distance to
// Skellam(m) is therefore below (2t+2)·2^−64 + 10^−12, far below what
// SampleSkellam itself achieves with 53-bit inversion (and below any
// effect on the privacy accounting).
type SkellamTable struct {
	m     float64
	t     int64        // the bulk is [−t, t]
	shift uint         // 64 − b: u>>shift picks one of 2^b columns
	mask  uint64       // 2^(64−b) − 1: u&mask is the position in the column
	cols  []skellamCol // 2^b alias columns
	tail  []float64    // P(t+1), P(t+2), …, until negligible
	tsum  float64      // Σ tail
	// For small m, the same integer weights in the order 0, 1, −1, 2, −2,
	// …, t, −t, tail, as cumulative thresholds: a draw walks them from the
	// mode, a few comparisons on a few cache lines, where the alias
	// table's random column costs a cache miss once many tables are in
	// use (a federated round draws from one table per item).
	seqCum []uint64 // cumulative weights of all outcomes but the last
	seqVal []int32  // the outcomes in that order (tailMark for the tail)
}

// seqMaxMean is the largest m drawn by the sequential walk.
const seqMaxMean = 64

// skellamCol is one alias column: a draw whose low bits fall below thresh
// gives lo, otherwise hi (tailMark for the tail outcome).
type skellamCol struct {
	thresh uint64
	lo, hi int32
}

// NewSkellamTable builds the sampler for Skellam(m). It fails with ErrParam
// unless 0 < m ≤ MaxSkellamTableMean (NaN and ±Inf fail); for larger m use
// SampleSkellam or FillSkellam. Building costs O(√m + log(1/m)) time and
// the table holds 16 bytes per column, about 16·2^⌈log2(2t+2)⌉ bytes with
// t ≈ 9.3·√(2m) for large m (4 KiB at m = 50, 64 KiB at the maximum).
func NewSkellamTable(m float64) (*SkellamTable, error) {
	if !(m > 0) || !(m <= MaxSkellamTableMean) {
		return nil, paramErr("Skellam table mean m = %g, want 0 < m ≤ %d", m, MaxSkellamTableMean)
	}
	p, suf := skellamHalfPMF(m)
	// t: the least with the two-sided tail 2·Σ_{k>t} P(k) below 2^−60.
	var t int64
	for 2*suf[t+1] >= skellamTableTail {
		t++
	}
	s := &SkellamTable{m: m, t: t}

	// The tail beyond t, cut where what remains is below 2^−64 of it.
	tail := 2 * suf[t+1]
	end := t + 1
	for end < int64(len(p)) && suf[end] > 0x1p-64*suf[t+1] {
		end++
	}
	s.tail = append([]float64(nil), p[t+1:end]...)
	for i := len(s.tail) - 1; i >= 0; i-- {
		s.tsum += s.tail[i]
	}

	// Outcome i ∈ [0, 2t] is k = i − t; outcome 2t+1 is the tail.
	nout := 2*t + 2
	b := max(1, bits.Len64(uint64(nout-1)))
	ncol := 1 << b
	s.shift = uint(64 - b)
	s.mask = 1<<s.shift - 1
	capacity := uint64(1) << s.shift
	w := make([]uint64, ncol)
	val := make([]int32, ncol)
	var rest uint64
	for i := range nout {
		k := int64(i) - t
		val[i] = int32(k)
		switch {
		case i == nout-1:
			val[i] = tailMark
			w[i] = uint64(math.Round(math.Ldexp(tail, 64)))
		case k != 0:
			w[i] = uint64(math.Round(math.Ldexp(p[abs64(k)], 64)))
		}
		rest += w[i]
	}
	s.cols = make([]skellamCol, ncol)
	if rest == 0 {
		// Every outcome but 0 rounds to zero weight (m below about
		// 2^−66): the point mass at 0, whose weight 2^64 does not fit.
		for i := range s.cols {
			s.cols[i] = skellamCol{thresh: capacity}
		}
		return s, nil
	}
	w[t] = -rest // 2^64 − rest: the weights sum to exactly 2^64
	if m <= seqMaxMean {
		order := []int64{t}
		for k := int64(1); k <= t; k++ {
			order = append(order, t+k, t-k)
		}
		order = append(order, nout-1)
		var cum uint64
		for k, i := range order {
			s.seqVal = append(s.seqVal, val[i])
			if k < len(order)-1 {
				cum += w[i]
				s.seqCum = append(s.seqCum, cum)
			}
		}
	}
	voseInt(w, val, capacity, s.cols)
	return s, nil
}

func abs64(k int64) int64 {
	if k < 0 {
		return -k
	}
	return k
}

// skellamHalfPMF returns P(k) for k = 0…K and the suffix sums
// suf[k] = Σ_{j≥k} P(j) (suf has K+2 entries, suf[K+1] = 0), where K is
// far enough out (SkellamTail below 10^−200) that the backward recurrence's
// starting error and the mass beyond K are negligible.
func skellamHalfPMF(m float64) (p, suf []float64) {
	x := 2 * m
	K := SkellamTailBound(m, 1e-200) + 2
	// ratio[k] = I_k(x)/I_{k−1}(x) = 1/(2k/x + ratio[k+1]), ratio[K+1] = 0.
	p = make([]float64, K+1)
	var next float64
	for k := K; k >= 1; k-- {
		next = 1 / (2*float64(k)/x + next)
		p[k] = next
	}
	// Relative pmf q_k = Π_{j≤k} ratio[j], q_0 = 1; then normalise by
	// q_0 + 2·Σ_{k≥1} q_k, summed from the small end.
	p[0] = 1
	for k := int64(1); k <= K; k++ {
		p[k] *= p[k-1]
	}
	var z float64
	for k := K; k >= 1; k-- {
		z += p[k]
	}
	z = 1 + 2*z
	suf = make([]float64, K+2)
	for k := K; k >= 0; k-- {
		p[k] /= z
		suf[k] = suf[k+1] + p[k]
	}
	return p, suf
}

// voseInt lays out integer weights w (summing to exactly len(w)·capacity,
// modulo 2^64) as alias columns, Vose's variant of Walker's method in
// exact arithmetic: outcome i is drawn with probability w[i]/2^64 exactly.
// It consumes w.
func voseInt(w []uint64, val []int32, capacity uint64, cols []skellamCol) {
	small := make([]int, 0, len(w))
	large := make([]int, 0, len(w))
	for i, x := range w {
		if x < capacity {
			small = append(small, i)
		} else {
			large = append(large, i)
		}
	}
	for len(small) > 0 && len(large) > 0 {
		s := small[len(small)-1]
		small = small[:len(small)-1]
		l := large[len(large)-1]
		cols[s] = skellamCol{thresh: w[s], lo: val[s], hi: val[l]}
		w[l] -= capacity - w[s]
		if w[l] < capacity {
			large = large[:len(large)-1]
			small = append(small, l)
		}
	}
	// With exact integers whatever remains has weight exactly capacity.
	for _, i := range append(small, large...) {
		cols[i] = skellamCol{thresh: capacity, lo: val[i], hi: val[i]}
	}
}

// Mean returns the table's mean parameter m: its draws have variance 2m.
func (s *SkellamTable) Mean() float64 { return s.m }

// Sample returns one Skellam(m) draw.
func (s *SkellamTable) Sample(r *rand.Rand) int64 {
	if x := s.alias(r.Uint64()); x != tailMark {
		return int64(x)
	}
	return s.sampleTail(r)
}

// alias maps a uniform 64-bit u to an outcome by the alias columns
// (tailMark for the tail).
func (s *SkellamTable) alias(u uint64) int32 {
	c := s.cols[u>>s.shift]
	if u&s.mask < c.thresh {
		return c.lo
	}
	return c.hi
}

// walk maps u to an outcome by the cumulative weights from the mode
// (tables with seqVal).
func (s *SkellamTable) walk(u uint64) int32 {
	j := 0
	for j < len(s.seqCum) && u >= s.seqCum[j] {
		j++
	}
	return s.seqVal[j]
}

// Fill overwrites every element of dst with an independent Skellam(m)
// draw. It allocates nothing.
func (s *SkellamTable) Fill(r *rand.Rand, dst []int64) {
	for i := range dst {
		x := s.alias(r.Uint64())
		if x == tailMark {
			dst[i] = s.sampleTail(r)
			continue
		}
		dst[i] = int64(x)
	}
}

// AddTo adds an independent Skellam(m) draw to every element of dst: one
// client's share of distributed Skellam noise on a quantized row, with
// m = μ/n (see FillSkellamShare). It allocates nothing.
func (s *SkellamTable) AddTo(r *rand.Rand, dst []int64) {
	for i := range dst {
		// Two direct calls, not a function value: both inline.
		var x int32
		if u := r.Uint64(); s.seqVal != nil {
			x = s.walk(u)
		} else {
			x = s.alias(u)
		}
		if x == tailMark {
			dst[i] += s.sampleTail(r)
			continue
		}
		dst[i] += int64(x)
	}
}

// sampleTail draws S conditioned on |S| > t: a fair sign, and |S| by
// inversion over the tabulated P(k), k > t.
func (s *SkellamTable) sampleTail(r *rand.Rand) int64 {
	sign := r.Uint64()&1 == 1
	u := r.Float64() * s.tsum
	k := s.t + 1
	for i, p := range s.tail {
		if u < p || i == len(s.tail)-1 {
			break
		}
		u -= p
		k++
	}
	if sign {
		return -k
	}
	return k
}

// bytes is the table's approximate memory footprint.
func (s *SkellamTable) bytes() int {
	return 96 + 16*len(s.cols) + 8*len(s.tail)
}

// DefaultSkellamTablesBytes is the memory bound of a zero SkellamTables.
const DefaultSkellamTablesBytes = 32 << 20

// SkellamTables is a concurrency-safe cache of SkellamTables keyed by the
// exact bits of m, for processes that add Skellam(μ/n_j) shares for many
// items j with few distinct n_j. A table is a public function of m, so one
// cache may serve every client in the process. The zero value is ready to
// use and holds at most DefaultSkellamTablesBytes; when a new table would
// exceed the bound, arbitrary cached tables are dropped (tables already
// handed out stay valid).
type SkellamTables struct {
	// MaxBytes bounds the cached tables' memory; 0 means
	// DefaultSkellamTablesBytes. Set it before first use.
	MaxBytes int

	mu     sync.RWMutex
	tables map[uint64]*SkellamTable
	size   int
}

// Get returns the table for m, building and caching it on first use. It
// returns nil when NewSkellamTable rejects m.
func (c *SkellamTables) Get(m float64) *SkellamTable {
	key := math.Float64bits(m)
	c.mu.RLock()
	s := c.tables[key]
	c.mu.RUnlock()
	if s != nil {
		return s
	}
	s, err := NewSkellamTable(m)
	if err != nil {
		return nil
	}
	limit := c.MaxBytes
	if limit <= 0 {
		limit = DefaultSkellamTablesBytes
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.tables[key]; old != nil {
		return old // built concurrently by another caller
	}
	n := s.bytes()
	if n > limit {
		return s // too large to cache at all
	}
	if c.tables == nil {
		c.tables = make(map[uint64]*SkellamTable)
	}
	for k, old := range c.tables {
		if c.size+n <= limit {
			break
		}
		c.size -= old.bytes()
		delete(c.tables, k)
	}
	c.tables[key] = s
	c.size += n
	return s
}
