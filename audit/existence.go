package audit

import (
	"math"

	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

// existenceModel is what the attacker assumes about one user's send
// decisions: PRR with flip probability f, then each round an item with
// B' = 1 is sent with probability q and any other with probability p.
// Fresh per-round randomized response is f = 0 with p = p*, q = q*; a
// plain client is f = 0, p = 0, q = 1. The audit hands the attacker each
// user's exact parameters (a real server would estimate them), which only
// makes the attack stronger.
type existenceModel struct{ f, p, q float64 }

// bound returns the best balanced accuracy any attacker can reach on one
// rated-bit of this user from B' alone: e^ε∞/(1 + e^ε∞) with ε∞ =
// ln((1 − f/2)/(f/2)) the PRR bound, that is 1 − f/2 (1 without PRR).
func (m existenceModel) bound() float64 { return 1 - m.f/2 }

// existence scores guesses of which items each user rated, from the items
// the user's uploads name round after round. Each user is scored on a
// balanced set: its rated items and as many unrated ones drawn at random
// (fewer of both if it rated more than half the items), so that chance is
// 1/2 and e^ε/(1 + e^ε) bounds the accuracy of any ε-DP release of the bit.
type existence struct {
	nItems   int
	epochLen int                 // rounds per client epoch (restarts); 0: one epoch
	pos      []int32             // user·nItems + item → position in the user's scored set, −1 if not scored
	users    map[int]*scoredUser // by client ID
	order    []int               // scored client IDs, increasing
	model    func(u int) (existenceModel, bool)
	bnd      func(u int) float64  // the bound of user u's bits (default: model's)
	sizes    map[int]*sizeTracker // message sizes per user
}

type scoredUser struct {
	h      int // the user's number of rated items
	items  []int32
	rated  []bool
	counts [][]int32 // per epoch, per scored item: rounds in which it was sent
	rounds []int     // per epoch: rounds in which the user uploaded
}

type sizeTracker struct{ sum, n float64 }

// newExistence picks the scored sets of d's users (those model accepts).
func newExistence(d *ratings.Dataset, seed uint64, epochLen int, model func(u int) (existenceModel, bool)) *existence {
	nI := d.NumItems()
	x := &existence{nItems: nI, epochLen: epochLen, pos: make([]int32, d.NumUsers()*nI),
		users: map[int]*scoredUser{}, model: model, sizes: map[int]*sizeTracker{}}
	for k := range x.pos {
		x.pos[k] = -1
	}
	byUser := d.ByUser()
	for u := range d.NumUsers() {
		items, _ := byUser.Row(u)
		if len(items) == 0 {
			continue
		}
		if _, ok := model(u); !ok {
			continue
		}
		r := rng.New(seed, streamEval, uint64(u))
		rated := make([]bool, nI)
		for _, j := range items {
			rated[j] = true
		}
		n := min(len(items), nI-len(items))
		if n == 0 {
			continue
		}
		s := &scoredUser{h: len(items)}
		// n rated items (a random subset if n < h) and n unrated ones.
		perm := r.Perm(len(items))
		for _, k := range perm[:n] {
			s.items = append(s.items, items[k])
			s.rated = append(s.rated, true)
		}
		var unrated []int32
		for j := range int32(nI) {
			if !rated[j] {
				unrated = append(unrated, j)
			}
		}
		for _, k := range r.Perm(len(unrated))[:n] {
			s.items = append(s.items, unrated[k])
			s.rated = append(s.rated, false)
		}
		for k, j := range s.items {
			x.pos[u*nI+int(j)] = int32(k)
		}
		x.users[u] = s
		x.order = append(x.order, u)
		x.sizes[u] = &sizeTracker{}
	}
	return x
}

// observe counts one round of the transcript.
func (x *existence) observe(rec *protocol.Record) {
	if rec.Broadcast.Phase != protocol.PhaseTrain {
		return
	}
	e := 0
	if x.epochLen > 0 {
		e = rec.Round / x.epochLen
	}
	for _, up := range rec.Uploads {
		s := x.users[up.Client]
		if s == nil {
			continue
		}
		for len(s.rounds) <= e {
			s.rounds = append(s.rounds, 0)
			s.counts = append(s.counts, make([]int32, len(s.items)))
		}
		s.rounds[e]++
		z := x.sizes[up.Client]
		z.sum += float64(len(up.Items))
		z.n++
		base := up.Client * x.nItems
		for _, j := range up.Items {
			if k := x.pos[base+int(j)]; k >= 0 {
				s.counts[e][k]++
			}
		}
	}
}

// logBin is log P(k successes in n | π) up to the binomial coefficient.
func logBin(k, n int32, lp, lq float64) float64 {
	var s float64
	if k > 0 {
		s += float64(k) * lp
	}
	if n-k > 0 {
		s += float64(n-k) * lq
	}
	return s
}

// logMix returns log(a·e^x + b·e^y) for weights a, b ≥ 0.
func logMix(a, x, b, y float64) float64 {
	switch {
	case a == 0 || math.IsInf(x, -1):
		return math.Log(b) + y
	case b == 0 || math.IsInf(y, -1):
		return math.Log(a) + x
	}
	m := math.Max(x, y)
	return m + math.Log(a*math.Exp(x-m)+b*math.Exp(y-m))
}

// guess returns the attacker's log-likelihoods of B = 1 and B = 0 for one
// scored item of s: perEpoch treats each epoch's B' as a new draw (right
// against a client that forgets its PRR state at a restart), otherwise B'
// is one draw for the whole run.
func (s *scoredUser) logLik(k int, m existenceModel, perEpoch bool) (l1, l0 float64) {
	lq1, lq0 := math.Log(m.q), math.Log1p(-m.q)
	lp1, lp0 := math.Log(m.p), math.Log1p(-m.p)
	g := m.f / 2
	if perEpoch {
		for e := range s.rounds {
			n, c := int32(s.rounds[e]), s.counts[e][k]
			a, b := logBin(c, n, lq1, lq0), logBin(c, n, lp1, lp0) // B' = 1, B' = 0
			l1 += logMix(1-g, a, g, b)
			l0 += logMix(g, a, 1-g, b)
		}
		return l1, l0
	}
	var a, b float64
	for e := range s.rounds {
		n, c := int32(s.rounds[e]), s.counts[e][k]
		a += logBin(c, n, lq1, lq0)
		b += logBin(c, n, lp1, lp0)
	}
	return logMix(1-g, a, g, b), logMix(g, a, 1-g, b)
}

// score returns the balanced accuracy of the Bayes attacker over every
// scored item, and meanBound.
func (x *existence) score(perEpoch bool) (acc accuracy, bound float64) {
	tie := false
	for _, u := range x.order {
		s := x.users[u]
		m, _ := x.model(u)
		for k := range s.items {
			l1, l0 := s.logLik(k, m, perEpoch)
			g := l1 > l0
			if l1 == l0 || math.IsNaN(l1-l0) { // no evidence: alternate
				g, tie = tie, !tie
			}
			acc.add(g == s.rated[k])
		}
	}
	return acc, x.meanBound()
}

// meanBound returns the item-weighted mean of the users' bounds (bnd, or
// the model's) over every scored item.
func (x *existence) meanBound() float64 {
	var bsum float64
	var n int
	for _, u := range x.order {
		b := 0.0
		if x.bnd != nil {
			b = x.bnd(u)
		} else {
			m, _ := x.model(u)
			b = m.bound()
		}
		for range x.users[u].items {
			bsum += b
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return bsum / float64(n)
}
