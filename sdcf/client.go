package sdcf

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/internal/vec"
	"github.com/privrec/privrec/protocol"
)

// public holds the public configuration every client shares: hyper-
// parameters and the precisions Λ_u, Λ_v. It holds no data.
type public struct {
	loss       Loss
	dim        int
	nItems     int
	temp       float64
	private    bool
	epsG       float64
	dropout    float64
	itemBias   bool // u_i[0] is fixed at 1 (Config.ItemBias)
	lamU, lamV []float32
	// lamKeys, when not nil, name the broadcast parameters of Λ_v, which
	// the server drew (Config.Lambda 0); lamV is then only the clients'
	// own draw, unused.
	lamKeys []string
}

// client is one user's device: its ratings, user vector and PRR vector
// never leave it.
type client struct {
	id    int
	pub   *public
	items []int32   // rated items, sorted
	vals  []float32 // centred ratings, parallel to items (squared loss)
	u     []float32
	rr    dp.TwoStageRR
	ones  []int32 // items with B'_j = 1, sorted (private only)

	// scratch, reused every round
	err   []float32 // per rated item: e_ij (squared) or the BPR weight s
	negs  []int32   // per rated item: its sampled negative (BPR)
	ubar  []float64
	send  []int32
	pairs []pair
	up    protocol.Upload

	lamV []float32 // Λ_v of the current round (pub.lamV or broadcast)

	// simulation ledger (never sent): item gradients uploaded over the
	// run, and how many of them were for items the client did not rate,
	// rounds with an upload, and the ε spent (nil if not private)
	sent, unrated, uploads int64
	led                    *ledger
}

// pair is one item gradient of a round before merging: its error (or BPR
// weight) coefficient on u.
type pair struct {
	item int32
	coef float32
}

func (c *client) ID() int { return c.id }

// rated returns the position of item among the client's ratings.
func (c *client) rated(item int32) (int, bool) { return slices.BinarySearch(c.items, item) }

// needEta names the parameter every training broadcast carries.
var needEta = []string{"eta"}

// Round runs Alg. 1 for one iteration: Langevin step of u from the rated
// items, then gradients for the items the send set holds.
func (c *client) Round(b *protocol.Broadcast, r *rand.Rand) (*protocol.Upload, error) {
	if b.Phase != protocol.PhaseTrain {
		return nil, nil
	}
	p := c.pub
	// The Λ_v parameters (lamKeys) are checked as they are read.
	if err := b.Require(protocol.Need{Dim: p.dim, NumItems: p.nItems, V: true, Whole: true, Params: needEta}); err != nil {
		return nil, err
	}
	if p.dropout > 0 && r.Float64() < p.dropout {
		return nil, nil
	}
	eta := b.Param("eta", 0)
	if !(eta > 0) {
		return nil, fmt.Errorf("broadcast round %d: step eta = %g", b.Round, eta)
	}
	if p.lamKeys == nil {
		c.lamV = p.lamV
	} else {
		if c.lamV == nil {
			c.lamV = make([]float32, len(p.lamKeys))
		}
		for d, key := range p.lamKeys {
			x, ok := b.Params[key]
			if !ok {
				return nil, fmt.Errorf("%w: broadcast round %d has no %s", protocol.ErrMessage, b.Round, key)
			}
			c.lamV[d] = float32(x)
		}
	}
	K := p.dim
	h := len(c.items)
	clear(c.ubar)
	u := c.u
	switch p.loss {
	case Squared:
		for k, j := range c.items {
			v := b.Row(int(j))
			e := vec.Dot(u, v) - c.vals[k]
			c.err[k] = e
			for d := range K {
				c.ubar[d] += float64(e * v[d])
			}
		}
	case BPR:
		for k, j := range c.items {
			n := c.negative(r)
			c.negs[k] = n
			v, w := b.Row(int(j)), b.Row(int(n))
			s := sigmoidNeg(vec.Dot(u, v) - vec.Dot(u, w))
			c.err[k] = s
			for d := range K {
				c.ubar[d] += float64(s * (w[d] - v[d]))
			}
		}
	}
	// ū = mean over rated items of η(∇ + Λ_u u) − N(0, Temp·η I): the mean of
	// h independent normals is N(0, Temp·η/h).
	sdU := math.Sqrt(p.temp * eta / float64(h))
	for d := range K {
		c.ubar[d] = eta*(c.ubar[d]/float64(h)+float64(p.lamU[d]*u[d])) - sdU*r.NormFloat64()
	}
	if p.itemBias {
		c.ubar[0] = 0 // the offset coordinate stays 1
	}

	c.pairs = c.pairs[:0]
	if !p.private {
		for k, j := range c.items {
			if p.loss == Squared {
				c.pairs = append(c.pairs, pair{j, c.err[k]})
			} else { // Lemma 2: −s on the positive, +s on its negative
				c.pairs = append(c.pairs, pair{j, -c.err[k]}, pair{c.negs[k], c.err[k]})
			}
		}
	} else {
		c.sendSet(r)
		var alpha, mu, sigma float64
		if p.loss == Squared {
			mu, sigma = meanStd(c.err)
			if math.IsNaN(mu+sigma) || math.IsInf(mu+sigma, 0) {
				return nil, fmt.Errorf("%w at round %d: client %d has non-finite errors", ErrDiverged, b.Round+1, c.id)
			}
			sigma = math.Max(sigma, 1e-3)
			alpha = math.Inf(1)
			if p.epsG > 0 {
				a, err := dp.TruncationBound(p.epsG, mu, sigma)
				if err != nil {
					return nil, err
				}
				alpha = a
			}
		}
		for _, j := range c.send {
			k, ok := c.rated(j)
			var coef float32
			switch {
			case p.loss == Squared && ok:
				coef = c.err[k]
			case p.loss == Squared:
				coef = float32(truncNormal(r, mu, sigma, alpha))
			case ok: // BPR, a positive: its pair's weight
				coef = -c.err[k]
			default: // BPR, a negative: pair with a random positive
				pos := c.items[r.IntN(h)]
				coef = sigmoidNeg(vec.Dot(u, b.Row(int(pos))) - vec.Dot(u, b.Row(int(j))))
			}
			c.pairs = append(c.pairs, pair{j, coef})
		}
	}
	c.emit(b, r, eta)
	for d := range K {
		u[d] -= float32(c.ubar[d])
		if x := math.Abs(float64(u[d])); !(x <= maxFactor) {
			return nil, fmt.Errorf("%w at round %d: client %d's user vector left [−%g, %g]; lower lr0", ErrDiverged, b.Round+1, c.id, maxFactor, maxFactor)
		}
	}
	if c.led != nil {
		if err := c.led.charge(c.id, b.Round, c.uploads == 0); err != nil {
			return nil, err
		}
	}
	c.uploads++
	return &c.up, nil
}

// emit merges the pairs by item (sorted, so the upload's order reveals
// nothing) and writes grad(v_j) = η(coef·u + Λ_v v_j) − N(0, Temp·η I).
func (c *client) emit(b *protocol.Broadcast, r *rand.Rand, eta float64) {
	slices.SortFunc(c.pairs, func(x, y pair) int { return int(x.item) - int(y.item) })
	K := c.pub.dim
	sd := math.Sqrt(c.pub.temp * eta)
	c.up = protocol.Upload{Client: c.id, Round: b.Round, Items: c.up.Items[:0], Values: c.up.Values[:0]}
	for k := 0; k < len(c.pairs); {
		j := c.pairs[k].item
		var coef float32
		for ; k < len(c.pairs) && c.pairs[k].item == j; k++ {
			coef += c.pairs[k].coef
		}
		v := b.Row(int(j))
		c.up.Items = append(c.up.Items, j)
		c.sent++
		if _, ok := c.rated(j); !ok {
			c.unrated++
		}
		for d := range K {
			g := eta*float64(coef*c.u[d]+c.lamV[d]*v[d]) - sd*r.NormFloat64()
			c.up.Values = append(c.up.Values, float32(g))
		}
	}
}

// sendSet draws this round's IRR send set S^t from B' into c.send, sorted:
// each item of B' = 1 with probability q, each other item with probability
// p.
func (c *client) sendSet(r *rand.Rand) {
	c.send = dp.SampleSendSet(r, c.send[:0], c.ones, c.pub.nItems, c.rr.Q, c.rr.P)
}

// negative draws an unrated item uniformly.
func (c *client) negative(r *rand.Rand) int32 {
	for {
		j := int32(r.IntN(c.pub.nItems))
		if _, ok := c.rated(j); !ok {
			return j
		}
	}
}

// truncNormal draws from N(mu, sigma²) restricted to [−alpha, alpha] by
// inverting the CDF.
func truncNormal(r *rand.Rand, mu, sigma, alpha float64) float64 {
	if math.IsInf(alpha, 1) {
		return mu + sigma*r.NormFloat64()
	}
	lo := 0.5 * math.Erfc(-(-alpha-mu)/(sigma*math.Sqrt2))
	hi := 0.5 * math.Erfc(-(alpha-mu)/(sigma*math.Sqrt2))
	x := mu + sigma*math.Sqrt2*math.Erfinv(2*(lo+(hi-lo)*r.Float64())-1)
	if math.IsNaN(x) || math.IsInf(x, 0) {
		x = mu
	}
	return math.Max(-alpha, math.Min(alpha, x))
}

func meanStd(x []float32) (mu, sd float64) {
	for _, v := range x {
		mu += float64(v)
	}
	mu /= float64(len(x))
	for _, v := range x {
		d := float64(v) - mu
		sd += d * d
	}
	return mu, math.Sqrt(sd / float64(len(x)))
}

// sigmoidNeg returns e^(−x)/(1 + e^(−x)) = 1/(1 + e^x).
func sigmoidNeg(x float32) float32 { return float32(1 / (1 + math.Exp(float64(x)))) }
