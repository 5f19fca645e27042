package dpals

import (
	"fmt"
	"math"

	"github.com/privrec/privrec/accountant/rdp"
	"github.com/privrec/privrec/protocol"
)

// snapshotVersion versions the server's snapshot format.
const snapshotVersion = 1

// snapshot is the server's state between rounds.
type snapshot struct {
	NumItems, Dim, Round int
	Mu, PoolVar          float64
	PoolVarH             float64
	CountPost            []float64
	Prior                *ebPrior
	BI, BBias, V, Weight []float64
	Count, PoolG, PoolH  []float64
	Active               []bool
	Releases             []rdp.Release
	Stats                map[string]float64
	Clients              int
	ArrA, ArrS           []int
}

// MarshalBinary returns the server's state: a version byte, then the gob
// encoding of a snapshot.
func (s *server) MarshalBinary() ([]byte, error) {
	return protocol.EncodeSnapshot(snapshotVersion, snapshot{
		NumItems: s.ni, Dim: s.k, Round: s.round, Mu: s.mu, PoolVar: s.poolVar,
		PoolVarH: s.poolVarH, CountPost: s.countPost, Prior: s.prior,
		BI: s.bi, BBias: s.bBias, V: s.v, Weight: s.weight, Count: s.count, PoolG: s.poolG, PoolH: s.poolH,
		Active: s.active, Releases: s.led.Releases(), Stats: s.stats,
		Clients: s.clients, ArrA: s.arrA, ArrS: s.arrS,
	})
}

// UnmarshalBinary restores a state from MarshalBinary into s, a server
// built with the same configuration and catalog; it fails, leaving s
// unchanged, on corrupt data or another shape.
func (s *server) UnmarshalBinary(data []byte) error {
	var x snapshot
	if err := protocol.DecodeSnapshot(data, snapshotVersion, &x); err != nil {
		return fmt.Errorf("dpals: server snapshot: %w", err)
	}
	ok := func(v []float64) bool { return v == nil || len(v) == s.ni }
	switch {
	case x.NumItems != s.ni || x.Dim != s.k:
		return fmt.Errorf("dpals: server snapshot of %d items × %d, the server has %d × %d", x.NumItems, x.Dim, s.ni, s.k)
	case x.Round < 0 || x.Round > len(s.steps):
		return fmt.Errorf("dpals: server snapshot at round %d of %d", x.Round, len(s.steps))
	case len(x.BI) != s.ni || len(x.Weight) != s.ni || !ok(x.BBias) || !ok(x.Count) || !ok(x.PoolG) || !ok(x.PoolH) || !ok(x.CountPost):
		return fmt.Errorf("dpals: server snapshot: per-item vectors of the wrong length")
	case x.Prior != nil && (len(x.Prior.Grid) != ebGrid || len(x.Prior.Pi) != ebGrid):
		return fmt.Errorf("dpals: server snapshot: a bias prior of %d grid points, want %d", len(x.Prior.Grid), ebGrid)
	case x.Active != nil && len(x.Active) != s.ni, x.V != nil && len(x.V) != s.ni*s.k:
		return fmt.Errorf("dpals: server snapshot: %d factors, %d active flags", len(x.V), len(x.Active))
	}
	if (s.mask != nil) != (x.ArrA != nil) || x.ArrA != nil && (len(x.ArrA) != len(s.steps) || len(x.ArrS) != len(s.steps)) {
		return fmt.Errorf("dpals: server snapshot: integer-path arrivals of %d rounds, the server has %d (masked: %v)", len(x.ArrA), len(s.steps), s.mask != nil)
	}
	var l rdp.Ledger
	for _, r := range x.Releases {
		if !(r.Sigma > 0) || !(r.L2 > 0) || r.Count < 1 || math.IsInf(r.Sigma, 0) || math.IsInf(r.L2, 0) {
			return fmt.Errorf("dpals: server snapshot: bad release %+v", r)
		}
		l.Gaussian(r.Name, r.Count, r.L2, r.Sigma)
	}
	if x.Stats == nil {
		x.Stats = map[string]float64{}
	}
	s.round, s.mu, s.poolVar, s.poolVarH = x.Round, x.Mu, x.PoolVar, x.PoolVarH
	s.countPost, s.prior = x.CountPost, x.Prior
	s.bi, s.bBias, s.v, s.weight, s.count, s.poolG, s.poolH = x.BI, x.BBias, x.V, x.Weight, x.Count, x.PoolG, x.PoolH
	s.active, s.led, s.stats = x.Active, l, x.Stats
	s.clients, s.arrA, s.arrS = x.Clients, x.ArrA, x.ArrS
	return nil
}
