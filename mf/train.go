package mf

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/privrec/privrec/internal/vec"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

// NumBlocks is the side B of the B×B grid of rating blocks that Train
// schedules. It is fixed, independent of the number of workers, so that
// the result of training depends only on the data, the config and the seed.
const NumBlocks = 16

// Errors of Train.
var (
	ErrEmpty    = errors.New("mf: no training ratings")
	ErrDiverged = errors.New("mf: training diverged")
)

// Random stream labels under Config.Seed (see rng.New).
const (
	streamInit uint64 = iota + 1
	streamBlocks
	streamOrder
	streamSchedule
	streamShuffle
)

// EpochStats describes one finished training epoch.
type EpochStats struct {
	Epoch     int     // 1-based
	LearnRate float64 // the rate used in this epoch
	TrainRMSE float64 // RMSE of the errors seen before each update during the epoch
	Updates   int     // ratings visited
	Seconds   float64 // wall time of the epoch
}

// Train fits a model to train by stochastic gradient descent and returns
// it. onEpoch, if not nil, is called after every epoch. Canceling ctx stops
// training between blocks; Train then returns ctx.Err().
//
// The result is a deterministic function of train, cfg minus Workers, and
// cfg.Seed: see the package documentation for the parallel scheme.
func Train(ctx context.Context, train *ratings.Dataset, cfg Config, onEpoch func(EpochStats)) (*model.Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if train == nil || train.Len() == 0 {
		return nil, ErrEmpty
	}
	if err := checkIndices(train); err != nil {
		return nil, err
	}
	t := newTrainer(train, cfg)
	for e := 0; e < cfg.Epochs; e++ {
		start := time.Now()
		lr := cfg.rate(e)
		if err := t.epoch(ctx, e, lr); err != nil {
			return nil, err
		}
		var sse float64
		for _, s := range t.sse { // fixed order: the sum does not depend on scheduling
			sse += s
		}
		st := EpochStats{
			Epoch:     e + 1,
			LearnRate: lr,
			TrainRMSE: math.Sqrt(sse / float64(train.Len())),
			Updates:   train.Len(),
			Seconds:   time.Since(start).Seconds(),
		}
		if math.IsNaN(st.TrainRMSE) || math.IsInf(st.TrainRMSE, 0) || st.TrainRMSE > 1e6 {
			return nil, fmt.Errorf("%w at epoch %d (train RMSE %g): lower LearnRate (%g) or raise Reg", ErrDiverged, e+1, st.TrainRMSE, cfg.LearnRate)
		}
		if onEpoch != nil {
			onEpoch(st)
		}
	}
	return t.finish(), nil
}

// checkIndices checks the parts of train that Train relies on.
func checkIndices(d *ratings.Dataset) error {
	if len(d.Users) != len(d.Values) || len(d.Items) != len(d.Values) {
		return fmt.Errorf("mf: dataset %q: Users, Items and Values have lengths %d, %d, %d", d.Name, len(d.Users), len(d.Items), len(d.Values))
	}
	nu, ni := int32(d.NumUsers()), int32(d.NumItems())
	for k := range d.Values {
		if u := d.Users[k]; u < 0 || u >= nu {
			return fmt.Errorf("mf: dataset %q: rating %d: user index %d out of range [0, %d)", d.Name, k, u, nu)
		}
		if i := d.Items[k]; i < 0 || i >= ni {
			return fmt.Errorf("mf: dataset %q: rating %d: item index %d out of range [0, %d)", d.Name, k, i, ni)
		}
		if v := d.Values[k]; math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("mf: dataset %q: rating %d: value %g is not finite", d.Name, k, v)
		}
	}
	return nil
}

// newModel allocates the model and draws its initial factors. Both kinds
// predict the training mean for a pair they do not know; a biased model
// also adds it to every known pair.
func newModel(d *ratings.Dataset, cfg Config) *model.Model {
	nu, ni, k := d.NumUsers(), d.NumItems(), cfg.Dim
	m := &model.Model{
		Dim: k, NumUsers: nu, NumItems: ni,
		U:          make([]float32, nu*k),
		V:          make([]float32, ni*k),
		Default:    float32(d.Mean()),
		Scale:      d.Scale,
		UserIDs:    append([]string(nil), d.UserIDs...),
		ItemIDs:    append([]string(nil), d.ItemIDs...),
		ItemTitles: append([]string(nil), d.ItemTitles...),
	}
	if cfg.Biased {
		m.Mean = m.Default
		m.BU = make([]float32, nu)
		m.BI = make([]float32, ni)
	}
	r := rng.New(cfg.Seed, streamInit)
	for j := range m.U {
		m.U[j] = float32(r.NormFloat64() * cfg.InitScale)
	}
	for j := range m.V {
		m.V[j] = float32(r.NormFloat64() * cfg.InitScale)
	}
	return m
}

// grid is the training data arranged in NumBlocks×NumBlocks blocks: block
// (a, b) holds the ratings of the users of user block a on the items of
// item block b, contiguously in es[off[a*NumBlocks+b]:off[a*NumBlocks+b+1]].
//
// Users and items are renumbered so that each block's users (items) are
// contiguous: entry indices are positions in that order, and users[p]
// (items[p]) is the original index at position p. Training works on
// factor rows in this order, so that workers never write to the same
// cache line (no false sharing) and a block's rows sit together.
type grid struct {
	es           []entry
	off          []int
	users, items []int32
}

func (g *grid) block(a, b int) []entry {
	j := a*NumBlocks + b
	return g.es[g.off[j]:g.off[j+1]]
}

// arrange assigns users and items to blocks and copies the ratings into a
// grid, each block in a seeded random order.
func arrange(d *ratings.Dataset, seed uint64) *grid {
	perUser, perItem := d.Counts()
	r := rng.New(seed, streamBlocks)
	ub := balance(perUser, r.Perm(len(perUser)))
	ib := balance(perItem, r.Perm(len(perItem)))
	users, upos := blockOrder(ub)
	items, ipos := blockOrder(ib)
	const nb = NumBlocks * NumBlocks
	g := &grid{es: make([]entry, d.Len()), off: make([]int, nb+1), users: users, items: items}
	for k := range d.Values {
		g.off[int(ub[d.Users[k]])*NumBlocks+int(ib[d.Items[k]])+1]++
	}
	for j := 0; j < nb; j++ {
		g.off[j+1] += g.off[j]
	}
	next := append([]int(nil), g.off[:nb]...)
	for _, k := range rng.New(seed, streamOrder).Perm(d.Len()) {
		u, i := d.Users[k], d.Items[k]
		j := int(ub[u])*NumBlocks + int(ib[i])
		g.es[next[j]] = entry{U: upos[u], I: ipos[i], R: d.Values[k]}
		next[j]++
	}
	return g
}

// blockOrder lists the rows by block, increasing index within a block, and
// returns that order and each row's position in it.
func blockOrder(blk []uint8) (order, pos []int32) {
	var start [NumBlocks + 1]int
	for _, b := range blk {
		start[b+1]++
	}
	for b := 0; b < NumBlocks; b++ {
		start[b+1] += start[b]
	}
	order, pos = make([]int32, len(blk)), make([]int32, len(blk))
	for row, b := range blk {
		p := start[b]
		start[b]++
		order[p], pos[row] = int32(row), int32(p)
	}
	return order, pos
}

// gather returns the rows of x (each dim wide) in the order rows, each
// row stride ≥ dim wide, the rest zero, in memory aligned to 64 bytes.
func gather(x []float32, rows []int32, dim, stride int) []float32 {
	y := vec.MakeAligned(len(rows) * stride)
	for p, row := range rows {
		copy(y[p*stride:p*stride+dim], x[int(row)*dim:(int(row)+1)*dim])
	}
	return y
}

// scatter writes the rows of y (in the order rows, each stride wide) back
// to x.
func scatter(x, y []float32, rows []int32, dim, stride int) {
	for p, row := range rows {
		copy(x[int(row)*dim:(int(row)+1)*dim], y[p*stride:p*stride+dim])
	}
}

// rowLayout returns the stride of a factor row in training and the number
// of its elements the kernels work on. With SIMD kernels (see package
// vec) a row is padded with zeros to whole cache lines of 16 float32,
// and the kernels run over the padding too: every load is then a whole
// aligned vector and no row needs a tail loop, which on ML-1M made an
// epoch a third faster at K = 10 and 50 (and changed nothing at K = 128)
// although it adds arithmetic. The padding stays zero: c·0 + g·0 = 0.
// The pure Go kernels gain nothing from it and get rows dim wide.
func rowLayout(dim int) (stride, n int) {
	if vec.Current() == vec.Generic {
		return dim, dim
	}
	const line = 16 // float32 in a 64-byte cache line
	p := (dim + line - 1) / line * line
	return p, p
}

// balance assigns rows to NumBlocks blocks so that the blocks hold nearly
// equal numbers of ratings: rows in the order perm, heaviest first (a stable
// sort by count), each to the currently lightest block (lowest index on
// ties).
func balance(count []int, perm []int) []uint8 {
	// Counting sort of perm by count, descending, stable.
	maxc := 0
	for _, c := range count {
		maxc = max(maxc, c)
	}
	start := make([]int, maxc+2)
	for _, c := range count {
		start[maxc-c+1]++
	}
	for j := 1; j < len(start); j++ {
		start[j] += start[j-1]
	}
	order := make([]int, len(perm))
	for _, row := range perm {
		c := count[row]
		order[start[maxc-c]] = row
		start[maxc-c]++
	}
	var load [NumBlocks]int
	blk := make([]uint8, len(count))
	for _, row := range order {
		best := 0
		for b := 1; b < NumBlocks; b++ {
			if load[b] < load[best] {
				best = b
			}
		}
		blk[row] = uint8(best)
		load[best] += count[row]
	}
	return blk
}

// trainer holds the state of a training run: the model's parameters in
// the grid's row order.
type trainer struct {
	g      *grid
	m      *model.Model
	cfg    Config
	u, v   []float32
	bu, bi []float32
	sse    []float64 // per block, of the current epoch
	stride int       // of a row of u and v
	n      int       // the elements of a row the kernels work on
}

func newTrainer(d *ratings.Dataset, cfg Config) *trainer {
	m := newModel(d, cfg)
	g := arrange(d, cfg.Seed)
	t := &trainer{g: g, m: m, cfg: cfg, sse: make([]float64, NumBlocks*NumBlocks)}
	t.stride, t.n = rowLayout(m.Dim)
	t.u = gather(m.U, g.users, m.Dim, t.stride)
	t.v = gather(m.V, g.items, m.Dim, t.stride)
	if cfg.Biased {
		t.bu = gather(m.BU, g.users, 1, 1)
		t.bi = gather(m.BI, g.items, 1, 1)
	}
	return t
}

// finish copies the trained parameters back into the model's row order.
func (t *trainer) finish() *model.Model {
	m := t.m
	scatter(m.U, t.u, t.g.users, m.Dim, t.stride)
	scatter(m.V, t.v, t.g.items, m.Dim, t.stride)
	if t.cfg.Biased {
		scatter(m.BU, t.bu, t.g.users, 1, 1)
		scatter(m.BI, t.bi, t.g.items, 1, 1)
	}
	return m
}

// epoch runs one epoch: NumBlocks sub-epochs; in sub-epoch s the blocks
// (a, σ((a+s) mod B)) for a = 0..B−1, which share no user and no item, run
// in parallel. σ, a permutation of the item blocks, and the order of the
// sub-epochs are drawn per epoch from the seed. Within a block the ratings
// are visited in their (seeded, random) stored order.
func (t *trainer) epoch(ctx context.Context, e int, lr float64) error {
	const B = NumBlocks
	r := rng.New(t.cfg.Seed, streamSchedule, uint64(e))
	sigma := r.Perm(B)
	subs := r.Perm(B)
	st := step{
		stride: t.stride,
		n:      t.n,
		mean:   t.m.Default, // the training mean
		c:      float32(1 - lr*t.cfg.Reg),
		lr:     float32(lr),
		cb:     float32(1 - lr*t.cfg.RegBias),
		biased: t.cfg.Biased,
		u:      t.u, v: t.v, bu: t.bu, bi: t.bi,
	}
	workers := min(t.cfg.workers(), B)
	for _, s := range subs {
		if err := ctx.Err(); err != nil {
			return err
		}
		run := func(a int) {
			b := sigma[(a+s)%B]
			t.sse[a*B+b] = st.sgd(t.g.block(a, b))
		}
		if workers == 1 {
			for a := 0; a < B; a++ {
				if ctx.Err() != nil {
					break
				}
				run(a)
			}
			continue
		}
		var next atomic.Int32
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Go(func() {
				for {
					a := int(next.Add(1)) - 1
					if a >= B || ctx.Err() != nil {
						return
					}
					run(a)
				}
			})
		}
		wg.Wait()
	}
	return ctx.Err()
}
