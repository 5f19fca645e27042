package ldpop

import "math"

// ledger is the accounting of releases, in units of ε: per position the
// releases in the current refit segment, per row Σ cnt² and the closed
// segments' Σ ‖c_j‖₂. On the integer path (mk not nil) it also keeps per
// row the current segment's max_l c_l and Σ_l c_l and the closed
// segments' rowTotals, and the Rényi-DP ε of the worst row and round.
type ledger struct {
	k           int
	cnt         []int32
	rowSq       []int64
	rowDone     []float64
	maxRow      float64 // max_j (rowDone_j + sqrt(rowSq_j))
	sumRows     float64 // Σ_j (rowDone_j + sqrt(rowSq_j))
	roundFactor float64 // max over rounds of sqrt(positions of one row)
	// userRound is the max over rounds of Σ_j sqrt(positions of row j):
	// the user-level per-round factor (a user's data enter every row);
	// skUserRound its integer-path ε at δ, from the rows' totals.
	userRound, skUserRound float64
	updated                []bool

	mk      *masking
	rowMax  []int32
	rowSum  []int64
	done    []rowTotals
	skMax   float64 // max_j ε of row j's releases so far, at δ
	skRound float64 // max over rounds of one round's ε, at δ
}

func newLedger(m, k int, mk *masking) *ledger {
	l := &ledger{k: k, cnt: make([]int32, m*k), rowSq: make([]int64, m), rowDone: make([]float64, m), updated: make([]bool, m*k)}
	if mk != nil {
		l.mk, l.rowMax, l.rowSum, l.done = mk, make([]int32, m), make([]int64, m), make([]rowTotals, m)
	}
	return l
}

// current returns row j's totals in the current segment.
func (l *ledger) current(j int) rowTotals {
	mx, sum := float64(l.rowMax[j]), float64(l.rowSum[j])
	return rowTotals{a: mx, x: math.Sqrt(mx * sum), c: sum, n: math.Sqrt(float64(l.rowSq[j]))}
}

// totals returns row j's totals over the run.
func (l *ledger) totals(j int) rowTotals {
	t := l.done[j]
	t.add(l.current(j))
	return t
}

// sumTotals returns the totals summed over every row: a user's data
// enter every row she rated.
func (l *ledger) sumTotals() rowTotals {
	var t rowTotals
	for j := range l.done {
		t.add(l.totals(j))
	}
	return t
}

// account counts the releases of positions sel, sorted (in units of ε,
// u_i fixed): row j of V released c_jl times at coordinate l costs a
// rating of item j Σ_l c_jl|u_il|/B ≤ ‖c_j‖₂.
func (l *ledger) account(sel []int32) {
	k := int32(l.k)
	run := 0
	var roundSum float64
	var roundTot rowTotals
	defer func() {
		l.userRound = max(l.userRound, roundSum)
		if l.mk != nil {
			l.skUserRound = max(l.skUserRound, l.mk.rowEps(roundTot, 2*l.mk.a))
		}
	}()
	for n, p := range sel {
		j := p / k
		c := int64(l.cnt[p])
		l.cnt[p]++
		l.updated[p] = true
		before := math.Sqrt(float64(l.rowSq[j]))
		l.rowSq[j] += 2*c + 1
		after := math.Sqrt(float64(l.rowSq[j]))
		l.sumRows += after - before
		l.maxRow = max(l.maxRow, l.rowDone[j]+after)
		if n > 0 && sel[n-1]/k == j {
			run++
		} else {
			run = 1
		}
		l.roundFactor = max(l.roundFactor, math.Sqrt(float64(run)))
		if n+1 == len(sel) || sel[n+1]/k != j {
			roundSum += math.Sqrt(float64(run))
			roundTot.add(runTotals(run))
		}
		if l.mk == nil {
			continue
		}
		l.rowMax[j] = max(l.rowMax[j], int32(c+1))
		l.rowSum[j]++
		if n+1 == len(sel) || sel[n+1]/k != j { // the row's last position this round
			l.skMax = max(l.skMax, l.mk.rowEps(l.totals(int(j)), l.mk.a))
			l.skRound = max(l.skRound, l.mk.rowEps(runTotals(run), l.mk.a))
		}
	}
}

// closeSegment ends a refit segment: the users' vectors change, so the
// next releases compose on top of the finished segment's.
func (l *ledger) closeSegment() {
	for j, q := range l.rowSq {
		if q > 0 && l.mk != nil {
			l.done[j].add(l.current(j))
			l.rowMax[j], l.rowSum[j] = 0, 0
		}
		if q > 0 {
			l.rowDone[j] += math.Sqrt(float64(q))
			l.rowSq[j] = 0
		}
	}
	clear(l.cnt)
}
