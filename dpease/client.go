package dpease

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"

	"github.com/privrec/privrec/maskplan"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

// client is one user's device.
type client struct {
	id    int
	items []int32
	cfg   *Config
	pub   *public
	n     int // the catalog's size, from the counts round
}

// public is what every device learns from the broadcasts: the top items,
// the budget split the server resolved; and the integer path's
// calibration, built on first use.
type public struct {
	once      sync.Once
	top       []int32
	mu        sync.Mutex
	frac      float64 // the broadcast's counts share of ρ (0: none seen)
	plan      *maskplan.Plan
	planN     int     // the catalog size plan is for
	planFrac  float64 // the counts' share of ρ plan is for
	noiseless bool    // Clients.Noiseless: no Skellam shares (tests only)
}

// setFrac records the counts' share of ρ a broadcast carries: it must be
// in (0, 1) and the same in every round. Any share keeps the total ρ, so
// a device may take the server's.
func (p *public) setFrac(b *protocol.Broadcast) error {
	f, ok := b.Params[paramFrac]
	if !ok {
		return nil
	}
	if !(f > 0 && f < 1) {
		return fmt.Errorf("dpease: round %d: the broadcast's counts share %v of ρ is not in (0, 1)", b.Round, f)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.frac != 0 && p.frac != f {
		return fmt.Errorf("dpease: round %d: the broadcast's counts share %v of ρ, earlier %v", b.Round, f, p.frac)
	}
	p.frac = f
	return nil
}

// maskPlan returns the integer path's calibration of cfg for n items,
// with the broadcast's budget split when one was seen.
func (p *public) maskPlan(cfg Config, n int) (*maskplan.Plan, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.frac > 0 {
		cfg.FracCounts = p.frac
	}
	if p.plan == nil || p.planN != n || p.planFrac != cfg.Resolve().FracCounts {
		mp, err := newMaskPlan(cfg.Resolve(), n)
		if err != nil {
			return nil, err
		}
		p.plan, p.planN, p.planFrac = mp, n, cfg.Resolve().FracCounts
	}
	return p.plan, nil
}

// ID implements protocol.Client.
func (c *client) ID() int { return c.id }

// Round implements protocol.Client. On the ideal path the uploads are
// sparse (the items or pairs the user has); on the integer path (the
// broadcast asks for Words) they are dense vectors over every coordinate
// of the release, quantized, with the device's Skellam noise share drawn
// from r, so the server, which sees only the sum, cannot tell who has
// data where.
func (c *client) Round(b *protocol.Broadcast, r *rand.Rand) (*protocol.Upload, error) {
	if b.Phase == protocol.PhaseSetup {
		if b.Words != 1 {
			return nil, fmt.Errorf("dpease: setup round %d asks for %d words, want 1", b.Round, b.Words)
		}
		return &protocol.Upload{Client: c.id, Round: b.Round, Words: []uint32{1}}, nil
	}
	st := int(b.Param(paramStep, float64(b.Round)))
	masked := b.Words > 0
	if err := c.pub.setFrac(b); err != nil {
		return nil, err
	}
	for _, j := range c.items {
		if st == 0 && int(j) >= b.NumItems {
			return nil, fmt.Errorf("dpease: round %d: the user's item %d is outside the server's catalog of %d", b.Round, j, b.NumItems)
		}
	}
	if len(c.items) == 0 && !masked {
		return nil, nil
	}
	switch st {
	case 0:
		c.n = b.NumItems
		if !masked {
			w := float32(1 / math.Sqrt(float64(len(c.items))))
			vals := make([]float32, len(c.items))
			for k := range vals {
				vals[k] = w
			}
			return &protocol.Upload{Client: c.id, Round: b.Round, Items: slices.Clone(c.items), Values: vals}, nil
		}
		ms, err := c.step(b, 0)
		if err != nil {
			return nil, err
		}
		x := make([]float64, ms.D)
		for _, j := range c.items {
			x[j] = 1 / math.Sqrt(float64(len(c.items)))
		}
		return c.encode(b, ms, x, r)
	case 1:
		c.pub.once.Do(func() { c.pub.top = slices.Clone(b.Items) })
		up := GramUpload(c.id, c.items, b.Items, c.cfg.Cap)
		if !masked {
			if up != nil {
				up.Round = b.Round
			}
			return up, nil
		}
		ms, err := c.step(b, 1)
		if err != nil {
			return nil, err
		}
		x := make([]float64, ms.D)
		if up != nil {
			for k, p := range up.Items {
				x[p] = float64(up.Values[k])
			}
		}
		return c.encode(b, ms, x, r)
	}
	return nil, fmt.Errorf("dpease: no step %d (round %d)", st, b.Round)
}

// step returns the integer path's calibration of release st (0 counts, 1
// Gram), after checking that the broadcast's shape is the public plan's
// (before anything is allocated for it).
func (c *client) step(b *protocol.Broadcast, st int) (*maskplan.Step, error) {
	if n := int(b.Param(paramItems, 0)); c.n <= 0 && n > 0 {
		// Over cohorts a device may answer a Gram round without having
		// answered a counts round: the broadcast names the catalog's size.
		c.n = n
	}
	if c.n <= 0 {
		return nil, fmt.Errorf("dpease: round %d: the device saw no counts round, so it does not know the catalog's size", b.Round)
	}
	p, err := c.pub.maskPlan(*c.cfg, c.n)
	if err != nil {
		return nil, err
	}
	ms, m := &p.Steps[st], min(c.cfg.Resolve().TopItems, c.n)
	if b.Words != ms.D+1 || (st == 1 && len(b.Items) != m) {
		return nil, fmt.Errorf("dpease: round %d asks for %d words (%d top items), the integer path's plan for %d items has %d (%d)",
			b.Round, b.Words, len(b.Items), c.n, ms.D+1, m)
	}
	return ms, nil
}

// encode returns the device's integer upload of release ms from its dense
// float statistics x (maskplan.Step.Encode).
func (c *client) encode(b *protocol.Broadcast, ms *maskplan.Step, x []float64, r *rand.Rand) (*protocol.Upload, error) {
	// The noise scratch is not kept: a vendor process holds thousands of
	// devices, and the Gram's is M(M+1)/2 values.
	noise := make([]int64, ms.D)
	return &protocol.Upload{Client: c.id, Round: b.Round, Words: ms.Encode(x, r, maskplan.Shares(b), noise, c.pub.noiseless)}, nil
}

// slots returns the positions in top of the items (sorted ascending).
func slots(items, top []int32) []int {
	pos := make(map[int32]int, len(top))
	for k, j := range top {
		pos[j] = k
	}
	var out []int
	for _, j := range items {
		if k, ok := pos[j]; ok {
			out = append(out, k)
		}
	}
	sort.Ints(out)
	return out
}

// GramUpload is a device's Gram upload: the upper triangle of
// x xᵀ / max(n', cap) over its items among top.
func GramUpload(id int, items, top []int32, capN int) *protocol.Upload {
	sl := slots(items, top)
	if len(sl) == 0 {
		return nil
	}
	m := len(top)
	w := float32(1 / float64(max(len(sl), capN)))
	up := &protocol.Upload{Client: id, Round: 1, Items: make([]int32, 0, len(sl)*(len(sl)+1)/2)}
	for a, i := range sl {
		for _, j := range sl[a:] {
			up.Items = append(up.Items, int32(pairIndex(i, j, m)))
		}
	}
	up.Values = make([]float32, len(up.Items))
	for k := range up.Values {
		up.Values[k] = w
	}
	return up
}

// Clients is the client half.
type Clients struct {
	List  []protocol.Client
	train *ratings.Dataset
	cfg   Config
	pub   *public
}

// NewClients returns one client per user of train with ratings, with
// the Gram weight cap of cfg (the device's own, not the broadcast's).
func NewClients(train *ratings.Dataset, cfg Config) (*Clients, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if train == nil {
		return nil, errors.New("dpease: no training data")
	}
	byUser := train.ByUser()
	cl := &Clients{train: train, cfg: cfg, pub: &public{}}
	for u := range train.NumUsers() {
		items, _ := byUser.Row(u)
		if len(items) == 0 {
			continue
		}
		cl.List = append(cl.List, &client{id: u, items: slices.Clone(items), cfg: &cfg, pub: cl.pub})
	}
	return cl, nil
}

// Model builds the evaluation harness's model from the published item
// factors v (NumItems×(M+1)): user u's row is their indicator on the top
// items (M coordinates) and 1, computed from their own history.
func (cl *Clients) Model(v []float32) (*model.Model, error) {
	top := cl.pub.top
	d := cl.train
	dim := len(top) + 1
	if len(v) != d.NumItems()*dim {
		return nil, fmt.Errorf("dpease: %d factors for %d items × %d", len(v), d.NumItems(), dim)
	}
	byUser := d.ByUser()
	nu := d.NumUsers()
	u := make([]float32, nu*dim)
	for uu := range nu {
		items, _ := byUser.Row(uu)
		for _, k := range slots(items, top) {
			u[uu*dim+k] = 1
		}
		u[uu*dim+dim-1] = 1
	}
	// Every user row is known (Rated nil): a user without training items
	// has the empty history, whose scores are the popularity coordinate,
	// so they get the DP popularity list, not the catalog's index order.
	return &model.Model{Dim: dim, NumUsers: nu, NumItems: d.NumItems(), U: u, V: slices.Clone(v),
		Ranking: true, Scale: d.Scale, UserIDs: d.UserIDs, ItemIDs: d.ItemIDs, ItemTitles: d.ItemTitles,
		UserItems: slices.Clone(top)}, nil
}

// Finish returns the model with the published item factors v (Model) and
// the run's planned report: the two releases' ledger under the budget
// split the server's broadcasts carried, computed by a server that holds
// no data (the devices keep no ledger of their own).
func (cl *Clients) Finish(v []float32) (*model.Model, *Report, error) {
	m, err := cl.Model(v)
	if err != nil {
		return nil, nil, err
	}
	c := cl.cfg
	if f := cl.Frac(); f > 0 {
		c.FracCounts = f
	}
	acct, err := NewServer(c, cl.train.Public(), 0) // the seed draws noise only
	if err != nil {
		return nil, nil, err
	}
	return m, acct.PlannedReport(), nil
}

// Frac returns the counts' share of ρ the server's broadcasts carried
// (the split it resolved, PopularityMode), or 0 before any broadcast.
func (cl *Clients) Frac() float64 {
	cl.pub.mu.Lock()
	defer cl.pub.mu.Unlock()
	return cl.pub.frac
}

// Noiseless switches the integer path's Skellam shares off, so that the
// masked uploads carry only their data (tests compare the noise-free sums
// of both paths). The uploads then protect nothing.
func (cl *Clients) Noiseless() { cl.pub.noiseless = true }

// Train runs the protocol in process over protocol.InMem with
// cfg.Aggregation: the server's noise (ideal path) comes from crypto/rand,
// and so do the devices' noise shares and rounding (integer path: their
// streams are seeded by a secret seed), unless cfg.Seeded selects the
// test mode, where seed reproduces both. The roster is train's users
// (WithRoster) unless cfg gives one. With cfg.Cohort it runs over
// cohorts (protocol.Cohorts): each round asks Cohort users drawn from the
// run's seed among those whose limits allow it.
func Train(ctx context.Context, train *ratings.Dataset, cfg Config, seed uint64) (*model.Model, *Report, error) {
	cfg = cfg.WithRoster(train)
	srv, err := NewServer(cfg, train.Public(), seed)
	if err != nil {
		return nil, nil, err
	}
	cl, err := NewClients(train, cfg)
	if err != nil {
		return nil, nil, err
	}
	runSeed := seed
	if !cfg.Seeded {
		runSeed = rng.Crypto().Uint64()
	}
	opt := protocol.RunOptions{Workers: cfg.Workers, Seed: runSeed, Aggregation: cfg.Aggregation, Participation: cfg.Participation()}
	if err := protocol.Run(ctx, srv, cl.List, opt); err != nil {
		return nil, nil, err
	}
	v, _ := srv.Factors()
	m, err := cl.Model(v)
	if err != nil {
		return nil, nil, err
	}
	return m, srv.Report(), nil
}
