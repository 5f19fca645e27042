package sdcf

import (
	"fmt"
	"math"

	"github.com/privrec/privrec/protocol"
)

// server holds the item factors V (Alg. 2). It sees only uploads.
type server struct {
	dim, nItems, rounds int
	lr0, gamma          float64
	kappa               float64   // ServerStep
	pseudo              float64   // ServerPseudo
	lamV                []float32 // public prior precisions Λ_v
	v, bv               []float32 // current factors and the broadcast copy
	sum                 []float64
	cnt                 []int32
	round               int
	b                   protocol.Broadcast
	// lamKeys, when not nil, name the parameters that broadcast Λ_v (drawn
	// by the server, Config.Lambda 0).
	lamKeys []string
}

func newServer(dim, nItems, rounds int, lr0, gamma, kappa float64, lamV, v []float32) *server {
	return &server{dim: dim, nItems: nItems, rounds: rounds, lr0: lr0, gamma: gamma, kappa: kappa, lamV: lamV, v: v,
		bv: make([]float32, len(v)), sum: make([]float64, len(v)), cnt: make([]int32, nItems),
		b: protocol.Broadcast{Phase: protocol.PhaseTrain, Dim: dim, NumItems: nItems, Params: map[string]float64{}}}
}

// eta returns η_t = η_0 / t^γ for iteration t = round + 1.
func (s *server) eta(round int) float64 { return s.lr0 / math.Pow(float64(round+1), s.gamma) }

func (s *server) Broadcast(round int) (*protocol.Broadcast, error) {
	if round != s.round {
		return nil, fmt.Errorf("sdcf: broadcast of round %d, expected %d", round, s.round)
	}
	copy(s.bv, s.v)
	s.b.Round, s.b.V = round, s.bv
	s.b.Params["eta"] = s.eta(round)
	for d, key := range s.lamKeys {
		s.b.Params[key] = float64(s.lamV[d])
	}
	return &s.b, nil
}

// Aggregate averages, per item j, the gradients received for j (whatever
// arrives: real and fake, from the clients online this round) into g_j and
// moves v_j ← v_j − η_t Λ_v v_j − κ·(g_j − η_t Λ_v v_j): every upload's prior
// term η_t Λ_v v_j is public, so the server applies it once and scales only
// the data part by κ (Config.ServerStep). With κ = 1 this is v_j ← v_j − g_j.
// Items nobody sent stay. A non-finite factor ends the run with an error.
func (s *server) Aggregate(round int, ups []*protocol.Upload) error {
	K := s.dim
	for _, up := range ups {
		if up == nil {
			continue
		}
		for k, j := range up.Items {
			s.cnt[j]++
			row, g := s.sum[int(j)*K:(int(j)+1)*K], up.Values[k*K:(k+1)*K]
			for d := range K {
				row[d] += float64(g[d])
			}
		}
	}
	eta := s.eta(round)
	bad := false
	for j, n := range s.cnt {
		if n == 0 {
			continue
		}
		row, sum := s.v[j*K:(j+1)*K], s.sum[j*K:(j+1)*K]
		for d := range K {
			prior := eta * float64(s.lamV[d]*row[d])
			x := float64(row[d]) - prior - s.kappa*(sum[d]-float64(n)*prior)/(float64(n)+s.pseudo)
			row[d] = float32(x)
			bad = bad || math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) > maxFactor
			sum[d] = 0
		}
		s.cnt[j] = 0
	}
	s.round = round + 1
	if bad {
		return fmt.Errorf("%w at round %d: item factors left [−%g, %g]; lower lr0 or the server step", ErrDiverged, round+1, maxFactor, maxFactor)
	}
	return nil
}

func (s *server) Done() bool { return s.round >= s.rounds }

// Round returns the next round the server will broadcast.
func (s *server) Round() int { return s.round }

// Factors returns the current V and the dimension.
func (s *server) Factors() ([]float32, int) { return s.v, s.dim }

// snapshotVersion is the version byte of the server's snapshot.
const snapshotVersion = 1

// snapshot is the state of a server between rounds: V and the next round.
// Λ_v and the steps are configuration.
type snapshot struct {
	Dim, NumItems, Round int
	V                    []float32
}

// MarshalBinary returns the server's state: a version byte, then the gob
// encoding of a snapshot.
func (s *server) MarshalBinary() ([]byte, error) {
	return protocol.EncodeSnapshot(snapshotVersion, snapshot{Dim: s.dim, NumItems: s.nItems, Round: s.round, V: s.v})
}

// UnmarshalBinary restores a state from MarshalBinary into s, a server
// built with the same configuration; it fails, leaving s unchanged, on
// corrupt data or another shape.
func (s *server) UnmarshalBinary(data []byte) error {
	var x snapshot
	if err := protocol.DecodeSnapshot(data, snapshotVersion, &x); err != nil {
		return fmt.Errorf("sdcf: server snapshot: %w", err)
	}
	switch {
	case x.Dim != s.dim || x.NumItems != s.nItems:
		return fmt.Errorf("sdcf: server snapshot of %d items × %d, the server has %d × %d", x.NumItems, x.Dim, s.nItems, s.dim)
	case len(x.V) != len(s.v):
		return fmt.Errorf("sdcf: server snapshot: %d factors, want %d", len(x.V), len(s.v))
	case x.Round < 0 || x.Round > s.rounds:
		return fmt.Errorf("sdcf: server snapshot at round %d, outside 0..%d", x.Round, s.rounds)
	}
	copy(s.v, x.V)
	s.round = x.Round
	return nil
}

// Rounds returns the number of rounds the server of cfg broadcasts: its
// training rounds, one broadcast each (SD-FM's server too). A client
// refuses a round numbered past it.
func Rounds(cfg Config) (int, error) {
	if cfg.Rounds < 1 {
		return 0, fmt.Errorf("%w: Rounds = %d must be ≥ 1", ErrConfig, cfg.Rounds)
	}
	return cfg.Rounds, nil
}
