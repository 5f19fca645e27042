package accountant

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
)

// Errors of the accountant.
var (
	// ErrBudgetExceeded is returned by Charge and Reserve when a release
	// would take a unit past its budget. Nothing is recorded; the caller
	// must not draw noise or release anything.
	ErrBudgetExceeded = errors.New("accountant: privacy budget exceeded")
	// ErrCharge is wrapped by errors about an invalid charge: unknown unit,
	// negative or non-finite ε, δ outside [0, 1), negative round, or a
	// round earlier than the unit's last one.
	ErrCharge = errors.New("accountant: invalid charge")
	// ErrTicketUsed is returned by a second Commit or Cancel of a Ticket.
	ErrTicketUsed = errors.New("accountant: ticket already used")
	// ErrConfig is wrapped by New's errors about its arguments: a budget
	// that is not positive, δ or δ' out of range, a negative shard count.
	ErrConfig = errors.New("accountant: invalid configuration")
)

// budgetSlack is the relative tolerance of budget checks, so that ten
// releases of 0.1 fit a budget of 1 despite rounding.
const budgetSlack = 1e-9

// maxRound bounds round numbers, which index per-round tables.
const maxRound = 1 << 20

// DefaultDeltaPrime is the δ' of advanced composition when
// Config.DeltaPrime is zero.
const DefaultDeltaPrime = 1e-6

// Config configures an Accountant.
type Config struct {
	// Name says what a unit is, for reports: "user" (the default) or
	// "rating".
	Name string
	// Delta is each unit's total δ budget. With zero, only pure ε-DP
	// releases (δ = 0) are accepted under basic composition.
	Delta float64
	// DeltaPrime is the δ' of advanced composition, both in reports and,
	// with Advanced, in budget checks. Zero means DefaultDeltaPrime.
	DeltaPrime float64
	// Advanced makes budget checks accept a release when either basic
	// composition (Σε ≤ budget, Σδ ≤ Delta) or advanced composition
	// (ε' ≤ budget, Σδ + δ' ≤ Delta) fits. Without it only basic
	// composition counts.
	Advanced bool
	// Shards is the number of independently locked shards of units; zero
	// means 64. One shard is a single mutex.
	Shards int
	// Log keeps every release for Ledger. Without it the accountant keeps
	// only per-unit and per-round sums, O(1) memory per unit.
	Log bool
}

// Release is one recorded release in the ledger.
type Release struct {
	Unit  int     // user index, or rating position for a rating ledger
	Round int     // protocol round, from 0
	Label string  // mechanism, e.g. "hdpmf/grad-V"
	Eps   float64 // ε of this release
	Delta float64 // δ of this release
}

// Accountant is a ledger of privacy spending per unit (a user, or a rating
// where a method protects ratings), with a budget per unit. Every release
// is charged before its noise is drawn: Charge (or Reserve) refuses with
// ErrBudgetExceeded, recording nothing, when the release would exceed the
// unit's budget, and a unit that is refused uploads nothing.
//
// It composes each unit's releases both by basic composition (Σε, Σδ) and
// by advanced composition (Dwork, Rothblum and Vadhan 2010; Dwork and Roth
// 2014, Thm 3.20), in its form for heterogeneous releases:
//
//	ε' = sqrt(2 ln(1/δ') Σ ε_k²) + Σ ε_k (e^ε_k − 1),  δ_total = Σ δ_k + δ'
//
// which for k releases of ε each is sqrt(2k ln(1/δ'))·ε + k·ε·(e^ε − 1).
// Parallel composition across units is the caller's business: each unit
// has its own ledger.
//
// An Accountant is safe for concurrent use. Units are spread over
// independently locked shards.
type Accountant struct {
	cfg    Config
	n      int
	budget []float64
	shards []acctShard
}

// acctUnit is the running state of one unit.
type acctUnit struct {
	count     int32
	lastRound int32   // -1 before the first release
	sumEps    float64 // Σ ε
	sumSq     float64 // Σ ε²
	sumExpm1  float64 // Σ ε (e^ε − 1)
	sumDelta  float64 // Σ δ
	roundEps  float64 // Σ ε within lastRound
}

// acctRound is the per-round state of one shard.
type acctRound struct {
	units    int     // units with at least one release in the round
	releases int     // releases in the round
	sumEps   float64 // Σ ε of all releases in the round
	maxEps   float64 // largest ε any one unit spent in the round
}

type acctShard struct {
	mu      sync.Mutex
	units   []acctUnit // unit u is units[u / len(shards)] of shard u % len(shards)
	rounds  []acctRound
	log     [][]Release // per local unit, only with Log
	refused int
	_       [64]byte // keep shards' locks on separate cache lines
}

// New returns an accountant for len(budgets) units, unit u with
// ε budget budgets[u] (math.Inf(1) for a unit that is only tracked).
func New(budgets []float64, cfg Config) (*Accountant, error) {
	for u, b := range budgets {
		if !(b > 0) { // also NaN; +Inf is allowed
			return nil, fmt.Errorf("%w: budget of unit %d is %g, want > 0", ErrConfig, u, b)
		}
	}
	if cfg.Name == "" {
		cfg.Name = "user"
	}
	if cfg.DeltaPrime == 0 {
		cfg.DeltaPrime = DefaultDeltaPrime
	}
	if !(cfg.DeltaPrime > 0 && cfg.DeltaPrime < 1) {
		return nil, fmt.Errorf("%w: δ' = %g outside (0, 1)", ErrConfig, cfg.DeltaPrime)
	}
	if !(cfg.Delta >= 0 && cfg.Delta < 1) {
		return nil, fmt.Errorf("%w: δ budget %g outside [0, 1)", ErrConfig, cfg.Delta)
	}
	if cfg.Shards < 0 {
		return nil, fmt.Errorf("%w: %d shards", ErrConfig, cfg.Shards)
	}
	if cfg.Shards == 0 {
		cfg.Shards = 64
	}
	ns := min(cfg.Shards, max(1, len(budgets)))
	a := &Accountant{
		cfg:    cfg,
		n:      len(budgets),
		budget: append([]float64(nil), budgets...),
		shards: make([]acctShard, ns),
	}
	for s := range a.shards {
		local := (len(budgets) - s + ns - 1) / ns
		sh := &a.shards[s]
		sh.units = make([]acctUnit, local)
		for k := range sh.units {
			sh.units[k].lastRound = -1
		}
		if cfg.Log {
			sh.log = make([][]Release, local)
		}
	}
	return a, nil
}

// Len returns the number of units.
func (a *Accountant) Len() int { return a.n }

// Budget returns unit u's ε budget.
func (a *Accountant) Budget(u int) float64 { return a.budget[u] }

func (a *Accountant) locate(u int) (*acctShard, int) {
	ns := len(a.shards)
	return &a.shards[u%ns], u / ns
}

func (a *Accountant) checkArgs(u, round int, eps, delta float64) error {
	switch {
	case u < 0 || u >= a.n:
		return fmt.Errorf("%w: %s %d out of range [0, %d)", ErrCharge, a.cfg.Name, u, a.n)
	case round < 0 || round > maxRound:
		return fmt.Errorf("%w: round %d outside [0, %d]", ErrCharge, round, maxRound)
	case !(eps >= 0) || math.IsInf(eps, 0):
		return fmt.Errorf("%w: ε = %g must be non-negative and finite", ErrCharge, eps)
	case !(delta >= 0 && delta < 1):
		return fmt.Errorf("%w: δ = %g outside [0, 1)", ErrCharge, delta)
	}
	return nil
}

// advEps is heterogeneous advanced composition.
func advEps(sumSq, sumExpm1, deltaPrime float64) float64 {
	return math.Sqrt(2*math.Log(1/deltaPrime)*sumSq) + sumExpm1
}

// AdvancedComposition returns the total (ε', δ) of k releases, each
// (eps, delta)-DP, by the advanced composition theorem of Dwork, Rothblum
// and Vadhan: ε' = sqrt(2k ln(1/δ'))·eps + k·eps·(e^eps − 1) and
// δ_total = k·delta + δ'. It is a bound worth using only when it is below
// the basic k·eps.
func AdvancedComposition(k int, eps, delta, deltaPrime float64) (epsTotal, deltaTotal float64) {
	fk := float64(k)
	return math.Sqrt(2*fk*math.Log(1/deltaPrime))*eps + fk*eps*math.Expm1(eps), fk*delta + deltaPrime
}

// fits reports whether state s plus a release (eps, delta) stays within
// budget b.
func (a *Accountant) fits(s *acctUnit, b, eps, delta float64) bool {
	sumEps, sumDelta := s.sumEps+eps, s.sumDelta+delta
	db := a.cfg.Delta * (1 + budgetSlack)
	eb := b * (1 + budgetSlack)
	if sumEps <= eb && sumDelta <= db {
		return true
	}
	if !a.cfg.Advanced {
		return false
	}
	adv := advEps(s.sumSq+eps*eps, s.sumExpm1+eps*math.Expm1(eps), a.cfg.DeltaPrime)
	return adv <= eb && sumDelta+a.cfg.DeltaPrime <= db
}

// spent is the ε the unit has spent under the rule budget checks use.
func (a *Accountant) spent(s *acctUnit) float64 {
	e := s.sumEps
	if a.cfg.Advanced && s.sumDelta+a.cfg.DeltaPrime <= a.cfg.Delta*(1+budgetSlack) {
		e = math.Min(e, advEps(s.sumSq, s.sumExpm1, a.cfg.DeltaPrime))
	}
	return e
}

// add records (eps, delta) in round for a unit; sh is locked.
func (sh *acctShard) add(s *acctUnit, round int, eps, delta float64) {
	s.count++
	s.sumEps += eps
	s.sumSq += eps * eps
	s.sumExpm1 += eps * math.Expm1(eps)
	s.sumDelta += delta
	newUnit := false
	if int32(round) != s.lastRound {
		s.lastRound, s.roundEps, newUnit = int32(round), 0, true
	}
	s.roundEps += eps
	if round >= len(sh.rounds) {
		sh.rounds = append(sh.rounds, make([]acctRound, round+1-len(sh.rounds))...)
	}
	r := &sh.rounds[round]
	if newUnit {
		r.units++
	}
	r.releases++
	r.sumEps += eps
	r.maxEps = math.Max(r.maxEps, s.roundEps)
}

// try checks and records a release; sh is locked.
func (a *Accountant) try(sh *acctShard, local, u, round int, eps, delta float64) error {
	s := &sh.units[local]
	if int32(round) < s.lastRound {
		return fmt.Errorf("%w: %s %d: round %d after round %d", ErrCharge, a.cfg.Name, u, round, s.lastRound)
	}
	if !a.fits(s, a.budget[u], eps, delta) {
		sh.refused++
		return fmt.Errorf("%w: %s %d: ε %g on top of %g spent, budget %g (δ %g on top of %g, budget %g)",
			ErrBudgetExceeded, a.cfg.Name, u, eps, a.spent(s), a.budget[u], delta, s.sumDelta, a.cfg.Delta)
	}
	sh.add(s, round, eps, delta)
	return nil
}

// Charge records a release of (eps, delta) for unit u in round, labelled
// with its mechanism, or returns an error wrapping ErrBudgetExceeded (or
// ErrCharge) and records nothing. Draw noise only after a nil error.
// Rounds of one unit must not decrease.
func (a *Accountant) Charge(u, round int, eps, delta float64, label string) error {
	if err := a.checkArgs(u, round, eps, delta); err != nil {
		return err
	}
	sh, local := a.locate(u)
	sh.mu.Lock()
	err := a.try(sh, local, u, round, eps, delta)
	if err == nil && sh.log != nil {
		sh.log[local] = append(sh.log[local], Release{Unit: u, Round: round, Label: label, Eps: eps, Delta: delta})
	}
	sh.mu.Unlock()
	return err
}

// Ticket is a reservation of budget made by Reserve. It must be used
// exactly once: Commit after the release, or Cancel if nothing was
// released (no noise drawn, nothing sent). The reserved budget counts as
// spent from Reserve on, so concurrent reservations cannot overspend.
type Ticket struct {
	a          *Accountant
	unit       int
	round      int
	eps, delta float64
	label      string
	used       bool // guarded by the unit's shard lock
}

// Reserve is the two-step form of Charge: it checks and reserves the
// release and returns a ticket, or fails like Charge.
func (a *Accountant) Reserve(u, round int, eps, delta float64, label string) (*Ticket, error) {
	if err := a.checkArgs(u, round, eps, delta); err != nil {
		return nil, err
	}
	sh, local := a.locate(u)
	sh.mu.Lock()
	err := a.try(sh, local, u, round, eps, delta)
	sh.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return &Ticket{a: a, unit: u, round: round, eps: eps, delta: delta, label: label}, nil
}

// Commit finalizes the reservation and enters it in the ledger.
func (t *Ticket) Commit() error {
	sh, local := t.a.locate(t.unit)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if t.used {
		return fmt.Errorf("%w: %s %d round %d %q", ErrTicketUsed, t.a.cfg.Name, t.unit, t.round, t.label)
	}
	t.used = true
	if sh.log != nil {
		sh.log[local] = append(sh.log[local], Release{Unit: t.unit, Round: t.round, Label: t.label, Eps: t.eps, Delta: t.delta})
	}
	return nil
}

// Cancel returns the reserved budget. Call it only if nothing was
// released. The per-round maximum in reports keeps the cancelled amount.
func (t *Ticket) Cancel() error {
	sh, local := t.a.locate(t.unit)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if t.used {
		return fmt.Errorf("%w: %s %d round %d %q", ErrTicketUsed, t.a.cfg.Name, t.unit, t.round, t.label)
	}
	t.used = true
	s := &sh.units[local]
	s.count--
	s.sumEps -= t.eps
	s.sumSq -= t.eps * t.eps
	s.sumExpm1 -= t.eps * math.Expm1(t.eps)
	s.sumDelta -= t.delta
	if s.count == 0 {
		*s = acctUnit{lastRound: s.lastRound}
	}
	if int32(t.round) == s.lastRound {
		s.roundEps -= t.eps
	}
	r := &sh.rounds[t.round]
	r.releases--
	r.sumEps -= t.eps
	return nil
}

// UnitSpend is what one unit has spent.
type UnitSpend struct {
	Releases int
	Eps      float64 // basic composition: Σ ε
	Delta    float64 // basic composition: Σ δ
	AdvEps   float64 // advanced composition ε' with the configured δ'
	AdvDelta float64 // Σ δ + δ'
}

func (a *Accountant) unitSpend(s *acctUnit) UnitSpend {
	return UnitSpend{
		Releases: int(s.count),
		Eps:      s.sumEps,
		Delta:    s.sumDelta,
		AdvEps:   advEps(s.sumSq, s.sumExpm1, a.cfg.DeltaPrime),
		AdvDelta: s.sumDelta + a.cfg.DeltaPrime,
	}
}

// Spent returns what unit u has spent, counting open reservations.
func (a *Accountant) Spent(u int) UnitSpend {
	sh, local := a.locate(u)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return a.unitSpend(&sh.units[local])
}

// Remaining returns the ε unit u has left: its budget minus what it has
// spent under the composition rule budget checks use, never negative.
func (a *Accountant) Remaining(u int) float64 {
	sh, local := a.locate(u)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return math.Max(0, a.budget[u]-a.spent(&sh.units[local]))
}

// CanSpend reports whether unit u could be charged (eps, delta) now. With
// concurrent chargers the answer may be stale; Charge decides.
func (a *Accountant) CanSpend(u int, eps, delta float64) bool {
	if a.checkArgs(u, 0, eps, delta) != nil {
		return false
	}
	sh, local := a.locate(u)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return a.fits(&sh.units[local], a.budget[u], eps, delta)
}

// Ledger returns unit u's committed releases in order, or nil without
// Config.Log.
func (a *Accountant) Ledger(u int) []Release {
	sh, local := a.locate(u)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.log == nil {
		return nil
	}
	return append([]Release(nil), sh.log[local]...)
}

// RoundReport sums one round over all units.
type RoundReport struct {
	Round    int
	Units    int     // units with at least one release in the round
	Releases int     // releases in the round
	MaxEps   float64 // largest ε one unit spent in the round
	MeanEps  float64 // mean ε per participating unit
}

// Composition summarizes one composition rule over the units that have
// spent anything.
type Composition struct {
	MaxEps, MeanEps float64
	MaxDelta        float64
}

// Report summarizes an accountant.
type Report struct {
	Name       string  // what a unit is
	Units      int     // all units
	Active     int     // units with at least one release
	Releases   int     // all releases
	Refused    int     // charges refused for lack of budget
	Exhausted  int     // active units with less than 1e-9 ε left
	DeltaPrime float64 // δ' of the advanced composition
	Basic      Composition
	Advanced   Composition
	Best       Composition // per unit, the smaller ε of the two rules
	Rounds     []RoundReport
}

// Report returns the totals per unit (maximum and mean over active units)
// under both compositions, and per round.
func (a *Accountant) Report() Report {
	r := Report{Name: a.cfg.Name, Units: a.n, DeltaPrime: a.cfg.DeltaPrime}
	var rounds []acctRound
	var sumB, sumA, sumBest float64
	ns := len(a.shards)
	for si := range a.shards {
		sh := &a.shards[si]
		sh.mu.Lock()
		r.Refused += sh.refused
		for k := range sh.units {
			s := &sh.units[k]
			if s.count == 0 {
				continue
			}
			u := k*ns + si
			sp := a.unitSpend(s)
			r.Active++
			r.Releases += sp.Releases
			best, bestDelta := sp.Eps, sp.Delta
			if sp.AdvEps < best {
				best, bestDelta = sp.AdvEps, sp.AdvDelta
			}
			sumB, sumA, sumBest = sumB+sp.Eps, sumA+sp.AdvEps, sumBest+best
			r.Basic.MaxEps = math.Max(r.Basic.MaxEps, sp.Eps)
			r.Basic.MaxDelta = math.Max(r.Basic.MaxDelta, sp.Delta)
			r.Advanced.MaxEps = math.Max(r.Advanced.MaxEps, sp.AdvEps)
			r.Advanced.MaxDelta = math.Max(r.Advanced.MaxDelta, sp.AdvDelta)
			r.Best.MaxEps = math.Max(r.Best.MaxEps, best)
			r.Best.MaxDelta = math.Max(r.Best.MaxDelta, bestDelta)
			if a.budget[u]-a.spent(s) < 1e-9 {
				r.Exhausted++
			}
		}
		if len(sh.rounds) > len(rounds) {
			rounds = append(rounds, make([]acctRound, len(sh.rounds)-len(rounds))...)
		}
		for k, x := range sh.rounds {
			y := &rounds[k]
			y.units += x.units
			y.releases += x.releases
			y.sumEps += x.sumEps
			y.maxEps = math.Max(y.maxEps, x.maxEps)
		}
		sh.mu.Unlock()
	}
	if r.Active > 0 {
		n := float64(r.Active)
		r.Basic.MeanEps, r.Advanced.MeanEps, r.Best.MeanEps = sumB/n, sumA/n, sumBest/n
	}
	for k, x := range rounds {
		if x.units == 0 {
			continue
		}
		r.Rounds = append(r.Rounds, RoundReport{
			Round: k, Units: x.units, Releases: x.releases,
			MaxEps: x.maxEps, MeanEps: x.sumEps / float64(x.units),
		})
	}
	return r
}

// String renders the report as plain text.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "privacy spent by %d of %d %ss: %d releases, %d refused, %d %ss out of budget\n",
		r.Active, r.Units, r.Name, r.Releases, r.Refused, r.Exhausted, r.Name)
	fmt.Fprintf(&b, "  basic composition:    max ε %.4g, mean ε %.4g, max δ %.3g\n", r.Basic.MaxEps, r.Basic.MeanEps, r.Basic.MaxDelta)
	fmt.Fprintf(&b, "  advanced (δ'=%.3g): max ε %.4g, mean ε %.4g, max δ %.3g\n", r.DeltaPrime, r.Advanced.MaxEps, r.Advanced.MeanEps, r.Advanced.MaxDelta)
	fmt.Fprintf(&b, "  better of the two:    max ε %.4g, mean ε %.4g, max δ %.3g\n", r.Best.MaxEps, r.Best.MeanEps, r.Best.MaxDelta)
	if len(r.Rounds) > 0 {
		lo, hi := r.Rounds[0].MaxEps, r.Rounds[0].MaxEps
		for _, x := range r.Rounds {
			lo, hi = math.Min(lo, x.MaxEps), math.Max(hi, x.MaxEps)
		}
		fmt.Fprintf(&b, "  %d rounds, max ε per %s per round %.4g..%.4g\n", len(r.Rounds), r.Name, lo, hi)
	}
	return b.String()
}

// Markdown renders the report as Markdown tables: totals, then per round
// (at most maxRounds rows, evenly spaced with the last included; all
// rounds if maxRounds ≤ 0).
func (r Report) Markdown(maxRounds int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d %ss spent privacy in %d releases (%d refused, %d out of budget).\n\n",
		r.Active, r.Units, r.Name, r.Releases, r.Refused, r.Exhausted)
	fmt.Fprintf(&b, "| composition | max ε per %s | mean ε per %s | max δ |\n|---|---|---|---|\n", r.Name, r.Name)
	fmt.Fprintf(&b, "| basic | %.4g | %.4g | %.3g |\n", r.Basic.MaxEps, r.Basic.MeanEps, r.Basic.MaxDelta)
	fmt.Fprintf(&b, "| advanced (δ' = %.3g) | %.4g | %.4g | %.3g |\n", r.DeltaPrime, r.Advanced.MaxEps, r.Advanced.MeanEps, r.Advanced.MaxDelta)
	fmt.Fprintf(&b, "| better of the two | %.4g | %.4g | %.3g |\n", r.Best.MaxEps, r.Best.MeanEps, r.Best.MaxDelta)
	if len(r.Rounds) == 0 {
		return b.String()
	}
	fmt.Fprintf(&b, "\n| round | %ss | releases | max ε per %s | mean ε per %s |\n|---|---|---|---|---|\n", r.Name, r.Name, r.Name)
	rows := r.Rounds
	if maxRounds > 0 && len(rows) > maxRounds {
		sel := make([]RoundReport, 0, maxRounds)
		if maxRounds == 1 {
			sel = append(sel, rows[len(rows)-1])
		} else {
			for k := 0; k < maxRounds; k++ {
				sel = append(sel, rows[k*(len(rows)-1)/(maxRounds-1)])
			}
		}
		rows = sel
	}
	for _, x := range rows {
		fmt.Fprintf(&b, "| %d | %d | %d | %.4g | %.4g |\n", x.Round, x.Units, x.Releases, x.MaxEps, x.MeanEps)
	}
	return b.String()
}
