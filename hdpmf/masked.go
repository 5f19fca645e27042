package hdpmf

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/privrec/privrec/accountant/rdp"
	"github.com/privrec/privrec/budget"
	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/protocol"
)

// The integer path (Config.Aggregation = protocol.AggMasked): secure
// aggregation for real sums integers mod 2^b, so every upload is a dense
// integer vector over every item of the catalog — K quantized coordinates
// and one arrival bit per item — and the noise is the distributed Skellam
// mechanism (Agarwal, Kairouz and Liu, NeurIPS 2021) instead of gamma
// shares: each of the n_j clients that announced item j adds Skellam(μ/n_j)
// to each of its K coordinates, so the sum carries Skellam(μ) exactly. A
// dense upload also hides which items a client rated, which a sparse one
// under the ideal functionality hides only by assumption.
//
// Roster calibration (protocol.ParamRoster R, which a deployment running
// secagg's active protocol sets and its clients check against the
// certified roster they pin): the counts n_j come from the server, which
// the clients cannot check, and a server announcing n_j = 2^30 made every
// share vanish. Under it no count enters a share: every client in the
// round — with ratings or not, out of budget or not — adds
// Skellam(μ/⌊ρ·R⌋) to every coordinate of every item (maskedDense), so
// any ⌊ρ·R⌋ shares in the sum carry Skellam(μ) at every item. The
// clients refuse a survivor set below their pinned ρ of R, so a sum
// holds at least ρ·R vectors; with at most γ·R corrupt ones withholding
// their shares the noise is at least (1 − γ/ρ)·μ per coordinate
// (TestRosterFloorCost gives the ε). It costs each client K samples per
// item of the catalog instead of per rated item; the upload was already
// dense.
//
// Quantization: a client's row g = 2(u·v_j − y)·u is clipped to L2 norm
// ClipFactor·Δ (Δ the rating range; ‖u‖ ≤ 1 keeps honest rows below
// 2Δ·‖v_j‖-ish, so clipping touches only rows of far-off items), scaled by
// Scale units per float unit and rounded stochastically (unbiased). A
// change of one rating value by at most Δ moves g by at most 2Δ in L2
// (clipping is 1-Lipschitz), so the L2 sensitivity in integer units is
// 2Δ·Scale plus 2√K for the rounding, and the L1 sensitivity
// min(√K·L2, L2²).
//
// Calibration: μ is the least Poisson mean for which Rounds releases
// compose, in Rényi DP, to (E, Delta)-DP for the proven unit, one user's
// rating values, at the user clip's sensitivities, with E the float
// path's proven total: the smaller of Rounds·C·ε (basic composition) and
// the zCDP composition of Rounds rounds of C·ε-DP at Delta (C =
// Config.UserClip; ε the variant's per-round ε of a weight-1 rating,
// HDPMF: Eps, DPMF: the specification's floor, PDPMF: the threshold), so
// the two paths report the same proven total.
// Without a clip (C = 0) it is the paper's per-rating Rounds·ε at the
// per-rating sensitivities (then no proven figure). The per-rating
// figures (masking.epsRound, epsTotal) are the paper's, at the μ chosen.
const (
	maskScale      = 64 // integer units per float unit
	maskClipFactor = 4  // row clip, in units of the rating range
)

// masking is the public integer-path setup every party computes from the
// configuration.
type masking struct {
	q        dp.Quantizer
	mu       float64 // Poisson mean of the summed Skellam noise per coordinate
	l1, l2   float64 // sensitivities in integer units
	epsRound float64 // ε of one round at Delta (alone)
	epsTotal float64 // ε of all rounds at Delta
	delta    float64
	// ul1 and ul2 are the user-level sensitivities in integer units: one
	// user's values changed moves the sum by at most twice the user
	// clip's L2 norm, and an integer vector's L1 norm is at most its
	// squared L2 norm. +Inf without a user clip.
	ul1, ul2 float64
	// tables holds the Skellam(μ/n) samplers of the share sizes in use:
	// public functions of μ and n, shared by the clients of a process.
	tables dp.SkellamTables
}

// newMasking calibrates the integer path for per-round ε eps of a
// weight-1 rating and rating range sens.
func newMasking(cfg Config, eps, sens float64) (*masking, error) {
	delta := cfg.Delta
	if delta == 0 {
		delta = DefaultDelta
	}
	m := &masking{q: dp.Quantizer{Clip: maskClipFactor * sens, Scale: maskScale, Bits: 32}, delta: delta}
	m.l2 = 2*sens*maskScale + 2*math.Sqrt(float64(cfg.Dim))
	m.l1 = math.Min(math.Sqrt(float64(cfg.Dim))*m.l2, m.l2*m.l2)
	m.ul1, m.ul2 = math.Inf(1), math.Inf(1)
	total, l1, l2 := eps*float64(cfg.Rounds), m.l1, m.l2
	if cfg.UserClip > 0 {
		m.ul2 = 2 * cfg.UserClip * sens * maskScale
		m.ul1 = m.ul2 * m.ul2
		// The proven figure: the float path's, C·ε a round and over T
		// rounds the smaller of basic composition and zCDP at δ
		// (run.userEps), reached in Rényi DP at the user sensitivities.
		total, l1, l2 = floatProvenTotal(eps*cfg.UserClip, cfg.Rounds, delta), m.ul1, m.ul2
	}
	mu, err := rdp.SkellamMuFor(total, delta, cfg.Rounds, l1, l2)
	if err != nil {
		return nil, fmt.Errorf("%w: Skellam calibration: %w", ErrConfig, err)
	}
	m.mu = mu
	m.epsTotal = rdp.SkellamEpsilon(mu, cfg.Rounds, m.l1, m.l2, delta)
	m.epsRound = rdp.SkellamEpsilon(mu, 1, m.l1, m.l2, delta)
	return m, nil
}

// floatProvenTotal is the float path's proven total of rounds rounds of
// round-ε pure DP: the smaller of basic composition and the (ε, δ) of
// the zCDP composition (pure ε-DP is ε²/2-zCDP), as run.userEps computes
// it.
func floatProvenTotal(round float64, rounds int, delta float64) float64 {
	n := float64(rounds)
	return math.Min(n*round, rdp.ZCDPToDP(n*round*round/2, delta))
}

// userEps returns the user-level ε of rounds releases at δ (+Inf without
// a user clip).
func (m *masking) userEps(rounds int) float64 {
	if math.IsInf(m.ul2, 1) {
		return math.Inf(1)
	}
	if rounds == 0 {
		return 0
	}
	return rdp.SkellamEpsilon(m.mu, rounds, m.ul1, m.ul2, m.delta)
}

// bits returns the modulus exponent for sums over at most n raters of an
// item, numItems·K coordinates.
func (m *masking) bits(n, coords int) (int, error) {
	b, err := dp.ModulusBits(max(n, 1), m.q.Clip, m.q.Scale, m.mu, 1e-12/float64(max(coords, 1)))
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return b, nil
}

// maskedRound builds client c's words for its rated items (K+1 per item:
// the quantized row plus Skellam shares, and the arrival bit).
func (c *client) maskedRound(b *protocol.Broadcast, r *rand.Rand) *protocol.Upload {
	k := c.sh.k
	stride := k + 1
	if len(c.words) != len(c.items)*stride {
		c.words = make([]uint32, len(c.items)*stride)
		c.row = make([]float32, k)
		c.ints = make([]int64, k)
		c.noise = make([]int64, k)
	}
	q := c.sh.mask.q
	q.Bits = b.Bits
	rho := protocol.MinShare(b)
	u := c.u
	var tabs []*dp.SkellamTable
	noisy := c.sh.variant != Plain && !c.sh.noiseless
	if noisy {
		tabs = c.tables(b, rho)
	}
	c.sent++
	es := c.residuals(b)
	for n, j := range c.items {
		e := es[n]
		for d := range c.row {
			c.row[d] = e * u[d]
		}
		q.Quantize(r, c.row, c.ints)
		if noisy {
			if t := tabs[n]; t != nil {
				t.AddTo(r, c.ints)
			} else {
				shares := max(1, int(math.Floor(rho*float64(b.Counts[j]))))
				dp.FillSkellamShare(r, c.sh.mask.mu, shares, c.noise)
				for d := range c.ints {
					c.ints[d] += c.noise[d]
				}
			}
		}
		dst := c.words[n*stride : n*stride+k]
		q.Wrap(c.ints, dst)
		c.words[n*stride+k] = 1
	}
	// The rows of the rated items only: the transport masks the dense
	// vector (zero elsewhere), so the server cannot tell which were given.
	c.up = protocol.Upload{Client: c.id, Round: b.Round, Items: c.items, Words: c.words}
	return &c.up
}

// maskedDense builds client c's dense words over every item under a
// roster calibration (protocol.ParamRoster R, set by a deployment whose
// clients pin R): every item's K coordinates get a Skellam(μ/⌊ρ·R⌋)
// share, rated or not, and the rated items (when data is set) also their
// quantized rows and arrival bits. No count the server announces enters
// the share: R is checked by the deployment's clients against the roster
// they pin, ρ against their pinned floor. With data unset (no rated item,
// or the budget spent) the client sends its noise shares alone.
func (c *client) maskedDense(b *protocol.Broadcast, r *rand.Rand, data bool) *protocol.Upload {
	k, m := c.sh.k, c.sh.m
	stride := k + 1
	if len(c.dense) != m*stride {
		c.dense = make([]uint32, m*stride)
	}
	if len(c.ints) != k {
		c.row = make([]float32, k)
		c.ints = make([]int64, k)
		c.noise = make([]int64, k)
	}
	q := c.sh.mask.q
	q.Bits = b.Bits
	shares := protocol.NoiseShares(b, 0)
	if c.rtab == nil || c.rtabShares != shares {
		c.rtab, c.rtabShares = c.sh.mask.tables.Get(c.sh.mask.mu/float64(shares)), shares
	}
	var es []float32
	if data {
		c.sent++
		es = c.residuals(b)
	}
	u := c.u
	n := 0
	for j := range m {
		rated := data && n < len(c.items) && int(c.items[n]) == j
		if rated {
			e := es[n]
			for d := range c.row {
				c.row[d] = e * u[d]
			}
			q.Quantize(r, c.row, c.ints)
		} else {
			clear(c.ints)
		}
		if c.rtab != nil {
			c.rtab.AddTo(r, c.ints)
		} else {
			dp.FillSkellamShare(r, c.sh.mask.mu, shares, c.noise)
			for d := range c.ints {
				c.ints[d] += c.noise[d]
			}
		}
		q.Wrap(c.ints, c.dense[j*stride:j*stride+k])
		c.dense[j*stride+k] = 0
		if rated {
			c.dense[j*stride+k] = 1
			n++
		}
	}
	c.up = protocol.Upload{Client: c.id, Round: b.Round, Words: c.dense}
	return &c.up
}

// tables returns the Skellam(μ/n_j) samplers of the client's items (nil
// where μ/n_j is beyond a table): the counts and ρ are fixed after setup,
// so a client looks the shared cache up once per item, not once per
// rating and round (its lock was a tenth of a masked round's time).
func (c *client) tables(b *protocol.Broadcast, rho float64) []*dp.SkellamTable {
	if c.tabs != nil {
		return c.tabs
	}
	c.tabs = make([]*dp.SkellamTable, len(c.items))
	for n, j := range c.items {
		shares := max(1, int(math.Floor(rho*float64(b.Counts[j]))))
		c.tabs[n] = c.sh.mask.tables.Get(c.sh.mask.mu / float64(shares))
	}
	return c.tabs
}

// maskedSetup announces the rated items as a 0/1 vector over every item
// (given as the rows of the rated ones, masked dense by the transport),
// so that the server learns only the counts n_j.
func (c *client) maskedSetup(b *protocol.Broadcast) *protocol.Upload {
	w := make([]uint32, len(c.items))
	for k := range w {
		w[k] = 1
	}
	return &protocol.Upload{Client: c.id, Round: b.Round, Items: c.items, Words: w}
}

// aggregateMasked decodes the summed words of a round into per-item float
// sums and arrivals.
func (s *server) aggregateMasked(round int, ups []*protocol.Upload) error {
	k := s.k
	stride := k + 1
	if s.b.Phase == protocol.PhaseSetup {
		for _, u := range ups {
			if u == nil {
				continue
			}
			if len(u.Words) != s.numItems {
				return fmt.Errorf("%w: masked setup sum has %d words, want %d", protocol.ErrMessage, len(u.Words), s.numItems)
			}
			for j, w := range u.Words {
				s.counts[j] += int32(w)
			}
		}
		return nil
	}
	clear(s.sum)
	clear(s.arrived)
	s.inputs = 0
	q := dp.Quantizer{Clip: 1, Scale: maskScale, Bits: s.b.Bits}
	ints := make([]int64, k)
	for _, u := range ups {
		if u == nil {
			continue
		}
		if u.Client == -1 && s.sumRound == round {
			s.inputs += s.sumInputs // a summed upload
		} else {
			s.inputs++
		}
		if len(u.Words) != s.numItems*stride {
			return fmt.Errorf("%w: masked sum of round %d has %d words, want %d", protocol.ErrMessage, round, len(u.Words), s.numItems*stride)
		}
		for j := range s.numItems {
			s.arrived[j] += int32(u.Words[j*stride+k])
			q.Unwrap(u.Words[j*stride:j*stride+k], ints)
			dst := s.sum[j*k : j*k+k]
			for d, x := range ints {
				dst[d] += float32(float64(x) / q.Scale)
			}
		}
	}
	return nil
}

// account adds the training round just aggregated to the composed RDP
// curve, with the noise that arrived (NoiseCoverage at the broadcast's
// ρ). A round that folded no arrival (skipped, or its sum refused) adds
// nothing here; the deployment records a refused sum as unbounded.
func (s *server) account() {
	m := s.noise
	if m == nil || s.plain {
		return
	}
	cov, _, ok := s.NoiseCoverage(s.b.Param(protocol.ParamMinShare, 1))
	if !ok {
		return
	}
	if s.spent == nil {
		s.spent = make(rdp.Curve, len(rdp.Orders))
	}
	s.spent = rdp.Compose(s.spent, rdp.SkellamCurve(cov*m.mu, m.ul1, m.ul2))
}

// Spent implements protocol.Spent for HDPMF and HDPMF-R on the integer
// path: the Rényi composition of the released training rounds, each with
// the noise that arrived, converted to ε at the configured δ, for the
// proven unit, one user's rating values, at the user clip's sensitivity
// (+Inf without a clip). The paper's per-rating T·ε is not a bound and
// is not what the ledger records. DPMF and PDPMF calibrate μ on the
// clients' data, so the server cannot account them (ok false).
func (s *server) Spent() (eps, delta float64, ok bool) {
	m := s.noise
	if m == nil || s.plain || !s.masked {
		return 0, 0, false
	}
	if s.spent == nil {
		return 0, m.delta, true
	}
	eps, _ = rdp.ToDP(s.spent, m.delta)
	return eps, m.delta, true
}

// NoiseCoverage implements protocol.NoiseCoverage for the integer path:
// each rater of item j drew its Skellam share for ⌊rho·n_j⌋ of the n_j
// raters counted at setup, so the last round's noise at item j is
// Skellam(arrived_j/⌊rho·n_j⌋·μ). Coverage is the least such fraction
// over the items that received uploads, capped at 1. ε is that of the
// round alone with that noise (Rényi DP at δ) for HDPMF and HDPMF-R,
// whose μ is public, for the proven unit (one user's rating values, at
// the user clip's sensitivity; +Inf without a clip); DPMF and PDPMF
// calibrate μ on the clients' data, so the server reports their ε as 0,
// unknown. ok is false after a round
// that folded no arrival (a sum CheckSum refused, or none).
//
// What the figure assumes: arrived_j is a sum of the clients' own arrival
// words, so it counts noise shares only if every client in the sum is
// honest, adding 1 for an item exactly when it adds its share there (the
// assumption distributed noise rests on anyway: a client can always send
// its bit and withhold its share). A lying client can raise arrived_j,
// and so the reported coverage, but CheckSum refuses a sum with arrived_j
// above the number of inputs or above n_j, so the figure never exceeds
// min(inputs, n_j)/⌊rho·n_j⌋: inflating arrival words past the clients
// actually in the sum, or past the announced raters, is refused. Within
// that, an item whose n_j is at most the number of inputs can be made to
// read full coverage by one client; no check of the sum tells which of
// the inputs rated j, so only per-client proofs would close it.
//
// Under a roster calibration (protocol.ParamRoster R in the round's
// broadcast) every client in the sum drew a share for every item, for
// ⌊rho·R⌋ clients, so coverage is inputs/⌊rho·R⌋ for every item, inputs
// the masked vectors in the sum (SetSumInputs), capped at 1: no count the
// server announced enters it. The same assumption holds: a client in the
// sum that withholds its share (a corrupt one) still counts.
func (s *server) NoiseCoverage(rho float64) (coverage, eps float64, ok bool) {
	if !s.masked || s.plain || s.b.Phase != protocol.PhaseTrain {
		return 0, 0, false
	}
	if !(rho > 0 && rho <= 1) {
		rho = 1
	}
	coverage = 1
	arrived := false
	if r := protocol.Roster(&s.b); r > 0 {
		arrived = s.inputs > 0
		coverage = math.Min(1, float64(s.inputs)/max(1, math.Floor(rho*float64(r))))
	} else {
		for j, got := range s.arrived {
			if got == 0 {
				continue
			}
			arrived = true
			need := max(1, math.Floor(rho*float64(s.counts[j])))
			coverage = math.Min(coverage, float64(got)/need)
		}
	}
	if !arrived {
		return 0, 0, false
	}
	if m := s.noise; m != nil {
		eps = math.Inf(1)
		if !math.IsInf(m.ul2, 1) {
			eps = rdp.SkellamEpsilon(coverage*m.mu, 1, m.ul1, m.ul2, m.delta)
		}
	}
	return coverage, eps, true
}

// SetSumInputs implements protocol.SumInputsSetter: the number of masked
// vectors in round's summed upload, which a roster calibration's noise
// coverage counts (NoiseCoverage).
func (s *server) SetSumInputs(round, inputs int) { s.sumRound, s.sumInputs = round, inputs }

// sumCheck is what the server needs to check an unmasked sum
// (protocol.SumChecker): the bound of one client's quantized coordinate
// and an upper bound on μ, the Poisson mean of the summed Skellam noise
// per coordinate when ⌊ρ·n_j⌋ shares arrive.
type sumCheck struct {
	perClient int64   // ⌈clip·scale⌉: |a client's quantized coordinate|
	perRow    float64 // clip·scale + √K: a client's quantized row's L2 norm
	mu        float64 // μ, or an upper bound on it; 0: no noise (Plain)
}

// newSumCheck returns the check of cfg's masked sums for rating range
// sens. HDPMF and HDPMF-R calibrate μ on public figures (the server's
// masking); DPMF and PDPMF calibrate it on the clients' data (the least
// rating weight, PDPMF's threshold), which the server does not see, so
// it takes the μ of the least per-round ε those can be: ε times the least
// weight the specification can draw (User.Low·Item.Low, or the least of
// cfg.Weights), or PDPMF's numeric threshold. μ decreases in ε, so that μ
// bounds theirs from above (a looser check, never a false refusal).
func newSumCheck(cfg Config, m *masking, sens float64) (*sumCheck, error) {
	cs := maskClipFactor * sens * maskScale
	c := &sumCheck{perClient: int64(math.Ceil(cs)), perRow: cs*(1+1e-9) + math.Sqrt(float64(cfg.Dim))}
	switch cfg.Variant {
	case Plain:
		return c, nil
	case HDPMF, HDPMFR:
		c.mu = m.mu
		return c, nil
	}
	wmin := cfg.Spec.User.Low * cfg.Spec.Item.Low
	if w := cfg.Weights; w != nil {
		wmin = slices.Min(w.User) * slices.Min(w.Item)
	}
	eps := wmin * cfg.Eps
	if cfg.Variant == PDPMF {
		// A numeric threshold is the ε itself; min, mean and max of the
		// ratings' budgets are at least the least budget.
		t, err := budget.Threshold([]float64{eps}, orDefault(cfg.Threshold, "mean"))
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		eps = t
	}
	lo, err := newMasking(cfg, eps, sens)
	if err != nil {
		return nil, err
	}
	c.mu = lo.mu * (1 + 1e-6) // SkellamMuFor's bisection is precise to 1e-9
	return c, nil
}

// CheckSum implements protocol.SumChecker for the integer path: it checks
// the unmasked sum of the round the server last broadcast, of inputs
// clients' masked vectors, against what honest clients can produce, and
// returns an error wrapping protocol.ErrOutOfBounds at the first word out
// of bounds. It changes nothing.
//
// Setup round: word j counts the clients that rated item j, each adding 0
// or 1, so n_j ≤ inputs.
//
// Training round, item j (words j·(K+1) … j·(K+1)+K): the arrival word
// a_j, one per honest rater of j in the sum, must satisfy a_j ≤ inputs
// and a_j ≤ n_j (the count announced at setup: clients counted at setup
// are the only ones that may train; a deployment must keep the others
// out of training rounds). Each of the a_j raters adds to coordinate d its
// quantized row, |q| ≤ C = ⌈clip·scale⌉ (Quantize clamps to ±⌈c·γ⌉
// before rounding, so stochastic rounding is inside C), plus a Skellam
// share drawn for s_j = max(1, ⌊ρ·n_j⌋) raters, Skellam(μ/s_j), ρ the
// broadcast's ParamMinShare (1 when absent). The a_j shares sum to S ~
// Skellam(m_j), m_j = a_j·μ/s_j, so every honest coordinate has
//
//	|x_jd| ≤ a_j·C + t_j − 1,
//
// t_j the least integer with 2·exp(2m_j(√(1+z²) − 1) − t_j·asinh z) ≤
// p, z = t_j/(2m_j): the Chernoff bound on P(|S| ≥ t) from S's moment
// generating function E[e^{λS}] = exp(2m_j(cosh λ − 1)) at its optimal
// λ = asinh z (dp.SkellamTail), at p = protocol.SumTail/(numItems·K), so
// that by a union bound an honest round is refused with probability at
// most 2^−40. Plain draws no noise: t_j − 1 = 0. For DPMF and PDPMF, μ is
// an upper bound (newSumCheck).
//
// The row of item j is also bounded in L2 norm, on the same event (no
// further tail): a client's quantized row has ‖q‖₂ ≤ clip·scale + √K
// (the clip, then rounding moves each coordinate by less than 1), and
// the noise ‖S‖₂ ≤ √K·(t_j − 1), so
//
//	‖x_j‖₂ ≤ a_j·(clip·scale + √K) + √K·(t_j − 1).
//
// Where the data term dominates (popular items, little noise) it is up
// to √K times tighter than the coordinates' bound for a client spreading
// its excess over the row.
//
// ρ is read from the round's broadcast: a deployment that sets
// ParamMinShare only in the copy it sends the clients must set it in the
// server's broadcast too, or honest sums of rounds with ρ < 1 may be
// refused.
func (s *server) CheckSum(round int, sum *protocol.Upload, inputs int) error {
	if !s.masked || s.chk == nil || s.b.Phase == protocol.PhaseFinal {
		return nil
	}
	if round != s.b.Round {
		return fmt.Errorf("%w: check of round %d, the server broadcast round %d", protocol.ErrMessage, round, s.b.Round)
	}
	w := sum.Words
	if s.b.Phase == protocol.PhaseSetup {
		if len(w) != s.numItems {
			return fmt.Errorf("%w: masked setup sum has %d words, want %d", protocol.ErrMessage, len(w), s.numItems)
		}
		for j, x := range w {
			if int64(x) > int64(inputs) {
				return fmt.Errorf("%w: round %d (setup) word %d, item %d: count %d above the %d inputs", protocol.ErrOutOfBounds, round, j, j, x, inputs)
			}
		}
		return nil
	}
	k := s.k
	stride := k + 1
	if len(w) != s.numItems*stride {
		return fmt.Errorf("%w: masked sum of round %d has %d words, want %d", protocol.ErrMessage, round, len(w), s.numItems*stride)
	}
	rho := protocol.MinShare(&s.b)
	tail := protocol.SumTail / float64(s.numItems*k)
	roster := protocol.Roster(&s.b)
	type key struct{ a, shares int64 }
	tails := map[key]int64{}
	q := dp.Quantizer{Clip: 1, Scale: maskScale, Bits: s.b.Bits}
	ints := make([]int64, k)
	for j := range s.numItems {
		a, n := int64(w[j*stride+k]), int64(s.counts[j])
		if a > int64(inputs) || a > n {
			return fmt.Errorf("%w: round %d word %d, item %d: arrivals %d above min(%d inputs, %d announced)", protocol.ErrOutOfBounds, round, j*stride+k, j, a, inputs, n)
		}
		shares, drawn := max(1, int64(math.Floor(rho*float64(n)))), a
		if roster > 0 { // every input drew a share for every item
			shares, drawn = max(1, int64(math.Floor(rho*float64(roster)))), int64(inputs)
		}
		t, ok := tails[key{drawn, shares}]
		if !ok {
			t = dp.SkellamTailBound(float64(drawn)*s.chk.mu/float64(shares), tail)
			tails[key{drawn, shares}] = t
		}
		bound := a*s.chk.perClient + t - 1
		q.Unwrap(w[j*stride:j*stride+k], ints)
		var sq float64
		for d, x := range ints {
			if x > bound || x < -bound {
				return fmt.Errorf("%w: round %d word %d, item %d: value %d beyond ±%d (%d arrivals × %d + noise tail %d)", protocol.ErrOutOfBounds, round, j*stride+d, j, x, bound, a, s.chk.perClient, t-1)
			}
			sq += float64(x) * float64(x)
		}
		rk := math.Sqrt(float64(k))
		if l2, b2 := math.Sqrt(sq), float64(a)*s.chk.perRow+rk*float64(t-1); l2 > b2 {
			return fmt.Errorf("%w: round %d words %d-%d, item %d: row L2 norm %.0f beyond %.0f (%d arrivals × %.0f + √%d × noise tail %d)", protocol.ErrOutOfBounds, round, j*stride, j*stride+k-1, j, l2, b2, a, s.chk.perRow, k, t-1)
		}
	}
	return nil
}
