package audit

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/privrec/privrec/budget"
	"github.com/privrec/privrec/hdpmf"
	"github.com/privrec/privrec/ldpop"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

// The sensitivity canary: every private federated method's releases,
// computed on two neighbouring datasets with the same randomness, must
// move by at most the sensitivity its accounting charged, in every round.
//
// A run builds the method's server once (from public information only)
// and the noise-free clients of both datasets (Clients.Noiseless: the
// noise would cancel anyway, both sides drawing the same streams, but a
// unit that adds a user's shares would not). Each round the server's
// broadcast goes to both sets of clients, each client drawing the stream
// the transport would give it (rng.New(seed, client, round)); the server
// aggregates side A's uploads, so both sides see the same broadcasts:
// the adaptive composition the accounting assumes, with everything but
// the one unit's data equal. The per-item (per-position) sums of both
// sides are compared in L1 and L2 norm against what the round's figure
// charges, and the row's value is the largest ratio over the rounds.
//
// Negative controls, which must exceed 1: the figure each paper computes
// (one rating moves only its own item's row) on the method as the paper
// runs it; the proven figure with half the sensitivity it charges; and
// HDPMF without its user clip checked against the clip's sensitivity.

func init() {
	register(&Attack{
		Name:  "canary",
		Title: "sensitivity canary: neighbouring datasets, the same randomness, every release against its charged sensitivity",
		Doc: "Each row runs one method on two neighbouring datasets under the row's unit (a rating changed from 1 to 5, a rating added, " +
			"all of one user's ratings changed or removed), with the noise off and the same random streams on both sides; the server's " +
			"broadcasts are computed once and replayed to both sides' clients, so only that unit's data differs. Every round's release " +
			"(the per-item gradient sums of the HDPMF family, the per-position sums of LDP-OP) is compared, and the value is the largest " +
			"ratio, over the rounds, of the measured change to the sensitivity the figure charged for that round (the larger of the L1 " +
			"and L2 ratios; the Laplace figures rest on L1). A protected row holds at ≤ 1. Controls must exceed 1: each paper's own " +
			"per-rating figure on the method as the paper runs it (its analysis assumes a rating moves only its item's row, but u_i is " +
			"fitted to all of the user's ratings and carries a changed rating into every row the user rated), the proven figure " +
			"charged at half its sensitivity, and HDPMF without the user clip that the proven figure rests on. dp-als and dp-biases run with one user added " +
			"(their unit): on the Gaussian path each release of a round is compared with the L2 sensitivity its zCDP ledger charges; " +
			"on the integer path (secagg=masked, also run for HDPMF and DPMF) the clients' words are summed mod 2^32 as secure " +
			"aggregation sums them, with the Skellam shares off, and read as signed integers against the calibration's integer " +
			"sensitivities. dp-ease (ideal path) and dp-pop run with all of one user's ratings removed (dp-ease's zero-out: the device stays, with an empty history), each release (dp-ease's counts, then the Gram triangle of the top items its server chose from side A's noisy counts; dp-pop's popularity vector, at ε = 10⁶ with the noise drawn alike on both sides) against the L2 sensitivity its zCDP ledger charges; their controls charge half of it. dp-itemavg, dp-globalavg and isgld run with the canary's rating changed 1→5, their Laplace releases (the items' centred rating sums, read back from the averages; the centred sum of all ratings; every perturbed rating) against the L1 sensitivity their noise is set for, the scale's range, at ε = 10⁶ with the noise drawn alike on both sides; their controls charge half of it. dp-pmf and pdp-pmf have no row: objective perturbation releases no statistic with a sensitivity, and the bound of their Thm 4 is on the stage-2 objective's gradient given U, which the method does not expose. The SDCF family (SDMF, SD-FM, SD-BPRMF) has no row: randomized response and a truncated fake error " +
			"have no sensitivity to check; its existence claim is attacked by the average, shape and grid attacks above. The " +
			"releases are deterministic given the streams, so there is no interval.",
		cases: canaryCases,
	})
}

// canaryData is the canary's data: a small synthetic set in which user 0,
// the canary, rates half the catalog, and the rating it changes (item
// canaryItem) is a 1 (5 on the other side).
func canaryData(e *env) (*ratings.Dataset, error) {
	users, items := 60, 200
	if e.cfg.Quick {
		users = 40
	}
	d, err := ratings.Synthetic(ratings.SyntheticConfig{Users: users, Items: items, Rank: 3, PerUser: 10, MinPerUser: 5, Noise: 0.3}, e.cfg.Seed+7)
	if err != nil {
		return nil, err
	}
	d.Name = "canary"
	// Replace user 0's ratings by every other item, alternating extremes,
	// with item canaryItem rated 1.
	keep := d.Users[:0:0]
	var its []int32
	var vals []float32
	for k := range d.Values {
		if d.Users[k] != 0 {
			keep = append(keep, d.Users[k])
			its = append(its, d.Items[k])
			vals = append(vals, d.Values[k])
		}
	}
	for j := 0; j < items; j += 2 {
		keep = append(keep, 0)
		its = append(its, int32(j))
		vals = append(vals, float32(1+4*((j/2)%2)))
	}
	d.Users, d.Items, d.Values = keep, its, vals
	return d, d.Validate()
}

// canaryItem is the item of the canary's changed rating (rated 1 in the
// data); canaryNew an item the canary did not rate (the added rating).
const canaryItem, canaryNew = 4, 7

// neighbour returns a copy of d with f applied to user 0's ratings (item,
// value); f returns the new value, 0 to drop the rating; add appends
// ratings of user 0.
func neighbour(d *ratings.Dataset, f func(j int32, v float32) float32, add map[int32]float32) *ratings.Dataset {
	out := *d
	out.Users, out.Items, out.Values = nil, nil, nil
	for k := range d.Values {
		v := d.Values[k]
		if d.Users[k] == 0 && f != nil {
			v = f(d.Items[k], v)
		}
		if v == 0 {
			continue
		}
		out.Users = append(out.Users, d.Users[k])
		out.Items = append(out.Items, d.Items[k])
		out.Values = append(out.Values, v)
	}
	for _, j := range slices.Sorted(mapsKeys(add)) {
		out.Users = append(out.Users, 0)
		out.Items = append(out.Items, j)
		out.Values = append(out.Values, add[j])
	}
	return &out
}

func mapsKeys(m map[int32]float32) func(func(int32) bool) {
	return func(yield func(int32) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// The neighbouring relations the rows use.
var (
	changeRating = func(d *ratings.Dataset) *ratings.Dataset {
		return neighbour(d, func(j int32, v float32) float32 {
			if j == canaryItem {
				return 5
			}
			return v
		}, nil)
	}
	addRating = func(d *ratings.Dataset) *ratings.Dataset { return neighbour(d, nil, map[int32]float32{canaryNew: 5}) }
	flipUser  = func(d *ratings.Dataset) *ratings.Dataset {
		return neighbour(d, func(_ int32, v float32) float32 { return 6 - v }, nil)
	}
	removeUser = func(d *ratings.Dataset) *ratings.Dataset {
		return neighbour(d, func(int32, float32) float32 { return 0 }, nil)
	}
)

// canaryCharge returns the sensitivity a row charges for the round whose
// broadcast is b.
type canaryCharge func(b *protocol.Broadcast) (l1, l2 float64)

// canaryOutcome is the largest ratio over the rounds and where it was.
type canaryOutcome struct {
	ratio                float64
	round                int
	l1, l2, chL1, chL2   float64
	rounds               int
	firstOver, overCount int
	// byRound holds each compared round's ratio and norms, by the
	// broadcast's round number.
	byRound map[int]roundMove
}

// roundMove is one round's measured change and its charge.
type roundMove struct{ ratio, l1, l2, chL1, chL2 float64 }

// replay runs srv against the clients of both sides, each side's clients
// answering the same broadcasts, and compares every training round's
// per-item sums under charge.
func replay(ctx context.Context, srv protocol.Server, a, b []protocol.Client, numItems, dim int, seed uint64, charge canaryCharge) (canaryOutcome, error) {
	out := canaryOutcome{firstOver: -1}
	src := rand.NewChaCha8([32]byte{})
	r := rand.New(src)
	sums := [2][]float64{make([]float64, numItems*dim), make([]float64, numItems*dim)}
	ups := make([]*protocol.Upload, len(a))
	for round := 0; !srv.Done(); round++ {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		bc, err := srv.Broadcast(round)
		if err != nil {
			return out, err
		}
		released := false
		for side, cls := range [][]protocol.Client{b, a} { // a last: its uploads go to the server
			clear(sums[side])
			for k, c := range cls {
				src.Seed(rng.Seed(seed, uint64(c.ID()), uint64(round)))
				up, err := c.Round(bc, r)
				if err != nil {
					return out, fmt.Errorf("client %d round %d: %w", c.ID(), round, err)
				}
				ups[k] = up
				if up == nil || len(up.Values) == 0 || len(up.Values) != len(up.Items)*dim {
					continue
				}
				released = true
				for n, j := range up.Items {
					for d := range dim {
						sums[side][int(j)*dim+d] += float64(up.Values[n*dim+d])
					}
				}
			}
		}
		if released && bc.Phase == protocol.PhaseTrain {
			var l1, l2 float64
			for p := range sums[0] {
				x := math.Abs(sums[0][p] - sums[1][p])
				l1 += x
				l2 += x * x
			}
			l2 = math.Sqrt(l2)
			c1, c2 := charge(bc)
			ratio := math.Max(ratioOf(l1, c1), ratioOf(l2, c2))
			out.rounds++
			if out.byRound == nil {
				out.byRound = map[int]roundMove{}
			}
			out.byRound[bc.Round] = roundMove{ratio, l1, l2, c1, c2}
			if ratio > 1+canarySlack {
				out.overCount++
				if out.firstOver < 0 {
					out.firstOver = bc.Round
				}
			}
			if ratio > out.ratio || out.rounds == 1 {
				out.ratio, out.round, out.l1, out.l2, out.chL1, out.chL2 = ratio, bc.Round, l1, l2, c1, c2
			}
		}
		if err := srv.Aggregate(round, ups); err != nil {
			return out, err
		}
	}
	return out, nil
}

// ratioOf returns measured/charged, with 0/0 = 0 and x/0 = +Inf.
func ratioOf(measured, charged float64) float64 {
	switch {
	case measured <= 1e-6*math.Max(1, charged) && charged == 0:
		return 0
	case charged == 0:
		return math.Inf(1)
	}
	return measured / charged
}

// canarySlack is the relative tolerance of the canary's bound: the
// uploads are float32, so a release whose clip binds exactly on both
// sides can read a few ulps above its charge.
const canarySlack = 1e-5

// canaryResult turns an outcome into a row.
func canaryResult(o canaryOutcome, unit, setting, charged string) Result {
	note := fmt.Sprintf("unit: %s; charged: %s; worst round %d: change L1 %s, L2 %s against charged L1 %s, L2 %s",
		unit, charged, o.round, num(o.l1), num(o.l2), num(o.chL1), num(o.chL2))
	if o.overCount > 0 {
		note += fmt.Sprintf("; above the charge in %d of %d rounds, first in round %d", o.overCount, o.rounds, o.firstOver)
	} else {
		note += fmt.Sprintf("; within the charge in all %d rounds", o.rounds)
	}
	return Result{
		Case: unit, Setting: setting, Metric: "largest change / charged sensitivity",
		Value: o.ratio, Lo: o.ratio, Hi: o.ratio, N: o.rounds, Baseline: 0, Bound: 1 + canarySlack, HigherLeaks: true, Note: note,
	}
}

// hdpmfCanary returns a row of variant v: the neighbour of the canary
// data by rel, UserClip clip (< 0: the default), charged by the paper's per-rating figure
// (paper) or the proven user-level one, times scale.
func hdpmfCanary(v hdpmf.Variant, unit string, rel func(*ratings.Dataset) *ratings.Dataset, clip float64, paper bool, scale float64, what string) func(ctx context.Context, e *env) (Result, error) {
	return func(ctx context.Context, e *env) (Result, error) {
		o, setting, chName, err := hdpmfCanaryRun(ctx, e, v, rel, clip, paper, scale, what)
		if err != nil {
			return Result{}, err
		}
		return canaryResult(o, unit, setting, chName), nil
	}
}

// hdpmfCanaryRun runs hdpmfCanary's replay and returns its outcome, the
// setting and the name of the charge.
func hdpmfCanaryRun(ctx context.Context, e *env, v hdpmf.Variant, rel func(*ratings.Dataset) *ratings.Dataset, clip float64, paper bool, scale float64, what string) (o canaryOutcome, setting, chName string, err error) {
	{
		d, err := canaryData(e)
		if err != nil {
			return o, "", "", err
		}
		rounds := 20
		if !e.cfg.Quick {
			rounds = 40
		}
		cfg := hdpmf.DefaultConfig(v)
		cfg.Dim, cfg.Rounds, cfg.Seed, cfg.Workers = 10, rounds, e.cfg.Seed+1, 1
		if clip >= 0 { // < 0: the default
			cfg.UserClip = clip
		}
		clip = cfg.UserClip
		cfg.Spec.EpsMax = cfg.Eps
		if v == hdpmf.PDPMF {
			cfg.Threshold = "min" // every rating kept: the changed one must train
		}
		// The weights: drawn once from the specification on side A, used
		// on both sides (they are the users' privacy preferences, not the
		// data the unit changes).
		w, err := budget.HDPMFSpec(d, cfg.Spec, cfg.SpecSeed)
		if err != nil {
			return o, "", "", err
		}
		// The canary is the most exposed user, and its changed rating of
		// weight 1: the paper's per-rating figure charges it the most.
		w.User[0], w.Item[canaryItem] = 1, 1
		cfg.Weights = w
		nb := rel(d)
		ca, err := hdpmf.NewClients(d, cfg)
		if err != nil {
			return o, "", "", err
		}
		cb, err := hdpmf.NewClients(nb, cfg)
		if err != nil {
			return o, "", "", err
		}
		ca.Noiseless()
		cb.Noiseless()
		srv, err := hdpmf.NewServer(cfg, d.Public(), cfg.Seed)
		if err != nil {
			return o, "", "", err
		}
		ra, ua := ca.Charged(0)
		rb, ub := cb.Charged(0)
		ch := hdpmf.Sensitivity{L1: math.Max(ua.L1, ub.L1), L2: math.Max(ua.L2, ub.L2)}
		chName = "the proven user-level figure's 2C·Δ (L2), 2C·√K·Δ (L1) a round"
		if paper {
			ch = hdpmf.Sensitivity{L1: math.Max(ra.L1, rb.L1), L2: math.Max(ra.L2, rb.L2)}
			chName = "the paper's per-rating 2W·Δ (L2), 2√K·W·Δ (L1) a round, W of the canary's most exposed rating"
		}
		if clip == 0 && !paper {
			// The control without the clip is charged what the clip
			// would give.
			_, ch = clipCharge(d, cfg)
			chName = fmt.Sprintf("what the default user clip C = %g would charge, on a run without it", hdpmf.DefaultConfig(v).UserClip)
		}
		ch.L1 *= scale
		ch.L2 *= scale
		if scale != 1 {
			chName = fmt.Sprintf("%g × ", scale) + chName
		}
		o, err = replay(ctx, srv, ca.List, cb.List, d.NumItems(), cfg.Dim, cfg.Seed, func(*protocol.Broadcast) (float64, float64) { return ch.L1, ch.L2 })
		if err != nil {
			return o, "", "", err
		}
		setting = fmt.Sprintf("%s, K = %d, %d rounds, user clip C = %g, %s; %d users × %d items, user 0 the canary (%d ratings)",
			v, cfg.Dim, rounds, clip, what, d.NumUsers(), d.NumItems(), (d.NumItems()+1)/2)
		return o, setting, chName, nil
	}
}

// issueRound is the round of the issue's case (issue 32): HDPMF as the
// paper runs it, a rating changed from 1 to 5, and the whole release of
// round 4 moving by more than the per-rating 2Δ = 8 charged.
const issueRound = 4

// hdpmfRoundCanary is hdpmfCanary's row read at one round (issueRound):
// the value is that round's ratio, not the largest over the run.
func hdpmfRoundCanary(unit string, clip float64, paper bool, what string) func(ctx context.Context, e *env) (Result, error) {
	return func(ctx context.Context, e *env) (Result, error) {
		o, setting, chName, err := hdpmfCanaryRun(ctx, e, hdpmf.HDPMF, changeRating, clip, paper, 1, what)
		if err != nil {
			return Result{}, err
		}
		m, ok := o.byRound[issueRound]
		if !ok {
			return Result{}, fmt.Errorf("canary: the run compared no release at round %d", issueRound)
		}
		at := canaryOutcome{ratio: m.ratio, round: issueRound, l1: m.l1, l2: m.l2, chL1: m.chL1, chL2: m.chL2, rounds: 1, firstOver: -1}
		if m.ratio > 1+canarySlack {
			at.overCount, at.firstOver = 1, issueRound
		}
		r := canaryResult(at, unit, setting, chName)
		r.Note += fmt.Sprintf("; the row reads round %d alone (L2 ratio %s, L1 ratio %s); over all %d rounds the largest ratio is %s, at round %d",
			issueRound, num(ratioOf(m.l2, m.chL2)), num(ratioOf(m.l1, m.chL1)), o.rounds, num(o.ratio), o.round)
		return r, nil
	}
}

// hdpmfDataCanary is the paper's per-rating figure of HDPMF on the
// audit's data, the issue's case: the paper's defaults (K = 10, no user
// clip); canaries are the lowest ratings of the lightest users (at least
// 20 ratings: one rating moves u_i the most when the user's count, which
// preconditions her step, is small), each changed to the highest rating,
// and the row reports the canary that moved a release the most. It is a
// finding, not a control: on MovieLens data these canaries stay at about
// the charge (a rating's own row moves by 2Δ‖u_i‖ and u_i's change adds
// little in the first rounds), while the synthetic canary above, a user
// with many ratings at alternating extremes, exceeds it.
func hdpmfDataCanary(ctx context.Context, e *env) (Result, error) {
	d := e.data
	lo, hi := d.Scale.Min, d.Scale.Max
	n := make([]int, d.NumUsers())
	for _, u := range d.Users {
		n[u]++
	}
	const minRatings = 20
	canaries := 6
	if e.cfg.Quick {
		canaries = 3
	}
	var picks []int // one lowest rating of each of the lightest users
	seen := map[int32]bool{}
	order := make([]int, 0, d.Len())
	for k, v := range d.Values {
		if v == lo && n[d.Users[k]] >= minRatings {
			order = append(order, k)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return n[d.Users[a]] - n[d.Users[b]] })
	for _, k := range order {
		if !seen[d.Users[k]] && len(picks) < canaries {
			seen[d.Users[k]] = true
			picks = append(picks, k)
		}
	}
	if len(picks) == 0 {
		return Result{}, fmt.Errorf("canary: no user with %d ratings gave the scale's lowest value %g", minRatings, lo)
	}
	rounds := 8
	if !e.cfg.Quick {
		rounds = 20
	}
	var best canaryOutcome
	var bestPick int
	for c, pick := range picks {
		nb := *d
		nb.Values = slices.Clone(d.Values)
		nb.Values[pick] = hi
		cfg := hdpmf.DefaultConfig(hdpmf.HDPMF)
		cfg.Rounds, cfg.Seed, cfg.Workers, cfg.UserClip = rounds, e.cfg.Seed+1, e.cfg.Workers, 0
		cfg.Spec.EpsMax = cfg.Eps
		w, err := budget.HDPMFSpec(d, cfg.Spec, cfg.SpecSeed)
		if err != nil {
			return Result{}, err
		}
		u, j := d.Users[pick], d.Items[pick]
		w.User[u], w.Item[j] = 1, 1 // the most exposed weight: the paper charges it the most
		cfg.Weights = w
		ca, err := hdpmf.NewClients(d, cfg)
		if err != nil {
			return Result{}, err
		}
		cb, err := hdpmf.NewClients(&nb, cfg)
		if err != nil {
			return Result{}, err
		}
		ca.Noiseless()
		cb.Noiseless()
		srv, err := hdpmf.NewServer(cfg, d.Public(), cfg.Seed)
		if err != nil {
			return Result{}, err
		}
		ra, _ := ca.Charged(int(u))
		o, err := replay(ctx, srv, ca.List, cb.List, d.NumItems(), cfg.Dim, cfg.Seed, func(*protocol.Broadcast) (float64, float64) { return ra.L1, ra.L2 })
		if err != nil {
			return Result{}, err
		}
		if c == 0 || o.ratio > best.ratio {
			best, bestPick = o, pick
		}
	}
	u, j := d.Users[bestPick], d.Items[bestPick]
	setting := fmt.Sprintf("hdpmf, the paper's defaults (K = 10, no user clip), %d rounds, on %s; %d canaries (the lightest users' lowest ratings); "+
		"the largest: user %s (%d ratings) rates item %s %g, changed to %g", rounds, e.dataDesc, len(picks), d.UserIDs[u], n[u], d.ItemIDs[j], lo, hi)
	return canaryResult(best, "rating value, changed lowest→highest, on the audit data: the paper's per-rating figure", setting,
		"the paper's per-rating 2Δ (L2), 2√K·Δ (L1) a round, for a rating of weight 1"), nil
}

// clipCharge returns the sensitivities of cfg with the default UserClip.
func clipCharge(d *ratings.Dataset, cfg hdpmf.Config) (hdpmf.Sensitivity, hdpmf.Sensitivity) {
	cfg.UserClip = hdpmf.DefaultConfig(cfg.Variant).UserClip
	c, err := hdpmf.NewClients(d, cfg)
	if err != nil {
		return hdpmf.Sensitivity{}, hdpmf.Sensitivity{}
	}
	return c.Charged(0)
}

// ldpopCanary returns a row of LDP-OP: the neighbour by rel, charged by
// the paper's per-rating figure (paper, for a rating at item j) or the
// user-level one, times scale.
func ldpopCanary(unit string, rel func(*ratings.Dataset) *ratings.Dataset, j int32, paper bool, scale float64) func(ctx context.Context, e *env) (Result, error) {
	return func(ctx context.Context, e *env) (Result, error) {
		d, err := canaryData(e)
		if err != nil {
			return Result{}, err
		}
		cfg := ldpop.DefaultConfig(ldpop.LDPOP)
		cfg.Dim, cfg.Seed, cfg.Workers = 4, e.cfg.Seed+1, 1
		cfg.Rounds = d.NumItems() * cfg.Dim // one pass: every position once
		cfg.LearnRate, cfg.Decay = 0.05, 1
		nb := rel(d)
		ca, err := ldpop.NewClients(d, cfg)
		if err != nil {
			return Result{}, err
		}
		cb, err := ldpop.NewClients(nb, cfg)
		if err != nil {
			return Result{}, err
		}
		ca.Noiseless()
		cb.Noiseless()
		srv, err := ldpop.NewServer(cfg, d.Public(), cfg.Seed)
		if err != nil {
			return Result{}, err
		}
		chName := "the user-level figure's 4ΔB·scale at every released position"
		if paper {
			chName = fmt.Sprintf("the paper's per-rating 2ΔB·scale at the released positions of row %d, none elsewhere (u_i held fixed)", j)
		}
		if scale != 1 {
			chName = fmt.Sprintf("%g × ", scale) + chName
		}
		charge := func(b *protocol.Broadcast) (float64, float64) {
			r, u := ca.Charged(b, j)
			if paper {
				return scale * r.L1, scale * r.L2
			}
			return scale * u.L1, scale * u.L2
		}
		o, err := replay(ctx, srv, ca.List, cb.List, d.NumItems(), cfg.Dim, cfg.Seed, charge)
		if err != nil {
			return Result{}, err
		}
		setting := fmt.Sprintf("ldp-op, d = %d, %d rounds of one position (one pass), B = %g; %d users × %d items, user 0 the canary",
			cfg.Dim, cfg.Rounds, cfg.Bound, d.NumUsers(), d.NumItems())
		return canaryResult(o, unit, setting, chName), nil
	}
}

// canaryCases lists the rows: controls first.
func canaryCases(*env) []testCase {
	var cs []testCase
	const (
		rv    = "rating value, changed 1→5"
		ra    = "rating added"
		uv    = "user's rating values, all changed"
		urm   = "user's ratings, all removed"
		paper = "as the paper runs it (no user clip)"
	)
	fam := []hdpmf.Variant{hdpmf.HDPMF, hdpmf.HDPMFR, hdpmf.DPMF, hdpmf.PDPMF}
	for _, v := range fam {
		cs = append(cs, testCase{v.String(), Control, hdpmfCanary(v, rv+": the paper's per-rating figure", changeRating, 0, true, 1, paper)})
	}
	cs = append(cs,
		testCase{"hdpmf", Control, hdpmfRoundCanary(rv+fmt.Sprintf(", round %d (issue 32's case): the paper's per-rating figure", issueRound), 0, true, paper)},
		testCase{"hdpmf", Finding, hdpmfDataCanary},
		testCase{"hdpmf", Control, hdpmfCanary(hdpmf.HDPMF, uv+": no user clip", flipUser, 0, false, 1, "no user clip, charged as if the default C")},
		testCase{"hdpmf", Control, hdpmfCanary(hdpmf.HDPMF, uv+": half the charged sensitivity", flipUser, -1, false, 0.5, "proven figure understated by half")},
		testCase{"ldp-op", Control, ldpopCanary(rv+": the paper's per-rating figure", changeRating, canaryItem, true, 1)},
		testCase{"ldp-op", Control, ldpopCanary(ra+": the paper's per-rating figure", addRating, canaryNew, true, 1)},
		testCase{"ldp-op", Control, ldpopCanary(uv+": a quarter of the charged sensitivity", flipUser, 0, false, 0.25)},
		testCase{"hdpmf", Control, hdpmfMaskedCanary(hdpmf.HDPMF, rv+", integer path: the per-rating figure", changeRating, 0, true, 1, paper)},
		testCase{"hdpmf", Control, hdpmfMaskedCanary(hdpmf.HDPMF, uv+", integer path: half the charged sensitivity", flipUser, -1, false, 0.5, "proven figure understated by half")},
		testCase{"dp-als", Control, dpalsCanary("dp-als", false, 0.5)},
		testCase{"dp-als", Control, dpalsCanary("dp-als", true, 0.5)},
		testCase{"dp-biases", Control, dpalsCanary("dp-biases", false, 0.5)},
		testCase{"dp-ease", Control, dpeaseCanary(0.5)},
		testCase{"dp-pop", Control, dpPopCanary(0.5)},
		testCase{"dp-itemavg", Control, dpItemAvgCanary(0.5)},
		testCase{"isgld", Control, isgldCanary(0.5)},
		testCase{"dp-globalavg", Control, dpGlobalAvgCanary(0.5)},
	)
	cs = append(cs, testCase{"hdpmf", Protected, hdpmfRoundCanary(rv+fmt.Sprintf(", round %d (issue 32's case)", issueRound), -1, false, "the default user clip")})
	for _, v := range fam {
		cs = append(cs,
			testCase{v.String(), Protected, hdpmfCanary(v, rv, changeRating, -1, false, 1, "the default user clip")},
			testCase{v.String(), Protected, hdpmfCanary(v, uv, flipUser, -1, false, 1, "the default user clip")},
		)
	}
	cs = append(cs,
		testCase{"ldp-op", Protected, ldpopCanary(rv, changeRating, canaryItem, false, 1)},
		testCase{"ldp-op", Protected, ldpopCanary(ra, addRating, canaryNew, false, 1)},
		testCase{"ldp-op", Protected, ldpopCanary(uv, flipUser, 0, false, 1)},
		testCase{"ldp-op", Protected, ldpopCanary(urm, removeUser, 0, false, 1)},
		testCase{"hdpmf", Protected, hdpmfMaskedCanary(hdpmf.HDPMF, rv+", integer path", changeRating, -1, false, 1, "the default user clip")},
		testCase{"hdpmf", Protected, hdpmfMaskedCanary(hdpmf.HDPMF, uv+", integer path", flipUser, -1, false, 1, "the default user clip")},
		testCase{"dpmf", Protected, hdpmfMaskedCanary(hdpmf.DPMF, uv+", integer path", flipUser, -1, false, 1, "the default user clip")},
		testCase{"dp-als", Protected, dpalsCanary("dp-als", false, 1)},
		testCase{"dp-als", Protected, dpalsCanary("dp-als", true, 1)},
		testCase{"dp-biases", Protected, dpalsCanary("dp-biases", false, 1)},
		testCase{"dp-biases", Protected, dpalsCanary("dp-biases", true, 1)},
		testCase{"dp-ease", Protected, dpeaseCanary(1)},
		testCase{"dp-pop", Protected, dpPopCanary(1)},
		testCase{"dp-itemavg", Protected, dpItemAvgCanary(1)},
		testCase{"isgld", Protected, isgldCanary(1)},
		testCase{"dp-globalavg", Protected, dpGlobalAvgCanary(1)},
	)
	return cs
}
