package secagg

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Params are the public parameters of one aggregation round. Every client
// and the server must hold the same Params.
type Params struct {
	// N is the number of clients; their IDs are 0..N-1.
	N int
	// K is the neighbour degree: each client has K neighbours (K even, or
	// K = N-1 for the complete graph).
	K int
	// T is the Shamir threshold per neighbourhood: a client's secrets are
	// recovered from any T shares held by its neighbours, and from no fewer.
	T int
	// Bits is b: inputs, masks and the sum are taken modulo 2^Bits
	// (1 ≤ Bits ≤ 32).
	Bits int
	// Len is the length L of every client's vector.
	Len int
	// MinClients is the smallest number of clients that may survive any
	// round; below it the server aborts. Zero means T.
	MinClients int
	// Seed is the public per-round seed: it fixes the neighbour graph and
	// is mixed into every key derivation, so keys of one round are useless
	// in another.
	Seed [32]byte
	// Active selects the protocol against a server that lies: signed,
	// certified key advertisements (clients need an Auth), a neighbour
	// graph seeded by the committed key set (GraphSeed) rather than by
	// Seed, and a consistency round (Client.Consistency) before any
	// share is revealed.
	Active bool
}

// Validate reports whether p is usable.
func (p Params) Validate() error {
	switch {
	case p.N < 2:
		return fmt.Errorf("secagg: N = %d, need at least 2 clients", p.N)
	case p.N > math.MaxUint32:
		return fmt.Errorf("secagg: N = %d does not fit client IDs in uint32", p.N)
	case p.K < 1 || p.K > p.N-1:
		return fmt.Errorf("secagg: K = %d, need 1 ≤ K ≤ N-1 = %d", p.K, p.N-1)
	case p.K%2 != 0 && p.K != p.N-1:
		return fmt.Errorf("secagg: K = %d must be even unless it is N-1", p.K)
	case p.T < 1 || p.T > p.K:
		return fmt.Errorf("secagg: T = %d, need 1 ≤ T ≤ K = %d", p.T, p.K)
	case p.Bits < 1 || p.Bits > 32:
		return fmt.Errorf("secagg: Bits = %d, need 1..32", p.Bits)
	case p.Len < 1:
		return fmt.Errorf("secagg: Len = %d, need at least 1", p.Len)
	case p.MinClients < 0 || p.MinClients > p.N:
		return fmt.Errorf("secagg: MinClients = %d, need 0..N", p.MinClients)
	}
	return nil
}

func (p Params) minClients() int {
	if p.MinClients == 0 {
		return p.T
	}
	return p.MinClients
}

func (p Params) mask() uint32 { return uint32(1<<p.Bits - 1) }

// Graph is the neighbour graph of a round: a Harary graph H(K, N) laid
// over a permutation of the clients drawn from the round seed. Position i
// on the ring is joined to positions i±1, …, i±K/2, so every client has
// exactly K neighbours; with K = N-1 the graph is complete.
type Graph struct {
	nbrs [][]uint32
}

// NewGraph returns the neighbour graph for p (which must be valid).
func NewGraph(p Params) *Graph {
	n, k := p.N, p.K
	g := &Graph{nbrs: make([][]uint32, n)}
	if k == n-1 {
		for u := range n {
			g.nbrs[u] = make([]uint32, 0, k)
			for v := range n {
				if v != u {
					g.nbrs[u] = append(g.nbrs[u], uint32(v))
				}
			}
		}
		return g
	}
	perm := permutation(p)
	for i, u := range perm {
		g.nbrs[u] = ringNeighbours(perm, i, k)
	}
	return g
}

// permutation returns the public order of the clients on the Harary ring.
// ChaCha8 keyed by the seed makes it a deterministic function of the seed
// on every platform.
func permutation(p Params) []uint32 {
	r := rand.New(rand.NewChaCha8(derive32(p.Seed[:], "graph permutation")))
	perm := make([]uint32, p.N)
	for i := range perm {
		perm[i] = uint32(i)
	}
	r.Shuffle(p.N, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
	return perm
}

func ringNeighbours(perm []uint32, i, k int) []uint32 {
	n := len(perm)
	nb := make([]uint32, 0, k)
	for d := 1; d <= k/2; d++ {
		nb = append(nb, perm[(i+d)%n], perm[(i-d+n)%n])
	}
	slices.Sort(nb)
	return nb
}

// Neighbours returns the sorted neighbours of client u in the graph of p
// (which must be valid), without building the whole graph: O(N) time,
// O(K) memory.
func Neighbours(p Params, u uint32) []uint32 {
	if p.K == p.N-1 {
		nb := make([]uint32, 0, p.K)
		for v := range uint32(p.N) {
			if v != u {
				nb = append(nb, v)
			}
		}
		return nb
	}
	perm := permutation(p)
	return ringNeighbours(perm, slices.Index(perm, u), p.K)
}

// Neighbours returns the sorted neighbours of client u. The slice must not
// be modified.
func (g *Graph) Neighbours(u uint32) []uint32 { return g.nbrs[u] }

// Adjacent reports whether u and v are neighbours.
func (g *Graph) Adjacent(u, v uint32) bool {
	_, ok := slices.BinarySearch(g.nbrs[u], v)
	return ok
}

// Security and correctness targets used by ChooseParams: a failure of the
// secrecy conditions has probability at most 2^-SecurityBits, a
// correctness failure (an abort caused by too few surviving neighbours) at
// most 2^-CorrectnessBits, each over the random graph.
const (
	SecurityBits    = 40
	CorrectnessBits = 20
)

// DropoutMargin is added to the dropout fraction a deployment's
// participation floor allows (1 − floor) when it provisions a round's
// graph with ChooseParams or ChooseParamsActive (ProvisionedDropout): the
// server of package deploy provisions with it, and a client of the active
// protocol that refuses the server's K and T names the ones this margin
// gives, so that both sides speak of the same provisioning.
const DropoutMargin = 0.05

// Defaults of the fractions ChooseParams provisions for, where a caller
// has no deployment's figures: at most a tenth of the clients drop out
// and at most a tenth collude with the server. A deployment provisions
// its dropout from its participation floor (ProvisionedDropout).
const (
	DefaultDropout   = 0.1
	DefaultCollusion = 0.1
)

// ProvisionedDropout returns the dropout fraction to pass to ChooseParams
// or ChooseParamsActive for a round that must keep at least the fraction
// floor of its clients: 1 − floor + DropoutMargin.
func ProvisionedDropout(floor float64) float64 { return 1 - floor + DropoutMargin }

// ErrNoParams is returned by ChooseParams when no K ≤ N-1 meets the
// targets.
var ErrNoParams = errors.New("secagg: no neighbour degree meets the security and correctness targets")

// ChooseParams picks the neighbour degree K and threshold T for n clients
// of which at most a fraction dropout drop out during the round and at
// most a fraction collusion are corrupted and collude with the server. It
// returns the smallest even K for which some T satisfies, with the round
// graph drawn at random independently of who is corrupt or drops:
//
//	(secrecy)      n · P[Hyp(n-1, ⌊γn⌋, K) ≥ T] ≤ 2^-40
//	(connectivity) n²/2 · (γ+δ)^K ≤ 2^-40
//	(correctness)  n · P[Hyp(n-1, ⌊δn⌋, K) > K-T] ≤ 2^-20
//
// where Hyp(N, M, K) counts marked members in a uniform K-subset of N
// items of which M are marked: a client's K neighbours are such a subset
// because the permutation is uniform. Secrecy means no honest client has T
// corrupt neighbours, so the coalition never holds T shares of an honest
// secret on its own. Connectivity means the honest surviving clients stay
// connected in the graph: on the ring they would be cut only by two
// disjoint runs of K/2 consecutive removed clients, so the server learns
// nothing about their inputs beyond their sum. Correctness means every
// client keeps T surviving neighbours, so the round does not abort. Among
// the valid T it returns the largest, since a too-large T fails safe (an
// abort) while a too-small T fails open. If the complete graph is needed,
// K = n-1 and connectivity holds trivially.
func ChooseParams(n int, dropout, collusion float64) (k, t int, err error) {
	if n < 2 || dropout < 0 || collusion < 0 || dropout+collusion >= 1 {
		return 0, 0, fmt.Errorf("secagg: ChooseParams(%d, %g, %g): need n ≥ 2 and dropout+collusion < 1", n, dropout, collusion)
	}
	corrupt := int(math.Floor(collusion * float64(n)))
	dropped := int(math.Floor(dropout * float64(n)))
	logN := math.Log2(float64(n))
	for k = 2; ; k += 2 {
		k = min(k, n-1) // past the last even degree: the complete graph
		if k < n-1 && 2*logN-1+float64(k)*math.Log2(dropout+collusion) > -SecurityBits {
			continue
		}
		if t = bestThreshold(n, k, corrupt, dropped); t > 0 {
			return k, t, nil
		}
		if k == n-1 {
			return 0, 0, ErrNoParams
		}
	}
}

// bestThreshold returns the largest T meeting the secrecy and correctness
// conditions of ChooseParams for degree k, or 0 if there is none.
func bestThreshold(n, k, corrupt, dropped int) int {
	logN := math.Log2(float64(n))
	for t := k; t >= 1; t-- {
		// Correctness: fewer than T survivors means more than K-T dropped.
		if logN+log2Tail(n-1, dropped, k, k-t+1) > -CorrectnessBits {
			continue
		}
		if logN+log2Tail(n-1, corrupt, k, t) > -SecurityBits {
			return 0 // smaller T only makes secrecy worse
		}
		return t
	}
	return 0
}

// log2Tail returns log2 P[X ≥ x] for X ~ Hypergeometric(total, marked,
// draws), or -Inf when the probability is zero.
func log2Tail(total, marked, draws, x int) float64 {
	lo := max(x, 0)
	hi := min(marked, draws)
	if lo > hi {
		return math.Inf(-1)
	}
	if x <= 0 {
		return 0
	}
	den := lchoose(total, draws)
	maxl := math.Inf(-1)
	ls := make([]float64, 0, hi-lo+1)
	for i := lo; i <= hi; i++ {
		if draws-i > total-marked {
			continue
		}
		l := lchoose(marked, i) + lchoose(total-marked, draws-i) - den
		ls = append(ls, l)
		maxl = max(maxl, l)
	}
	if math.IsInf(maxl, -1) {
		return maxl
	}
	s := 0.0
	for _, l := range ls {
		s += math.Exp(l - maxl)
	}
	return (maxl + math.Log(s)) / math.Ln2
}

func lchoose(n, k int) float64 {
	a, _ := math.Lgamma(float64(n + 1))
	b, _ := math.Lgamma(float64(k + 1))
	c, _ := math.Lgamma(float64(n - k + 1))
	return a - b - c
}
