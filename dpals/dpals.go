package dpals

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/privrec/privrec/accountant/rdp"
	"github.com/privrec/privrec/internal/linalg"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
	"gonum.org/v1/gonum/mat"
)

// Stream labels for rng.New.
const (
	streamNoise  uint64 = 0x6470_616c_736e // "dpalsn": the aggregate noise
	streamSample uint64 = 0x6470_616c_7373 // "dpalss": a user's sample of c ratings
	streamInit   uint64 = 0x6470_616c_7369 // "dpalsi": the public initial item factors
	releaseInit  uint64 = 1 << 20          // the noise stream of the spectral initialization
)

// Report is what a run released and spent.
type Report struct {
	// Ledger holds every release of the run.
	Ledger rdp.Ledger
	// Rho is the zCDP budget the target (Eps, Delta) allows; the ledger's
	// total equals it up to rounding.
	Rho float64
	// Eps is the ledger's total ε at Delta.
	Eps float64
	// Mean is the released global mean.
	Mean float64
	// Stats holds figures for reports: "train_rmse", the noise σ of each
	// kind of release, "failed_solves".
	Stats map[string]float64
}

// Claim is the privacy claim of Train.
var Claim = model.Privacy{
	Unit: "user", Trusted: "nobody",
	Note: "user-level joint DP over the whole run: each user's vector and bias are solved on the device and never leave it; the " +
		"server receives only Gaussian-noised sums over users of per-item statistics (weighted counts and residual sums, Gramians " +
		"and right-hand sides) and a noised global mean, every release composed in zCDP and converted to (ε, δ); each user's " +
		"contribution is bounded (at most c ratings, clipped residuals, norm-bounded vectors, weights whose squares sum to 1); " +
		"holds against a server that sees only the sums (aggregation ideal: the ideal functionality of secure aggregation, the " +
		"noise drawn once as the sum of the clients' Gaussian shares); on the device each user also fits their own coefficients on " +
		"public item features (the released item bias and count, the release year in the public catalog's title), which releases nothing; " +
		"hyperparameter tuning is not counted",
	Aggregation: "ideal", Noise: "gaussian",
}

// Train fits the model on train (ratings on 1..5) with cfg and seed. See
// the package documentation for the protocol and its privacy.
func Train(ctx context.Context, train *ratings.Dataset, cfg Config, seed uint64) (*model.Model, *Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	rho, err := rdp.ZCDPRhoFor(cfg.Eps, cfg.Delta)
	if err != nil {
		return nil, nil, fmt.Errorf("dpals: %w", err)
	}
	t := &trainer{cfg: cfg, seed: seed, d: train, byUser: train.ByUser(),
		nu: train.NumUsers(), ni: train.NumItems(), k: cfg.Dim,
		rep: &Report{Rho: rho, Stats: map[string]float64{}}}
	factors := cfg.Dim > 0 && (cfg.Rounds > 0 || cfg.InitItems > 0)
	if !factors {
		t.k = 0
	}
	rhoMean := cfg.FracMean * rho
	rhoBias := (1 - cfg.FracMean) * rho
	if factors {
		rhoBias = cfg.FracBias * rho
	}
	t.releaseMean(rhoMean)
	t.bi = make([]float64, t.ni)
	t.bu = make([]float64, t.nu)
	t.weight = make([]float64, t.ni)
	for j := range t.weight {
		t.weight[j] = 1
	}
	for r := range cfg.BiasRounds {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		t.biasRound(r, rhoBias/float64(cfg.BiasRounds))
	}
	if factors {
		t.initV()
		rest := rho - rhoMean - rhoBias
		if cfg.InitItems > 0 {
			ri := rest
			if cfg.Rounds > 0 {
				ri = cfg.FracInit * rest
			}
			t.spectralInit(ri)
			rest -= ri
		}
		for r := range cfg.Rounds {
			rf := rest / float64(cfg.Rounds)
			if err := ctx.Err(); err != nil {
				return nil, nil, err
			}
			t.factorRound(cfg.BiasRounds+r, rf)
		}
	}
	t.addFeatures()
	m := t.finalModel()
	t.rep.Eps = t.rep.Ledger.Epsilon(cfg.Delta)
	return m, t.rep, nil
}

// trainer holds one run's state: the public broadcast (mean, item biases,
// item factors) and, standing for the devices, the users' own biases and
// vectors.
type trainer struct {
	cfg    Config
	seed   uint64
	d      *ratings.Dataset
	byUser *ratings.CSR
	nu, ni int
	k      int
	rep    *Report

	mu     float64   // released global mean
	bi     []float64 // item biases (public)
	bBias  []float64 // item biases of the last bias round: the prior of the factor rounds
	v      []float64 // item factors, ni×k (public)
	bu     []float64 // user biases (on the devices)
	u      []float64 // user vectors, nu×k (on the devices)
	weight []float64 // per-item popularity weight p_j from the last released counts
	count  []float64 // the last released (noisy) weighted counts
	// poolG and poolH sum the bias rounds' noisy counts and sums, and
	// poolVar their count noise variance (PoolBias).
	poolG, poolH []float64
	poolVar      float64
	// rec, when not nil, is given every release's sums before the noise
	// is added (tests use it to check sensitivities).
	rec    func(name string, sums []float64)
	active []bool    // items that get factors: the TopItems largest counts
	ridge  []float64 // per-dimension ridge of the user solve (nil: RegUser)
}

// record passes a release's noise-free sums to rec.
func (t *trainer) record(name string, sums []float64) {
	if t.rec != nil {
		t.rec(name, slices.Clone(sums))
	}
}

// noise returns the stream of the aggregate noise of release r.
func (t *trainer) noise(r uint64) *rand.Rand { return rng.New(t.seed, streamNoise, r) }

// releaseMean releases the global mean at zCDP cost rho: each user
// contributes (m_u − 3, 1), m_u the mean of the user's ratings, clipped to
// [1, 5]: L2 sensitivity √5. μ = 3 + S̃/max(Ñ, 1), clamped to [1, 5].
func (t *trainer) releaseMean(rho float64) {
	l2 := math.Sqrt(5)
	sigma := rdp.GaussianSigmaFor(rho, l2)
	t.rep.Ledger.Gaussian("global mean: sum of user means and user count", 1, l2, sigma)
	var s, n float64
	for u := range t.nu {
		_, val := t.byUser.Row(u)
		if len(val) == 0 {
			continue
		}
		var m float64
		for _, x := range val {
			m += float64(x)
		}
		m = min(max(m/float64(len(val)), 1), 5)
		s += m - 3
		n++
	}
	t.record("mean", []float64{s, n})
	r := t.noise(0)
	s += sigma * r.NormFloat64()
	n += sigma * r.NormFloat64()
	t.mu = min(max(3+s/max(n, 1), 1), 5)
	t.rep.Mean = t.mu
	t.rep.Stats["sigma_mean"] = sigma
}

// sample returns the positions (within the user's row) of the user's
// ratings that enter round r's statistics: all of them (in a factor
// round, all on active items), or a uniform sample of MaxRatings of them
// drawn on the device.
func (t *trainer) sample(u, r int, items []int32, buf []int) []int {
	buf = buf[:0]
	for p, j := range items {
		if t.active == nil || t.active[j] {
			buf = append(buf, p)
		}
	}
	c, n := t.cfg.MaxRatings, len(buf)
	if c == 0 || n <= c {
		return buf
	}
	g := rng.New(t.seed, streamSample, uint64(r), uint64(u))
	for p := range c {
		q := p + g.IntN(n-p)
		buf[p], buf[q] = buf[q], buf[p]
	}
	buf = buf[:c]
	slices.Sort(buf)
	return buf
}

// weights writes the user's weights for the sampled ratings: p_j
// normalized so that their squares sum to 1.
func (t *trainer) weights(items []int32, pos []int, w []float64) []float64 {
	w = w[:0]
	if len(pos) == 0 {
		return w
	}
	var s float64
	for _, p := range pos {
		x := t.weight[items[p]]
		w = append(w, x)
		s += x * x
	}
	s = 1 / math.Sqrt(s)
	for k := range w {
		w[k] *= s
	}
	return w
}

// setWeights sets the popularity weights p_j = (c̃_j + 1)^(−Beta) from
// released weighted counts (post-processing).
func (t *trainer) setWeights(count []float64) {
	t.count = slices.Clone(count)
	for j, c := range count {
		t.weight[j] = math.Pow(max(c, 0)+1, -t.cfg.Beta)
	}
}

// resBound is the L2 bound of a user's weighted residual vector (w_uj·y_uj
// over the user's contributed ratings): Clip, since the weights' squares
// sum to 1, or ClipNorm when it is set and smaller.
func (t *trainer) resBound() float64 {
	if c := t.cfg.ClipNorm; c > 0 && c < t.cfg.Clip {
		return c
	}
	return t.cfg.Clip
}

// clipNorm scales the weighted residual vector ys down to norm resBound.
func (t *trainer) clipNorm(ys []float64) {
	b := t.resBound()
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

// biasRound runs bias round r at zCDP cost rho. Each device solves its
// bias b_u against the broadcast μ and b_j; the server receives the
// noised per-item sums g_j = Σ_u w_uj (weighted count, sensitivity 1)
// and h_j = Σ_u w_uj·clip(r − μ − b_u) (sensitivity Clip), and sets
// b_j = h̃_j / (max(g̃_j, 0) + λ), λ = RegItem + RegNoise·σ_g.
func (t *trainer) biasRound(r int, rho float64) {
	rg, rh := t.cfg.FracGram*rho, (1-t.cfg.FracGram)*rho
	sg, sh := rdp.GaussianSigmaFor(rg, 1), rdp.GaussianSigmaFor(rh, t.resBound())
	t.rep.Ledger.Gaussian(fmt.Sprintf("round %d: item weighted counts", r+1), 1, 1, sg)
	t.rep.Ledger.Gaussian(fmt.Sprintf("round %d: item residual sums", r+1), 1, t.resBound(), sh)
	t.rep.Stats["sigma_bias_count"], t.rep.Stats["sigma_bias_sum"] = sg, sh
	g := make([]float64, t.ni)
	h := make([]float64, t.ni)
	var pos []int
	var w, ys []float64
	for u := range t.nu {
		items, val := t.byUser.Row(u)
		if len(items) == 0 {
			continue
		}
		var s float64
		for k, j := range items {
			s += float64(val[k]) - t.mu - t.bi[j]
		}
		bu := s / (float64(len(items)) + t.cfg.RegUserBias)
		t.bu[u] = bu
		pos = t.sample(u, r, items, pos)
		w = t.weights(items, pos, w)
		ys = ys[:0]
		for k, p := range pos {
			ys = append(ys, w[k]*clip(float64(val[p])-t.mu-bu, t.cfg.Clip))
		}
		t.clipNorm(ys)
		for k, p := range pos {
			j := items[p]
			g[j] += w[k]
			h[j] += ys[k]
		}
	}
	t.record("counts", g)
	t.record("sums", h)
	nz := t.noise(uint64(1 + r))
	lam := t.cfg.RegItem + t.cfg.RegNoise*sg
	for j := range t.ni {
		g[j] += sg * nz.NormFloat64()
		h[j] += sh * nz.NormFloat64()
	}
	if t.cfg.PoolBias {
		if t.poolG == nil {
			t.poolG, t.poolH = make([]float64, t.ni), make([]float64, t.ni)
		}
		t.poolVar += sg * sg
		lam = t.cfg.RegItem + t.cfg.RegNoise*math.Sqrt(t.poolVar)
		for j := range t.ni {
			t.poolG[j] += g[j]
			t.poolH[j] += h[j]
			t.bi[j] = t.poolH[j] / (max(t.poolG[j], 0) + lam)
		}
	} else {
		for j := range t.ni {
			t.bi[j] = h[j] / (max(g[j], 0) + lam)
		}
	}
	t.setWeights(g)
	t.bBias = slices.Clone(t.bi)
}

// initV draws the initial item factors from public randomness and marks
// the active items: the TopItems with the largest released counts of the
// last bias round (post-processing), or all.
func (t *trainer) initV() {
	g := rng.New(t.seed, streamInit)
	t.v = make([]float64, t.ni*t.k)
	for k := range t.v {
		t.v[k] = t.cfg.InitScale * g.NormFloat64()
	}
	t.u = make([]float64, t.nu*t.k)
	t.active = make([]bool, t.ni)
	m := t.cfg.TopItems
	if m == 0 || m >= t.ni {
		for j := range t.active {
			t.active[j] = true
		}
		return
	}
	for _, j := range t.topItems(m) {
		t.active[j] = true
	}
	for j, on := range t.active {
		if !on {
			clear(t.v[j*t.k : j*t.k+t.k])
		}
	}
}

// solveUser solves user u's bias and vector on the device from all the
// user's ratings against the broadcast μ, b_j and V (ridge RegUserBias on
// the bias, RegUser on the vector), storing them in t.bu and t.u. It
// reports false when the solve failed (the user keeps the old values).
func (t *trainer) solveUser(u int, a, b []float64) bool {
	k1 := t.k + 1
	items, val := t.byUser.Row(u)
	clear(a)
	clear(b)
	for q, j := range items {
		y := float64(val[q]) - t.mu - t.bi[j]
		vj := t.v[int(j)*t.k : int(j)*t.k+t.k]
		// x = (1, v_j)
		a[0]++
		b[0] += y
		for p := range t.k {
			a[(p+1)*k1] += vj[p]
			b[p+1] += y * vj[p]
			row := a[(p+1)*k1 : (p+1)*k1+p+2]
			for s := 0; s <= p; s++ {
				row[s+1] += vj[p] * vj[s]
			}
		}
	}
	a[0] += t.cfg.RegUserBias + 1e-9
	for p := range t.k {
		if t.ridge != nil {
			a[(p+1)*k1+p+1] += t.ridge[p]
		} else {
			a[(p+1)*k1+p+1] += t.cfg.RegUser
		}
	}
	if !linalg.CholeskySolve(a, b, k1) {
		return false
	}
	t.bu[u] = b[0]
	copy(t.u[u*t.k:u*t.k+t.k], b[1:])
	return true
}

// factorRound runs factor round r at zCDP cost rho. Each device solves
// (b_u, u) against the broadcast and scales u to norm at most NormU; with
// x = (1, u) and y = clip(r − μ − b_u), it adds for each sampled rating on
// an active item w·y·x to the item's right-hand side (sensitivity
// Clip·√(1 + NormU²)) and either w·x xᵀ to the item's Gramian (its upper
// triangle, sensitivity 1 + NormU²) or, with SharedGram, w to the item's
// count (sensitivity 1) and, once per user, x xᵀ to one global Gramian
// (sensitivity 1 + NormU²), the item's Gramian then being its count times
// the global mean of x xᵀ. The server solves
// (G̃_j + λI) (b_j, v_j) = h̃_j + λ(b̄_j, 0), b̄_j the bias rounds' item
// bias, λ = RegItem + RegNoise·σ of the count or Gramian entries.
func (t *trainer) factorRound(r int, rho float64) {
	k, k1 := t.k, t.k+1
	nt := k1 * (k1 + 1) / 2 // upper triangle with the diagonal
	shared := t.cfg.SharedGram
	lg := 1 + t.cfg.NormU*t.cfg.NormU
	lh := t.resBound() * math.Sqrt(lg)
	rg, rh := t.cfg.FracGram*rho, (1-t.cfg.FracGram)*rho
	sh := rdp.GaussianSigmaFor(rh, lh)
	var sg, sc float64 // σ of the Gramians (per item or global), of the counts
	if shared {
		// The global Gramian sums over every user: a tenth of the
		// Gramian share is plenty.
		sg = rdp.GaussianSigmaFor(0.1*rg, lg)
		sc = rdp.GaussianSigmaFor(0.9*rg, 1)
		t.rep.Ledger.Gaussian(fmt.Sprintf("round %d: global Gramian of the user vectors", r+1), 1, lg, sg)
		t.rep.Ledger.Gaussian(fmt.Sprintf("round %d: item weighted counts", r+1), 1, 1, sc)
		t.rep.Stats["sigma_count"] = sc
	} else {
		sg = rdp.GaussianSigmaFor(rg, lg)
		sc = sg
		t.rep.Ledger.Gaussian(fmt.Sprintf("round %d: item Gramians (upper triangles)", r+1), 1, lg, sg)
	}
	t.rep.Ledger.Gaussian(fmt.Sprintf("round %d: item right-hand sides", r+1), 1, lh, sh)
	t.rep.Stats["sigma_gram"], t.rep.Stats["sigma_rhs"] = sg, sh
	var gram []float64
	if shared {
		gram = make([]float64, nt) // the global one
	} else {
		gram = make([]float64, t.ni*nt)
	}
	cnt := make([]float64, t.ni)
	rhs := make([]float64, t.ni*k1)
	a := make([]float64, k1*k1)
	b := make([]float64, k1)
	x := make([]float64, k1)
	var pos []int
	var w, ys []float64
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
	for u := range t.nu {
		items, val := t.byUser.Row(u)
		if len(items) == 0 {
			continue
		}
		if !t.solveUser(u, a, b) {
			t.rep.Stats["failed_solves"]++
		}
		x[0] = 1
		uu := t.u[u*k : u*k+k]
		var n2 float64
		for _, z := range uu {
			n2 += z * z
		}
		s := 1.0
		if n := math.Sqrt(n2); n > t.cfg.NormU {
			s = t.cfg.NormU / n
		}
		for p, z := range uu {
			x[p+1] = s * z
		}
		if shared {
			addOuter(gram, 1)
		}
		pos = t.sample(u, r, items, pos)
		w = t.weights(items, pos, w)
		ys = ys[:0]
		for q, p := range pos {
			ys = append(ys, w[q]*clip(float64(val[p])-t.mu-t.bu[u], t.cfg.Clip))
		}
		t.clipNorm(ys)
		for q, p := range pos {
			j := int(items[p])
			y := ys[q]
			hj := rhs[j*k1 : j*k1+k1]
			for p1 := range k1 {
				hj[p1] += y * x[p1]
			}
			if shared {
				cnt[j] += w[q]
			} else {
				addOuter(gram[j*nt:j*nt+nt], w[q])
			}
		}
	}
	if shared {
		t.record("global gram", gram)
		t.record("counts", cnt)
	} else {
		t.record("gram", gram)
	}
	t.record("rhs", rhs)
	nz := t.noise(uint64(1 + r))
	var global []float64
	if shared {
		for e := range gram {
			gram[e] += sg * nz.NormFloat64()
		}
		global = make([]float64, nt)
		for e := range gram {
			global[e] = gram[e] / max(gram[0], 1)
		}
	}
	lam := t.cfg.RegItem + t.cfg.RegNoise*sc
	gj := make([]float64, nt)
	for j := range t.ni {
		// Every item's statistics are released (the vector's shape is
		// public); inactive items are not solved.
		hj := rhs[j*k1 : j*k1+k1]
		for e := range hj {
			hj[e] += sh * nz.NormFloat64()
		}
		if shared {
			cnt[j] += sc * nz.NormFloat64()
			c := max(cnt[j], 0)
			for e := range gj {
				gj[e] = c * global[e]
			}
		} else {
			copy(gj, gram[j*nt:j*nt+nt])
			for e := range gj {
				gj[e] += sg * nz.NormFloat64()
			}
			cnt[j] = gj[0]
		}
		if t.active[j] {
			t.solveItem(j, gj, hj, lam, a, b)
		}
	}
}

// solveItem solves item j's (b_j, v_j) from its noisy upper-triangle
// Gramian gj and right-hand side hj with ridge lam, shrinking b_j towards
// the bias rounds' estimate. A Gramian the noise made indefinite gets its
// ridge doubled until the solve succeeds.
func (t *trainer) solveItem(j int, gj, hj []float64, lam float64, a, b []float64) {
	k1 := t.k + 1
	for try := 0; try < 60; try++ {
		e := 0
		for p1 := range k1 {
			for p2 := p1; p2 < k1; p2++ {
				a[p2*k1+p1] = gj[e] // lower triangle, row p2
				e++
			}
			a[p1*k1+p1] += lam
		}
		copy(b, hj)
		b[0] += lam * t.bBias[j]
		if linalg.CholeskySolve(a, b, k1) {
			t.bi[j] = b[0]
			copy(t.v[j*t.k:j*t.k+t.k], b[1:])
			return
		}
		lam *= 2
	}
	t.rep.Stats["failed_solves"]++
}

// finalModel has every device solve its bias and vector against the last
// broadcast one more time (free: it reads only the user's own ratings)
// and returns the model of all users' on-device predictions.
func (t *trainer) finalModel() *model.Model {
	d := t.d
	m := &model.Model{
		Dim: t.k, NumUsers: t.nu, NumItems: t.ni,
		Mean: float32(t.mu), Default: float32(t.mu), Scale: d.Scale,
		BU: make([]float32, t.nu), BI: make([]float32, t.ni),
		U: make([]float32, t.nu*t.k), V: make([]float32, t.ni*t.k),
		Rated:   make([]bool, t.nu),
		UserIDs: slices.Clone(d.UserIDs), ItemIDs: slices.Clone(d.ItemIDs), ItemTitles: slices.Clone(d.ItemTitles),
	}
	k1 := t.k + 1
	a := make([]float64, k1*k1)
	b := make([]float64, k1)
	if t.u == nil {
		t.u = make([]float64, 0)
	}
	var se float64
	for u := range t.nu {
		items, val := t.byUser.Row(u)
		if len(items) == 0 {
			continue
		}
		m.Rated[u] = true
		if t.k > 0 {
			if !t.solveUser(u, a, b) {
				t.rep.Stats["failed_solves"]++
			}
		} else {
			var s float64
			for q, j := range items {
				s += float64(val[q]) - t.mu - t.bi[j]
			}
			t.bu[u] = s / (float64(len(items)) + t.cfg.RegUserBias)
		}
		for q, j := range items {
			p := t.mu + t.bu[u] + t.bi[j]
			for c := range t.k {
				p += t.u[u*t.k+c] * t.v[int(j)*t.k+c]
			}
			e := float64(val[q]) - float64(d.Scale.Clamp(float32(p)))
			se += e * e
		}
	}
	for u, x := range t.bu {
		m.BU[u] = float32(x)
	}
	for j, x := range t.bi {
		m.BI[j] = float32(x)
	}
	for c, x := range t.u {
		m.U[c] = float32(x)
	}
	for c, x := range t.v {
		m.V[c] = float32(x)
	}
	if d.Len() > 0 {
		t.rep.Stats["train_rmse"] = math.Sqrt(se / float64(d.Len()))
	}
	return m
}

// spectralInit replaces the initial item factors of the InitItems items
// with the largest released counts by the top Dim eigenvectors of a noisy
// item-item second-moment matrix, at zCDP cost rho (a private warm start in
// the manner of Dwork et al.'s Analyze Gauss, STOC 2014). Each device
// solves its bias against the broadcast, forms z_u with z_uj =
// w_uj·clip(r_uj − μ − b_u − b_j) on its rated items among them (weights
// whose squares sum to 1) and adds z_u z_uᵀ: L2 sensitivity Clip². The
// server adds symmetric Gaussian noise and keeps the top eigenvectors,
// scaled by √(λ/n̂) with n̂ the number of users (its own noisy (0,0)-free
// estimate: the global mean's count is not reused, so the scale is
// λ/InitItems, a public function of the release).
func (t *trainer) spectralInit(rho float64) {
	m := min(t.cfg.InitItems, t.ni)
	c2 := t.resBound() * t.resBound()
	sigma := rdp.GaussianSigmaFor(rho, c2)
	t.rep.Ledger.Gaussian("warm start: item-item second moments of the top items", 1, c2, sigma)
	t.rep.Stats["sigma_init"] = sigma
	if m == 0 {
		return // no items: an empty matrix, nothing to release
	}
	top := t.topItems(m)
	slot := make([]int, t.ni)
	for j := range slot {
		slot[j] = -1
	}
	for s, j := range top {
		slot[j] = s
	}
	a := make([]float64, m*m)
	var zi []int
	var zv []float64
	for u := range t.nu {
		items, val := t.byUser.Row(u)
		if len(items) == 0 {
			continue
		}
		var s float64
		for q, j := range items {
			s += float64(val[q]) - t.mu - t.bi[j]
		}
		bu := s / (float64(len(items)) + t.cfg.RegUserBias)
		zi, zv = zi[:0], zv[:0]
		var n2 float64
		for q, j := range items {
			if slot[j] < 0 {
				continue
			}
			p := t.weight[j]
			zi = append(zi, slot[j])
			zv = append(zv, p*clip(float64(val[q])-t.mu-bu-t.bi[j], t.cfg.Clip))
			n2 += p * p
		}
		if len(zi) == 0 {
			continue
		}
		if c := t.cfg.MaxRatings; c > 0 && len(zi) > c {
			g := rng.New(t.seed, streamSample, releaseInit, uint64(u))
			for p := range c {
				q := p + g.IntN(len(zi)-p)
				zi[p], zi[q] = zi[q], zi[p]
				zv[p], zv[q] = zv[q], zv[p]
			}
			zi, zv = zi[:c], zv[:c]
			n2 = 0
			for _, j := range zi {
				p := t.weight[top[j]]
				n2 += p * p
			}
		}
		sc := 1 / math.Sqrt(n2)
		for x := range zv {
			zv[x] *= sc
		}
		t.clipNorm(zv)
		for x, i := range zi {
			for y, k := range zi {
				if k >= i {
					a[i*m+k] += zv[x] * zv[y]
				}
			}
		}
	}
	upper := make([]float64, 0, m*(m+1)/2)
	for i := range m {
		upper = append(upper, a[i*m+i:i*m+m]...)
	}
	t.record("init", upper)
	nz := t.noise(releaseInit)
	for i := range m {
		for k := i; k < m; k++ {
			a[i*m+k] += sigma * nz.NormFloat64()
			a[k*m+i] = a[i*m+k]
		}
	}
	var eig mat.EigenSym
	if !eig.Factorize(mat.NewSymDense(m, a), true) {
		t.rep.Stats["failed_solves"]++
		return
	}
	vals := eig.Values(nil) // ascending
	var vecs mat.Dense
	eig.VectorsTo(&vecs)
	for j := range t.v {
		t.v[j] = 0
	}
	// A Gaussian symmetric m×m matrix of entry σ has spectral norm about
	// 2σ√m: components below InitFloor times that are noise and are left
	// at 0 (the user vectors then leave those dimensions unused).
	floor := t.cfg.InitFloor * 2 * sigma * math.Sqrt(float64(m))
	kept := 0
	for c := range min(t.k, m) {
		col := m - 1 - c
		l := max(vals[col], 0)
		if l <= floor {
			break
		}
		kept++
		sc := t.cfg.InitScale * math.Sqrt(float64(m)) * math.Sqrt(l/vals[m-1])
		for s, j := range top {
			t.v[j*t.k+c] = sc * vecs.At(s, col)
		}
	}
	t.rep.Stats["init_dims"] = float64(kept)
	t.rep.Stats["init_top_eigenvalue"] = vals[m-1]
	t.rep.Stats["init_noise_floor"] = floor
}

// topItems returns the m items with the largest released counts, largest
// first (ties by index).
func (t *trainer) topItems(m int) []int {
	order := make([]int, t.ni)
	for j := range order {
		order[j] = j
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case t.count[a] > t.count[b]:
			return -1
		case t.count[a] < t.count[b]:
			return 1
		}
		return 0
	})
	return order[:m]
}
