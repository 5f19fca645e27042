package experiment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/privrec/privrec/datasets"
	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/internal/progress"
	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

// Options configure a run.
type Options struct {
	// Out is the output folder; it holds the cell store (cells.jsonl), so
	// a rerun with the same Out resumes. A hand-written OUT/reading.md,
	// when present, becomes the report's Reading section.
	Out string
	// Command is the command line that ran the experiment, for the report
	// (default "privrec experiment run NAME").
	Command string
	// DataRoot, when set, is searched first for dataset names
	// (DataRoot/NAME), before datasets.Open's own places.
	DataRoot string
	// Workers is the number of cells run at once; 0 means
	// max(1, cores / MethodWorkers).
	Workers int
	// MethodWorkers is the "workers" parameter given to methods that have
	// one (default 1: parallelism comes from running cells side by side).
	MethodWorkers int
	// Progress, when a terminal, shows a progress bar with ETA.
	Progress io.Writer
	// OnComputed, when set, is called after each cell computed and stored
	// by this run, with the number computed so far (tests use it to
	// interrupt a run).
	OnComputed func(n int)
}

// Outcome is what a run produced.
type Outcome struct {
	Spec *Spec
	Plan *Plan
	// Records are the test cells of the spec, in plan order.
	Records []*Record
	// Chosen holds the hyperparameters chosen by cross-validation per
	// unit ("dataset/variant/x/label"), with the validation error.
	Chosen map[string]Choice
	// Computed and Reused count the distinct cells run now and found in
	// the store; cells with the same key (a method that does not depend
	// on the swept parameter) are run once and counted once.
	Computed, Reused int
	// Files are the output files written.
	Files []string
	Wall  time.Duration
	// CellTime is the summed running time of every cell the result rests
	// on (cross-validation and test cells, whether computed now or
	// reused): the cost of the experiment from scratch on one worker.
	CellTime time.Duration
	command  string
}

// Choice is a cross-validation result.
type Choice struct {
	Params Params  // the grid parameters chosen
	Score  float64 // mean validation error of the chosen point
	Metric string
	Points int
}

// Run runs the experiment s, reusing cells already in opt.Out's store,
// and writes the outputs there. When ctx is cancelled it stops, keeps
// every finished cell and returns ctx's error.
func Run(ctx context.Context, s *Spec, opt Options) (*Outcome, error) {
	start := time.Now()
	if opt.Out == "" {
		return nil, errors.New("experiment: Options.Out is empty")
	}
	if opt.MethodWorkers < 1 {
		opt.MethodWorkers = 1
	}
	if opt.Workers < 1 {
		opt.Workers = max(1, runtime.NumCPU()/opt.MethodWorkers)
	}
	plan, err := Expand(s)
	if err != nil {
		return nil, err
	}
	st, err := openStore(filepath.Join(opt.Out, "cells.jsonl"))
	if err != nil {
		return nil, err
	}
	defer st.close()
	r := &runner{plan: plan, opt: opt, st: st, data: map[string]*dataEntry{}}
	out := &Outcome{Spec: s, Plan: plan, Chosen: map[string]Choice{}, command: opt.Command}
	if out.command == "" {
		out.command = "privrec experiment run " + s.Name
	}
	total := plan.NumCells()
	r.total = total
	r.bar = progress.New(opt.Progress, int64(total), s.Name, "cells")
	defer r.bar.Finish()

	// Phase 1: cross-validation of the methods with a grid.
	var cv []*Cell
	for _, u := range plan.units {
		cv = append(cv, plan.cvCells(u)...)
	}
	if err := r.runAll(ctx, cv); err != nil {
		return nil, err
	}
	// Phase 2: the test cells, with the chosen parameters.
	var test []*Cell
	for _, u := range plan.units {
		params := u.params
		if len(u.grid) > 0 {
			ch := r.choose(u)
			out.Chosen[unitName(u)] = ch
			params = maps.Clone(params)
			maps.Copy(params, ch.Params)
		}
		test = append(test, plan.testCells(u, params)...)
	}
	if err := r.runAll(ctx, test); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, c := range append(cv, test...) {
		if rec := st.get(c.Key); rec != nil && !seen[c.Key] {
			seen[c.Key] = true
			out.CellTime += time.Duration(rec.Seconds * float64(time.Second))
		}
	}
	for _, c := range test {
		rec := *st.get(c.Key)
		rec.Cell = *c // the label, variant and sweep value of this use
		out.Records = append(out.Records, &rec)
	}
	out.Computed, out.Reused = r.computed, r.reused
	out.Wall = time.Since(start)
	files, err := writeOutputs(out, opt.Out)
	out.Files = files
	return out, err
}

func unitName(u *unit) string {
	return u.dataset + "/" + u.variant + "/" + u.x + "/" + u.m.label()
}

type runner struct {
	plan  *Plan
	opt   Options
	st    *store
	bar   *progress.Bar
	mu    sync.Mutex
	data  map[string]*dataEntry
	done  int
	total int

	computed, reused int
}

// dataEntry caches a loaded dataset and its outer splits by seed.
type dataEntry struct {
	once   sync.Once
	d      *ratings.Dataset
	err    error
	mu     sync.Mutex
	splits map[uint64]*splitEntry
	inner  map[string]*splitEntry
}

type splitEntry struct {
	once   sync.Once
	splits []ratings.Split
	err    error
}

// Cell outcomes counted by tick.
const (
	cellComputed = iota
	cellReused   // found in the store
	cellShared   // same key as another cell of this run
)

func (r *runner) tick(how int) {
	r.mu.Lock()
	r.done++
	switch how {
	case cellReused:
		r.reused++
	case cellComputed:
		r.computed++
	}
	n := r.computed
	r.mu.Unlock()
	r.bar.Add(1)
	if how == cellComputed && r.opt.OnComputed != nil {
		r.opt.OnComputed(n)
	}
}

// runAll runs the cells not in the store on opt.Workers goroutines; cells
// with the same key run once.
func (r *runner) runAll(ctx context.Context, cells []*Cell) error {
	var todo []*Cell
	seen := map[string]bool{}
	for _, c := range cells {
		if seen[c.Key] {
			r.tick(cellShared)
			continue
		}
		seen[c.Key] = true
		if r.st.get(c.Key) != nil {
			r.tick(cellReused)
			continue
		}
		todo = append(todo, c)
	}
	if len(todo) == 0 {
		return ctx.Err()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan *Cell)
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	for range min(r.opt.Workers, len(todo)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range ch {
				rec, err := r.exec(ctx, c)
				if err == nil {
					err = r.st.put(rec)
				}
				if err != nil {
					errOnce.Do(func() {
						firstErr = err
						if ctx.Err() == nil {
							firstErr = fmt.Errorf("experiment %s: cell %s %s/%s/%s seed %d fold %d: %w",
								r.plan.Spec.Name, c.Kind, c.Dataset, c.Label, c.X, c.Seed, c.Fold, err)
						}
						cancel()
					})
					continue
				}
				r.tick(cellComputed)
			}
		}()
	}
feed:
	for _, c := range todo {
		select {
		case ch <- c:
		case <-ctx.Done():
			break feed
		}
	}
	close(ch)
	wg.Wait()
	if firstErr != nil {
		if errors.Is(firstErr, context.Canceled) && ctx.Err() != nil {
			return fmt.Errorf("experiment %s: interrupted: %w", r.plan.Spec.Name, context.Canceled)
		}
		return firstErr
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("experiment %s: interrupted: %w", r.plan.Spec.Name, err)
	}
	return nil
}

// dataset returns the preprocessed dataset named name.
func (r *runner) dataset(name string) (*dataEntry, error) {
	r.mu.Lock()
	e := r.data[name]
	if e == nil {
		e = &dataEntry{splits: map[uint64]*splitEntry{}, inner: map[string]*splitEntry{}}
		r.data[name] = e
	}
	r.mu.Unlock()
	e.once.Do(func() {
		e.d, e.err = openData(name, r.opt.DataRoot)
		if e.err != nil {
			return
		}
		pre := r.plan.Spec.Preprocess
		if pre.MinUserRatings > 0 || pre.MinItemRatings > 0 {
			e.d = ratings.MinCounts(e.d, pre.MinUserRatings, pre.MinItemRatings)
		}
		if e.d.Len() == 0 {
			e.err = fmt.Errorf("experiment: %s: no ratings left after preprocessing", name)
		}
	})
	return e, e.err
}

// openData opens a dataset, trying root/name first.
func openData(name, root string) (*ratings.Dataset, error) {
	spec := name
	if root != "" && name != datasets.Default {
		if p := filepath.Join(root, name); exists(p) {
			spec = p
		}
	}
	var opt ratings.LoadOptions
	if s, ok := datasets.DeclaredScale(name); ok {
		opt.Scale = &s // a file under a known dataset's folder
	}
	d, _, err := datasets.Open(spec, opt)
	if err != nil {
		return nil, err
	}
	if spec != name {
		d.Name = name
	}
	return d, nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// outer returns the train/test splits of seed.
func (r *runner) outer(e *dataEntry, seed uint64) ([]ratings.Split, error) {
	e.mu.Lock()
	se := e.splits[seed]
	if se == nil {
		se = &splitEntry{}
		e.splits[seed] = se
	}
	e.mu.Unlock()
	se.once.Do(func() {
		sp, _ := ratings.ParseSplit(r.plan.Spec.Split)
		se.splits, se.err = sp.Apply(e.d, seed)
	})
	return se.splits, se.err
}

// applyData applies the data parameters to one split.
func (r *runner) applyData(sp ratings.Split, data map[string]string, seed uint64) (ratings.Split, error) {
	if v, ok := data[DataTrainFraction]; ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return sp, fmt.Errorf("%s %q: not a number", DataTrainFraction, v)
		}
		if f < 1 {
			tr, err := ratings.SubsampleUsers(sp.Train, f, seed)
			if err != nil {
				return sp, err
			}
			sp.Train = tr
		}
	}
	for _, name := range []string{DataVendors, DataItemVendors} {
		v, ok := data[name]
		if !ok {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > r.plan.Spec.Vendors {
			return sp, fmt.Errorf("%s %q: want an integer in [1, %d]", name, v, r.plan.Spec.Vendors)
		}
		sp = vendorSplit(sp, n, r.plan.Spec.Vendors, seed, name == DataItemVendors)
	}
	return sp, nil
}

// The random streams of the vendor assignments.
const (
	rngVendors     uint64 = 0x76656e64 // "vend"
	rngItemVendors uint64 = 0x6976656e // "iven"
)

// vendorSplit assigns each user (or, with byItem, each item) of sp to one
// of `of` vendors uniformly at random, keeps the training ratings of
// vendors 0..n−1 and the test ratings of vendor 0: vendor 0's view when n−1
// other vendors pool their data with it.
func vendorSplit(sp ratings.Split, n, of int, seed uint64, byItem bool) ratings.Split {
	stream, rows, ids := rngVendors, sp.Train.NumUsers(), func(d *ratings.Dataset) []int32 { return d.Users }
	if byItem {
		stream, rows, ids = rngItemVendors, sp.Train.NumItems(), func(d *ratings.Dataset) []int32 { return d.Items }
	}
	rg := rng.New(seed, stream)
	owner := make([]int, rows)
	for x := range owner {
		owner[x] = rg.IntN(of)
	}
	vendor := func(x int32) int { // the splits share the index space; -1 guards
		if int(x) < len(owner) {
			return owner[x]
		}
		return -1
	}
	sp.Train = keepRows(sp.Train, ids(sp.Train), func(x int32) bool { v := vendor(x); return v >= 0 && v < n })
	sp.Test = keepRows(sp.Test, ids(sp.Test), func(x int32) bool { return vendor(x) == 0 })
	return sp
}

// keepRows returns the ratings k of d for which keep(row[k]) holds.
func keepRows(d *ratings.Dataset, row []int32, keep func(int32) bool) *ratings.Dataset {
	idx := make([]int, 0, d.Len())
	for k, x := range row {
		if keep(x) {
			idx = append(idx, k)
		}
	}
	return d.Subset(idx)
}

// trainTest returns the training and evaluation data of c.
func (r *runner) trainTest(c *Cell) (train, test *ratings.Dataset, err error) {
	e, err := r.dataset(c.Dataset)
	if err != nil {
		return nil, nil, err
	}
	if c.Kind == KindTest {
		splits, err := r.outer(e, c.Seed)
		if err != nil {
			return nil, nil, err
		}
		sp, err := r.applyData(splits[c.Fold], c.Data, c.Seed)
		return sp.Train, sp.Test, err
	}
	// CV: inner splits of the first seed's (first fold's) training part.
	dk := fmt.Sprint(sortedPairs(c.Data))
	e.mu.Lock()
	se := e.inner[dk]
	if se == nil {
		se = &splitEntry{}
		e.inner[dk] = se
	}
	e.mu.Unlock()
	se.once.Do(func() {
		splits, err := r.outer(e, c.Seed)
		if err != nil {
			se.err = err
			return
		}
		sp, err := r.applyData(splits[0], c.Data, c.Seed)
		if err != nil {
			se.err = err
			return
		}
		cv := r.plan.Spec.CV
		if cv.Holdout > 0 {
			h, err := ratings.Holdout(sp.Train, cv.Holdout, c.Seed^rngCV)
			se.splits, se.err = []ratings.Split{h}, err
			return
		}
		se.splits, se.err = ratings.KFold(sp.Train, cv.Folds, c.Seed^rngCV)
	})
	if se.err != nil {
		return nil, nil, se.err
	}
	return se.splits[c.Fold].Train, se.splits[c.Fold].Test, nil
}

// rngCV separates the inner CV splits from the outer split of a seed.
const rngCV uint64 = 0x6376_0000_0000 // "cv"

// exec runs one cell.
func (r *runner) exec(ctx context.Context, c *Cell) (*Record, error) {
	train, test, err := r.trainTest(c)
	if err != nil {
		return nil, err
	}
	params := maps.Clone(c.Params)
	if _, ok := params["workers"]; ok {
		params["workers"] = strconv.Itoa(r.opt.MethodWorkers)
	}
	var curve []Num
	hook := func(p method.Progress) { curve = append(curve, Num(p.TrainRMSE)) }
	start := time.Now()
	spec, err := method.Lookup(c.Method)
	if err != nil {
		return nil, err
	}
	cfg, err := spec.Configure(params)
	if err != nil {
		return nil, err
	}
	// An experiment measures, it releases nothing: its private methods run
	// in the test mode, so a cell's noise is its seed's and reruns agree
	// (the Result's note says the model is not a release).
	m, res, err := spec.Fit(method.WithTestMode(ctx), train, cfg, c.Seed*1_000_003+uint64(c.Fold), hook)
	if errors.Is(err, method.ErrDiverged) {
		// A setting that diverges is a result: NaN metrics, marked, and
		// never chosen by cross-validation.
		nan := Num(math.NaN())
		return &Record{Cell: *c, Metrics: map[string]Num{"rmse": nan, "mse": nan, "mae": nan},
			Stats: map[string]Num{"diverged": 1}, Train: train.Len(), Test: test.Len(),
			Seconds: time.Since(start).Seconds(), Finished: time.Now().UTC()}, nil
	}
	if err != nil {
		return nil, err
	}
	secs := time.Since(start).Seconds()
	e := eval.Rating(m, test)
	rec := &Record{Cell: *c, Metrics: map[string]Num{"rmse": Num(e.RMSE), "mse": Num(e.MSE), "mae": Num(e.MAE)},
		Train: train.Len(), Test: test.Len(), Seconds: secs, Finished: time.Now().UTC()}
	if slices.ContainsFunc(curve, func(x Num) bool { return !math.IsNaN(float64(x)) }) {
		rec.Curve = curve
	}
	if res != nil {
		rec.Privacy = privacyOf(res.Privacy)
		if len(res.Stats) > 0 {
			rec.Stats = map[string]Num{}
			for k, v := range res.Stats {
				rec.Stats[k] = Num(v)
			}
		}
	}
	s := r.plan.Spec
	if c.Kind == KindTest {
		if slices.Contains(s.Metrics, "auc") {
			rk := eval.Rank(m, train, test, s.Rank.K, float32(s.Rank.Relevant))
			rec.Metrics["auc"] = Num(rk.AUC)
			rec.Metrics["precision"] = Num(rk.Precision)
			rec.Metrics["recall"] = Num(rk.Recall)
			rec.Metrics["ndcg"] = Num(rk.NDCG)
		}
		if slices.Contains(s.Metrics, "cdf") {
			for _, f := range eval.ErrorCDF(m, test, s.CDF) {
				rec.CDF = append(rec.CDF, Num(f))
			}
		}
	}
	return rec, nil
}

// choose picks u's grid point with the smallest mean validation error.
func (r *runner) choose(u *unit) Choice {
	metric := r.plan.Spec.CV.Metric
	best := Choice{Score: math.Inf(1), Metric: metric, Points: len(u.grid)}
	cells := r.plan.cvCells(u)
	for g := range u.grid {
		var sum float64
		n := 0
		for _, c := range cells {
			if c.Grid != g {
				continue
			}
			if rec := r.st.get(c.Key); rec != nil {
				sum += float64(rec.Metrics[metric])
				n++
			}
		}
		score := sum / float64(n)
		if n > 0 && score < best.Score { // NaN never wins
			best.Score = score
			best.Params = Params{}
			for name := range u.m.Grid {
				best.Params[name] = u.grid[g][name]
			}
		}
	}
	if best.Params == nil { // every point diverged: the first one
		best.Params = Params{}
		for name := range u.m.Grid {
			best.Params[name] = u.grid[0][name]
		}
	}
	return best
}
