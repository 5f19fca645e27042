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
// leaves it. Items outside the top M are ranked by ŝ alone. When the
// counts are weak against their noise (fewer than M items with ŝ ≥
// PopDiagSNR·σ_c, default 2: few users for the budget), the top M items'
// popularity coordinate is PopWeight·(1 + G̃_ii/max G̃_jj) instead, from
// the Gram's diagonal (the larger share of ρ), above every other item's;
// a rule on the released counts alone, which keeps the ML-1M defaults.
//
// Privacy: the unit is one user; the neighbouring relation is adding or
// removing one user with all their ratings (Report.EpsReplace: replacing
// one). Each release has the sensitivity above, FracCounts of the zCDP
// budget ρ on the counts, the rest on the Gram, and ε is an upper bound
// over the whole run at Delta, listed release by release in
// Report.Ledger. A user's recommendations are computed from their own
// history on the device (joint DP). Hyperparameter tuning is not counted.
// Who is trusted depends on Config.Aggregation:
//
//   - ideal (in process): each release is the Gaussian mechanism, composed
//     in zCDP. The server is trusted to add the noise to the sum it
//     receives and with no single upload (the ideal functionality of
//     secure aggregation).
//   - masked (privrec serve's default; masked.go): the devices upload
//     quantized dense vectors with their shares of distributed Skellam
//     noise, summed by SecAgg+, so the server learns only the noisy sums
//     and is trusted with nothing; the devices are trusted to add their
//     shares. ε is the Rényi accounting of the two Skellam releases
//     (quantization slack included), calibrated to at most Eps.
//   - off: the server reads every upload; the ε holds only against
//     observers of the releases.
//
// The noise (the server's, or the devices' shares and rounding) is drawn
// from crypto/rand unless Config.Seeded selects the reproducible test
// mode (noise from the run's seed; over the network, the devices' shares
// are reproducible when the deployment runs in its test mode, --seed).
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
	"github.com/privrec/privrec/internal/maskcal"
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
	// PopDiagSNR k: when fewer than M items have a noisy count ŝ of at
	// least k·σ_c (the counts are weak against their noise), the top M
	// items' popularity coordinate is taken from the Gram release's
	// diagonal (0.9 of ρ at the default split) instead of ŝ. 0: never; +Inf:
	// always. Post-processing of the two releases.
	PopDiagSNR float64 `json:"pop_diag_snr"`
	Seeded     bool    `json:"seeded"`  // test mode: noise from the seed, not crypto/rand
	Workers    int     `json:"workers"` // client workers of the in-process run (0: all cores)
	// Aggregation is how the server receives the uploads: AggIdeal (the
	// default in process: only their sums, to which the server adds the
	// Gaussian noise), AggMasked (the integer path of masked.go: dense
	// quantized vectors with the devices' Skellam noise shares, summed by
	// SecAgg+; privrec serve's default) or AggOff (the server reads every
	// upload, and the claim does not hold against it).
	Aggregation protocol.Aggregation `json:"secagg"`
}

// DefaultConfig returns the defaults: TopItems, LambdaNoise and PopWeight
// follow ε (ByEps; chosen on a validation split of the ML-1M training
// part), PopDiagSNR 2 (chosen on validation splits of five datasets'
// training parts; docs/results/private-topn.md).
func DefaultConfig() Config {
	return Config{Eps: 1, Delta: 1e-6, TopItems: 0, Cap: 10, FracCounts: 0.1,
		Lambda: 1, LambdaNoise: -1, PopWeight: -1, PopDiagSNR: 2, Aggregation: protocol.AggIdeal}
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
	case !(c.PopDiagSNR >= 0):
		return fmt.Errorf("dpease: pop-diag-snr %v, want ≥ 0", c.PopDiagSNR)
	case c.Aggregation != protocol.AggIdeal && c.Aggregation != protocol.AggMasked && c.Aggregation != protocol.AggOff:
		return fmt.Errorf("dpease: aggregation %v: want masked, ideal or off", c.Aggregation)
	}
	return nil
}

// GramL2 is the L2 sensitivity of the Gram release for cap c.
func GramL2(c int) float64 { return math.Sqrt((1 + 1/float64(c)) / 2) }

// Report is what a run spent.
type Report struct {
	Ledger rdp.Ledger
	Rho    float64 // the zCDP budget (Eps, Delta) allows
	// Eps is the run's ε at Delta for add/remove-one-user neighbours: the
	// ledger's (Gaussian releases, zCDP) on the ideal path, the Skellam
	// releases' (Rényi, every noise share arriving) on the integer path.
	Eps float64
	// EpsReplace is the same for replace-one-user neighbours (every
	// sensitivity doubled).
	EpsReplace float64
	Stats      map[string]float64
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
	// The integer path (nil mask on the ideal path): its calibration and
	// the last broadcast (a deployment adds its noise-share parameters to
	// it; the sum check and the accounting read them).
	mask *maskPlan
	b    protocol.Broadcast
	// Validation experiments only (validation_test.go sets it; zero in
	// every run of the method): snr > 0 lets the released counts choose M
	// (chooseM), post-processing.
	snr float64
}

// state is the server's state between rounds (its snapshot).
type state struct {
	Round  int
	Counts []float64 // noisy popularity ŝ after round 0
	Top    []int32   // the top M items after round 0
	V      []float32 // item factors after the Gram round
	// The integer path: the clients counted at setup, and per release
	// (counts, Gram) the noise shares that arrived and the number of
	// clients each share was drawn for.
	Clients    int
	ArrA, ArrS []int
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
	if cfg.Aggregation == protocol.AggMasked {
		if s.mask, err = newMaskPlan(cfg, numItems); err != nil {
			return nil, err
		}
		s.st.ArrA, s.st.ArrS = make([]int, 2), make([]int, 2)
	}
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

// Broadcast parameters.
const (
	paramStep    = "dpease-step" // 0: counts, 1: Gram (absent: the round number)
	paramClients = "clients"     // the integer path: the clients counted at setup
)

// offset is the number of rounds before the counts: 1 (the setup round)
// on the integer path, else 0.
func (s *Server) offset() int {
	if s.mask != nil {
		return 1
	}
	return 0
}

// Broadcast implements protocol.Server. On the integer path round 0 is a
// setup round (each device uploads the word 1, so the server counts the
// clients its noise shares are drawn for), and the counts and the Gram
// follow as rounds 1 and 2, each asking for a dense vector of words.
func (s *Server) Broadcast(round int) (*protocol.Broadcast, error) {
	if round != s.st.Round || s.Done() {
		return nil, fmt.Errorf("dpease: broadcast of round %d, the server is at round %d of %d", round, s.st.Round, 2+s.offset())
	}
	st := round - s.offset()
	b := &s.b
	switch st {
	case -1:
		*b = protocol.Broadcast{Round: round, Phase: protocol.PhaseSetup, Dim: 1, NumItems: s.n, Words: 1, Bits: 32}
		return b, nil
	case 0:
		*b = protocol.Broadcast{Round: round, Phase: protocol.PhaseTrain, Dim: 1, NumItems: s.n}
	case 1:
		// The uploads index the pairs of the top items' upper triangle:
		// the index space is the larger of the catalog and the pairs.
		*b = protocol.Broadcast{Round: round, Phase: protocol.PhaseTrain, Dim: 1,
			NumItems: max(s.n, pairs(s.m)), Items: s.st.Top}
	}
	b.Params = map[string]float64{paramStep: float64(st)}
	if s.mask != nil {
		b.Words, b.Bits = s.mask.steps[st].D+1, 32
		b.Params[paramClients] = float64(s.st.Clients)
	}
	return b, nil
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

// Aggregate implements protocol.Server: it adds up the round's uploads
// (one summed upload under secure aggregation), adds the Gaussian noise
// on the ideal path (the integer path's sum carries the devices' Skellam
// shares), records the release and updates the public state.
func (s *Server) Aggregate(round int, ups []*protocol.Upload) error {
	if round != s.st.Round || s.Done() {
		return fmt.Errorf("dpease: aggregate of round %d, the server is at round %d of %d", round, s.st.Round, 2+s.offset())
	}
	st := round - s.offset()
	var sums []float64
	var err error
	size := s.n
	if st == 1 {
		size = pairs(s.m)
	}
	if s.mask != nil {
		if sums, err = s.decode(round, st, ups); err != nil || st < 0 {
			return err
		}
	} else if sums, err = sum(ups, size); err != nil {
		return err
	}
	switch st {
	case 0:
		c := sums
		if s.mask == nil {
			for j := range c {
				c[j] += s.sigmaC * s.noise.NormFloat64()
			}
		}
		s.led.Gaussian(countsRelease, 1, 1, s.sigmaC)
		s.st.Counts = c
		s.m = s.chooseM(c)
		s.st.Top = TopItems(c, s.m)
	case 1:
		g := sums
		if s.mask == nil {
			for p := range g {
				g[p] += s.sigmaG * s.noise.NormFloat64()
			}
		}
		s.gram = g
		s.led.Gaussian(s.gramRelease(), 1, GramL2(s.cfg.Cap), s.sigmaG)
		v, err := s.solve(g)
		if err != nil {
			return err
		}
		s.st.V = v
	}
	s.st.Round = round + 1
	return nil
}

// chooseM returns the number of items in the Gram release from the
// released noisy counts c (post-processing): cfg's M, or with the
// validation hook snr > 0 the number of items whose noisy count clears
// snr·σ_c, between 1 and cfg's M.
func (s *Server) chooseM(c []float64) int {
	m := min(s.cfg.TopItems, s.n)
	if !(s.snr > 0) {
		return m
	}
	return max(1, min(m, signalItems(c, s.snr*s.sigmaC)))
}

// PopDiag reports whether the solve takes the top items' popularity from
// the Gram's diagonal: after the counts release, when fewer than M items'
// noisy counts clear PopDiagSNR·σ_c (a function of the released counts
// alone).
func (s *Server) PopDiag() bool {
	k := s.cfg.PopDiagSNR
	return k > 0 && s.st.Counts != nil && (math.IsInf(k, 1) || signalItems(s.st.Counts, k*s.sigmaC) < s.m)
}

// signalItems returns the number of entries of c at or above thr.
func signalItems(c []float64, thr float64) int {
	k := 0
	for _, x := range c {
		if x >= thr {
			k++
		}
	}
	return k
}

// countsRelease names the counts in the ledger.
const countsRelease = "item counts (indicators / √n_u)"

// gramRelease names the Gram in the ledger.
func (s *Server) gramRelease() string {
	return fmt.Sprintf("Gram of the top %d items (upper triangle, weights 1/max(n', %d))", s.m, s.cfg.Cap)
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
	if s.PopDiag() {
		// The top items' coordinate from the Gram's diagonal, in
		// PopWeight·[1, 2], above every other item's (at most PopWeight).
		maxd := 0.0
		for sj := range m {
			maxd = math.Max(maxd, g[pairIndex(sj, sj, m)])
		}
		for sj, j := range s.st.Top {
			x := 0.0
			if maxd > 0 {
				x = math.Max(g[pairIndex(sj, sj, m)], 0) / maxd
			}
			v[int(j)*dim+m] = float32(s.cfg.PopWeight * (1 + x))
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
func (s *Server) Done() bool { return s.st.Round >= 2+s.offset() }

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

// UserItems implements protocol.Indicating: the top M items, whose
// indicator (and a constant 1) is a user's row; nil before the counts
// round.
func (s *Server) UserItems() []int32 { return s.st.Top }

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
	o := s.offset()
	if st.Round < 0 || st.Round > 2+o || (st.Round >= 1+o && (len(st.Counts) != s.n || len(st.Top) != s.m)) ||
		(st.Round == 2+o && len(st.V) != s.n*(s.m+1)) ||
		(s.mask != nil) != (st.ArrA != nil) || (st.ArrA != nil && (len(st.ArrA) != 2 || len(st.ArrS) != 2)) {
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
	cfg   *Config
	pub   *public
	n     int // the catalog's size, from the counts round
}

// public is what every device learns from the broadcasts: the top items;
// and the integer path's calibration, built on first use.
type public struct {
	once      sync.Once
	top       []int32
	mu        sync.Mutex
	plan      *maskPlan
	noiseless bool // Clients.Noiseless: no Skellam shares (tests only)
}

// maskPlan returns the integer path's calibration of cfg for n items.
func (p *public) maskPlan(cfg Config, n int) (*maskPlan, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.plan == nil || p.plan.n != n {
		mp, err := newMaskPlan(cfg.Resolve(), n)
		if err != nil {
			return nil, err
		}
		p.plan = mp
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
func (c *client) step(b *protocol.Broadcast, st int) (*maskcal.Step, error) {
	if c.n <= 0 {
		return nil, fmt.Errorf("dpease: round %d: the device saw no counts round, so it does not know the catalog's size", b.Round)
	}
	p, err := c.pub.maskPlan(*c.cfg, c.n)
	if err != nil {
		return nil, err
	}
	ms := &p.steps[st]
	if b.Words != ms.D+1 || (st == 1 && len(b.Items) != p.m) {
		return nil, fmt.Errorf("dpease: round %d asks for %d words (%d top items), the integer path's plan for %d items has %d (%d)",
			b.Round, b.Words, len(b.Items), c.n, ms.D+1, p.m)
	}
	return ms, nil
}

// encode returns the device's integer upload of release ms from its dense
// float statistics x (maskcal.Step.Encode).
func (c *client) encode(b *protocol.Broadcast, ms *maskcal.Step, x []float64, r *rand.Rand) (*protocol.Upload, error) {
	// The noise scratch is not kept: a vendor process holds thousands of
	// devices, and the Gram's is M(M+1)/2 values.
	noise := make([]int64, ms.D)
	return &protocol.Upload{Client: c.id, Round: b.Round, Words: ms.Encode(x, r, shares(b), noise, c.pub.noiseless)}, nil
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
		cl.List = append(cl.List, &client{id: u, items: slices.Clone(items), cfg: &cfg, pub: cl.pub})
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
		Ranking: true, Scale: d.Scale, UserIDs: d.UserIDs, ItemIDs: d.ItemIDs, ItemTitles: d.ItemTitles,
		UserItems: slices.Clone(top)}, nil
}

// Noiseless switches the integer path's Skellam shares off, so that the
// masked uploads carry only their data (tests compare the noise-free sums
// of both paths). The uploads then protect nothing.
func (cl *Clients) Noiseless() { cl.pub.noiseless = true }

// Train runs the protocol in process over protocol.InMem with
// cfg.Aggregation: the server's noise (ideal path) comes from crypto/rand,
// and so do the devices' noise shares and rounding (integer path: their
// streams are seeded by a secret seed), unless cfg.Seeded selects the
// test mode, where seed reproduces both.
func Train(ctx context.Context, train *ratings.Dataset, cfg Config, seed uint64) (*model.Model, *Report, error) {
	srv, err := NewServer(cfg, train.NumItems(), seed)
	if err != nil {
		return nil, nil, err
	}
	cl := NewClients(train, cfg)
	runSeed := seed
	if !cfg.Seeded {
		runSeed = rng.Crypto().Uint64()
	}
	if err := protocol.Run(ctx, srv, cl.List, protocol.RunOptions{Workers: cfg.Workers, Seed: runSeed, Aggregation: cfg.Aggregation}); err != nil {
		return nil, nil, err
	}
	v, _ := srv.Factors()
	m, err := cl.Model(v)
	if err != nil {
		return nil, nil, err
	}
	return m, srv.Report(), nil
}

// Report returns what the run spent so far (on the integer path Eps is
// the calibrated plan's, every share arriving; Stats["eps_spent"] counts
// the shares that arrived).
func (s *Server) Report() *Report {
	r := s.report(s.led)
	if s.mask != nil && s.st.Round > 1 {
		r.Stats["eps_spent"], _, _ = s.Spent()
	}
	return r
}

// report is the report of the releases in l.
func (s *Server) report(l rdp.Ledger) *Report {
	r := &Report{Ledger: l, Rho: s.rho, Eps: l.Epsilon(s.cfg.Delta), EpsReplace: rdp.ZCDPToDP(4*l.Rho(), s.cfg.Delta)}
	r.Stats = s.stats()
	if s.mask != nil {
		r.Eps, r.EpsReplace = s.mask.eps, s.mask.epsR
		r.Stats["skellam_eta"] = s.mask.eta
		r.Stats["sigma_counts_skellam"] = s.mask.steps[0].NoiseSigma(0)
		r.Stats["sigma_gram_skellam"] = s.mask.steps[1].NoiseSigma(0)
	}
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
	l.Gaussian(countsRelease, 1, 1, s.sigmaC)
	l.Gaussian(s.gramRelease(), 1, GramL2(s.cfg.Cap), s.sigmaG)
	return s.report(l)
}

// ReleaseEps returns the ε at Delta of each release taken alone (counts,
// Gram): the Gaussian releases' zCDP shares on the ideal path, the
// calibrated Skellam releases (every share arriving) on the integer path.
func (s *Server) ReleaseEps() (counts, gram float64) {
	if s.mask != nil {
		c, _ := rdp.ToDP(s.mask.steps[0].Curve(1, 1), s.cfg.Delta)
		g, _ := rdp.ToDP(s.mask.steps[1].Curve(1, 1), s.cfg.Delta)
		return c, g
	}
	return rdp.ZCDPToDP(s.cfg.FracCounts*s.rho, s.cfg.Delta), rdp.ZCDPToDP((1-s.cfg.FracCounts)*s.rho, s.cfg.Delta)
}
