package audit

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"

	"github.com/privrec/privrec/budget"
	"github.com/privrec/privrec/hdpmf"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/sdcf"
)

// invMargin is how much better than the mean (in calibrated RMSE, as a
// fraction) the inversion may do on a protected method.
const invMargin = 0.02

func init() {
	register(&Attack{
		Name:  "inversion",
		Title: "Rating reconstruction from gradients (two-round gradient inversion, as against FedMF)",
		Doc: "Every item gradient a client uploads in one round is a multiple of the same user vector: 2(u·v_j − r_j)·u in federated MF, " +
			"η(e_j·u + Λ_v v_j) − noise in SGLD. The server takes the direction of u from one round's rows, and the user's update between " +
			"two consecutive rounds (a public rule of the protocol, with the public V of both rounds) fixes its length: a closed-form " +
			"least-squares solve for ‖u‖; the rating then follows from each row (Chai et al., FedMF, 2020). Every consecutive pair of " +
			"training rounds gives an estimate; the attacker takes the median. sdcf fixes the first coordinate of u at 1 (the item " +
			"offset), so there one round fixes the length and the sign: u = a/a[0]. Ratings without an estimate get the global mean. " +
			"Metric: RMSE of the best affine map of the estimates onto the truth, over the RMSE of the global mean (sqrt(1 − ρ²); " +
			"calibrating with the truth only helps the attacker), with a bootstrap interval over users. Controls: plain federated MF " +
			"(near-exact recovery) and sdcf's SGLD MF without Langevin noise or randomized response (checks the SGLD equations). The integer path of secure aggregation (secagg=masked) " +
			"is audited without noise, the attacker told which items each client rated: on the unmasked integer vectors (a control) and " +
			"on the masked vectors the server receives under SecAgg+ (protected: at chance). Protected: " +
			"DPMF and HDPMF as shipped (secure aggregation: the server holds only per-item sums, nothing to attribute to a user); each " +
			"must stay at ratio ≥ 1 − margin. Findings: DPMF and HDPMF with secure aggregation off, where the server reads each " +
			"user's upload and its 1/n_j share of the noise, and SDMF, whose claim covers rating existence, not values (sdcf.Train " +
			"observed through its transcript).",
		cases: func(e *env) []testCase {
			return []testCase{
				{method: "fedmf", role: Control, run: fedInversion(hdpmf.Plain, false)},
				{method: "sgld-mf", role: Control, run: sdcfInversion("sgld-mf", false)},
				{method: "fedmf", role: Control, run: maskedInversion(false)},
				{method: "fedmf", role: Protected, run: maskedInversion(true)},
				{method: "dp-als", role: Control, run: dpalsInversion(false)},
				{method: "dp-als", role: Protected, run: dpalsInversion(true)},
				{method: "dpmf", role: Protected, run: fedInversion(hdpmf.DPMF, true)},
				{method: "hdpmf", role: Protected, run: fedInversion(hdpmf.HDPMF, true)},
				{method: "dpmf", role: Finding, run: fedInversion(hdpmf.DPMF, false)},
				{method: "hdpmf", role: Finding, run: fedInversion(hdpmf.HDPMF, false)},
				{method: "sdmf", role: Finding, run: sdcfInversion("sdmf", true)},
				{method: sdfmTarget, role: Finding, run: sdcfInversion(sdfmTarget, true)},
			}
		},
	})
}

// estimates collects per-rating estimates, keyed by (user, item).
type estimates map[int64][]float32

func key(u int, j int32) int64 { return int64(u)<<32 | int64(j) }

// topDir returns the unit vector that best explains the rows (n × k,
// row-major) up to sign: the top eigenvector of Σ g gᵀ by power iteration,
// started at the longest row.
func topDir(rows []float32, k int) []float64 {
	n := len(rows) / k
	if n == 0 {
		return nil
	}
	m := make([]float64, k*k)
	best, bestNorm := 0, -1.0
	for r := range n {
		g := rows[r*k : (r+1)*k]
		var s float64
		for a := range k {
			s += float64(g[a]) * float64(g[a])
			for b := range k {
				m[a*k+b] += float64(g[a]) * float64(g[b])
			}
		}
		if s > bestNorm {
			best, bestNorm = r, s
		}
	}
	x := make([]float64, k)
	for a := range k {
		x[a] = float64(rows[best*k+a])
	}
	y := make([]float64, k)
	for range 60 {
		for a := range k {
			var s float64
			for b := range k {
				s += m[a*k+b] * x[b]
			}
			y[a] = s
		}
		nrm := math.Sqrt(dot(y, y))
		if !(nrm > 0) {
			return nil
		}
		for a := range k {
			x[a] = y[a] / nrm
		}
	}
	return x
}

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func dot32(a []float64, b []float32) float64 {
	var s float64
	for i := range a {
		s += a[i] * float64(b[i])
	}
	return s
}

// solveScale returns s > 0 with s²·P⊥A ≈ P⊥B, P⊥ the projection away from
// dir: the length of u that makes the update s·A − B/s point along the
// next round's direction. ok is false when no positive s² fits.
func solveScale(a, b, dir []float64) (s float64, ok bool) {
	pa, pb := slices.Clone(a), slices.Clone(b)
	ca, cb := dot(a, dir), dot(b, dir)
	for i := range pa {
		pa[i] -= ca * dir[i]
		pb[i] -= cb * dir[i]
	}
	s2 := dot(pa, pb) / dot(pa, pa)
	if !(s2 > 0) || math.IsInf(s2, 0) {
		return 0, false
	}
	return math.Sqrt(s2), true
}

// fedInvert inverts one client's uploads of rounds t (up0 against b0) and
// t+1 (up1 against b1) of a federated run: 2(u·v − y)u rows, and between
// them the device step u ← u − η'/(n + n0)·(Σ_j 2(u·v'_j − y_j)v'_j + 2λu).
// It appends an estimate of y_j for every item of up0.
func fedInvert(b0, b1 *protocol.Broadcast, up0, up1 *protocol.Upload, pseudo float64, est estimates) {
	k := b0.Dim
	if k < 2 || len(up0.Values) == 0 || len(up1.Values) == 0 {
		return
	}
	a0, a1 := topDir(up0.Values, k), topDir(up1.Values, k)
	if a0 == nil || a1 == nil {
		return
	}
	n := len(up0.Items)
	lr := b1.Param("lr-user", 0) / (float64(n) + pseudo)
	lam := b1.Param("lambda", 0)
	alpha := make([]float64, n)
	A, B := make([]float64, k), make([]float64, k)
	for d := range k {
		A[d] = (1 - 2*lam*lr) * a0[d]
	}
	for m, j := range up0.Items {
		v0, v1 := b0.V[int(j)*k:int(j)*k+k], b1.V[int(j)*k:int(j)*k+k]
		alpha[m] = dot32(a0, up0.Values[m*k:(m+1)*k])
		var dv float64
		for d := range k {
			dv += a0[d] * (float64(v1[d]) - float64(v0[d]))
		}
		for d := range k {
			A[d] -= 2 * lr * dv * float64(v1[d])
			B[d] += lr * alpha[m] * float64(v1[d])
		}
	}
	s, ok := solveScale(A, B, a1)
	if !ok {
		return
	}
	y := make([]float64, n)
	for m, j := range up0.Items {
		y[m] = s*dot32(a0, b0.V[int(j)*k:int(j)*k+k]) - alpha[m]/(2*s)
	}
	// The rows fix (u, y) only up to a common sign; ratings are positive.
	if median(y) < 0 {
		for m := range y {
			y[m] = -y[m]
		}
	}
	for m, j := range up0.Items {
		est[key(up0.Client, j)] = append(est[key(up0.Client, j)], float32(y[m]))
	}
}

// sgldInvert inverts one client's SGLD uploads of rounds t and t+1:
// rows η(e_j u + Λ_v v_j) − noise, and between them
// u ← u − η(mean_j e_j v_j + Λ_u u) + noise, with e_j = u·v_j − c_j on the
// centred rating c_j. The uploaded items stand in for the rated ones (the
// server cannot tell them apart). The sign is left to signed.resolve.
func sgldInvert(b0, b1 *protocol.Broadcast, up0, up1 *protocol.Upload, lamU, lamV []float32, est signed) {
	k := b0.Dim
	if k < 2 || len(up0.Items) == 0 || len(up1.Items) == 0 {
		return
	}
	unshift := func(b *protocol.Broadcast, up *protocol.Upload) []float32 {
		eta := b.Param("eta", 0)
		out := make([]float32, len(up.Values))
		for m, j := range up.Items {
			for d := range k {
				out[m*k+d] = float32(float64(up.Values[m*k+d])/eta - float64(lamV[d]*b.V[int(j)*k+d]))
			}
		}
		return out
	}
	r0, r1 := unshift(b0, up0), unshift(b1, up1)
	a0, a1 := topDir(r0, k), topDir(r1, k)
	if a0 == nil || a1 == nil {
		return
	}
	eta := b0.Param("eta", 0)
	n := len(up0.Items)
	alpha := make([]float64, n)
	A, B := make([]float64, k), make([]float64, k)
	for d := range k {
		A[d] = (1 - eta*float64(lamU[d])) * a0[d]
	}
	for m, j := range up0.Items {
		alpha[m] = dot32(a0, r0[m*k:(m+1)*k])
		for d := range k {
			B[d] += eta * alpha[m] * float64(b0.V[int(j)*k+d]) / float64(n)
		}
	}
	s, ok := solveScale(A, B, a1)
	if !ok {
		return
	}
	c := make([]float64, n)
	for m, j := range up0.Items {
		c[m] = s*dot32(a0, b0.V[int(j)*k:int(j)*k+k]) - alpha[m]/s
	}
	est.add(up0.Client, up0.Items, c)
}

// signed collects, per user, the estimate vectors of the round pairs of
// an SGLD run, each known only up to its sign: (u, c) and (−u, −c) give
// the same uploads.
type signed map[int][]pairEst

type pairEst struct {
	items []int32
	c     []float64
}

func (s signed) add(u int, items []int32, c []float64) {
	s[u] = append(s[u], pairEst{slices.Clone(items), c})
}

// resolve fixes the signs and returns one median estimate per rating:
// each user's pairs are aligned with its first one (on the items they
// share), the users are aligned with each other (sign synchronization on
// the item means of everyone's estimates, since users broadly agree on
// which items are better), and the common sign is the one under which
// users like popular items (pop, counts from the transcript) better.
func (s signed) resolve(nItems int, pop []float64) estimates {
	users := make([]int, 0, len(s))
	for u := range s {
		users = append(users, u)
	}
	slices.Sort(users)
	vecs := map[int]map[int32]float64{}
	for _, u := range users {
		ps := s[u]
		ref := map[int32]float64{}
		for m, j := range ps[0].items {
			ref[j] = ps[0].c[m]
		}
		all := map[int32][]float64{}
		for _, p := range ps {
			var agree float64
			for m, j := range p.items {
				agree += p.c[m] * ref[j]
			}
			sg := 1.0
			if agree < 0 {
				sg = -1
			}
			for m, j := range p.items {
				all[j] = append(all[j], sg*p.c[m])
			}
		}
		v := map[int32]float64{}
		for j, x := range all {
			v[j] = median(x)
		}
		vecs[u] = v
	}
	sign := map[int]float64{}
	for _, u := range users {
		sign[u] = 1
	}
	mean := make([]float64, nItems)
	cnt := make([]float64, nItems)
	for range 20 {
		clear(mean)
		clear(cnt)
		for _, u := range users {
			for j, x := range vecs[u] {
				mean[j] += sign[u] * x
				cnt[j]++
			}
		}
		changed := false
		for _, u := range users {
			var agree float64
			for j, x := range vecs[u] {
				agree += x * (mean[j] - sign[u]*x) / math.Max(cnt[j], 1) // leave u out
			}
			if sg := math.Copysign(1, agree); agree != 0 && sg != sign[u] {
				sign[u], changed = sg, true
			}
		}
		if !changed {
			break
		}
	}
	var mp, np, sp float64
	for _, p := range pop {
		mp += p
		np++
	}
	mp /= math.Max(np, 1)
	for _, u := range users {
		for j, x := range vecs[u] {
			sp += sign[u] * x * (pop[j] - mp)
		}
	}
	global := 1.0
	if sp < 0 {
		global = -1
	}
	est := estimates{}
	for _, u := range users {
		for j, x := range vecs[u] {
			est[key(u, j)] = []float32{float32(global * sign[u] * x)}
		}
	}
	return est
}

func median(x []float64) float64 {
	if len(x) == 0 {
		return math.NaN()
	}
	s := slices.Clone(x)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func median32(x []float32) float64 {
	f := make([]float64, len(x))
	for i, v := range x {
		f[i] = float64(v)
	}
	return median(f)
}

// pairs walks a transcript and calls inv for every client that uploaded
// in two consecutive training rounds t ≥ 1 (so that the device step
// between them happened).
type pairs struct {
	prev    *protocol.Record
	prevUps map[int]*protocol.Upload
	inv     func(b0, b1 *protocol.Broadcast, up0, up1 *protocol.Upload)
	sums    int // summed uploads seen (secure aggregation)
	single  int // single-client uploads seen
	onRound func(rec *protocol.Record)
}

func (p *pairs) observe(rec *protocol.Record) {
	if p.onRound != nil {
		p.onRound(rec)
	}
	ups := map[int]*protocol.Upload{}
	for _, u := range rec.Uploads {
		if u.Client < 0 {
			p.sums++
			continue
		}
		p.single++
		ups[u.Client] = u
	}
	if rec.Broadcast.Phase != protocol.PhaseTrain {
		p.prev, p.prevUps = nil, nil
		return
	}
	if p.prev != nil {
		for c, u1 := range ups {
			if u0, ok := p.prevUps[c]; ok {
				p.inv(p.prev.Broadcast, rec.Broadcast, u0, u1)
			}
		}
	}
	p.prev, p.prevUps = rec, ups
}

// scoreEstimates scores the median estimate of every rating of d against
// the truth (truth(u, k-th rating)) with the calibrated RMSE ratio, and
// the clamped raw RMSE; ratings without an estimate get fallback.
func scoreEstimates(d *ratings.Dataset, est estimates, seed uint64, guess func(u int, j int32, y float64) float64,
	truth func(u int, j int32, r float32) float64, fallback float64) (v, lo, hi, raw float64, n, covered int) {
	byUser := d.ByUser()
	var clusters []moments
	var se float64
	for u := range d.NumUsers() {
		items, vals := byUser.Row(u)
		if len(items) == 0 {
			continue
		}
		var m moments
		for k, j := range items {
			x := fallback
			if e, ok := est[key(u, j)]; ok {
				x = guess(u, j, median32(e))
				covered++
			}
			y := truth(u, j, vals[k])
			m.add(x, y)
			dx := x - y
			if !math.IsNaN(dx) {
				se += dx * dx
			}
			n++
		}
		clusters = append(clusters, m)
	}
	v, lo, hi = bootRatio(clusters, 400, seed)
	return v, lo, hi, math.Sqrt(se / float64(max(n, 1))), n, covered
}

// fedInversion observes a federated run and scores the inversion.
func fedInversion(v hdpmf.Variant, secagg bool) func(context.Context, *env) (Result, error) {
	return func(ctx context.Context, e *env) (Result, error) {
		d := e.data
		cfg := fedConfig(v)
		cfg.Rounds, cfg.Seed, cfg.Workers, cfg.Aggregation = e.invRounds, e.cfg.Seed, e.cfg.Workers, protocol.SecureIf(secagg)
		est := estimates{}
		var pseudo float64
		p := &pairs{}
		p.inv = func(b0, b1 *protocol.Broadcast, up0, up1 *protocol.Upload) { fedInvert(b0, b1, up0, up1, pseudo, est) }
		err := observe(ctx, func(w io.Writer) error {
			c := cfg
			c.Transcript = w
			_, _, err := hdpmf.Train(ctx, d, c)
			return err
		}, func(h protocol.TranscriptHeader, rec *protocol.Record) error {
			if rec.Round == 0 {
				x, err := strconv.ParseFloat(h.Meta["pseudo"], 64)
				if err != nil {
					return fmt.Errorf("transcript header has no pseudo count: %w", err)
				}
				pseudo = x
			}
			p.observe(rec)
			return nil
		})
		if err != nil {
			return Result{}, err
		}
		gm := d.Mean()
		guess := func(u int, j int32, y float64) float64 { return y }
		if v == hdpmf.HDPMF {
			// y = β_u γ_j r: γ is public; the attacker is also given β_u.
			w, err := budget.HDPMFSpec(d, cfg.Spec, cfg.SpecSeed)
			if err != nil {
				return Result{}, err
			}
			guess = func(u int, j int32, y float64) float64 { return y / w.W(int32(u), j) }
		}
		truth := func(_ int, _ int32, r float32) float64 { return float64(r) }
		clamped := func(u int, j int32, y float64) float64 {
			return float64(d.Scale.Clamp(float32(guess(u, j, y))))
		}
		val, lo, hi, raw, n, covered := scoreEstimates(d, est, e.cfg.Seed, clamped, truth, gm)
		view := "per-user uploads"
		if secagg {
			view = "secure aggregation: per-item sums only"
		}
		res := Result{
			Case:   map[bool]string{true: "secagg", false: "secagg off"}[secagg],
			Metric: "calibrated RMSE / global-mean RMSE", Value: val, Lo: lo, Hi: hi, N: n, Baseline: 1,
			Bound: 1 - invMargin, HigherLeaks: false,
			Setting: fmt.Sprintf("%s, K = %d, %d rounds, ε = %g, %s", v, cfg.Dim, cfg.Rounds, cfg.Eps, view),
			Note: fmt.Sprintf("estimates for %d of %d ratings (%d single uploads, %d sums seen); raw RMSE of the clamped estimates %.4f, global mean %.4f",
				covered, n, p.single, p.sums, raw, stdDev(d)),
		}
		if v == hdpmf.Plain {
			res.Case = ""
			res.Setting = fmt.Sprintf("fedmf (federated MF, no noise), K = %d, %d rounds, per-user uploads", cfg.Dim, cfg.Rounds)
		}
		if v == hdpmf.HDPMF {
			res.Note += "; the attacker is given each user's weight β_u"
		}
		return res, nil
	}
}

// sdcfInversion observes sdcf.Train (SGLD MF, or SDMF when private; the
// control runs SGLD MF at temperature 0, without Langevin noise) and
// scores the inversion on the centred ratings. The attacker reads Λ_u,
// Λ_v and whether the first coordinate of u is the fixed item-offset 1
// from the transcript header. With that coordinate (sdcf's default), one
// round's rows give u itself, u = a/a[0] for their direction a, and each
// row's error e_j; without it, the two-round solve and the sign
// resolution below.
func sdcfInversion(target string, private bool) func(context.Context, *env) (Result, error) {
	return func(ctx context.Context, e *env) (Result, error) {
		cfg := sdcfConfig(private)
		cfg.Rounds, cfg.Seed, cfg.Workers = e.invRounds, e.cfg.Seed, e.cfg.Workers
		if !private {
			cfg.Temp = 0
		}
		return invertSDCF(ctx, e, target, cfg)
	}
}

// invertSDCF runs the inversion on sdcf.Train with cfg.
func invertSDCF(ctx context.Context, e *env, target string, cfg sdcf.Config) (Result, error) {
	d, private := e.data, cfg.Private
	est, signs := estimates{}, signed{}
	pop := make([]float64, d.NumItems())
	var pub sdcfPublic
	read := false
	p := &pairs{}
	p.onRound = func(rec *protocol.Record) {
		for _, up := range rec.Uploads {
			for _, j := range up.Items {
				pop[j]++
			}
			if pub.itemBias {
				biasInvert(rec.Broadcast, up, pub.lamV, est)
			}
		}
	}
	p.inv = func(b0, b1 *protocol.Broadcast, up0, up1 *protocol.Upload) {
		if !pub.itemBias {
			sgldInvert(b0, b1, up0, up1, pub.lamU, pub.lamV, signs)
		}
	}
	err := observe(ctx, sdcfProducer(ctx, target, d, cfg), func(h protocol.TranscriptHeader, rec *protocol.Record) error {
		if !read {
			var err error
			if pub, err = readSDCFPublic(h); err != nil {
				return err
			}
			read = true
		}
		p.observe(rec)
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	if !pub.itemBias {
		est = signs.resolve(d.NumItems(), pop)
	}
	means := deviceMeans(d) // the scores are on centred ratings
	guess := func(_ int, _ int32, c float64) float64 { return c }
	truth := func(u int, _ int32, r float32) float64 { return float64(r) - means[u] }
	val, lo, hi, raw, n, covered := scoreEstimates(d, est, e.cfg.Seed, guess, truth, 0)
	var se float64 // over the ratings with an estimate only
	for k, u := range d.Users {
		if x, ok := est[key(int(u), d.Items[k])]; ok {
			dx := median32(x) - truth(int(u), d.Items[k], d.Values[k])
			se += dx * dx
		}
	}
	name := "SGLD MF without Langevin noise or RR (temperature 0)"
	if private {
		name = fmt.Sprintf("SDMF at its defaults, temperature %g, ε_I = %g, ε_g = %g", cfg.Temp, cfg.EpsI, cfg.EpsG)
	}
	how := "the item-offset coordinate u[0] = 1 fixes u from one round's rows"
	if !pub.itemBias {
		how = "two-round solve for ‖u‖, signs resolved across users"
	}
	res := Result{
		Metric: "calibrated RMSE / user-mean RMSE", Value: val, Lo: lo, Hi: hi, N: n, Baseline: 1,
		Bound: 1 - invMargin, HigherLeaks: false,
		Setting: fmt.Sprintf("%s %s, K = %d, %d rounds", runName(target), name, cfg.Dim, cfg.Rounds),
		Note: fmt.Sprintf("%s; scored on ratings centred at the user's mean (sdcf centres on the device), "+
			"so the baseline is the user's own mean, which the attacker is given; estimates for %d of %d ratings, raw RMSE %.4f (%.4f on those %d)",
			how, covered, n, raw, math.Sqrt(se/float64(max(covered, 1))), covered),
	}
	if private {
		res.Note += "; SDMF claims rating existence only: rating values are hidden by the Langevin noise alone, with no ε claimed " +
			"(method sdmf's claim), so this row is a finding: the rated items a client sends give their ratings away up to that noise"
	}
	return res, nil
}

// biasInvert inverts one SGLD upload whose user vector has the fixed
// coordinate u[0] = 1: its rows, less the public prior term and divided by
// η, are e_j·u plus noise, so their top direction a gives u = a/a[0], each
// row's error e_j = a·row/(a·u), and the centred rating c_j = u·v_j − e_j.
// Fake rows (SDMF) are multiples of the same u and only sharpen a; the
// estimates of the items the user did not rate are never scored.
func biasInvert(b *protocol.Broadcast, up *protocol.Upload, lamV []float32, est estimates) {
	biasEach(b, up, lamV, func(j int32, c float64) {
		est[key(up.Client, j)] = append(est[key(up.Client, j)], float32(c))
	})
}

// biasEach inverts one SGLD upload as biasInvert does and calls fn with
// each uploaded item and its estimated centred rating c_j.
func biasEach(b *protocol.Broadcast, up *protocol.Upload, lamV []float32, fn func(j int32, c float64)) {
	k := b.Dim
	eta := b.Param("eta", 0)
	if k < 2 || len(up.Items) == 0 || !(eta > 0) || len(lamV) != k {
		return
	}
	rows := make([]float32, len(up.Values))
	for m, j := range up.Items {
		for d := range k {
			rows[m*k+d] = float32(float64(up.Values[m*k+d])/eta - float64(lamV[d]*b.V[int(j)*k+d]))
		}
	}
	a := topDir(rows, k)
	if a == nil || a[0] == 0 {
		return
	}
	s := 1 / a[0] // u = s·a
	for m, j := range up.Items {
		fn(j, s*dot32(a, b.V[int(j)*k:int(j)*k+k])-dot32(a, rows[m*k:(m+1)*k])/s)
	}
}

// stdDev returns the RMSE of predicting d's global mean.
func stdDev(d *ratings.Dataset) float64 {
	m := d.Mean()
	var s float64
	for _, v := range d.Values {
		s += (float64(v) - m) * (float64(v) - m)
	}
	return math.Sqrt(s / float64(max(d.Len(), 1)))
}
