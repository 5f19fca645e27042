// Package dpease is a private top-N recommender: EASE (Steck, WWW 2019)
// solved on item statistics released under user-level joint differential
// privacy.
//
// The protocol has two rounds between the users' devices and a server.
//
//  1. Counts: each device uploads its item indicator vector
//     scaled by 1/√n_u (n_u its number of items), so a user's whole
//     upload has L2 norm 1. The server receives the sum (secure
//     aggregation) and adds N(0, σ_c²) to every item: the noisy
//     popularity ŝ.
//  2. Gram: the server broadcasts the M items with the largest ŝ.
//     Each device forms x_u, its indicator on those items (n'_u of them),
//     and uploads the upper triangle (diagonal included) of
//     x_u x_uᵀ / max(n'_u, c): its L2 norm is at most √((1+1/c)/2). The
//     server adds N(0, σ_g²) to every entry of the summed triangle.
//
// Everything after is post-processing of the two releases: the server
// solves B = I − P·diag(P)⁻¹ with P = (G̃ + λI)⁻¹, λ = Lambda +
// LambdaNoise·σ_g·√M (the noise's spectral scale), and publishes the
// item factors: item i's row is column slot(i) of B, plus PopWeight·ŝ_i/
// max ŝ in a last coordinate. A device scores every item with its own
// history, x_u·B + PopWeight·ŝ_i/max ŝ, on the device: the history never
// leaves it. Items outside the top M are ranked by ŝ alone.
//
// Privacy: the unit is one user (added or removed with all their
// ratings); each release is the Gaussian mechanism with the sensitivity
// above, composed in zCDP (Release listed in Report.Ledger) and converted
// to (Eps, Delta) over the whole run: FracCounts of ρ on the counts, the
// rest on the Gram. The server is trusted to add the noise to the sum it
// receives and is not trusted with any single upload (the ideal
// functionality of secure aggregation); every other party, including
// anyone who sees the published model, sees only the noised releases. A
// user's recommendations are computed from their own history on the
// device (joint DP). Hyperparameter tuning is not counted.
//
// The noise is drawn from crypto/rand unless Config.Seeded selects the
// reproducible test mode (noise from the run's seed).
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

	"github.com/privrec/privrec/accountant/rdp"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

// Config holds the hyperparameters.
type Config struct {
	Eps         float64 `json:"eps"`          // user-level ε of the whole run
	Delta       float64 `json:"delta"`        // user-level δ of the whole run
	TopItems    int     `json:"top_items"`    // M: items in the Gram release
	Cap         int     `json:"cap"`          // c: a device's Gram weight is 1/max(n', c)
	FracCounts  float64 `json:"frac_counts"`  // share of ρ spent on the counts
	Lambda      float64 `json:"lambda"`       // ridge of the EASE solve
	LambdaNoise float64 `json:"lambda_noise"` // ridge added per σ_g·√M
	PopWeight   float64 `json:"pop_weight"`   // weight of the noisy popularity in a score
	Seeded      bool    `json:"seeded"`       // test mode: noise from the seed, not crypto/rand
	Workers     int     `json:"workers"`      // client workers of the in-process run (0: all cores)
}

// DefaultConfig returns the defaults: TopItems, LambdaNoise and PopWeight
// follow ε (ByEps; chosen on a validation split of the ML-1M training
// part, docs/results/private-topn.md).
func DefaultConfig() Config {
	return Config{Eps: 1, Delta: 1e-6, TopItems: 0, Cap: 10, FracCounts: 0.1,
		Lambda: 1, LambdaNoise: -1, PopWeight: -1}
}

// ByEps returns the ε-dependent defaults: the number of items in the
// Gram release, the noise ridge per σ·√M and the popularity weight.
// They interpolate log-linearly in ε between the settings chosen on the
// validation split at ε = 1 (M 300, λ-noise 6, pop-weight 0.12) and ε = 10
// (M 1000, λ-noise 5, pop-weight 0.04), and stay at those settings below
// ε = 1 and above ε = 10 (outside the validated range). More budget buys
// a larger, less shrunk item-item model and less weight on popularity.
func ByEps(eps float64) (topItems int, lambdaNoise, popWeight float64) {
	t := math.Min(math.Max(math.Log10(eps), 0), 1)
	topItems = int(math.Round(300 * math.Pow(1000.0/300, t)))
	lambdaNoise = 6 - t
	popWeight = 0.12 * math.Pow(0.04/0.12, t)
	return
}

// Resolve returns the config with the ε-dependent fields filled in:
// TopItems 0, LambdaNoise < 0 and PopWeight < 0 take ByEps(Eps).
func (c Config) Resolve() Config {
	m, ln, pw := ByEps(c.Eps)
	if c.TopItems == 0 {
		c.TopItems = m
	}
	if c.LambdaNoise < 0 {
		c.LambdaNoise = ln
	}
	if c.PopWeight < 0 {
		c.PopWeight = pw
	}
	return c
}

// Validate checks the config (after Resolve).
func (c Config) Validate() error {
	c = c.Resolve()
	switch {
	case !(c.Eps > 0) || math.IsInf(c.Eps, 0):
		return fmt.Errorf("dpease: eps %v, want > 0", c.Eps)
	case !(c.Delta > 0 && c.Delta < 1):
		return fmt.Errorf("dpease: delta %v, want in (0, 1)", c.Delta)
	case c.TopItems < 1:
		return fmt.Errorf("dpease: top-items %d, want ≥ 1", c.TopItems)
	case c.Cap < 1:
		return fmt.Errorf("dpease: cap %d, want ≥ 1", c.Cap)
	case !(c.FracCounts > 0 && c.FracCounts < 1):
		return fmt.Errorf("dpease: frac-counts %v, want in (0, 1)", c.FracCounts)
	case !(c.Lambda >= 0) || !(c.LambdaNoise >= 0) || c.Lambda+c.LambdaNoise <= 0:
		return fmt.Errorf("dpease: lambda %v, lambda-noise %v: want ≥ 0, not both 0", c.Lambda, c.LambdaNoise)
	case !(c.PopWeight >= 0):
		return fmt.Errorf("dpease: pop-weight %v, want ≥ 0", c.PopWeight)
	}
	return nil
}

// GramL2 is the L2 sensitivity of the Gram release for cap c.
func GramL2(c int) float64 { return math.Sqrt((1 + 1/float64(c)) / 2) }

// Report is what a run spent.
type Report struct {
	Ledger rdp.Ledger
	Rho    float64 // the zCDP budget (Eps, Delta) allows
	Eps    float64 // the ledger's ε at Delta
	Stats  map[string]float64
}

// Server is the server half.
type Server struct {
	cfg    Config
	n      int
	m      int // min(TopItems, n)
	rho    float64
	sigmaC float64
	sigmaG float64
	noise  *rand.Rand
	st     state
	led    rdp.Ledger
	gram   []float64 // the last released noisy Gram triangle (for tests)
}

// state is the server's state between rounds (its snapshot).
type state struct {
	Round  int
	Counts []float64 // noisy popularity ŝ after round 0
	Top    []int32   // the top M items after round 0
	V      []float32 // item factors after round 1
}

const streamNoise uint64 = 0x6470_6561 // "dpea"

// NewServer returns the server for a catalog of numItems items; seed
// seeds the noise only in the test mode (cfg.Seeded).
func NewServer(cfg Config, numItems int, seed uint64) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.Resolve()
	if numItems < 1 {
		return nil, errors.New("dpease: no items")
	}
	rho, err := rdp.ZCDPRhoFor(cfg.Eps, cfg.Delta)
	if err != nil {
		return nil, fmt.Errorf("dpease: %w", err)
	}
	s := &Server{cfg: cfg, n: numItems, m: min(cfg.TopItems, numItems), rho: rho}
	s.sigmaC = rdp.GaussianSigmaFor(cfg.FracCounts*rho, 1)
	s.sigmaG = rdp.GaussianSigmaFor((1-cfg.FracCounts)*rho, GramL2(cfg.Cap))
	if cfg.Seeded {
		s.noise = rng.New(seed, streamNoise)
	} else {
		s.noise = rng.Crypto()
	}
	return s, nil
}

// pairs is the number of entries of an m×m upper triangle.
func pairs(m int) int { return m * (m + 1) / 2 }

// pairIndex is the index of (a, b), a ≤ b, in the row-major upper
// triangle of an m×m matrix.
func pairIndex(a, b, m int) int { return a*m - a*(a-1)/2 + (b - a) }

// Broadcast implements protocol.Server.
func (s *Server) Broadcast(round int) (*protocol.Broadcast, error) {
	switch round {
	case 0:
		return &protocol.Broadcast{Round: 0, Phase: protocol.PhaseTrain, Dim: 1, NumItems: s.n}, nil
	case 1:
		// The uploads index the pairs of the top items' upper triangle:
		// the index space is the larger of the catalog and the pairs.
		return &protocol.Broadcast{Round: 1, Phase: protocol.PhaseTrain, Dim: 1,
			NumItems: max(s.n, pairs(s.m)), Items: s.st.Top}, nil
	}
	return nil, fmt.Errorf("dpease: no round %d", round)
}

// sum adds the uploads of a round into a dense vector of length size.
func sum(ups []*protocol.Upload, size int) ([]float64, error) {
	out := make([]float64, size)
	for _, u := range ups {
		if u == nil {
			continue
		}
		if len(u.Values) != len(u.Items) {
			return nil, fmt.Errorf("dpease: upload of client %d: %d values for %d items", u.Client, len(u.Values), len(u.Items))
		}
		for k, i := range u.Items {
			if int(i) >= size {
				return nil, fmt.Errorf("dpease: upload of client %d: index %d ≥ %d", u.Client, i, size)
			}
			out[i] += float64(u.Values[k])
		}
	}
	return out, nil
}

// Aggregate implements protocol.Server.
func (s *Server) Aggregate(round int, ups []*protocol.Upload) error {
	switch round {
	case 0:
		c, err := sum(ups, s.n)
		if err != nil {
			return err
		}
		for j := range c {
			c[j] += s.sigmaC * s.noise.NormFloat64()
		}
		s.led.Gaussian("item counts (indicators / √n_u)", 1, 1, s.sigmaC)
		s.st.Counts = c
		s.st.Top = TopItems(c, s.m)
	case 1:
		g, err := sum(ups, pairs(s.m))
		if err != nil {
			return err
		}
		for p := range g {
			g[p] += s.sigmaG * s.noise.NormFloat64()
		}
		s.gram = g
		s.led.Gaussian(fmt.Sprintf("Gram of the top %d items (upper triangle, weights 1/max(n', %d))", s.m, s.cfg.Cap), 1, GramL2(s.cfg.Cap), s.sigmaG)
		v, err := s.solve(g)
		if err != nil {
			return err
		}
		s.st.V = v
	default:
		return fmt.Errorf("dpease: no round %d", round)
	}
	s.st.Round = round + 1
	return nil
}

// Lambda returns the ridge of the EASE solve.
func (s *Server) Lambda() float64 {
	return s.cfg.Lambda + s.cfg.LambdaNoise*s.sigmaG*math.Sqrt(float64(s.m))
}

// solve turns the noisy Gram triangle g into item factors (post-processing).
func (s *Server) solve(g []float64) ([]float32, error) {
	m := s.m
	a := make([]float64, m*m)
	lam := s.Lambda()
	for i := range m {
		for j := i; j < m; j++ {
			x := g[pairIndex(i, j, m)]
			a[i*m+j], a[j*m+i] = x, x
		}
		a[i*m+i] += lam
	}
	p, ok := spdInverse(a, m)
	if !ok {
		return nil, fmt.Errorf("dpease: the noisy Gram plus λ = %.4g is not positive definite: raise lambda or lambda-noise", lam)
	}
	dim := m + 1
	v := make([]float32, s.n*dim)
	maxc := 0.0
	for _, c := range s.st.Counts {
		maxc = math.Max(maxc, c)
	}
	for j := range s.n {
		if maxc > 0 {
			v[j*dim+m] = float32(s.cfg.PopWeight * s.st.Counts[j] / maxc)
		}
	}
	for sj, j := range s.st.Top {
		pjj := p[sj*m+sj]
		for k := range m {
			if k != sj {
				// B[k][sj] = −P[k][sj] / P[sj][sj]
				v[int(j)*dim+k] = float32(-p[k*m+sj] / pjj)
			}
		}
	}
	return v, nil
}

// spdInverse inverts the symmetric positive definite n×n matrix a (full,
// row-major) in place by Cholesky; false when a is not positive definite.
func spdInverse(a []float64, n int) ([]float64, bool) {
	// Cholesky a = L Lᵀ, L in the lower triangle.
	for j := range n {
		rj := a[j*n : j*n+j]
		s := a[j*n+j]
		for _, x := range rj {
			s -= x * x
		}
		if !(s > 0) {
			return nil, false
		}
		l := math.Sqrt(s)
		a[j*n+j] = l
		for i := j + 1; i < n; i++ {
			ri := a[i*n : i*n+j]
			t := a[i*n+j]
			for k, x := range ri {
				t -= x * rj[k]
			}
			a[i*n+j] = t / l
		}
	}
	// W = L⁻¹ (lower triangular), row by row.
	w := make([]float64, n*n)
	for i := range n {
		w[i*n+i] = 1 / a[i*n+i]
		for j := range i {
			var t float64
			for k := j; k < i; k++ {
				t += a[i*n+k] * w[k*n+j]
			}
			w[i*n+j] = -t / a[i*n+i]
		}
	}
	// a⁻¹ = Wᵀ W: (i, j) = Σ_k W[k][i] W[k][j], k ≥ max(i, j).
	inv := make([]float64, n*n)
	for k := range n {
		wk := w[k*n : k*n+k+1]
		for i, x := range wk {
			if x == 0 {
				continue
			}
			row := inv[i*n : i*n+k+1]
			for j, y := range wk {
				row[j] += x * y
			}
		}
	}
	return inv, true
}

// TopItems returns the m items with the largest c, largest first (ties
// by index).
func TopItems(c []float64, m int) []int32 {
	idx := make([]int32, len(c))
	for j := range idx {
		idx[j] = int32(j)
	}
	sort.SliceStable(idx, func(a, b int) bool { return c[idx[a]] > c[idx[b]] })
	return slices.Clone(idx[:min(m, len(c))])
}

// Done implements protocol.Server.
func (s *Server) Done() bool { return s.st.Round >= 2 }

// Round implements protocol.Stateful.
func (s *Server) Round() int { return s.st.Round }

// Factors implements protocol.Stateful: after the run, the item factors
// (NumItems×(M+1)); before it, nil.
func (s *Server) Factors() ([]float32, int) {
	if s.st.V == nil {
		return nil, s.m + 1
	}
	return s.st.V, s.m + 1
}

// Ledger returns the releases so far.
func (s *Server) Ledger() *rdp.Ledger { return &s.led }

// Sigmas returns the noise of the counts and of the Gram.
func (s *Server) Sigmas() (counts, gram float64) { return s.sigmaC, s.sigmaG }

const snapVersion = 1

type snapshot struct {
	State    state
	Releases []rdp.Release
}

// MarshalBinary implements protocol.Stateful.
func (s *Server) MarshalBinary() ([]byte, error) {
	return protocol.EncodeSnapshot(snapVersion, snapshot{State: s.st, Releases: s.led.Releases()})
}

// UnmarshalBinary implements protocol.Stateful.
func (s *Server) UnmarshalBinary(data []byte) error {
	var sn snapshot
	if err := protocol.DecodeSnapshot(data, snapVersion, &sn); err != nil {
		return fmt.Errorf("dpease: %w", err)
	}
	st := sn.State
	if st.Round < 0 || st.Round > 2 || (st.Round >= 1 && (len(st.Counts) != s.n || len(st.Top) != s.m)) ||
		(st.Round == 2 && len(st.V) != s.n*(s.m+1)) {
		return errors.New("dpease: the snapshot does not fit this server")
	}
	s.st = st
	s.led = rdp.Ledger{}
	for _, r := range sn.Releases {
		s.led.Gaussian(r.Name, r.Count, r.L2, r.Sigma)
	}
	return nil
}

// client is one user's device.
type client struct {
	id    int
	items []int32
	cap   int
	pub   *public
}

// public is what every device learns from the broadcasts: the top items.
type public struct {
	once sync.Once
	top  []int32
}

// ID implements protocol.Client.
func (c *client) ID() int { return c.id }

// Round implements protocol.Client.
func (c *client) Round(b *protocol.Broadcast, _ *rand.Rand) (*protocol.Upload, error) {
	if len(c.items) == 0 {
		return nil, nil
	}
	switch b.Round {
	case 0:
		w := float32(1 / math.Sqrt(float64(len(c.items))))
		vals := make([]float32, len(c.items))
		for k := range vals {
			vals[k] = w
		}
		return &protocol.Upload{Client: c.id, Round: 0, Items: slices.Clone(c.items), Values: vals}, nil
	case 1:
		c.pub.once.Do(func() { c.pub.top = slices.Clone(b.Items) })
		return GramUpload(c.id, c.items, b.Items, c.cap), nil
	}
	return nil, fmt.Errorf("dpease: no round %d", b.Round)
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
	pub   *public
}

// NewClients returns one client per user of train with ratings, with
// the Gram weight cap of cfg (the device's own, not the broadcast's).
func NewClients(train *ratings.Dataset, cfg Config) *Clients {
	byUser := train.ByUser()
	cl := &Clients{train: train, pub: &public{}}
	for u := range train.NumUsers() {
		items, _ := byUser.Row(u)
		if len(items) == 0 {
			continue
		}
		cl.List = append(cl.List, &client{id: u, items: slices.Clone(items), cap: cfg.Cap, pub: cl.pub})
	}
	return cl
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
	rated := make([]bool, nu)
	for uu := range nu {
		items, _ := byUser.Row(uu)
		rated[uu] = len(items) > 0
		for _, k := range slots(items, top) {
			u[uu*dim+k] = 1
		}
		u[uu*dim+dim-1] = 1
	}
	return &model.Model{Dim: dim, NumUsers: nu, NumItems: d.NumItems(), U: u, V: slices.Clone(v), Rated: rated,
		Ranking: true, Scale: d.Scale, UserIDs: d.UserIDs, ItemIDs: d.ItemIDs, ItemTitles: d.ItemTitles}, nil
}

// Train runs the protocol in process over protocol.InMem under ideal
// secure aggregation.
func Train(ctx context.Context, train *ratings.Dataset, cfg Config, seed uint64) (*model.Model, *Report, error) {
	srv, err := NewServer(cfg, train.NumItems(), seed)
	if err != nil {
		return nil, nil, err
	}
	cl := NewClients(train, cfg)
	if err := protocol.Run(ctx, srv, cl.List, protocol.RunOptions{Workers: cfg.Workers, Seed: seed, Aggregation: protocol.AggIdeal}); err != nil {
		return nil, nil, err
	}
	v, _ := srv.Factors()
	m, err := cl.Model(v)
	if err != nil {
		return nil, nil, err
	}
	return m, srv.Report(), nil
}

// Report returns what the run spent so far.
func (s *Server) Report() *Report {
	r := &Report{Ledger: s.led, Rho: s.rho, Eps: s.led.Epsilon(s.cfg.Delta)}
	r.Stats = s.stats()
	return r
}

// stats are the run's figures, the resolved ε-dependent settings
// included.
func (s *Server) stats() map[string]float64 {
	return map[string]float64{"sigma_counts": s.sigmaC, "sigma_gram": s.sigmaG, "lambda": s.Lambda(),
		"top_items": float64(s.m), "lambda_noise": s.cfg.LambdaNoise, "pop_weight": s.cfg.PopWeight}
}

// PlannedReport returns the report of a full run of this server's config
// (both releases), without running it: the ledger depends only on the
// config, never on the data.
func (s *Server) PlannedReport() *Report {
	var l rdp.Ledger
	l.Gaussian("item counts (indicators / √n_u)", 1, 1, s.sigmaC)
	l.Gaussian(fmt.Sprintf("Gram of the top %d items (upper triangle, weights 1/max(n', %d))", s.m, s.cfg.Cap), 1, GramL2(s.cfg.Cap), s.sigmaG)
	r := &Report{Ledger: l, Rho: s.rho, Eps: l.Epsilon(s.cfg.Delta)}
	r.Stats = s.stats()
	return r
}

// Spent implements protocol.Spent: the zCDP composition of the releases
// so far, converted to ε at the configured δ, for one user added or
// removed (what the Report gives at the end of the run).
func (s *Server) Spent() (eps, delta float64, ok bool) {
	if s.led.Rho() == 0 {
		return 0, s.cfg.Delta, true
	}
	return s.led.Epsilon(s.cfg.Delta), s.cfg.Delta, true
}

// RoundSpent implements protocol.RoundSpent: the ε at δ of the release
// of the round aggregated last, alone.
func (s *Server) RoundSpent() (eps float64, ok bool) {
	rs := s.led.Releases()
	if len(rs) == 0 {
		return 0, false
	}
	return rdp.ZCDPToDP(rs[len(rs)-1].Rho, s.cfg.Delta), true
}
