package shard

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/privrec/privrec/secagg"
)

// startNATS runs an embedded NATS server with a JetStream file store in
// a temporary directory, listening on 127.0.0.1 at a random port.
func startNATS(tb testing.TB) (*nats.Conn, jetstream.JetStream) {
	tb.Helper()
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: tb.TempDir(), NoSigs: true,
		MaxPayload: 4 << 20,
	})
	if err != nil {
		tb.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		tb.Fatal("nats server not ready")
	}
	tb.Cleanup(s.Shutdown)
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	return nc, js
}

// problem is one secagg round: its parameters, inputs and dropouts.
type problem struct {
	p      secagg.Params
	inputs [][]uint32
	drop   []secagg.Phase
}

func newProblem(n, l, shardsSeed int) problem {
	r := rand.New(rand.NewPCG(uint64(shardsSeed), 7))
	p := secagg.Params{N: n, K: n - 1, T: n/2 + 1, Bits: 24, Len: l}
	p.Seed[0] = byte(shardsSeed)
	pr := problem{p: p, inputs: make([][]uint32, n), drop: make([]secagg.Phase, n)}
	for u := range n {
		pr.inputs[u] = make([]uint32, l)
		for i := range pr.inputs[u] {
			pr.inputs[u][i] = r.Uint32() & (1<<16 - 1)
		}
	}
	// One client drops before its masked input (its pairwise masks must
	// be removed), one before the unmasking (its input stays in).
	pr.drop[1] = secagg.DropBeforeInput
	pr.drop[n-2] = secagg.DropBeforeUnmask
	return pr
}

// plainSum is Σ inputs of the clients that uploaded, mod 2^Bits.
func (pr problem) plainSum() []uint32 {
	out := make([]uint32, pr.p.Len)
	for u, x := range pr.inputs {
		if pr.drop[u] == secagg.DropBeforeInput {
			continue
		}
		for i, v := range x {
			out[i] += v
		}
	}
	for i := range out {
		out[i] &= 1<<pr.p.Bits - 1
	}
	return out
}

// roundHooks lets a test interfere with a round.
type roundHooks struct {
	// beforeUpload runs once every client has masked, before any
	// upload; afterUpload once every client has uploaded, before the
	// close.
	beforeUpload, afterUpload func(masked []*secagg.MaskedInput)
	// aggregators runs the aggregators (default: one goroutine each).
	aggregators func(ctx context.Context, t *testing.T, c Config, round uint64) func() []AggStats
	// onUpload sees each client's upload statistics.
	onUpload func(UploadStats)
	// uploaded runs with the round's coordinator once every client has
	// uploaded (after afterUpload), before the close.
	uploaded func(co *Coordinator, masked []*secagg.MaskedInput)
}

func defaultAggregators(ctx context.Context, t *testing.T, js jetstream.JetStream, c Config, round uint64) func() []AggStats {
	stats := make([]AggStats, c.Shards)
	errs := make([]error, c.Shards)
	var wg sync.WaitGroup
	for s := range c.Shards {
		ag, err := NewAggregator(js, c, s)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { stats[s], errs[s] = ag.Round(ctx, round) })
	}
	return func() []AggStats {
		wg.Wait()
		for s, err := range errs {
			if err != nil {
				t.Errorf("aggregator %d: %v", s, err)
			}
		}
		return stats
	}
}

// runRound runs one round both through the sharded path and through a
// single secagg.Server fed the very same messages, and returns both sums.
func runRound(t *testing.T, nc *nats.Conn, js jetstream.JetStream, c Config, pr problem, round uint64, h roundHooks) (sharded, single []uint32, stats []AggStats) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := pr.p
	co, err := NewCoordinator(ctx, nc, js, c, p, round)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := secagg.NewServer(p)
	if err != nil {
		t.Fatal(err)
	}
	var wait func() []AggStats
	if h.aggregators != nil {
		wait = h.aggregators(ctx, t, c, round)
	} else {
		wait = defaultAggregators(ctx, t, js, c, round)
	}
	both := func(f func(*secagg.Server) error) {
		t.Helper()
		if err := f(co.Server()); err != nil {
			t.Fatal(err)
		}
		if err := f(ref); err != nil {
			t.Fatal(err)
		}
	}
	rnd := rand.NewChaCha8([32]byte{byte(round), 1})
	clients := make([]*secagg.Client, p.N)
	for u := range p.N {
		if clients[u], err = secagg.NewClient(uint32(u), p, rnd); err != nil {
			t.Fatal(err)
		}
		m, err := clients[u].AdvertiseKeys()
		if err != nil {
			t.Fatal(err)
		}
		both(func(s *secagg.Server) error { return s.AddKeys(m) })
	}
	kb, err := co.Server().FinishKeys()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ref.FinishKeys(); err != nil {
		t.Fatal(err)
	}
	for _, b := range kb {
		m, err := clients[b.To].ShareKeys(b)
		if err != nil {
			t.Fatal(err)
		}
		both(func(s *secagg.Server) error { return s.AddShares(m) })
	}
	sd, err := co.Server().FinishShares()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ref.FinishShares(); err != nil {
		t.Fatal(err)
	}
	if err := co.Listen(); err != nil {
		t.Fatal(err)
	}
	var masked []*secagg.MaskedInput
	for _, d := range sd {
		if pr.drop[d.To] == secagg.DropBeforeInput {
			continue
		}
		m, err := clients[d.To].MaskedInput(d, pr.inputs[d.To])
		if err != nil {
			t.Fatal(err)
		}
		masked = append(masked, m)
		if err := ref.AddMaskedInput(m); err != nil {
			t.Fatal(err)
		}
	}
	if h.beforeUpload != nil {
		h.beforeUpload(masked)
	}
	var wg sync.WaitGroup
	for _, m := range masked {
		wg.Go(func() {
			st, err := Upload(ctx, nc, js, co.Config(), round, m)
			if err != nil {
				t.Error(err)
			}
			if h.onUpload != nil {
				h.onUpload(st)
			}
		})
	}
	wg.Wait()
	if h.afterUpload != nil {
		h.afterUpload(masked)
	}
	if h.uploaded != nil {
		h.uploaded(co, masked)
	}
	reqs, err := co.CloseInput(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ref.FinishMaskedInput(); err != nil {
		t.Fatal(err)
	}
	for _, r := range reqs {
		if pr.drop[r.To] == secagg.DropBeforeUnmask {
			continue
		}
		m, err := clients[r.To].Unmask(r)
		if err != nil {
			t.Fatal(err)
		}
		both(func(s *secagg.Server) error { return s.AddUnmask(m) })
	}
	if sharded, err = co.Sum(ctx); err != nil {
		t.Fatal(err)
	}
	stats = wait()
	if single, err = ref.Result(); err != nil {
		t.Fatal(err)
	}
	if err := co.Broadcast(ctx, []byte("next")); err != nil {
		t.Fatal(err)
	}
	return sharded, single, stats
}

func TestShardedSumEqualsSingleServer(t *testing.T) {
	nc, js := startNATS(t)
	defer func(n int) { streamsPerMsg = n }(streamsPerMsg)
	for _, tc := range []struct {
		shards, n, l int
		perMsg       int // mask streams a control message
	}{
		{1, 8, 257, 30_000},
		{2, 10, 1000, 5}, // the mask streams in several parts
		{3, 12, 1001, 1}, // shard boundaries 333, 667: not multiples of 4
		{4, 9, 64, 30_000},
	} {
		streamsPerMsg = tc.perMsg
		t.Run(fmt.Sprintf("S=%d", tc.shards), func(t *testing.T) {
			c := Config{Run: fmt.Sprintf("eq%d", tc.shards), Shards: tc.shards, Len: tc.l, Clients: tc.n, Bits: 24}
			pr := newProblem(tc.n, tc.l, tc.shards)
			got, want, stats := runRound(t, nc, js, c, pr, 1, roundHooks{})
			if !slices.Equal(got, want) {
				t.Fatalf("sharded sum differs from the single server's")
			}
			if !slices.Equal(got, pr.plainSum()) {
				t.Fatalf("sharded sum differs from the plain sum")
			}
			for s, st := range stats {
				if st.Folded != tc.n-1 {
					t.Errorf("shard %d folded %d, want %d", s, st.Folded, tc.n-1)
				}
			}
		})
	}
}

// TestRoundsOfOtherShapes: one run's rounds differ in length, cohort
// and bits within the run's bounds (a deployed run's setup and training
// rounds do); an aborted round that never opened is dropped by its
// aggregators, which go on to the next; a round beyond the bounds is
// refused.
func TestRoundsOfOtherShapes(t *testing.T) {
	nc, js := startNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := Config{Run: "shapes", Shards: 3, Len: 1000, Clients: 12, Bits: 32}
	if err := Setup(ctx, js, c); err != nil {
		t.Fatal(err)
	}
	if err := Abort(ctx, js, c, 1, "a session that failed before it opened"); err != nil {
		t.Fatal(err)
	}
	for s := range c.Shards {
		ag, err := NewAggregator(js, c, s)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ag.Round(ctx, 1); !errors.Is(err, ErrAborted) {
			t.Fatalf("shard %d, aborted round: %v, want ErrAborted", s, err)
		}
	}
	for round, shape := range map[uint64][2]int{2: {8, 257}, 3: {12, 1000}, 4: {7, 31}, 5: {8, 1}, 6: {9, 2}} {
		pr := newProblem(shape[0], shape[1], int(round))
		got, want, _ := runRound(t, nc, js, c, pr, round, roundHooks{})
		if !slices.Equal(got, want) || !slices.Equal(got, pr.plainSum()) {
			t.Fatalf("round %d of %d clients and %d words: sharded sum differs", round, shape[0], shape[1])
		}
	}
	for _, p := range []secagg.Params{{N: 13, K: 12, T: 7, Bits: 24, Len: 100}, {N: 8, K: 7, T: 5, Bits: 24, Len: 1001}} {
		if _, err := NewCoordinator(ctx, nc, js, c, p, 9); err == nil {
			t.Errorf("a round of %d clients and %d words in a run of %d and %d: accepted", p.N, p.Len, c.Clients, c.Len)
		}
	}
}

// TestReplayAndConflictingPieces: a replayed upload's pieces are dropped
// by the duplicate window and its commit answered as admitted, once; the
// same client uploading another vector is refused; a different piece
// for an admitted client (under another message id, stored before the
// client's own) and a piece of a client never admitted change no shard's
// sum.
func TestReplayAndConflictingPieces(t *testing.T) {
	nc, js := startNATS(t)
	c := Config{Run: "replay", Shards: 2, Len: 100, Clients: 8, Bits: 24}
	pr := newProblem(c.Clients, c.Len, 5)
	ctx := context.Background()
	var replay UploadStats
	var replayErr, commitErr error
	hooks := roundHooks{
		beforeUpload: func(masked []*secagg.MaskedInput) {
			for s := range c.Shards {
				a, b := c.Range(s)
				for _, u := range []uint32{masked[1].From, 1} { // 1 dropped before its input
					bad := slices.Clone(masked[1].Y[a:b])
					bad[0]++
					msg := &nats.Msg{Subject: c.upSubject(3, s), Data: encodeWords(bad), Header: nats.Header{}}
					msg.Header.Set(hdrClient, fmt.Sprint(u))
					msg.Header.Set(hdrRound, "3")
					msg.Header.Set(hdrShard, fmt.Sprint(s))
					if _, err := js.PublishMsg(ctx, msg, jetstream.WithMsgID(fmt.Sprintf("evil.%d.%d", u, s))); err != nil {
						t.Fatal(err)
					}
				}
			}
		},
		afterUpload: func(masked []*secagg.MaskedInput) {
			replay, replayErr = Upload(ctx, nc, js, c, 3, masked[0])
			other := &secagg.MaskedInput{From: masked[0].From, Y: slices.Clone(masked[0].Y)}
			other.Y[0] ^= 1
			_, commitErr = Upload(ctx, nc, js, c, 3, other)
		},
	}
	got, want, _ := runRound(t, nc, js, c, pr, 3, hooks)
	if !slices.Equal(got, want) || !slices.Equal(got, pr.plainSum()) {
		t.Fatal("sum changed by replays or conflicting pieces")
	}
	if replay.Duplicates != c.Shards {
		t.Errorf("replay: %d duplicates, want %d", replay.Duplicates, c.Shards)
	}
	if replayErr != nil {
		t.Errorf("replayed upload: %v, want its commit answered as admitted", replayErr)
	}
	if !errors.Is(commitErr, ErrRefused) {
		t.Errorf("commit of other pieces by an admitted client: %v, want ErrRefused", commitErr)
	}
}

// TestPublishedElsewhere: a masked input without words, as a deployed
// server hands its session for a client whose front-end uploaded and
// committed the pieces itself (privrec front), is taken when the
// client's commit was admitted and refused with ErrNotAdmitted for a
// client that committed nothing (here the one that dropped before its
// input); taking it changes neither the admissions nor the sum.
func TestPublishedElsewhere(t *testing.T) {
	nc, js := startNATS(t)
	c := Config{Run: "elsewhere", Shards: 2, Len: 60, Clients: 8, Bits: 24}
	pr := newProblem(c.Clients, c.Len, 11)
	var took, refused []error
	var admitted int
	got, want, _ := runRound(t, nc, js, c, pr, 1, roundHooks{uploaded: func(co *Coordinator, masked []*secagg.MaskedInput) {
		ctx := context.Background()
		for _, m := range masked {
			if !co.IsAdmitted(m.From) {
				t.Errorf("client %d uploaded and is not admitted", m.From)
			}
			took = append(took, co.AddMaskedInput(ctx, &secagg.MaskedInput{From: m.From}))
		}
		refused = append(refused, co.AddMaskedInput(ctx, &secagg.MaskedInput{From: 1}))
		admitted = co.Admitted()
	}})
	for k, err := range took {
		if err != nil {
			t.Errorf("published input %d: %v", k, err)
		}
	}
	if len(took) != c.Clients-1 || admitted != c.Clients-1 {
		t.Errorf("%d published inputs taken, %d admitted; want %d and %d", len(took), admitted, c.Clients-1, c.Clients-1)
	}
	if len(refused) != 1 || !errors.Is(refused[0], ErrNotAdmitted) {
		t.Errorf("a published input of a client that committed nothing: %v, want ErrNotAdmitted", refused)
	}
	if !slices.Equal(got, want) || !slices.Equal(got, pr.plainSum()) {
		t.Fatal("the sum changed")
	}
}

// TestCrashedAggregatorResumes kills shard 1's aggregator mid-round
// (after it folded some pieces, before it acknowledged them), restarts it
// from its checkpoint and durable consumer, and checks the sum.
func TestCrashedAggregatorResumes(t *testing.T) {
	nc, js := startNATS(t)
	c := Config{Run: "crash", Shards: 2, Len: 200, Clients: 12, Bits: 24,
		AckWait: time.Second, CheckpointEvery: 4, MaxAckPending: 8}
	pr := newProblem(c.Clients, c.Len, 9)
	var restarted AggStats
	var crashedAt int
	hooks := roundHooks{aggregators: func(ctx context.Context, t *testing.T, c Config, round uint64) func() []AggStats {
		ag0, err := NewAggregator(js, c, 0)
		if err != nil {
			t.Fatal(err)
		}
		var st0 AggStats
		var err0, err1 error
		var wg sync.WaitGroup
		wg.Go(func() { st0, err0 = ag0.Round(ctx, round) })
		wg.Go(func() {
			ag1, _ := NewAggregator(js, c, 1)
			cctx, crash := context.WithCancel(ctx)
			ag1.OnFold = func(n int) {
				if n == 6 { // the 6th fold is not checkpointed
					crashedAt = n
					crash()
				}
			}
			if _, err := ag1.Round(cctx, round); err == nil {
				err1 = fmt.Errorf("aggregator did not crash")
				return
			}
			ag1 = nil // the crashed process is gone; a new one starts
			ag, _ := NewAggregator(js, c, 1)
			restarted, err1 = ag.Round(ctx, round)
		})
		return func() []AggStats {
			wg.Wait()
			if err0 != nil || err1 != nil {
				t.Fatalf("aggregators: %v, %v", err0, err1)
			}
			return []AggStats{st0, restarted}
		}
	}}
	got, want, _ := runRound(t, nc, js, c, pr, 7, hooks)
	if crashedAt == 0 {
		t.Fatal("the aggregator never crashed")
	}
	if !slices.Equal(got, want) || !slices.Equal(got, pr.plainSum()) {
		t.Fatal("sum after a crash differs from the single server's")
	}
	if restarted.Resumed >= 6 || restarted.Folded != c.Clients-1 {
		t.Errorf("restarted: resumed %d (want < 6: the 6th fold was never checkpointed), folded %d (want %d)", restarted.Resumed, restarted.Folded, c.Clients-1)
	}
}

// TestBackpressure: with a backlog of two pieces a shard and the
// aggregators starting late, clients are held
// back (retries) and the round still completes with the right sum.
func TestBackpressure(t *testing.T) {
	nc, js := startNATS(t)
	c := Config{Run: "bp", Shards: 2, Len: 2000, Clients: 10, Bits: 24, Backlog: 2}
	pr := newProblem(c.Clients, c.Len, 11)
	var retries int
	var mu sync.Mutex
	hooks := roundHooks{aggregators: func(ctx context.Context, t *testing.T, c Config, round uint64) func() []AggStats {
		// Nothing consumes until the aggregators start: nine clients
		// cannot all store a piece in a shard that holds two.
		start := make(chan struct{})
		go func() {
			time.Sleep(300 * time.Millisecond)
			close(start)
		}()
		var inner func() []AggStats
		done := make(chan struct{})
		go func() {
			<-start
			inner = defaultAggregators(ctx, t, js, c, round)
			close(done)
		}()
		return func() []AggStats { <-done; return inner() }
	}}
	hooks.onUpload = func(st UploadStats) {
		mu.Lock()
		retries += st.Retries
		mu.Unlock()
	}
	got, want, _ := runRound(t, nc, js, c, pr, 1, hooks)
	if !slices.Equal(got, want) {
		t.Fatal("sum differs under backpressure")
	}
	if retries == 0 {
		t.Error("no publish was held back by the full stream")
	}
}

// TestAddRange checks the seekable expansion against one AES-128-CTR
// keystream over the whole vector, for offsets in every position of a
// block.
func TestAddRange(t *testing.T) {
	key := [16]byte{1, 2, 3}
	const n = 10000
	blk, _ := aes.NewCipher(key[:])
	ks := make([]byte, 4*n)
	cipher.NewCTR(blk, make([]byte, 16)).XORKeyStream(ks, ks)
	for _, r := range [][2]int{{0, n}, {1, 2}, {3, 4100}, {4097, 9999}, {5000, 5001}, {6, 6}} {
		for _, sub := range []bool{false, true} {
			dst := make([]uint32, r[1]-r[0])
			for i := range dst {
				dst[i] = uint32(i)
			}
			addRange(dst, &key, r[0], sub)
			for i := range dst {
				w := binary.LittleEndian.Uint32(ks[4*(r[0]+i):])
				if sub {
					w = -w
				}
				if dst[i] != uint32(i)+w {
					t.Fatalf("range %v sub=%v: word %d wrong", r, sub, r[0]+i)
				}
			}
		}
	}
}

// TestAggregatorRefusesPieces drives one aggregator by hand: with two
// admitted clients, a piece whose digest is not the admitted one, a
// piece of a client never admitted and a second, different piece of an
// admitted client are refused, and the shard's result is the two
// admitted pieces minus its range of the mask stream.
func TestAggregatorRefusesPieces(t *testing.T) {
	_, js := startNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := Config{Run: "refuse", Shards: 2, Len: 50, Clients: 6, Bits: 32}
	if err := Setup(ctx, js, c); err != nil {
		t.Fatal(err)
	}
	const round, s = 4, 1
	lo, hi := c.Range(s)
	piece := func(u uint32, v uint32) []byte {
		w := make([]uint32, hi-lo)
		for i := range w {
			w[i] = v + uint32(i)
		}
		return encodeWords(w)
	}
	good := map[uint32][]byte{0: piece(0, 100), 1: piece(1, 2000)}
	pub := func(subj string, data []byte, id string, hdr ...string) {
		t.Helper()
		msg := &nats.Msg{Subject: subj, Data: data, Header: nats.Header{}}
		for i := 0; i+1 < len(hdr); i += 2 {
			msg.Header.Set(hdr[i], hdr[i+1])
		}
		if _, err := js.PublishMsg(ctx, msg, jetstream.WithMsgID(id)); err != nil {
			t.Fatal(err)
		}
	}
	pub(c.ctlSubject(round, "open"), encodeOpen(c), "open")
	for u, data := range good {
		d := make([][32]byte, c.Shards)
		d[s] = digest(u, round, s, data)
		pub(c.ctlSubject(round, "admit"), encodeCommit(round, u, d), fmt.Sprint("admit", u))
	}
	pub(c.ctlSubject(round, "close"), []byte{0, 0, 0, 2}, "close")
	key := [16]byte{9}
	pub(c.ctlSubject(round, "unmask"), encodeStreams([]secagg.MaskStream{{Key: key, Sub: true}}), "unmask", hdrPart, "0/1")
	up := func(u uint32, data []byte, id string) {
		pub(c.upSubject(round, s), data, id, hdrClient, fmt.Sprint(u), hdrRound, fmt.Sprint(round), hdrShard, fmt.Sprint(s))
	}
	up(0, piece(0, 7), "bad-digest")
	up(5, piece(5, 100), "not-admitted")
	up(0, good[0], "good0")
	up(0, piece(0, 8), "second")
	up(1, good[1], "good1")

	ag, err := NewAggregator(js, c, s)
	if err != nil {
		t.Fatal(err)
	}
	st, err := ag.Round(ctx, round)
	if err != nil {
		t.Fatal(err)
	}
	if st.Folded != 2 || st.Rejected != 2 || st.Duplicates != 1 || st.Deferred != 0 {
		t.Errorf("stats %+v: want 2 folded, 2 rejected, 1 duplicate, none deferred", st)
	}
	cons, err := js.OrderedConsumer(ctx, c.ctlStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{c.ctlSubject(round, fmt.Sprint("result.", s))}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := next(ctx, cons)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := decodeWords(m.Data())
	g0, _ := decodeWords(good[0])
	g1, _ := decodeWords(good[1])
	want := make([]uint32, hi-lo)
	for i := range want {
		want[i] = g0[i] + g1[i]
	}
	addRange(want, &key, lo, true)
	if !slices.Equal(got, want) {
		t.Fatal("shard result is not the admitted pieces minus the mask range")
	}
}
