package audit

import (
	"context"
	"fmt"
	"slices"

	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/hdpmf"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
	"github.com/privrec/privrec/secagg"
)

// maskSpy runs rounds in process and records, for every client upload of
// a masked training round, two views of it as per-item float rows over
// the client's rated items: the unmasked integer vector (the control: what
// a server without secure aggregation would read) and the masked vector
// the client sends under SecAgg+ (what the server reads). It returns the
// round's sum, as MaskedSum does.
type maskSpy struct {
	inner         protocol.Transport
	plain, masked []*protocol.Record
	sum           *protocol.MaskedSum
	fixed         fixedTransport
	// keep, when not nil, receives every upload's dense unmasked and
	// masked words instead of the per-item float rows.
	keep func(b *protocol.Broadcast, u *protocol.Upload, plain, masked []uint32)
}

type fixedTransport struct{ ups []*protocol.Upload }

func (f *fixedTransport) Exchange(context.Context, *protocol.Broadcast) ([]*protocol.Upload, error) {
	return f.ups, nil
}
func (f *fixedTransport) NumClients() int { return len(f.ups) }
func (f *fixedTransport) Close() error    { return nil }

func (s *maskSpy) NumClients() int { return s.inner.NumClients() }
func (s *maskSpy) Close() error    { return nil }

func (s *maskSpy) Exchange(ctx context.Context, b *protocol.Broadcast) ([]*protocol.Upload, error) {
	ups, err := s.inner.Exchange(ctx, b)
	if err != nil {
		return nil, err
	}
	if b.Words > 0 && b.Phase == protocol.PhaseTrain {
		if err := s.record(b, ups); err != nil {
			return nil, err
		}
	}
	s.fixed.ups = ups
	return s.sum.Exchange(ctx, b)
}

// record masks every upload of b with the SecAgg+ client steps and keeps
// both views.
func (s *maskSpy) record(b *protocol.Broadcast, ups []*protocol.Upload) error {
	var given []*protocol.Upload
	for _, u := range ups {
		if u != nil {
			given = append(given, u)
		}
	}
	n := len(given)
	k, t, err := secagg.ChooseParams(n, secagg.DefaultDropout, secagg.DefaultCollusion)
	if err != nil {
		return err
	}
	p := secagg.Params{N: n, K: k, T: t, Bits: b.Bits, Len: b.Words, Seed: rng.Seed(7, uint64(b.Round))}
	dense := make([][]uint32, n)
	for i, u := range given {
		dense[i] = u.DenseWords(b)
	}
	mis, err := secagg.MaskedInputs(p, dense, secaggRand(b.Round))
	if err != nil {
		return err
	}
	bc := *b
	bc.V = slices.Clone(b.V)
	plain := &protocol.Record{Round: b.Round, Broadcast: &bc}
	masked := &protocol.Record{Round: b.Round, Broadcast: &bc}
	for i, u := range given {
		if s.keep != nil {
			s.keep(b, u, dense[i], mis[i].Y)
			continue
		}
		plain.Uploads = append(plain.Uploads, rows(b, u.Client, u.Items, dense[i]))
		masked.Uploads = append(masked.Uploads, rows(b, u.Client, u.Items, mis[i].Y))
	}
	s.plain, s.masked = append(s.plain, plain), append(s.masked, masked)
	return nil
}

// rows decodes the K coordinates of the given items from a dense vector
// (64 units per rating unit, the integer path's scale) into a float
// upload: the attacker is even told which items the client rated.
func rows(b *protocol.Broadcast, client int, items []int32, words []uint32) *protocol.Upload {
	k, stride := b.Dim, b.Words/b.NumItems
	q := dp.Quantizer{Clip: 1, Scale: 64, Bits: b.Bits}
	ints := make([]int64, k)
	up := &protocol.Upload{Client: client, Round: b.Round, Items: items, Values: make([]float32, len(items)*k)}
	for r, j := range items {
		q.Unwrap(words[int(j)*stride:int(j)*stride+k], ints)
		q.Dequantize(ints, up.Values[r*k:(r+1)*k])
	}
	return up
}

type chachaReader struct{ r interface{ Uint64() uint64 } }

func (c chachaReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(c.r.Uint64())
	}
	return len(p), nil
}

func secaggRand(round int) chachaReader { return chachaReader{rng.New(99, uint64(round))} }

// runMasked runs federated MF without noise (the Plain variant) on the
// integer path over d and returns the two views of every client's
// training uploads (see maskSpy).
func runMasked(ctx context.Context, d *ratings.Dataset, rounds int, seed uint64) (*maskSpy, hdpmf.Config, error) {
	cfg := fedConfig(hdpmf.Plain)
	cfg.Aggregation, cfg.Rounds, cfg.Seed, cfg.Workers = protocol.AggMasked, rounds, seed, 1
	srv, err := hdpmf.NewServer(cfg, d.Public(), cfg.Seed)
	if err != nil {
		return nil, cfg, err
	}
	cl, err := hdpmf.NewClients(d, cfg)
	if err != nil {
		return nil, cfg, err
	}
	inner, err := protocol.NewInMem(cl.List, 1, seed)
	if err != nil {
		return nil, cfg, err
	}
	spy := &maskSpy{inner: inner}
	spy.sum = protocol.NewMaskedSum(&spy.fixed, seed)
	err = protocol.RunTransport(ctx, srv, spy, protocol.RunOptions{Seed: seed})
	return spy, cfg, err
}

// scoreMaskedView runs the two-round inversion on one view of the uploads
// and scores it like fedInversion.
func scoreMaskedView(d *ratings.Dataset, recs []*protocol.Record, pseudo float64, seed uint64) (v, lo, hi, raw float64, n, covered int) {
	est := estimates{}
	p := &pairs{}
	p.inv = func(b0, b1 *protocol.Broadcast, up0, up1 *protocol.Upload) { fedInvert(b0, b1, up0, up1, pseudo, est) }
	for _, r := range recs {
		p.observe(r)
	}
	clamped := func(_ int, _ int32, y float64) float64 { return float64(d.Scale.Clamp(float32(y))) }
	truth := func(_ int, _ int32, r float32) float64 { return float64(r) }
	return scoreEstimates(d, est, seed, clamped, truth, d.Mean())
}

// maskedInversion is the inversion against the integer path of federated
// MF without noise: on the unmasked integer vectors (masked false, the
// control: what a server without secure aggregation reads) and on the
// masked vectors the server receives under SecAgg+ (masked true). The
// attacker is even told which items each client rated.
func maskedInversion(masked bool) func(context.Context, *env) (Result, error) {
	return func(ctx context.Context, e *env) (Result, error) {
		d := e.data
		spy, cfg, err := runMasked(ctx, d, e.invRounds, e.cfg.Seed)
		if err != nil {
			return Result{}, err
		}
		recs, view := spy.plain, "unmasked integer vectors"
		if masked {
			recs, view = spy.masked, "masked vectors (SecAgg+)"
		}
		val, lo, hi, raw, n, covered := scoreMaskedView(d, recs, cfg.Pseudo, e.cfg.Seed)
		return Result{
			Case:   map[bool]string{true: "masked", false: "integer, unmasked"}[masked],
			Metric: "calibrated RMSE / global-mean RMSE", Value: val, Lo: lo, Hi: hi, N: n, Baseline: 1,
			Bound: 1 - invMargin, HigherLeaks: false,
			Setting: fmt.Sprintf("fedmf (federated MF, no noise) on the integer path, K = %d, %d rounds, the server reads %s", cfg.Dim, cfg.Rounds, view),
			Note: fmt.Sprintf("estimates for %d of %d ratings; the attacker is told which items each client rated; raw RMSE of the clamped estimates %.4f",
				covered, n, raw),
		}, nil
	}
}
