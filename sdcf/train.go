package sdcf

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/privrec/privrec/accountant"
	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

// Random stream labels under Config.Seed, apart from the clients' streams
// rng.New(Seed, clientID, round) that the transport draws.
const (
	streamLambda uint64 = 0x5344_4346_0000_0000 + iota // "SDCF"
	streamServerInit
	streamClientInit
	streamSecret
)

// Spend is one budget's spending: the largest ε any user spent in one
// round, and the largest total over the run by basic composition.
type Spend struct {
	Round, Total float64
}

// Report is what Train measured.
type Report struct {
	// Clients is the number of users with at least one training rating.
	Clients int
	// EpsG, EpsI, EpsP are the accountant's figures for ε_g (charged every
	// round a user uploads, squared loss only), ε_I (every round) and ε_P
	// (once, at a user's first upload). Zero without Config.Private.
	EpsG, EpsI, EpsP Spend
	// ExistenceTotal bounds the whole run's leak about which items a user
	// rated: the send sets are post-processing of B', so they cost
	// min(EpsP.Total, EpsI.Total), plus EpsG.Total for the fake values.
	ExistenceTotal float64
	// Z is the target uploads per client and round of eq. (12).
	Z float64
	// ExpectedUploads is the mean over clients of h·q* + (|V| − h)·p*
	// (eq. 12) for their own p, q; it equals Z up to rounding.
	ExpectedUploads float64
	// UploadsPerClientRound is the measured mean number of item gradients
	// per upload (a client that drops out sends none and is not counted).
	UploadsPerClientRound float64
	// UnratedFraction is the measured fraction of uploaded item gradients
	// that were for items their client did not rate: SDMF's fake gradients
	// (about 94% on ML-100K at z = |R|/|U|), SD-BPRMF's and BPR's sampled
	// negatives, 0 for SGLD MF. ExpectedUnrated is its eq. (10)-(12)
	// expectation, 1 − Σ h_i q*_i / Σ z_i over the clients (private only).
	// Only the simulation knows these; the server cannot tell.
	UnratedFraction, ExpectedUnrated float64
	// Participation is the fraction of client-rounds with an upload.
	Participation float64
	// TrainRMSE is the final training RMSE (squared loss), NaN for BPR.
	TrainRMSE float64
}

// RoundStats is what Train's hook receives after each round.
type RoundStats struct {
	Round, Rounds int     // finished rounds and the total
	TrainRMSE     float64 // squared loss only, NaN for BPR
	Uploads       int     // clients that uploaded
	Items         int     // item gradients received
}

// Train runs SGLD MF, SDMF, BPR-MF or SD-BPRMF (see the package doc) on
// train with the protocol's in-process transport. hook, when not nil, is
// called after every round; cfg.Transcript, when not nil, receives what
// the server receives.
func Train(ctx context.Context, train *ratings.Dataset, cfg Config, hook func(RoundStats)) (*model.Model, *Report, error) {
	cl, err := NewClients(train, cfg)
	if err != nil {
		return nil, nil, err
	}
	srv, err := NewServer(cfg, train.Public(), cfg.Seed)
	if err != nil {
		return nil, nil, err
	}
	// The hook's training error reads the server's V as it moves.
	cl.m.V, _ = srv.Factors()
	m := cl.m
	opt := protocol.RunOptions{Workers: cfg.Workers, Seed: cfg.Seed, Transcript: cfg.Transcript,
		Header: protocol.TranscriptHeader{Method: cfg.MethodName(), Meta: transcriptMeta(cfg, cl.pub, cl.z)}}
	if hook != nil {
		opt.OnRound = func(info protocol.RoundInfo) error {
			st := RoundStats{Round: info.Round + 1, Rounds: cfg.Rounds, TrainRMSE: math.NaN(), Uploads: info.Uploads, Items: info.Items}
			if cfg.Loss == Squared {
				st.TrainRMSE = eval.Rating(m, train).RMSE
			}
			hook(st)
			return nil
		}
	}
	if err := protocol.Run(ctx, srv, cl.List, opt); err != nil {
		return nil, nil, err
	}
	v, _ := srv.Factors()
	return cl.Finish(v)
}

// drawLambdas returns the precisions Λ_u and Λ_v of cfg: Lambda, or drawn
// from the Gamma prior with cfg.Seed (interleaved per dimension).
func drawLambdas(cfg Config) (lamU, lamV []float32) {
	K := cfg.Dim
	lamU, lamV = make([]float32, K), make([]float32, K)
	lr := rng.New(cfg.Seed, streamLambda)
	for d := range K {
		if cfg.Lambda > 0 {
			lamU[d], lamV[d] = float32(cfg.Lambda), float32(cfg.Lambda)
			continue
		}
		lamU[d] = float32(dp.SampleGamma(lr, cfg.LambdaShape, 1/cfg.LambdaRate))
		lamV[d] = float32(dp.SampleGamma(lr, cfg.LambdaShape, 1/cfg.LambdaRate))
	}
	return lamU, lamV
}

// NewServer returns the server of cfg for the public catalog (only its
// size is read). It needs only public information and draws its own
// randomness from seed, which takes cfg.Seed's place (a run gives the
// clients the same): the initial V and, with Lambda 0, the precisions
// Λ_v, which it then broadcasts every round (Params "lambda-v/0" …).
func NewServer(cfg Config, catalog *ratings.Dataset, seed uint64) (protocol.Stateful, error) {
	cfg.Seed = seed
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	numItems := catalog.NumItems()
	if numItems < 2 {
		return nil, fmt.Errorf("%w: %d items", ErrConfig, numItems)
	}
	_, lamV := drawLambdas(cfg)
	v := make([]float32, numItems*cfg.Dim)
	ir := rng.New(cfg.Seed, streamServerInit)
	for k := range v {
		v[k] = float32(ir.NormFloat64() * cfg.InitScale)
	}
	srv := newServer(cfg.Dim, numItems, cfg.Rounds, cfg.LR0, cfg.Gamma, cfg.serverStep(), lamV, v)
	srv.pseudo = cfg.ServerPseudo
	if cfg.Lambda == 0 {
		srv.lamKeys = lambdaKeys(cfg.Dim)
	}
	return srv, nil
}

// lambdaKeys returns the broadcast parameters of Λ_v.
func lambdaKeys(dim int) []string {
	keys := make([]string, dim)
	for d := range keys {
		keys[d] = "lambda-v/" + strconv.Itoa(d)
	}
	return keys
}

// Clients is the client half of a run: one device per user with training
// ratings, built from the users' own ratings, and the simulation's view
// of them (the model's U and offsets, the ledger of ε spent).
type Clients struct {
	// List holds the clients in increasing user index; List[k].ID() is
	// the user index.
	List  []protocol.Client
	cls   []*client
	pub   *public
	cfg   Config
	train *ratings.Dataset
	m     *model.Model // U and Offset are the clients' backing store
	led   *ledger
	z     float64
	rep   Report // the parts known at construction
}

// NewClients builds the clients of cfg from train, one per user with at
// least one rating, drawing their initial vectors, their Λ_u (with Lambda
// 0) and their PRR secrets from cfg.Seed. Run them with a server from
// NewServer for train.NumItems() items.
func NewClients(train *ratings.Dataset, cfg Config) (*Clients, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	nU, nI, K := train.NumUsers(), train.NumItems(), cfg.Dim
	if train.Len() == 0 || nI < 2 {
		return nil, fmt.Errorf("%w: training set has %d ratings over %d items", ErrConfig, train.Len(), nI)
	}
	pub := &public{loss: cfg.Loss, dim: K, nItems: nI, temp: cfg.Temp, private: cfg.Private,
		epsG: cfg.EpsG, dropout: cfg.Dropout, itemBias: cfg.ItemBias}
	pub.lamU, pub.lamV = drawLambdas(cfg)
	if cfg.Lambda == 0 {
		pub.lamKeys = lambdaKeys(K) // Λ_v is the server's: read off the broadcasts
	}
	// The model: U from the clients (gathered by the evaluation harness,
	// never by the server) and V from the server. For the squared loss
	// each device keeps its mean training rating as Offset and predicts
	// Offset[u] + u·v clamped to the scale; for BPR u·v is a ranking
	// score, not a rating.
	m := &model.Model{
		Dim: K, NumUsers: nU, NumItems: nI, U: make([]float32, nU*K), V: make([]float32, nI*K),
		Default: (train.Scale.Min + train.Scale.Max) / 2, Ranking: cfg.Loss == BPR, Scale: train.Scale,
		UserIDs: slices.Clone(train.UserIDs), ItemIDs: slices.Clone(train.ItemIDs), ItemTitles: slices.Clone(train.ItemTitles),
	}
	if cfg.Loss == Squared {
		m.Offset = make([]float32, nU)
	}

	byUser := train.ByUser()
	var users []int
	for u := range nU {
		if byUser.RowLen(u) > 0 {
			users = append(users, u)
		}
	}
	z := cfg.Z
	if z == 0 {
		z = float64(train.Len()) / float64(len(users))
	}
	cls := make([]*client, len(users))
	expected := make([]float64, len(users))
	realExp := make([]float64, len(users))
	errs := make([]error, len(users))
	parallel(len(users), cfg.Workers, func(k int) {
		cls[k], expected[k], realExp[k], errs[k] = newClient(users[k], byUser, pub, m, cfg, z)
	})
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	c := &Clients{cls: cls, pub: pub, cfg: cfg, train: train, m: m, z: z,
		rep: Report{Clients: len(users), Z: z, TrainRMSE: math.NaN()}}
	var realSum, allSum float64
	for k, e := range expected {
		c.rep.ExpectedUploads += e / float64(len(users))
		realSum, allSum = realSum+realExp[k], allSum+e
	}
	if cfg.Private {
		c.rep.ExpectedUnrated = 1 - realSum/allSum
		var err error
		if c.led, err = newLedger(nU, cfg); err != nil {
			return nil, err
		}
		for _, cl := range cls {
			cl.led = c.led
		}
	}
	c.List = make([]protocol.Client, len(cls))
	for k, cl := range cls {
		c.List[k] = cl
	}
	return c, nil
}

// Model returns a copy of the clients' user vectors (and offsets) with
// the server's final V (train.NumItems()×Dim): the model on train's
// scale. It also sets the V that Report's training error reads.
func (c *Clients) Model(v []float32) (*model.Model, error) {
	if len(v) != len(c.m.V) {
		return nil, fmt.Errorf("%w: V holds %d values, want %d items × %d", ErrConfig, len(v), c.m.NumItems, c.m.Dim)
	}
	copy(c.m.V, v)
	s := c.m
	return &model.Model{
		Dim: s.Dim, NumUsers: s.NumUsers, NumItems: s.NumItems,
		U: slices.Clone(s.U), V: slices.Clone(s.V), Offset: slices.Clone(s.Offset),
		Default: s.Default, Ranking: s.Ranking, Scale: s.Scale,
		UserIDs: s.UserIDs, ItemIDs: s.ItemIDs, ItemTitles: s.ItemTitles,
	}, nil
}

// Finish returns the model with the server's final V (Model) and what the
// clients measured and spent (Report).
func (c *Clients) Finish(v []float32) (*model.Model, *Report, error) {
	m, err := c.Model(v)
	if err != nil {
		return nil, nil, err
	}
	return m, c.Report(), nil
}

// Report returns what the clients measured and spent, with the training
// error of the model as Model last set it.
func (c *Clients) Report() *Report {
	rep := c.rep
	if c.cfg.Loss == Squared {
		rep.TrainRMSE = eval.Rating(c.m, c.train).RMSE
	}
	var ups, sent, unrated int64
	for _, cl := range c.cls {
		ups, sent, unrated = ups+cl.uploads, sent+cl.sent, unrated+cl.unrated
	}
	if ups > 0 {
		rep.UploadsPerClientRound = float64(sent) / float64(ups)
	}
	rep.Participation = float64(ups) / float64(len(c.cls)*c.cfg.Rounds)
	if sent > 0 {
		rep.UnratedFraction = float64(unrated) / float64(sent)
	}
	if c.led != nil {
		rep.EpsG, rep.EpsI, rep.EpsP = spend(c.led.g), spend(c.led.i), spend(c.led.p)
		rep.ExistenceTotal = math.Min(rep.EpsP.Total, rep.EpsI.Total) + rep.EpsG.Total
	}
	return &rep
}

// TranscriptMeta returns the public parameters of the clients' run as a
// transcript header's Meta holds them (see Config.Transcript), for a run
// of these clients with another server (package fm's SD-FM).
func (c *Clients) TranscriptMeta() map[string]string { return transcriptMeta(c.cfg, c.pub, c.z) }

// transcriptMeta returns the public parameters of a run for the
// transcript header (see Config.Transcript).
func transcriptMeta(cfg Config, pub *public, z float64) map[string]string {
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	list := func(x []float32) string {
		s := make([]string, len(x))
		for k, v := range x {
			s[k] = strconv.FormatFloat(float64(v), 'g', -1, 32)
		}
		return strings.Join(s, ",")
	}
	m := map[string]string{
		"loss": cfg.Loss.String(), "private": strconv.FormatBool(cfg.Private),
		"dim": strconv.Itoa(cfg.Dim), "rounds": strconv.Itoa(cfg.Rounds), "lr0": f(cfg.LR0), "gamma": f(cfg.Gamma),
		"temp": f(cfg.Temp), "item_bias": strconv.FormatBool(cfg.ItemBias), "server_step": f(cfg.serverStep()),
		"server_pseudo": f(cfg.ServerPseudo), "dropout": f(cfg.Dropout),
		"lambda_u": list(pub.lamU), "lambda_v": list(pub.lamV),
	}
	if cfg.Private {
		m["eps_i"], m["eps_p"], m["eps_g"], m["z"] = f(cfg.EpsI), f(cfg.EffectiveEpsP()), f(cfg.EpsG), f(z)
	}
	return m
}

// newClient builds user u's device: its sorted ratings, initial u_i and,
// for the private variants, its PRR vector and IRR probabilities. It also
// returns the client's expected uploads per round, eq. (12), and the
// expected number of them for rated items, h·q*.
func newClient(u int, byUser *ratings.CSR, pub *public, m *model.Model, cfg Config, z float64) (*client, float64, float64, error) {
	idx, val := byUser.Row(u)
	h, K := len(idx), pub.dim
	c := &client{id: u, pub: pub, items: make([]int32, h), vals: make([]float32, h), u: m.U[u*K : (u+1)*K],
		err: make([]float32, h), ubar: make([]float64, K)}
	ord := make([]int, h)
	for k := range ord {
		ord[k] = k
	}
	slices.SortFunc(ord, func(a, b int) int { return int(idx[a]) - int(idx[b]) })
	var mean float32
	if m.Offset != nil {
		for _, v := range val {
			mean += v
		}
		mean /= float32(h)
		m.Offset[u] = mean
	}
	for k, o := range ord {
		c.items[k], c.vals[k] = idx[o], val[o]-mean
	}
	if pub.loss == BPR {
		if h >= pub.nItems {
			return nil, 0, 0, fmt.Errorf("%w: user %d rated all %d items: no negatives for BPR", ErrConfig, u, pub.nItems)
		}
		c.negs = make([]int32, h)
	}
	r := rng.New(cfg.Seed, streamClientInit, uint64(u))
	for d := range c.u {
		c.u[d] = float32(r.NormFloat64() * cfg.InitScale)
	}
	if pub.itemBias {
		c.u[0] = 1
	}
	if !pub.private {
		return c, float64(h), float64(h), nil
	}
	rr, err := dp.SolveTwoStageRR(cfg.EffectiveEpsP(), cfg.EpsI, h, pub.nItems, z)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("sdcf: user %d (%d ratings): %w", u, h, err)
	}
	c.rr = rr
	// The per-user PRR secret: random in deployment, derived from the seed
	// here so that runs replay.
	var secret [32]byte
	sr := rng.New(cfg.Seed, streamSecret, uint64(u))
	for k := range secret {
		secret[k] = byte(sr.Uint32())
	}
	src := dp.NewPRRSource(secret[:])
	for j := range int32(pub.nItems) {
		_, rated := c.rated(j)
		if rr.PRR(src, j, rated) {
			c.ones = append(c.ones, j)
		}
	}
	ps, qs := rr.SendProbs()
	return c, float64(h)*qs + float64(pub.nItems-h)*ps, float64(h) * qs, nil
}

// parallel runs f(0..n-1) on workers goroutines.
func parallel(n, workers int, f func(int)) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	next := 0
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				k := next
				next++
				mu.Unlock()
				if k >= n {
					return
				}
				f(k)
			}
		}()
	}
	wg.Wait()
}

// ledger charges the three budgets per user. The clients charge their own
// uploads (bookkeeping on the devices' side: the server only sees who
// sent).
type ledger struct {
	cfg     Config
	g, i, p *accountant.Accountant
}

func newLedger(nUsers int, cfg Config) (*ledger, error) {
	inf := make([]float64, nUsers)
	for k := range inf {
		inf[k] = math.Inf(1)
	}
	l := &ledger{cfg: cfg}
	var err error
	for _, a := range []**accountant.Accountant{&l.g, &l.i, &l.p} {
		if *a, err = accountant.New(inf, accountant.Config{Name: "user", Shards: 1}); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// charge records client u's upload of round: ε_g (squared loss), ε_I,
// and ε_P at its first upload (first true).
func (l *ledger) charge(u, round int, first bool) error {
	if l.cfg.Loss == Squared {
		if err := l.g.Charge(u, round, l.cfg.EpsG, 0, "sdcf/fake-gradients"); err != nil {
			return err
		}
	}
	if err := l.i.Charge(u, round, l.cfg.EpsI, 0, "sdcf/irr"); err != nil {
		return err
	}
	if first {
		if err := l.p.Charge(u, round, l.cfg.EffectiveEpsP(), 0, "sdcf/prr"); err != nil {
			return err
		}
	}
	return nil
}

func spend(a *accountant.Accountant) Spend {
	r := a.Report()
	s := Spend{Total: r.Basic.MaxEps}
	for _, x := range r.Rounds {
		s.Round = math.Max(s.Round, x.MaxEps)
	}
	return s
}
