package fm

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
	"github.com/privrec/privrec/sdcf"
)

// MethodName is the registry name of SD-FM, and its transcripts' Method.
const MethodName = "sd-fm"

// streamAttrInit labels the server's draw of the attribute factors.
const streamAttrInit uint64 = 0x464d_5344_0000_0001 // "FMSD"

// SDConfig configures TrainSD: SDMF's configuration (package sdcf, which
// runs the clients) over an FM with item features.
type SDConfig struct {
	// Config is SDMF's: Dim counts the item-offset coordinate (k + 1 for k
	// factors), ItemBias must be set, Private selects the randomized
	// response, and Lambda must be positive (the server applies the
	// public prior Λ_v to the FM's parameters itself).
	sdcf.Config
	// Features is IDs (SD-FM is then SDMF, bit for bit) or Items. All is
	// refused: user attributes stay on the device (see the package doc).
	Features Features
	// YearBucket is the width in years of a release-year feature.
	YearBucket int
	// AttrStep, in [0, 1], is the share of its items' common move that an
	// attribute takes each round: the attribute's parameters move by
	// AttrStep × Σ_i x_i G_i / Σ_i x_i² (the least-squares fit of the moves
	// G_i of the rows of the items i carrying it that received gradients,
	// x_i its value in i), and each item's own parameters by the rest of
	// its row's move. 0 leaves the attributes at their initial values.
	AttrStep float64
}

// DefaultSDConfig returns SDMF's defaults (sdcf.DefaultConfig(Squared,
// true)) with features IDs (so that it trains on any rating file; Items
// needs the dataset's item side file), decade buckets and AttrStep 1. On a
// validation split of ML-100K training data (TestTuneSteps) AttrStep
// hardly matters: validation RMSE 0.9661 (0.25), 0.9660 (0.5), 0.9657
// (1), against SDMF's 0.9771. (An earlier server that added the
// attributes' gradient steps on top of the items' scored 0.9570 at its
// best step on that split but diverged in 4 of 5 full ML-100K training
// sets: its rows moved by more than SDMF's server step, which is already
// near SDMF's stability limit. Splitting each row's SDMF move between the
// item and its attributes keeps SDMF's stability.)
func DefaultSDConfig() SDConfig {
	return SDConfig{Config: sdcf.DefaultConfig(sdcf.Squared, true), Features: IDs, YearBucket: 10, AttrStep: 1}
}

// Validate checks the fields of c.
func (c SDConfig) Validate() error {
	if err := c.Config.Validate(); err != nil {
		return err
	}
	switch {
	case c.Loss != sdcf.Squared:
		return fmt.Errorf("%w: SD-FM trains the squared loss", ErrConfig)
	case c.Features == All:
		return fmt.Errorf("%w: features all: SD-FM keeps user attributes on the device and cannot train their shared parameters without revealing them; use items", ErrConfig)
	case c.Features != IDs && c.Features != Items:
		return fmt.Errorf("%w: features %q, want ids or items", ErrConfig, c.Features)
	case !c.ItemBias:
		return fmt.Errorf("%w: SD-FM needs ItemBias (the item row's first coordinate carries the item side's bias)", ErrConfig)
	case !(c.Lambda > 0):
		return fmt.Errorf("%w: SD-FM needs a fixed prior precision Lambda > 0", ErrConfig)
	case !(c.ServerStep > 0):
		return fmt.Errorf("%w: ServerStep = %g must be positive", ErrConfig, c.ServerStep)
	case c.YearBucket < 1:
		return fmt.Errorf("%w: YearBucket = %d must be ≥ 1", ErrConfig, c.YearBucket)
	case !(c.AttrStep >= 0 && c.AttrStep <= 1):
		return fmt.Errorf("%w: AttrStep = %g outside [0, 1]", ErrConfig, c.AttrStep)
	}
	return nil
}

// sdServer holds the FM's public parameters: the biases and factors of
// the item indicators and item attributes. It broadcasts every item's
// collapsed row [b_i, q_i] as SDMF's v_i and maps the gradients it
// receives for the rows back to the parameters (see the package doc).
type sdServer struct {
	enc                 *Encoding
	dim, nItems, rounds int // dim = k + 1
	lr0, gamma          float64
	kappa, pseudo       float64
	lambda              float32
	attrStep            float64
	w, v                []float32 // item indicators then attributes: biases, factors (k each)
	rows, brows         []float32 // collapsed rows and the broadcast copy
	sum                 []float64
	cnt                 []int32
	av                  []float64 // per attribute: Σ_i x·G_i (k + 1), then its move Δ_a
	ax                  []float64 // per attribute: Σ_i x²
	cold                []float64 // per item: its interactions before the round's update
	round               int
	b                   protocol.Broadcast
	fs                  []Feat
	q                   []float32
}

// NewSDServer returns the SD-FM server of cfg over the item features of
// enc. Its item parameters start as sdcf's server's initial V (so that
// with IDs the run is SDMF's), its attribute factors as N(0, InitScale²)
// draws and their biases at 0; it needs only public information.
func NewSDServer(cfg SDConfig, enc *Encoding) (protocol.Stateful, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if enc.UserAttrs != nil {
		return nil, fmt.Errorf("%w: the server's encoding has user attributes", ErrConfig)
	}
	base, err := sdcf.NewServer(cfg.Config, ratings.AnonymousItems(enc.NumItems, ratings.Scale{}), cfg.Config.Seed)
	if err != nil {
		return nil, err
	}
	v0, K1 := base.Factors()
	k, nI, nA := K1-1, enc.NumItems, enc.NumItemAttrs
	s := &sdServer{enc: enc, dim: K1, nItems: nI, rounds: cfg.Rounds, lr0: cfg.LR0, gamma: cfg.Gamma,
		kappa: cfg.ServerStep, pseudo: cfg.ServerPseudo, lambda: float32(cfg.Lambda), attrStep: cfg.AttrStep,
		w: make([]float32, nI+nA), v: make([]float32, (nI+nA)*k), rows: make([]float32, nI*K1), brows: make([]float32, nI*K1),
		sum: make([]float64, nI*K1), cnt: make([]int32, nI), av: make([]float64, nA*K1), ax: make([]float64, nA), cold: make([]float64, nI),
		q: make([]float32, k),
		b: protocol.Broadcast{Phase: protocol.PhaseTrain, Dim: K1, NumItems: nI, Params: map[string]float64{}}}
	for i := range nI {
		s.w[i] = v0[i*K1]
		copy(s.v[i*k:(i+1)*k], v0[i*K1+1:(i+1)*K1])
	}
	r := rng.New(cfg.Seed, streamAttrInit)
	for x := nI * k; x < len(s.v); x++ {
		s.v[x] = float32(r.NormFloat64() * cfg.InitScale)
	}
	s.collapse()
	return s, nil
}

// params returns the FM parameters of the server's features, for
// Params.half: indices 0..nItems-1 are the item indicators, then the
// attributes.
func (s *sdServer) params() *Params { return &Params{Dim: s.dim - 1, W: s.w, V: s.v} }

// itemFeatures returns item i's features in the server's index space.
func (s *sdServer) itemFeatures(i int) []Feat {
	s.fs = append(s.fs[:0], Feat{int32(i), 1})
	if s.enc.ItemAttrs != nil {
		for _, f := range s.enc.ItemAttrs[i] {
			s.fs = append(s.fs, Feat{int32(s.nItems) + f.Index, f.Value})
		}
	}
	return s.fs
}

// interactions returns the interactions among item i's features,
// Σ_{f<g} x_f x_g <v_f, v_g>.
func (s *sdServer) interactions(i int) float64 {
	p := s.params()
	fs := s.itemFeatures(i)
	var lin float64
	for _, f := range fs {
		lin += float64(p.W[f.Index] * f.Value)
	}
	return float64(p.half(fs, s.q)) - lin
}

// collapse recomputes every item's row [b_i, q_i].
func (s *sdServer) collapse() {
	p, K1 := s.params(), s.dim
	for i := range s.nItems {
		row := s.rows[i*K1 : (i+1)*K1]
		row[0] = p.half(s.itemFeatures(i), row[1:])
	}
}

func (s *sdServer) eta(round int) float64 { return s.lr0 / math.Pow(float64(round+1), s.gamma) }

func (s *sdServer) Broadcast(round int) (*protocol.Broadcast, error) {
	if round != s.round {
		return nil, fmt.Errorf("fm: broadcast of round %d, expected %d", round, s.round)
	}
	copy(s.brows, s.rows)
	s.b.Round, s.b.V = round, s.brows
	s.b.Params["eta"] = s.eta(round)
	return &s.b, nil
}

// Aggregate averages the gradients received for each item's row as sdcf's
// server does (G_i: κ times the mean data gradient, the public prior term
// taken out), so that every row that received uploads moves as SDMF would
// move it, and splits that move between the item's own parameters and its
// attributes': each attribute a takes AttrStep times the least-squares
// fit of the moves of its items, Σ_i x_ia G_i / Σ_i x_ia², and each item
// the rest, G_i − Σ_a x_ia Δ_a. The prior Λ shrinks every parameter
// towards 0, so an item's row shrinks towards its attributes' part rather
// than towards 0; a row that received nothing moves with its attributes.
func (s *sdServer) Aggregate(round int, ups []*protocol.Upload) error {
	K1, k := s.dim, s.dim-1
	for _, up := range ups {
		if up == nil {
			continue
		}
		if len(up.Values) != len(up.Items)*K1 {
			return fmt.Errorf("%w: upload of client %d: %d values for %d items × %d", protocol.ErrMessage, up.Client, len(up.Values), len(up.Items), K1)
		}
		for x, j := range up.Items {
			if j < 0 || int(j) >= s.nItems {
				return fmt.Errorf("%w: upload of client %d: item %d outside [0, %d)", protocol.ErrMessage, up.Client, j, s.nItems)
			}
			s.cnt[j]++
			row, g := s.sum[int(j)*K1:(int(j)+1)*K1], up.Values[x*K1:(x+1)*K1]
			for d := range K1 {
				row[d] += float64(g[d])
			}
		}
	}
	eta := s.eta(round)
	lam := s.lambda
	nA := s.enc.NumItemAttrs
	// G_i into sum (in place), for the items that received uploads.
	for i, n := range s.cnt {
		if n == 0 {
			continue
		}
		row, sum := s.rows[i*K1:(i+1)*K1], s.sum[i*K1:(i+1)*K1]
		for d := range K1 {
			prior := eta * float64(lam*row[d])
			sum[d] = s.kappa * (sum[d] - float64(n)*prior) / (float64(n) + s.pseudo)
		}
		if nA == 0 {
			continue
		}
		s.cold[i] = s.interactions(i)
		for _, f := range s.enc.ItemAttrs[i] {
			a, x := int(f.Index), float64(f.Value)
			for d := range K1 {
				s.av[a*K1+d] += x * sum[d]
			}
			s.ax[a] += x * x
		}
	}
	// The attributes' moves Δ_a (into av), then their update with the prior.
	for a := range nA {
		f := s.nItems + a
		va := s.v[f*k : (f+1)*k]
		c := 0.0
		if s.ax[a] > 0 {
			c = s.attrStep / s.ax[a]
		}
		delta := s.av[a*K1 : (a+1)*K1]
		for d := range delta {
			delta[d] *= c
		}
		s.w[f] = float32(float64(s.w[f]) - eta*float64(lam*s.w[f]) - delta[0])
		for d := range k {
			va[d] = float32(float64(va[d]) - eta*float64(lam*va[d]) - delta[1+d])
		}
		s.ax[a] = 0
	}
	// The items: the rest of G_i, with the prior.
	for i, n := range s.cnt {
		if n == 0 {
			continue
		}
		sum := s.sum[i*K1 : (i+1)*K1]
		if nA > 0 {
			for _, f := range s.enc.ItemAttrs[i] {
				a, x := int(f.Index), float64(f.Value)
				for d := range K1 {
					sum[d] -= x * s.av[a*K1+d]
				}
			}
		}
		vi := s.v[i*k : (i+1)*k]
		for d := range k {
			vi[d] = float32(float64(vi[d]) - eta*float64(lam*vi[d]) - sum[1+d])
		}
		if nA > 0 {
			// the bias absorbs the change of the row's own interactions
			sum[0] += s.interactions(i) - s.cold[i]
		}
		s.w[i] = float32(float64(s.w[i]) - eta*float64(lam*s.w[i]) - sum[0])
		clear(sum)
		s.cnt[i] = 0
	}
	clear(s.av)
	s.collapse()
	s.round = round + 1
	for _, x := range s.rows {
		if !(math.Abs(float64(x)) <= 1e3) {
			return fmt.Errorf("%w at round %d: item rows left [−1000, 1000]; lower lr0, server-step or attr-step", ErrDiverged, round+1)
		}
	}
	return nil
}

func (s *sdServer) Done() bool { return s.round >= s.rounds }

// Round returns the next round the server will broadcast.
func (s *sdServer) Round() int { return s.round }

// Factors returns the collapsed item rows [b_i, q_i] and their width k+1:
// the public item half of the model.
func (s *sdServer) Factors() ([]float32, int) { return s.rows, s.dim }

// sdSnapshotVersion is the version byte of the server's snapshot.
const sdSnapshotVersion = 1

type sdSnapshot struct {
	Dim, NumItems, NumAttrs, Round int
	W, V                           []float32
}

// MarshalBinary returns the server's state: the FM's public parameters and
// the next round.
func (s *sdServer) MarshalBinary() ([]byte, error) {
	return protocol.EncodeSnapshot(sdSnapshotVersion, sdSnapshot{Dim: s.dim, NumItems: s.nItems, NumAttrs: s.enc.NumItemAttrs,
		Round: s.round, W: s.w, V: s.v})
}

// UnmarshalBinary restores a state from MarshalBinary into s, a server
// built with the same configuration and encoding.
func (s *sdServer) UnmarshalBinary(data []byte) error {
	var x sdSnapshot
	if err := protocol.DecodeSnapshot(data, sdSnapshotVersion, &x); err != nil {
		return fmt.Errorf("fm: server snapshot: %w", err)
	}
	switch {
	case x.Dim != s.dim || x.NumItems != s.nItems || x.NumAttrs != s.enc.NumItemAttrs || len(x.W) != len(s.w) || len(x.V) != len(s.v):
		return fmt.Errorf("fm: server snapshot of %d items, %d attributes × %d, the server has %d, %d × %d",
			x.NumItems, x.NumAttrs, x.Dim, s.nItems, s.enc.NumItemAttrs, s.dim)
	case x.Round < 0 || x.Round > s.rounds:
		return fmt.Errorf("fm: server snapshot at round %d, outside 0..%d", x.Round, s.rounds)
	}
	copy(s.w, x.W)
	copy(s.v, x.V)
	s.round = x.Round
	s.collapse()
	return nil
}

// SDReport is what TrainSD measured: SDMF's report of the clients and the
// size of the public feature space.
type SDReport struct {
	sdcf.Report
	ItemAttrs, MissingItems int
}

// TrainSD runs SD-FM on train in process: sdcf's clients (ratings, user
// vectors, randomized response and fake gradients on the devices) with
// the FM server over train's item features. cfg.Transcript, when not nil,
// receives what the server sees, headed like SDMF's (Method "sd-fm", Meta
// sdcf's public parameters plus "features", "year_bucket", "attr_step"
// and "item_attrs"). The model is the clients' offsets and user vectors
// with the server's collapsed item rows.
func TrainSD(ctx context.Context, train *ratings.Dataset, cfg SDConfig, hook func(sdcf.RoundStats)) (*model.Model, *SDReport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("fm: %w", err)
	}
	enc, err := Encode(train, cfg.Features, cfg.YearBucket)
	if err != nil {
		return nil, nil, err
	}
	cl, err := sdcf.NewClients(train, cfg.Config)
	if err != nil {
		return nil, nil, err
	}
	srv, err := NewSDServer(cfg, enc)
	if err != nil {
		return nil, nil, err
	}
	meta := cl.TranscriptMeta()
	meta["features"], meta["year_bucket"] = string(cfg.Features), strconv.Itoa(cfg.YearBucket)
	meta["attr_step"], meta["item_attrs"] = strconv.FormatFloat(cfg.AttrStep, 'g', -1, 64), strconv.Itoa(enc.NumItemAttrs)
	opt := protocol.RunOptions{Workers: cfg.Workers, Seed: cfg.Seed, Transcript: cfg.Transcript,
		Header: protocol.TranscriptHeader{Method: MethodName, Meta: meta}}
	if hook != nil {
		opt.OnRound = func(info protocol.RoundInfo) error {
			hook(sdcf.RoundStats{Round: info.Round + 1, Rounds: cfg.Rounds, TrainRMSE: math.NaN(), Uploads: info.Uploads, Items: info.Items})
			return nil
		}
	}
	if err := protocol.Run(ctx, srv, cl.List, opt); err != nil {
		return nil, nil, err
	}
	rows, _ := srv.Factors()
	m, err := cl.Model(slices.Clone(rows))
	if err != nil {
		return nil, nil, err
	}
	return m, &SDReport{Report: *cl.Report(), ItemAttrs: enc.NumItemAttrs, MissingItems: enc.MissingItems}, nil
}
