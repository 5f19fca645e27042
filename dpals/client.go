package dpals

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/privrec/privrec/accountant/rdp"
	"github.com/privrec/privrec/internal/linalg"
	"github.com/privrec/privrec/maskplan"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
)

// Clients is the client half of a run: one client per user of the
// training data with ratings, built from that user's own ratings.
type Clients struct {
	// List holds one client per user index with ratings, in increasing
	// order; List[k].ID() is the user index.
	List []protocol.Client
	cfg  Config
	d    *ratings.Dataset
	cl   []*client
	obs  *observer
}

// observer keeps the final broadcast, which every client sees: the first
// client to see it records it.
type observer struct {
	mu    sync.Mutex
	final *protocol.Broadcast
	plan  *maskplan.Plan // the integer path's calibration, built on first use
	items int            // the catalog size plan is for
	// noiseless (Clients.Noiseless) switches the Skellam shares off; set
	// before a run.
	noiseless bool
}

// maskPlan returns the integer path's calibration for ni items.
func (o *observer) maskPlan(cfg Config, ni int) (*maskplan.Plan, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.plan == nil || len(o.plan.Steps) > 0 && o.items != ni {
		p, err := newMaskPlan(cfg, ni)
		if err != nil {
			return nil, err
		}
		o.plan, o.items = p, ni
	}
	return o.plan, nil
}

// client is one user's device: its ratings, bias and vector never leave
// it except through the per-round statistics it uploads.
type client struct {
	id     int
	cfg    *Config
	obs    *observer
	items  []int32
	val    []float32
	bu     float64
	u      []float64
	failed int
	up     protocol.Upload
	noise  []int64
	// scratch
	pos          []int
	w, ys, a, b  []float64
	x, zv, ridge []float64
	zi, zj       []int
}

// NewClients builds the clients of cfg from train (ratings on 1..5), one
// per user with ratings. Run them with a server from NewServer for
// train's item catalog, with the aggregation cfg.Aggregation names.
func NewClients(train *ratings.Dataset, cfg Config) (*Clients, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if train == nil {
		return nil, fmt.Errorf("dpals: no training data")
	}
	c := &Clients{cfg: cfg, d: train, obs: &observer{}}
	byUser := train.ByUser()
	for u := range train.NumUsers() {
		items, val := byUser.Row(u)
		if len(items) == 0 {
			continue
		}
		cl := &client{id: u, cfg: &c.cfg, obs: c.obs, items: items, val: val}
		c.cl = append(c.cl, cl)
		c.List = append(c.List, cl)
	}
	return c, nil
}

// ID returns the client's user index.
func (c *client) ID() int { return c.id }

// Round answers broadcast b: the user's statistics of the round as one
// dense vector (Upload.Scalars) over the round's whole index space, so
// that the summed vector's shape does not depend on the user; nil in the
// final round, where the device solves its bias and vector one last time.
// r draws the user's sample of MaxRatings ratings.
func (c *client) Round(b *protocol.Broadcast, r *rand.Rand) (*protocol.Upload, error) {
	kind := int(b.Param(paramKind, -1))
	mu := b.Param(paramMu, math.NaN())
	if math.IsNaN(mu) {
		return nil, fmt.Errorf("dpals: round %d: no global mean in the broadcast", b.Round)
	}
	for _, j := range c.items {
		if int(j) >= b.NumItems {
			return nil, fmt.Errorf("dpals: round %d: the user's item %d is outside the server's catalog of %d", b.Round, j, b.NumItems)
		}
	}
	if kind == kindSetup {
		c.up = protocol.Upload{Client: c.id, Round: b.Round, Words: []uint32{1}}
		return &c.up, nil
	}
	// The shapes follow from the public config: a broadcast of another
	// shape is refused before anything is allocated for it.
	kf := 0
	if c.cfg.Dim > 0 && (c.cfg.Rounds > 0 || c.cfg.InitItems > 0) {
		kf = c.cfg.Dim
	}
	kaug := kf + min(c.cfg.UserFeatures, 3)
	cols := map[int]int{kindMean: 0, kindBias: 2, kindInit: 3, kindFactor: 3 + kf, kindFinal: 1 + kaug}
	want, ok := cols[kind]
	k := int(b.Param(paramK, 0))
	switch {
	case !ok || b.AuxDim != want || len(b.Aux) != b.NumItems*want || b.Round < 0:
		return nil, fmt.Errorf("dpals: round %d: a broadcast of kind %d with %d values per item", b.Round, kind, b.AuxDim)
	case kind == kindFactor && (kf == 0 || k != kf), kind == kindFinal && k != kaug:
		return nil, fmt.Errorf("dpals: round %d: %d item dimensions, the config has %d", b.Round, k, kf)
	case kind == kindInit && int(b.Param(paramM, -1)) != min(c.cfg.InitItems, b.NumItems):
		return nil, fmt.Errorf("dpals: round %d: a warm start on %g items, the config asks for %d", b.Round, b.Param(paramM, -1), min(c.cfg.InitItems, b.NumItems))
	}
	ni := b.NumItems
	c.up = protocol.Upload{Client: c.id, Round: b.Round}
	switch kind {
	case kindMean:
		var m float64
		for _, x := range c.val {
			m += float64(x)
		}
		m = min(max(m/float64(len(c.val)), 1), 5)
		c.up.Scalars = []float64{m - 3, 1}
	case kindBias:
		c.up.Scalars = make([]float64, 2*ni)
		c.bias(b, mu, r, c.up.Scalars[:ni], c.up.Scalars[ni:])
	case kindInit:
		m := int(b.Param(paramM, 0))
		if m < 0 || m > ni {
			return nil, fmt.Errorf("dpals: round %d: a warm start on %d of %d items", b.Round, m, ni)
		}
		c.up.Scalars = make([]float64, m*(m+1)/2)
		if !c.init(b, mu, m, r, c.up.Scalars) && b.Words == 0 {
			return nil, nil // nothing to add (the integer path still adds its noise share)
		}
	case kindFactor:
		k := int(b.Param(paramK, 0))
		k1 := k + 1
		nt := k1 * (k1 + 1) / 2
		if c.cfg.SharedGram {
			c.up.Scalars = make([]float64, nt+ni+ni*k1)
		} else {
			c.up.Scalars = make([]float64, ni*nt+ni*k1)
		}
		c.factor(b, mu, k, r, c.up.Scalars)
	case kindFinal:
		c.final(b, mu)
		c.obs.mu.Lock()
		if c.obs.final == nil || c.obs.final.Round < b.Round {
			cp := *b
			cp.Aux, cp.Params = slices.Clone(b.Aux), make(map[string]float64, len(b.Params))
			for k, v := range b.Params {
				cp.Params[k] = v
			}
			c.obs.final = &cp
		}
		c.obs.mu.Unlock()
		return nil, nil
	}
	if b.Words > 0 {
		p, err := c.obs.maskPlan(*c.cfg, ni)
		if err != nil {
			return nil, err
		}
		if b.Round >= len(p.Steps) || p.Steps[b.Round].D+1 != b.Words || len(c.up.Scalars) != p.Steps[b.Round].D {
			return nil, fmt.Errorf("dpals: round %d asks for %d words, the integer path's plan has another shape", b.Round, b.Words)
		}
		c.up.Words, c.up.Scalars = c.encode(b, &p.Steps[b.Round], c.up.Scalars, r), nil
	}
	return &c.up, nil
}

// sample returns the positions (within the user's row) of the user's
// ratings that enter the round's statistics: all of them on active items
// (active nil: all items), or a uniform sample of MaxRatings of them drawn
// from r.
func (c *client) sample(active func(j int32) bool, r *rand.Rand) []int {
	buf := c.pos[:0]
	for p, j := range c.items {
		if active == nil || active(j) {
			buf = append(buf, p)
		}
	}
	cm, n := c.cfg.MaxRatings, len(buf)
	if cm > 0 && n > cm {
		for p := range cm {
			q := p + r.IntN(n-p)
			buf[p], buf[q] = buf[q], buf[p]
		}
		buf = buf[:cm]
		slices.Sort(buf)
	}
	c.pos = buf
	return buf
}

// weights returns the user's weights for the sampled ratings: p_j
// normalized so that their squares sum to 1.
func (c *client) weights(pos []int, p func(j int32) float64) []float64 {
	w := c.w[:0]
	if len(pos) == 0 {
		return w
	}
	var s float64
	for _, q := range pos {
		x := p(c.items[q])
		w = append(w, x)
		s += x * x
	}
	s = 1 / math.Sqrt(s)
	for k := range w {
		w[k] *= s
	}
	c.w = w
	return w
}

// clipNorm scales the weighted residual vector ys down to norm resBound.
func clipNorm(cfg *Config, ys []float64) {
	b := cfg.resBound()
	var n2 float64
	for _, y := range ys {
		n2 += y * y
	}
	if n := math.Sqrt(n2); n > b {
		for k := range ys {
			ys[k] *= b / n
		}
	}
}

// clip returns x clipped to [−c, c].
func clip(x, c float64) float64 { return min(max(x, -c), c) }

// userBias is the user's bias against μ and the broadcast item biases:
// Σ (r − μ − b_j) / (n + RegUserBias).
func (c *client) userBias(mu float64, bi func(j int32) float64) float64 {
	var s float64
	for k, j := range c.items {
		s += float64(c.val[k]) - mu - bi(j)
	}
	return s / (float64(len(c.items)) + c.cfg.RegUserBias)
}

// bias writes the user's bias-round statistics: its weighted count w_uj
// into g and its weighted clipped residual w_uj·clip(r − μ − b_u) into h,
// the residual vector clipped to norm resBound.
func (c *client) bias(b *protocol.Broadcast, mu float64, r *rand.Rand, g, h []float64) {
	bi := func(j int32) float64 { return float64(b.Aux[int(j)*2]) }
	c.bu = c.userBias(mu, bi)
	pos := c.sample(nil, r)
	w := c.weights(pos, func(j int32) float64 { return float64(b.Aux[int(j)*2+1]) })
	ys := c.ys[:0]
	for k, p := range pos {
		ys = append(ys, w[k]*clip(float64(c.val[p])-mu-c.bu, c.cfg.Clip))
	}
	c.ys = ys
	clipNorm(c.cfg, ys)
	for k, p := range pos {
		j := c.items[p]
		g[j] += w[k]
		h[j] += ys[k]
	}
}

// init writes the user's z_u z_uᵀ over the warm start's m items (upper
// triangle, row by row) into upper, z_uj = w_uj·clip(r − μ − b_u − b_j)
// with weights whose squares sum to 1, clipped to norm resBound. It
// reports false when the user rated none of the items.
func (c *client) init(b *protocol.Broadcast, mu float64, m int, r *rand.Rand, upper []float64) bool {
	aux := func(j int32, col int) float64 { return float64(b.Aux[int(j)*3+col]) }
	bu := c.userBias(mu, func(j int32) float64 { return aux(j, 0) })
	zi, zj, zv := c.zi[:0], c.zj[:0], c.zv[:0]
	var n2 float64
	for q, j := range c.items {
		slot := int(aux(j, 2))
		if slot < 0 || slot >= m {
			continue
		}
		p := aux(j, 1)
		zi = append(zi, slot)
		zj = append(zj, int(j))
		zv = append(zv, p*clip(float64(c.val[q])-mu-bu-aux(j, 0), c.cfg.Clip))
		n2 += p * p
	}
	c.zi, c.zj, c.zv = zi, zj, zv
	if len(zi) == 0 {
		return false
	}
	if cm := c.cfg.MaxRatings; cm > 0 && len(zi) > cm {
		for p := range cm {
			q := p + r.IntN(len(zi)-p)
			zi[p], zi[q] = zi[q], zi[p]
			zj[p], zj[q] = zj[q], zj[p]
			zv[p], zv[q] = zv[q], zv[p]
		}
		zi, zj, zv = zi[:cm], zj[:cm], zv[:cm]
		n2 = 0
		for _, j := range zj {
			p := aux(int32(j), 1)
			n2 += p * p
		}
	}
	sc := 1 / math.Sqrt(n2)
	for x := range zv {
		zv[x] *= sc
	}
	clipNorm(c.cfg, zv)
	for x, i := range zi {
		for y, k := range zi {
			if k >= i {
				upper[i*m-i*(i-1)/2+k-i] += zv[x] * zv[y]
			}
		}
	}
	return true
}

// solve solves the user's bias and vector (dimension k) from all of the
// user's ratings against μ, the item biases bi and the item table v
// (ridge RegUserBias on the bias, ridge[p] or RegUser on the vector),
// storing them; it reports false when the solve failed (the user keeps
// the old values).
func (c *client) solve(mu float64, k int, bi func(j int32) float64, v func(j int32) []float32, ridge []float64) bool {
	k1 := k + 1
	c.a = slices.Grow(c.a[:0], k1*k1)[:k1*k1]
	c.b = slices.Grow(c.b[:0], k1)[:k1]
	a, b := c.a, c.b
	clear(a)
	clear(b)
	for q, j := range c.items {
		y := float64(c.val[q]) - mu - bi(j)
		vj := v(j)
		// x = (1, v_j)
		a[0]++
		b[0] += y
		for p := range k {
			vp := float64(vj[p])
			a[(p+1)*k1] += vp
			b[p+1] += y * vp
			row := a[(p+1)*k1 : (p+1)*k1+p+2]
			for s := 0; s <= p; s++ {
				row[s+1] += vp * float64(vj[s])
			}
		}
	}
	a[0] += c.cfg.RegUserBias + 1e-9
	for p := range k {
		if ridge != nil {
			a[(p+1)*k1+p+1] += ridge[p]
		} else {
			a[(p+1)*k1+p+1] += c.cfg.RegUser
		}
	}
	if !linalg.CholeskySolve(a, b, k1) {
		return false
	}
	c.bu = b[0]
	copy(c.u, b[1:])
	return true
}

// factor writes the user's factor-round statistics into out: the device
// solves (b_u, u) against the broadcast and scales u to norm at most
// NormU; with x = (1, u) and y = clip(r − μ − b_u), it adds for each
// sampled rating on an active item w·y·x to the item's right-hand side and
// either w·x xᵀ to the item's Gramian (its upper triangle) or, with
// SharedGram, w to the item's count and, once, x xᵀ to the global Gramian.
// Layout: SharedGram [global Gramian | counts | right-hand sides], else
// [Gramians | right-hand sides].
func (c *client) factor(b *protocol.Broadcast, mu float64, k int, r *rand.Rand, out []float64) {
	ni, cols := b.NumItems, b.AuxDim
	k1 := k + 1
	nt := k1 * (k1 + 1) / 2
	if len(c.u) != k {
		c.u = make([]float64, k)
	}
	row := func(j int32) []float32 { return b.Aux[int(j)*cols : int(j)*cols+cols] }
	bi := func(j int32) float64 { return float64(row(j)[0]) }
	if !c.solve(mu, k, bi, func(j int32) []float32 { return row(j)[3:] }, nil) {
		c.failed++
	}
	c.x = slices.Grow(c.x[:0], k1)[:k1]
	x := c.x
	x[0] = 1
	var n2 float64
	for _, z := range c.u {
		n2 += z * z
	}
	s := 1.0
	if n := math.Sqrt(n2); n > c.cfg.NormU {
		s = c.cfg.NormU / n
	}
	for p, z := range c.u {
		x[p+1] = s * z
	}
	addOuter := func(g []float64, wt float64) {
		e := 0
		for p1 := range k1 {
			wx := wt * x[p1]
			for p2 := p1; p2 < k1; p2++ {
				g[e] += wx * x[p2]
				e++
			}
		}
	}
	var gram, cnt, rhs []float64
	if c.cfg.SharedGram {
		gram, cnt, rhs = out[:nt], out[nt:nt+ni], out[nt+ni:]
		addOuter(gram, 1)
	} else {
		gram, rhs = out[:ni*nt], out[ni*nt:]
	}
	pos := c.sample(func(j int32) bool { return row(j)[2] != 0 }, r)
	w := c.weights(pos, func(j int32) float64 { return float64(row(j)[1]) })
	ys := c.ys[:0]
	for q, p := range pos {
		ys = append(ys, w[q]*clip(float64(c.val[p])-mu-c.bu, c.cfg.Clip))
	}
	c.ys = ys
	clipNorm(c.cfg, ys)
	for q, p := range pos {
		j := int(c.items[p])
		y := ys[q]
		hj := rhs[j*k1 : j*k1+k1]
		for p1 := range k1 {
			hj[p1] += y * x[p1]
		}
		if c.cfg.SharedGram {
			cnt[j] += w[q]
		} else {
			addOuter(gram[j*nt:j*nt+nt], w[q])
		}
	}
}

// final solves the user's bias and vector against the final broadcast
// (free: it reads only the user's own ratings and public quantities).
func (c *client) final(b *protocol.Broadcast, mu float64) {
	k, cols := b.AuxDim-1, b.AuxDim
	row := func(j int32) []float32 { return b.Aux[int(j)*cols : int(j)*cols+cols] }
	bi := func(j int32) float64 { return float64(row(j)[0]) }
	if k == 0 {
		c.bu = c.userBias(mu, bi)
		return
	}
	kf := k - min(c.cfg.UserFeatures, 3)
	if len(c.u) != k {
		c.u = make([]float64, k) // the features' coefficients start at 0
	}
	if !c.solve(mu, k, bi, func(j int32) []float32 { return row(j)[1:] }, featureRidge(*c.cfg, kf, k)) {
		c.failed++
	}
}

// Finish gathers the model from the clients' biases and vectors, the
// final broadcast they saw (the global mean and item biases) and the
// server's final item table v (Factors), and the run's report: its
// accounting is a function of the config alone, the server's public
// figures come with the final broadcast.
func (cs *Clients) Finish(v []float32) (*model.Model, *Report, error) {
	fb := cs.obs.final
	d := cs.d
	ni, nu := d.NumItems(), d.NumUsers()
	if fb == nil && len(cs.cl) == 0 && ni > 0 {
		// No client saw the final broadcast: a model of no user, the
		// mid-scale mean and zero item biases.
		k := len(v) / ni
		fb = &protocol.Broadcast{NumItems: ni, AuxDim: k + 1, Aux: make([]float32, ni*(k+1)), Params: map[string]float64{paramMu: 3}}
	}
	if fb == nil {
		if len(cs.cl) > 0 || ni > 0 {
			return nil, nil, fmt.Errorf("dpals: the run did not reach its final round")
		}
		fb = &protocol.Broadcast{AuxDim: 1, Params: map[string]float64{paramMu: 3}}
	}
	k := fb.AuxDim - 1
	if fb.NumItems != ni || len(v) != ni*k {
		return nil, nil, fmt.Errorf("dpals: the final item table holds %d values and %d items, want %d items × %d", len(v), fb.NumItems, ni, k)
	}
	mu := fb.Param(paramMu, 0)
	m := &model.Model{
		Dim: k, NumUsers: nu, NumItems: ni,
		Mean: float32(mu), Default: float32(mu), Scale: d.Scale,
		BU: make([]float32, nu), BI: make([]float32, ni),
		U: make([]float32, nu*k), V: slices.Clone(v),
		Rated:   make([]bool, nu),
		UserIDs: slices.Clone(d.UserIDs), ItemIDs: slices.Clone(d.ItemIDs), ItemTitles: slices.Clone(d.ItemTitles),
	}
	for j := range ni {
		m.BI[j] = fb.Aux[j*(k+1)]
	}
	led, rho, stats, err := plannedLedger(cs.cfg)
	if err != nil {
		return nil, nil, err
	}
	for name, x := range fb.Params {
		if len(name) > len(paramStat) && name[:len(paramStat)] == paramStat {
			stats[name[len(paramStat):]] = x
		}
	}
	var se float64
	var failed int
	for _, c := range cs.cl {
		u := c.id
		m.Rated[u] = true
		m.BU[u] = float32(c.bu)
		for p := range min(k, len(c.u)) {
			m.U[u*k+p] = float32(c.u[p])
		}
		failed += c.failed
		for q, j := range c.items {
			p := mu + c.bu + float64(m.BI[j])
			for p2 := range min(k, len(c.u)) {
				p += c.u[p2] * float64(v[int(j)*k+p2])
			}
			e := float64(c.val[q]) - float64(d.Scale.Clamp(float32(p)))
			se += e * e
		}
	}
	if failed > 0 || stats["failed_solves"] > 0 {
		stats["failed_solves"] += float64(failed)
	}
	if d.Len() > 0 {
		stats["train_rmse"] = math.Sqrt(se / float64(d.Len()))
	}
	rep := &Report{Ledger: *led, Rho: rho, Mean: mu, Stats: stats, Participation: cs.cfg.Participation()}
	rep.UserRho, rep.UserRounds = rep.Ledger.Rho(), nil
	if cs.cfg.limited() {
		steps, _ := schedule(cs.cfg, rho)
		rep.UserRho, rep.UserRounds = userRho(steps, cs.cfg.Participation())
		stats["rounds_per_user"] = float64(len(rep.UserRounds))
	}
	rep.Eps = rdp.ZCDPToDP(rep.UserRho, cs.cfg.Delta)
	rep.EpsReplace = epsReplace(rep.UserRho, cs.cfg.Delta)
	if cs.cfg.Aggregation == protocol.AggMasked {
		// The integer path: Skellam curves composed by Rényi accounting
		// (every share arriving; eps_spent: with the arrivals counted).
		p, err := newMaskPlan(cs.cfg, ni)
		if err != nil {
			return nil, nil, err
		}
		rep.Eps, rep.EpsReplace = p.Eps, p.EpsReplace
		stats["skellam_eta"] = p.Eta
	}
	return m, rep, nil
}
