package audit

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/privrec/privrec/budget"
	"github.com/privrec/privrec/dpals"
	"github.com/privrec/privrec/hdpmf"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

// The canary's general replay, for uploads that are not per-item float
// rows: dp-als's dense vectors (Upload.Scalars) and the integer path's
// words (secagg=masked), summed as secure aggregation sums them (mod
// 2^Bits) and compared as signed integers, and a release split into
// blocks charged separately (the zCDP ledger's releases of one round).

// canaryBlock is a run of coordinates of a round's release and the
// sensitivity charged for it (L1 +Inf: not charged in L1).
type canaryBlock struct {
	size   int
	l1, l2 float64
}

// sideSums returns the data coordinates of one side's summed release of
// the round whose broadcast is b.
type sideSums func(b *protocol.Broadcast, ups []*protocol.Upload) ([]float64, error)

// serverInput returns what the server receives of side A's uploads.
type serverInput func(b *protocol.Broadcast, ups []*protocol.Upload) []*protocol.Upload

// replayBlocks runs srv against the clients of both sides (the same
// broadcasts, each client its transport stream), sums each side's
// uploads by sum, and compares every release's blocks under charge (nil:
// no release that round); the server aggregates side A's uploads through
// in.
func replayBlocks(ctx context.Context, srv protocol.Server, a, b []protocol.Client, seed uint64, sum sideSums, in serverInput,
	charge func(*protocol.Broadcast) ([]canaryBlock, error)) (canaryOutcome, error) {
	out := canaryOutcome{firstOver: -1}
	src := rand.NewChaCha8([32]byte{})
	r := rand.New(src)
	for round := 0; !srv.Done(); round++ {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		if round > 10000 {
			return out, fmt.Errorf("canary: the run did not end in 10000 rounds")
		}
		bc, err := srv.Broadcast(round)
		if err != nil {
			return out, err
		}
		var sums [2][]float64
		var upsA []*protocol.Upload
		for side, cls := range [][]protocol.Client{b, a} { // a last: its uploads go to the server
			ups := make([]*protocol.Upload, 0, len(cls))
			for _, c := range cls {
				src.Seed(rng.Seed(seed, uint64(c.ID()), uint64(round)))
				up, err := c.Round(bc, r)
				if err != nil {
					return out, fmt.Errorf("client %d round %d: %w", c.ID(), round, err)
				}
				if up != nil {
					cp := *up // clients reuse their upload
					ups = append(ups, &cp)
				}
			}
			blocks, err := charge(bc)
			if err != nil {
				return out, err
			}
			if blocks != nil {
				if sums[side], err = sum(bc, ups); err != nil {
					return out, err
				}
			}
			upsA = ups
		}
		blocks, _ := charge(bc)
		if blocks != nil {
			var ratio, l1w, l2w, c1w, c2w float64
			off := 0
			for _, bl := range blocks {
				if off+bl.size > len(sums[0]) || len(sums[0]) != len(sums[1]) {
					return out, fmt.Errorf("canary: round %d: sums of %d and %d coordinates for blocks up to %d", round, len(sums[0]), len(sums[1]), off+bl.size)
				}
				var l1, l2 float64
				for p := off; p < off+bl.size; p++ {
					x := math.Abs(sums[0][p] - sums[1][p])
					l1 += x
					l2 += x * x
				}
				l2 = math.Sqrt(l2)
				off += bl.size
				rt := ratioOf(l2, bl.l2)
				if !math.IsInf(bl.l1, 1) {
					rt = math.Max(rt, ratioOf(l1, bl.l1))
				}
				if rt > ratio || c2w == 0 {
					ratio, l1w, l2w, c1w, c2w = rt, l1, l2, bl.l1, bl.l2
				}
			}
			out.rounds++
			if ratio > 1+canarySlack {
				out.overCount++
				if out.firstOver < 0 {
					out.firstOver = bc.Round
				}
			}
			if ratio > out.ratio || out.rounds == 1 {
				out.ratio, out.round, out.l1, out.l2, out.chL1, out.chL2 = ratio, bc.Round, l1w, l2w, c1w, c2w
			}
		}
		if err := srv.Aggregate(round, in(bc, upsA)); err != nil {
			return out, err
		}
	}
	return out, nil
}

// denseWordSum sums the uploads' words as secure aggregation does (the
// dense vector of each, mod 2^Bits).
func denseWordSum(b *protocol.Broadcast, ups []*protocol.Upload) []uint32 {
	total := make([]uint32, b.Words)
	for _, u := range ups {
		for k, w := range u.DenseWords(b) {
			total[k] += w
		}
	}
	if b.Bits > 0 && b.Bits < 32 {
		mask := uint32(1)<<b.Bits - 1
		for k := range total {
			total[k] &= mask
		}
	}
	return total
}

// signedWord reads a word mod 2^bits as a signed integer.
func signedWord(w uint32, bits int) float64 {
	if bits <= 0 || bits >= 32 {
		return float64(int32(w))
	}
	w &= uint32(1)<<bits - 1
	if w >= uint32(1)<<(bits-1) {
		return float64(int64(w) - int64(1)<<bits)
	}
	return float64(w)
}

// wordSums returns the data words of the summed integer release as signed
// integers: data(b, p) says which words carry data (not arrival words).
func wordSums(data func(b *protocol.Broadcast, p int) bool) sideSums {
	return func(b *protocol.Broadcast, ups []*protocol.Upload) ([]float64, error) {
		if b.Words == 0 {
			return nil, fmt.Errorf("canary: round %d of the integer path asks for no words", b.Round)
		}
		var out []float64
		for p, w := range denseWordSum(b, ups) {
			if data(b, p) {
				out = append(out, signedWord(w, b.Bits))
			}
		}
		return out, nil
	}
}

// maskedInput gives the server the one summed upload of secure
// aggregation in rounds that ask for words, the uploads otherwise.
func maskedInput(b *protocol.Broadcast, ups []*protocol.Upload) []*protocol.Upload {
	if b.Words == 0 {
		return ups
	}
	return []*protocol.Upload{{Client: -1, Round: b.Round, Words: denseWordSum(b, ups)}}
}

// scalarSums sums the uploads' dense float vectors (dp-als's Gaussian
// path).
func scalarSums(b *protocol.Broadcast, ups []*protocol.Upload) ([]float64, error) {
	var out []float64
	for _, u := range ups {
		if out == nil {
			out = make([]float64, len(u.Scalars))
		}
		if len(u.Scalars) != len(out) {
			return nil, fmt.Errorf("canary: round %d: uploads of %d and %d values", b.Round, len(out), len(u.Scalars))
		}
		for k, x := range u.Scalars {
			out[k] += x
		}
	}
	return out, nil
}

func passThrough(_ *protocol.Broadcast, ups []*protocol.Upload) []*protocol.Upload { return ups }

// addUserPair returns d and d without the canary's ratings (user 0 of
// canaryData): the add/remove-one-user neighbours (the canary's row
// empty on the other side, the user space the same).
func addUserPair(d *ratings.Dataset) (with, without *ratings.Dataset) {
	return d, removeUser(d)
}

// dpalsCanary returns a row of dp-als or dp-biases (name): one user
// added (the canary of canaryData, every other item at alternating
// extremes), on the Gaussian path or the integer path (masked), charged
// by the run's own Charged blocks times scale.
func dpalsCanary(name string, masked bool, scale float64) func(ctx context.Context, e *env) (Result, error) {
	return func(ctx context.Context, e *env) (Result, error) {
		d, err := canaryData(e)
		if err != nil {
			return Result{}, err
		}
		cfg := configOf[dpals.Config](name)
		if cfg.Dim > 0 {
			// The factor releases too: two factor rounds after the
			// warm start (dp-als's default has none).
			cfg.Rounds = 2
			cfg.InitItems = min(cfg.InitItems, 40)
		}
		cfg.Aggregation = protocol.AggIdeal
		if masked {
			cfg.Aggregation = protocol.AggMasked
		}
		with, without := addUserPair(d)
		ca, err := dpals.NewClients(with, cfg)
		if err != nil {
			return Result{}, err
		}
		cb, err := dpals.NewClients(without, cfg)
		if err != nil {
			return Result{}, err
		}
		ca.Noiseless()
		cb.Noiseless()
		seed := e.cfg.Seed + 1
		srv, err := dpals.NewServer(cfg, d, seed)
		if err != nil {
			return Result{}, err
		}
		ni := d.NumItems()
		charge := func(b *protocol.Broadcast) ([]canaryBlock, error) {
			if b.Phase != protocol.PhaseTrain {
				return nil, nil
			}
			bs, err := dpals.Charged(cfg, ni, b.Round)
			if err != nil || bs == nil {
				return nil, err
			}
			out := make([]canaryBlock, len(bs))
			for i, x := range bs {
				out[i] = canaryBlock{size: x.Size, l1: scale * x.L1, l2: scale * x.L2}
			}
			return out, nil
		}
		sum, in, path := scalarSums, serverInput(passThrough), "Gaussian path (the server's noise; the zCDP ledger's L2 per release)"
		chName := "the zCDP ledger's L2 sensitivity of each release of the round"
		if masked {
			sum = wordSums(func(b *protocol.Broadcast, p int) bool { return p < b.Words-1 }) // the last word counts arrivals
			in = maskedInput
			path = "integer path (secagg=masked, Skellam shares off)"
			chName = "the Skellam calibration's integer Δ2 = G + √d (L2) and Δ1 = min(√d·Δ2, Δ2²) (L1) of the round"
		}
		if scale != 1 {
			chName = fmt.Sprintf("%g × ", scale) + chName
		}
		o, err := replayBlocks(ctx, srv, ca.List, cb.List, seed, sum, in, charge)
		if err != nil {
			return Result{}, err
		}
		setting := fmt.Sprintf("%s, %s, K = %d, %d bias rounds, %d factor rounds, warm start on %d items; %d users × %d items, user 0 the canary (%d ratings at alternating extremes)",
			name, path, cfg.Dim, cfg.BiasRounds, cfg.Rounds, cfg.InitItems, d.NumUsers(), d.NumItems(), (d.NumItems()+1)/2)
		unit := "user added (all of one user's ratings)"
		if masked {
			unit += ", integer path"
		}
		if scale != 1 {
			unit += fmt.Sprintf(": %g × the charged sensitivity", scale)
		}
		return canaryResult(o, unit, setting, chName), nil
	}
}

// hdpmfMaskedCanary returns a row of variant v on the integer path
// (secagg=masked, Skellam shares off): the neighbour by rel, with the
// default user clip (clip < 0) or none (0), charged by the proven
// user-level integer sensitivity (or, paper, the per-rating one) times
// scale.
func hdpmfMaskedCanary(v hdpmf.Variant, unit string, rel func(*ratings.Dataset) *ratings.Dataset, clip float64, paper bool, scale float64, what string) func(ctx context.Context, e *env) (Result, error) {
	return func(ctx context.Context, e *env) (Result, error) {
		d, err := canaryData(e)
		if err != nil {
			return Result{}, err
		}
		rounds := 10
		if !e.cfg.Quick {
			rounds = 20
		}
		cfg := hdpmf.DefaultConfig(v)
		cfg.Dim, cfg.Rounds, cfg.Seed, cfg.Workers = 10, rounds, e.cfg.Seed+1, 1
		cfg.Aggregation = protocol.AggMasked
		if clip >= 0 {
			cfg.UserClip = clip
		}
		clip = cfg.UserClip
		cfg.Spec.EpsMax = cfg.Eps
		if v == hdpmf.PDPMF {
			cfg.Threshold = "min"
		}
		w, err := budget.HDPMFSpec(d, cfg.Spec, cfg.SpecSeed)
		if err != nil {
			return Result{}, err
		}
		w.User[0], w.Item[canaryItem] = 1, 1
		cfg.Weights = w
		ca, err := hdpmf.NewClients(d, cfg)
		if err != nil {
			return Result{}, err
		}
		cb, err := hdpmf.NewClients(rel(d), cfg)
		if err != nil {
			return Result{}, err
		}
		ca.Noiseless()
		cb.Noiseless()
		srv, err := hdpmf.NewServer(cfg, d.Public(), cfg.Seed)
		if err != nil {
			return Result{}, err
		}
		rs, us, ok := ca.ChargedMasked()
		if !ok {
			return Result{}, fmt.Errorf("canary: %s: the clients have no integer path", v)
		}
		ch, chName := us, "the proven user-level 2C·Δ·Scale (L2), its square (L1), in integer units"
		if paper {
			ch, chName = rs, "the per-rating 2Δ·Scale + 2√K (L2), min(√K·L2, L2²) (L1), in integer units"
		}
		if clip == 0 && !paper {
			c2 := cfg
			c2.UserClip = hdpmf.DefaultConfig(v).UserClip
			cc, err := hdpmf.NewClients(d, c2)
			if err != nil {
				return Result{}, err
			}
			_, ch, _ = cc.ChargedMasked()
			chName = fmt.Sprintf("what the default user clip C = %g would charge, on a run without it", c2.UserClip)
		}
		ch.L1 *= scale
		ch.L2 *= scale
		if scale != 1 {
			chName = fmt.Sprintf("%g × ", scale) + chName
		}
		k := cfg.Dim
		data := func(b *protocol.Broadcast, p int) bool { return p%(k+1) != k } // the last word of an item counts arrivals
		charge := func(b *protocol.Broadcast) ([]canaryBlock, error) {
			if b.Phase != protocol.PhaseTrain || b.Words == 0 {
				return nil, nil
			}
			return []canaryBlock{{size: b.NumItems * k, l1: ch.L1, l2: ch.L2}}, nil
		}
		o, err := replayBlocks(ctx, srv, ca.List, cb.List, cfg.Seed, wordSums(data), maskedInput, charge)
		if err != nil {
			return Result{}, err
		}
		setting := fmt.Sprintf("%s on the integer path (secagg=masked, Skellam shares off), K = %d, %d rounds, user clip C = %g, %s; %d users × %d items, user 0 the canary (%d ratings)",
			v, cfg.Dim, rounds, clip, what, d.NumUsers(), d.NumItems(), (d.NumItems()+1)/2)
		return canaryResult(o, unit, setting, chName), nil
	}
}
