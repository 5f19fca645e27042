package ldpop

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/internal/vec"
	"github.com/privrec/privrec/protocol"
)

// shared is the public configuration every client knows.
type shared struct {
	variant Variant
	k, m, n int
	delta   float64 // Δ = r_max − r_min
	bound   float64 // B
	reg     float64 // λ of the user fit
	lambda  float32 // λ of the item gradient
	b       float64 // Laplace scale of a position's summed noise (0: none)
	scheme  dp.ShareScheme
	mask    *masking // the integer path, nil on the float paths
	clip    bool     // clip residuals to [−Δ, Δ]
	all     []int32  // 0..m−1, the items of a basic upload
	obs     *observer
}

// client is one user's device. Its fields never leave it except through
// the uploads it builds.
type client struct {
	id      int
	sh      *shared
	items   []int32   // rated items, increasing
	y       []float32 // the ratings
	u       []float32 // u_i, ‖u_i‖ ≤ B
	clipped bool      // the fit met the bound
	eta     []float32 // Basic: the fixed noise shares η^i, m·k
	up      protocol.Upload
	upItems []int32
	vals    []float32
	noise   []float32 // scratch: this round's noise shares
	h       []float32 // scratch: the server's H of this round's positions
	words   []uint32  // the integer path's upload
	fw      fitWork
}

// ID returns the client's index.
func (c *client) ID() int { return c.id }

// Round answers one broadcast.
func (c *client) Round(b *protocol.Broadcast, r *rand.Rand) (*protocol.Upload, error) {
	k := c.sh.k
	if err := c.check(b); err != nil {
		return nil, err
	}
	c.sh.obs.observe(b, k)
	if b.Phase == protocol.PhaseSetup || b.Param(paramFit, 0) == 1 {
		if b.Items != nil || len(b.V) != c.sh.m*k {
			return nil, fmt.Errorf("%w: a fit round must carry the whole V", protocol.ErrMessage)
		}
		c.clipped = fitUser(c.u, c.items, c.y, b.V, k, c.sh.reg, c.sh.bound, &c.fw)
		if b.Phase != protocol.PhaseSetup {
			return nil, nil
		}
		if b.Words > 0 {
			return c.maskedSetup(b)
		}
		if c.sh.variant == Basic {
			if err := c.drawFixedNoise(b, r); err != nil {
				return nil, err
			}
		}
		// Announce the client, so that the server averages over the
		// clients that take part.
		c.up = protocol.Upload{Client: c.id, Round: b.Round, Scalars: []float64{1}}
		return &c.up, nil
	}
	if b.Phase != protocol.PhaseTrain {
		return nil, nil
	}
	if c.sh.variant == Basic {
		return c.basic(b)
	}
	if b.Words > 0 {
		if c.sh.mask == nil {
			return nil, fmt.Errorf("%w: a masked round, and the clients were not built for secagg=masked", protocol.ErrMessage)
		}
		return c.maskedSampled(b, r)
	}
	return c.sampled(b, r)
}

// check returns an error for a broadcast the client cannot answer: not
// shaped for its catalog, missing what the round reads (the whole V in a
// setup, fit or basic round; the named rows, their V and positions in a
// sampled one), non-finite, or asking for more masked words than the
// client sends (one in setup, none in a fit or basic round, at most one
// per named position and the arrival word in a sampled one).
func (c *client) check(b *protocol.Broadcast) error {
	sh := c.sh
	n := protocol.Need{Dim: sh.k, NumItems: sh.m}
	switch {
	case b.Phase == protocol.PhaseSetup:
		n.V, n.Whole, n.Words = true, true, 1
	case b.Param(paramFit, 0) == 1 || (b.Phase == protocol.PhaseTrain && sh.variant == Basic):
		n.V, n.Whole = true, true
	case b.Phase == protocol.PhaseTrain:
		n.V, n.AuxDim = true, sh.k
		if b.Words == 0 && sh.b > 0 && sh.scheme == dp.MixtureShares {
			n.AuxDim = 2 * sh.k
		}
		if b.Items == nil {
			return fmt.Errorf("%w: sampled round %d names no rows", protocol.ErrMessage, b.Round)
		}
		n.Words = len(b.Items)*sh.k + 1 // at most: the named positions and the arrival word
	}
	return b.Require(n)
}

// drawFixedNoise draws the basic scheme's noise shares once: they are a
// term of the objective, the same in every round.
func (c *client) drawFixedNoise(b *protocol.Broadcast, r *rand.Rand) error {
	sh := c.sh
	c.eta = make([]float32, sh.m*sh.k)
	if sh.scheme == dp.MixtureShares && (b.AuxDim != sh.k || len(b.Aux) != len(c.eta)) {
		return fmt.Errorf("%w: the setup round carries no H", protocol.ErrMessage)
	}
	sh.fillShares(r, b.Aux, c.eta)
	return nil
}

// residual returns r − u·v, clipped to [−Δ, Δ] unless the scheme does not
// clip.
func (c *client) residual(y float32, v []float32) float32 {
	e := y - vec.Dot(c.u, v)
	if c.sh.clip {
		d := float32(c.sh.delta)
		e = min(max(e, -d), d)
	}
	return e
}

// basic uploads the whole gradient of (8) plus the fixed noise (Alg. 1).
func (c *client) basic(b *protocol.Broadcast) (*protocol.Upload, error) {
	sh := c.sh
	k := sh.k
	if b.Items != nil || len(b.V) != sh.m*k || c.eta == nil {
		return nil, fmt.Errorf("%w: basic round without the whole V or before setup", protocol.ErrMessage)
	}
	if c.vals == nil {
		c.vals = make([]float32, sh.m*k)
	}
	lam := float32(b.Param(paramLambda, 0))
	for p, v := range b.V {
		c.vals[p] = lam*v + c.eta[p]
	}
	for n, j := range c.items {
		v := b.V[int(j)*k : int(j)*k+k]
		e := 2 * c.residual(c.y[n], v)
		row := c.vals[int(j)*k : int(j)*k+k]
		for l := range row {
			row[l] -= e * c.u[l]
		}
	}
	c.up = protocol.Upload{Client: c.id, Round: b.Round, Items: sh.all, Values: c.vals}
	return &c.up, nil
}

// sampled uploads the named positions (Alg. C2): R/k·(gradient element +
// noise share) at each, zeros elsewhere in the named rows.
func (c *client) sampled(b *protocol.Broadcast, r *rand.Rand) (*protocol.Upload, error) {
	sh := c.sh
	k := sh.k
	ad := k
	if sh.b > 0 && sh.scheme == dp.MixtureShares {
		ad = 2 * k
	}
	rows := b.Items
	if rows == nil || b.AuxDim != ad || len(b.Aux) != len(rows)*ad {
		return nil, fmt.Errorf("%w: sampled round without positions (AuxDim %d, want %d)", protocol.ErrMessage, b.AuxDim, ad)
	}
	scale := float32(b.Param(paramScale, 0))
	lam := float32(b.Param(paramLambda, 0))
	c.upItems = append(c.upItems[:0], rows...)
	if cap(c.vals) < len(rows)*k {
		c.vals = make([]float32, len(rows)*k)
	}
	vals := c.vals[:len(rows)*k]
	clear(vals)
	c.noise = slices.Grow(c.noise[:0], len(rows)*k)
	if ad > k {
		c.h = slices.Grow(c.h[:0], len(rows)*k)
	}
	for q, j := range rows {
		v := b.Row(q)
		aux := b.Aux[q*ad : (q+1)*ad]
		var e float32
		if n, ok := slices.BinarySearch(c.items, j); ok {
			e = 2 * c.residual(c.y[n], v)
		}
		for l, on := range aux[:k] {
			if on == 0 {
				continue
			}
			vals[q*k+l] = lam*v[l] - e*c.u[l]
			c.noise = append(c.noise, 0)
			if ad > k {
				c.h = append(c.h, aux[k+l])
			}
		}
	}
	if sh.b > 0 {
		sh.fillShares(r, c.h, c.noise)
	}
	// Noise shares in position order, then the scale of C2 line 5.
	x := 0
	for q := range rows {
		for l, on := range b.Aux[q*ad : q*ad+k] {
			if on != 0 {
				vals[q*k+l] = scale * (vals[q*k+l] + c.noise[x])
				x++
			}
		}
	}
	c.up = protocol.Upload{Client: c.id, Round: b.Round, Items: c.upItems, Values: vals}
	return &c.up, nil
}
