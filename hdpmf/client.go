package hdpmf

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/privrec/privrec/accountant"
	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/internal/vec"
	"github.com/privrec/privrec/protocol"
)

// shared is the public configuration every client knows.
type shared struct {
	k       int
	m       int // catalog size
	variant Variant
	scheme  dp.ShareScheme
	noise   float64 // Laplace scale per coordinate of an item's summed noise
	reg     float32
	pseudo  float64
	acct    *accountant.Accountant
	item    []float64 // γ_j, public item weights
	eps     float64
	thresh  float64
	label   string
	ones    []int32
	mask    *masking // the integer path, nil on the float paths
	// clipL2 and clipL1 bound the norms of one client's whole noise-free
	// upload on the float paths (Config.UserClip·Δ and ·√K·Δ), clipInt the
	// L2 norm of its quantized words on the integer path; 0: no clip.
	clipL2, clipL1, clipInt float64
	noiseless               bool // Clients.Noiseless: no noise shares (the canary)
	paper                   bool // Config.PaperPredict: the paper's final step and prediction
}

// client is one user's device. Its fields never leave it except through
// the uploads it builds.
type client struct {
	id     int
	sh     *shared
	beta   float64   // β_i, this user's weight
	charge float64   // ε of this user's most exposed rating per round
	items  []int32   // rated (PDPMF: kept) items, increasing
	y      []float32 // ratings, stretched by W_ij for HDPMF
	raw    []float32 // the ratings, unstretched (HDPMF's final fold-in)
	off    float32   // HDPMF: the user's offset from the final fold-in
	u      []float32 // user vector, ‖u‖ ≤ 1
	grad   []float32 // scratch, K
	es     []float32 // scratch: the residual factor of each rated item's row
	sent   int       // training rounds this client uploaded in
	up     protocol.Upload
	// The integer path's buffers.
	words       []uint32
	row         []float32
	ints, noise []int64
	tabs        []*dp.SkellamTable // per item: its Skellam share sampler
	// The roster calibration's buffers (maskedDense): the dense words
	// and the one share sampler, drawn for rtabShares clients.
	dense      []uint32
	rtab       *dp.SkellamTable
	rtabShares int
}

func (c *client) ID() int { return c.id }

// Round answers one broadcast.
func (c *client) Round(b *protocol.Broadcast, r *rand.Rand) (*protocol.Upload, error) {
	if err := c.check(b); err != nil {
		return nil, err
	}
	switch b.Phase {
	case protocol.PhaseSetup:
		return c.setup(b, r), nil
	case protocol.PhaseFinal:
		if c.sh.variant != Plain && !c.sh.paper {
			c.foldIn(b.V) // the published table (shrink.go)
		} else {
			c.updateUser(b)
		}
		return nil, nil
	}
	if b.Round >= 2 {
		c.updateUser(b)
	}
	// Under a roster calibration (protocol.ParamRoster) every client adds
	// its noise share to every item, data or not.
	rosterNoise := b.Words > 0 && c.sh.variant != Plain && protocol.Roster(b) > 0
	if len(c.items) == 0 {
		if rosterNoise {
			return c.maskedDense(b, r, false), nil
		}
		return nil, nil
	}
	if c.sh.variant != Plain { // Plain: exact gradients, nothing to spend
		if err := c.sh.acct.Charge(c.id, b.Round, c.charge, 0, c.sh.label); err != nil {
			if errors.Is(err, accountant.ErrBudgetExceeded) {
				if rosterNoise { // noise alone: no data released
					return c.maskedDense(b, r, false), nil
				}
				return nil, nil // out of budget: release nothing
			}
			return nil, err
		}
	}
	if rosterNoise {
		return c.maskedDense(b, r, true), nil
	}
	if b.Words > 0 {
		return c.maskedRound(b, r), nil
	}
	c.sent++
	k := c.sh.k
	vals := c.up.Values[:len(c.items)*k]
	u := c.u
	es := c.residuals(b)
	for n, j := range c.items {
		e := es[n]
		row := vals[n*k : n*k+k]
		switch {
		case c.sh.variant == Plain || c.sh.noiseless:
			clear(row)
		case c.sh.scheme == dp.MixtureShares:
			dp.FillMixShares(r, c.sh.noise, b.Aux[int(j)*k:int(j)*k+k], int(b.Counts[j]), row)
		default:
			dp.FillGammaShares32(r, c.sh.noise, int(b.Counts[j]), row)
		}
		vec.Axpy(row, u, e)
	}
	c.up.Client, c.up.Round, c.up.Items, c.up.Values = c.id, b.Round, c.items, vals
	c.up.Counts = c.sh.ones[:len(c.items)]
	return &c.up, nil
}

// residuals returns the factor e_n = 2(u·v_j − y_n) of each rated item's
// row e_n·u against b's V, scaled down so that the whole noise-free
// upload meets the user clip (Config.UserClip): on the float paths its L2
// norm ‖u‖₂·√Σe² ≤ clipL2 and its L1 norm ‖u‖₁·Σ|e| ≤ clipL1; on the
// integer path (clipInt) its L2 norm in integer units, after the row clip
// and stochastic rounding (each coordinate moves by less than 1), is at
// most clipInt: the float rows are scaled to clipInt − √(K·n) units.
func (c *client) residuals(b *protocol.Broadcast) []float32 {
	k := c.sh.k
	if cap(c.es) < len(c.items) {
		c.es = make([]float32, len(c.items))
	}
	es := c.es[:len(c.items)]
	u := c.u
	var s2, s1 float64
	for n, j := range c.items {
		v := b.V[int(j)*k : int(j)*k+k]
		e := 2 * (vec.Dot(u, v) - c.y[n])
		es[n] = e
		s2 += float64(e) * float64(e)
		s1 += math.Abs(float64(e))
	}
	var n2, n1 float64
	for _, x := range u {
		n2 += float64(x) * float64(x)
		n1 += math.Abs(float64(x))
	}
	l2, l1 := math.Sqrt(s2*n2), s1*n1
	f := 1.0
	switch sh := c.sh; {
	case b.Words > 0 && sh.clipInt > 0:
		room := math.Max(0, sh.clipInt-math.Sqrt(float64(k*len(c.items))))
		if l2*maskScale > room {
			f = room / (l2 * maskScale)
		}
	case b.Words == 0 && sh.clipL2 > 0:
		if l2 > sh.clipL2 {
			f = sh.clipL2 / l2
		}
		if l1*f > sh.clipL1 {
			f = sh.clipL1 / l1
		}
	}
	if f < 1 {
		for n := range es {
			es[n] *= float32(f)
		}
	}
	return es
}

// needUserRate names the parameter of the user step.
var needUserRate = []string{"lr-user"}

// check returns an error for a broadcast the client cannot answer: not
// shaped for its catalog, missing what the phase reads (V and the counts
// of every item, H under MixtureShares, the user step), non-finite, a
// masked round the client was not built for, or a round before setup.
func (c *client) check(b *protocol.Broadcast) error {
	sh := c.sh
	n := protocol.Need{Dim: sh.k, NumItems: sh.m}
	words := 0 // the masked words the phase asks for
	switch b.Phase {
	case protocol.PhaseSetup:
		words = sh.m
	case protocol.PhaseTrain:
		n.V, n.Whole = true, true
		if sh.variant != Plain {
			n.Counts = true
			if sh.scheme == dp.MixtureShares && b.Words == 0 {
				n.AuxDim = sh.k
			}
		}
		if b.Round >= 2 {
			n.Params = needUserRate
		}
		words = sh.m * (sh.k + 1)
	case protocol.PhaseFinal:
		n.V, n.Whole, n.Params = true, true, needUserRate
	}
	if b.Words > 0 {
		n.Words = words
	}
	if err := b.Require(n); err != nil {
		return err
	}
	switch {
	case b.Words > 0 && (b.Phase == protocol.PhaseFinal || b.Words != words):
		return fmt.Errorf("%w: %s round %d asks for %d words, the client sends %d", protocol.ErrMessage, b.Phase, b.Round, b.Words, words)
	case b.Words > 0 && b.Phase == protocol.PhaseTrain && sh.mask == nil:
		return fmt.Errorf("%w: a masked round, and the clients were not built for secagg=masked", protocol.ErrMessage)
	case b.Phase != protocol.PhaseSetup && c.grad == nil:
		return fmt.Errorf("%w: %s round %d before the setup round", protocol.ErrMessage, b.Phase, b.Round)
	}
	return nil
}

// setup samples (PDPMF) and announces the rated items.
func (c *client) setup(b *protocol.Broadcast, r *rand.Rand) *protocol.Upload {
	if c.sh.variant == PDPMF {
		n := 0
		for k, j := range c.items {
			e := c.beta * c.sh.item[j] * c.sh.eps
			if e >= c.sh.thresh || r.Float64() < dp.KeepProb(e, c.sh.thresh) {
				c.items[n], c.y[n], c.raw[n] = j, c.y[k], c.raw[k]
				n++
			}
		}
		c.items, c.y, c.raw = c.items[:n], c.y[:n], c.raw[:n]
	}
	c.grad = make([]float32, c.sh.k)
	c.up.Values = make([]float32, len(c.items)*c.sh.k)
	if len(c.items) == 0 {
		return nil
	}
	if b.Words > 0 {
		return c.maskedSetup(b)
	}
	c.up = protocol.Upload{Client: c.id, Round: b.Round, Items: c.items, Counts: c.sh.ones[:len(c.items)], Values: c.up.Values}
	up := c.up
	up.Values = nil
	return &up
}

// updateUser takes one preconditioned gradient step on u against b's V
// (at the previous round's rate) and projects u into the unit ball.
func (c *client) updateUser(b *protocol.Broadcast) {
	if len(c.items) == 0 {
		return
	}
	k := c.sh.k
	g := c.grad
	clear(g)
	u := c.u
	for n, j := range c.items {
		v := b.V[int(j)*k : int(j)*k+k]
		e := 2 * (vec.Dot(u, v) - c.y[n])
		vec.Axpy(g, v, e)
	}
	lr := float32(b.Param("lr-user", 0) / (float64(len(c.items)) + c.sh.pseudo))
	reg2 := 2 * c.sh.reg
	for d := range u {
		u[d] -= lr * (g[d] + reg2*u[d])
	}
	project(u)
}

// project scales u into the unit L2 ball.
func project(u []float32) {
	var s float64
	for _, x := range u {
		s += float64(x) * float64(x)
	}
	if s > 1 {
		f := float32(1 / math.Sqrt(s))
		for d := range u {
			u[d] *= f
		}
	}
}
