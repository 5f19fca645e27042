package sdcf

import (
	"math"

	"github.com/privrec/privrec/protocol"
)

// server holds the item factors V (Alg. 2). It sees only uploads.
type server struct {
	dim, nItems, rounds int
	lr0, gamma          float64
	v, bv               []float32 // current factors and the broadcast copy
	sum                 []float64
	cnt                 []int32
	round               int
	b                   protocol.Broadcast
	// onUploads, when not nil, sees who uploaded in a round (the ledger of
	// the simulation; a real server sees the senders too).
	onUploads func(round int, ups []*protocol.Upload) error
}

func newServer(dim, nItems, rounds int, lr0, gamma float64, v []float32) *server {
	return &server{dim: dim, nItems: nItems, rounds: rounds, lr0: lr0, gamma: gamma, v: v,
		bv: make([]float32, len(v)), sum: make([]float64, len(v)), cnt: make([]int32, nItems),
		b: protocol.Broadcast{Phase: protocol.PhaseTrain, Dim: dim, NumItems: nItems, Params: map[string]float64{}}}
}

// eta returns η_t = η_0 / t^γ for iteration t = round + 1.
func (s *server) eta(round int) float64 { return s.lr0 / math.Pow(float64(round+1), s.gamma) }

func (s *server) Broadcast(round int) (*protocol.Broadcast, error) {
	copy(s.bv, s.v)
	s.b.Round, s.b.V = round, s.bv
	s.b.Params["eta"] = s.eta(round)
	return &s.b, nil
}

// Aggregate moves each v_j by the mean of the gradients received for j
// (items nobody sent stay).
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
	for j, n := range s.cnt {
		if n == 0 {
			continue
		}
		row, sum := s.v[j*K:(j+1)*K], s.sum[j*K:(j+1)*K]
		for d := range K {
			row[d] -= float32(sum[d] / float64(n))
			sum[d] = 0
		}
		s.cnt[j] = 0
	}
	s.round = round + 1
	if s.onUploads != nil {
		return s.onUploads(round, ups)
	}
	return nil
}

func (s *server) Done() bool { return s.round >= s.rounds }
