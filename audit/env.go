package audit

import (
	"context"
	"fmt"
	"io"
	"math"

	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

// Random stream labels of the audit under Config.Seed.
const (
	streamEval   uint64 = 0x41554430 + iota // "AUD0": which unrated items are scored
	streamBoot                              // bootstrap resamples
	streamSecret                            // B' redrawn by the prr-redrawn control's clients
)

// env is what every case of a run shares: the data and the sizes.
type env struct {
	cfg      Config
	data     *ratings.Dataset
	dataDesc string

	// inversion: training rounds of the observed runs.
	invRounds int
	// average: rounds observed, restart period, checkpoints of the curve.
	avgRounds, restartEvery int
	// shape: rounds of the SDMF run observed.
	shapeRounds int
	// server-h: independent items (samples) per neighbouring input.
	hItems int
	// grid: training rounds of the observed runs.
	gridRounds int

	// cache holds observations that several rows score.
	cache map[string]any
}

// quickUsers is the number of users the quick audit keeps.
const quickUsers = 200

func newEnv(cfg Config) (*env, error) {
	e := &env{cfg: cfg, cache: map[string]any{}}
	d := cfg.Data
	if d == nil {
		var err error
		d, err = ratings.Synthetic(ratings.SyntheticConfig{
			Users: 300, Items: 400, Rank: 3, PerUser: 30, MinPerUser: 10, Zipf: 0.8, Noise: 0.3,
		}, cfg.Seed+1)
		if err != nil {
			return nil, err
		}
		d.Name = "synthetic"
		// Real items differ in quality (a film most people like): give
		// every item an offset, so that users broadly agree on which items
		// are better, as in MovieLens.
		r := rng.New(cfg.Seed, streamEval, 1<<40)
		off := make([]float64, d.NumItems())
		for j := range off {
			off[j] = 0.8 * r.NormFloat64()
		}
		for k, j := range d.Items {
			d.Values[k] = d.Scale.Clamp(float32(math.Round(float64(d.Values[k]) + off[j])))
		}
	}
	if d.Len() == 0 {
		return nil, fmt.Errorf("%w: the data set has no ratings", ErrUsage)
	}
	name := d.Name
	if name == "" {
		name = "data"
	}
	if cfg.Quick && d.NumUsers() > quickUsers {
		var idx []int
		for k, u := range d.Users {
			if u < quickUsers {
				idx = append(idx, k)
			}
		}
		d = ratings.Compact(d.Subset(idx))
		name += fmt.Sprintf(" (first %d users)", quickUsers)
	} else {
		d = ratings.Compact(d)
	}
	e.data = d
	e.dataDesc = fmt.Sprintf("%s: %d users, %d items, %d ratings", name, d.NumUsers(), d.NumItems(), d.Len())
	if cfg.Quick {
		e.invRounds, e.avgRounds, e.restartEvery, e.shapeRounds, e.hItems = 5, 300, 30, 50, 100000
		e.gridRounds = 10
	} else {
		e.invRounds, e.avgRounds, e.restartEvery, e.shapeRounds, e.hItems = 8, 1000, 25, 200, 1000000
		e.gridRounds = 30
	}
	return e, nil
}

// observe runs produce, which writes a protocol transcript to the writer it
// is given, and hands every record to consume as it is written: the
// attacker reads exactly what the server received, streamed, so no
// transcript has to fit in memory or on disk.
func observe(ctx context.Context, produce func(w io.Writer) error, consume func(h protocol.TranscriptHeader, rec *protocol.Record) error) error {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := produce(pw)
		pw.CloseWithError(err)
		done <- err
	}()
	cerr := func() error {
		tr, err := protocol.NewTranscriptReader(pr)
		if err != nil {
			return err
		}
		h := tr.Header()
		for {
			if err := ctx.Err(); err != nil {
				return err
			}
			rec, err := tr.Next()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if err := consume(h, rec); err != nil {
				return err
			}
		}
	}()
	pr.CloseWithError(fmt.Errorf("audit: observer stopped"))
	perr := <-done
	if cerr != nil {
		return cerr
	}
	return perr
}
