package ldpop

import (
	"fmt"
	"math/rand/v2"

	"github.com/privrec/privrec/protocol"
)

// snapshotVersion is the version byte of the server's snapshot.
const snapshotVersion = 1

// snapshot is the state of a server between rounds: everything the next
// Broadcast and Aggregate read that a round changes, the position
// generator's state and the accounting. The rest is configuration or
// rebuilt by Broadcast.
type snapshot struct {
	Dim, NumItems, N, Round, Kind, T int
	V                                []float32
	PosRng                           []byte // the ChaCha8 state, nil for Basic
	Perm                             []int32
	Used, Pass                       int
	H                                []float32
	Cnt                              []int32
	RowSq                            []int64
	RowDone                          []float64
	MaxRow, SumRows, RoundFactor     float64
	Updated                          []bool
	// Short and BasicSum: a round's noise fell short, and the released
	// rounds' ε added up (Spent).
	Short    bool
	BasicSum float64
	// The integer path's accounting (absent on the float paths): per
	// row max_l c_l and Σ_l c_l, the closed segments' totals (four per
	// row), the worst row's and round's ε.
	RowMax         []int32
	RowSum         []int64
	Done           []float64
	SkMax, SkRound float64
}

// MarshalBinary returns the server's state: a version byte, then the gob
// encoding of a snapshot.
func (s *server) MarshalBinary() ([]byte, error) {
	x := snapshot{Dim: s.k, NumItems: s.m, N: s.n, Round: s.round, Kind: s.kind, T: s.t,
		V: s.v, Perm: s.perm, Used: s.used, Pass: s.pass, H: s.h, Short: s.short, BasicSum: s.basicSum}
	if s.posSrc != nil {
		st, err := s.posSrc.MarshalBinary()
		if err != nil {
			return nil, err
		}
		x.PosRng = st
	}
	if l := s.led; l != nil {
		x.Cnt, x.RowSq, x.RowDone, x.Updated = l.cnt, l.rowSq, l.rowDone, l.updated
		x.MaxRow, x.SumRows, x.RoundFactor = l.maxRow, l.sumRows, l.roundFactor
		if l.mk != nil {
			x.RowMax, x.RowSum, x.SkMax, x.SkRound = l.rowMax, l.rowSum, l.skMax, l.skRound
			x.Done = make([]float64, 0, 4*len(l.done))
			for _, t := range l.done {
				x.Done = append(x.Done, t.a, t.x, t.c, t.n)
			}
		}
	}
	return protocol.EncodeSnapshot(snapshotVersion, x)
}

// UnmarshalBinary restores a state from MarshalBinary into s, a server
// built with the same configuration; it fails, leaving s unchanged, on
// corrupt data or another shape.
func (s *server) UnmarshalBinary(data []byte) error {
	var x snapshot
	if err := protocol.DecodeSnapshot(data, snapshotVersion, &x); err != nil {
		return fmt.Errorf("ldpop: server snapshot: %w", err)
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("ldpop: server snapshot: "+format, a...)
	}
	md, m := s.md, s.m
	switch {
	case x.Dim != s.k || x.NumItems != s.m:
		return bad("%d items × %d, the server has %d × %d", x.NumItems, x.Dim, s.m, s.k)
	case len(x.V) != md:
		return bad("%d factors, want %d", len(x.V), md)
	case x.Round < 0 || x.T < 0 || x.T > x.Round || x.N < 0 || x.Kind < kindSetup || x.Kind > kindTrain:
		return bad("round %d, training round %d, %d clients, kind %d", x.Round, x.T, x.N, x.Kind)
	case x.Perm != nil && len(x.Perm) != md, x.Used < 0 || x.Used > md, x.Pass < 0:
		return bad("%d permuted positions, %d used, pass %d, want %d positions", len(x.Perm), x.Used, x.Pass, md)
	case x.H != nil && len(x.H) != md:
		return bad("%d mixing variables, want %d", len(x.H), md)
	case (x.PosRng != nil) != (s.posSrc != nil):
		return bad("position generator state present: %v, the server has one: %v", x.PosRng != nil, s.posSrc != nil)
	}
	for _, p := range x.Perm {
		if p < 0 || int(p) >= md {
			return bad("permuted position %d outside [0, %d)", p, md)
		}
	}
	if s.led != nil && (len(x.Cnt) != md || len(x.Updated) != md || len(x.RowSq) != m || len(x.RowDone) != m) {
		return bad("accounting of %d positions and %d rows, want %d and %d", len(x.Cnt), len(x.RowSq), md, m)
	}
	if s.led != nil && s.led.mk != nil && (len(x.RowMax) != m || len(x.RowSum) != m || len(x.Done) != 4*m) {
		return bad("integer-path accounting of %d, %d and %d values, want %d, %d and %d", len(x.RowMax), len(x.RowSum), len(x.Done), m, m, 4*m)
	}
	if s.posSrc != nil {
		var src rand.ChaCha8
		if err := src.UnmarshalBinary(x.PosRng); err != nil {
			return bad("position generator: %w", err)
		}
		*s.posSrc = src
	}
	copy(s.v, x.V)
	s.n, s.round, s.kind, s.t = x.N, x.Round, x.Kind, x.T
	s.perm, s.used, s.pass, s.h = x.Perm, x.Used, x.Pass, x.H
	s.short, s.basicSum = x.Short, x.BasicSum
	if l := s.led; l != nil {
		copy(l.cnt, x.Cnt)
		copy(l.rowSq, x.RowSq)
		copy(l.rowDone, x.RowDone)
		copy(l.updated, x.Updated)
		l.maxRow, l.sumRows, l.roundFactor = x.MaxRow, x.SumRows, x.RoundFactor
		if l.mk != nil {
			copy(l.rowMax, x.RowMax)
			copy(l.rowSum, x.RowSum)
			for j := range l.done {
				l.done[j] = rowTotals{a: x.Done[4*j], x: x.Done[4*j+1], c: x.Done[4*j+2], n: x.Done[4*j+3]}
			}
			l.skMax, l.skRound = x.SkMax, x.SkRound
		}
	}
	s.lastRound = -1
	return nil
}
