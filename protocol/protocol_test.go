package protocol

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
)

// sumServer averages the clients' noisy per-item values into V each round.
type sumServer struct {
	numItems, dim, rounds, round int
	v                            []float32
	b                            Broadcast
}

func newSumServer(numItems, dim, rounds int) *sumServer {
	return &sumServer{numItems: numItems, dim: dim, rounds: rounds, v: make([]float32, numItems*dim)}
}

func (s *sumServer) Broadcast(round int) (*Broadcast, error) {
	s.b = Broadcast{Round: round, Phase: PhaseTrain, Dim: s.dim, NumItems: s.numItems, V: s.v, Params: map[string]float64{"lr": 0.5}}
	return &s.b, nil
}

func (s *sumServer) Aggregate(round int, ups []*Upload) error {
	sum := make([]float32, len(s.v))
	cnt := make([]int32, s.numItems)
	for _, u := range ups {
		if u == nil {
			continue
		}
		for k, i := range u.Items {
			cnt[i] += u.Counts[k]
			for d := 0; d < s.dim; d++ {
				sum[int(i)*s.dim+d] += u.Values[k*s.dim+d]
			}
		}
	}
	for i := 0; i < s.numItems; i++ {
		if cnt[i] == 0 {
			continue
		}
		for d := 0; d < s.dim; d++ {
			s.v[i*s.dim+d] += 0.5 * (sum[i*s.dim+d]/float32(cnt[i]) - s.v[i*s.dim+d])
		}
	}
	s.round++
	return nil
}

func (s *sumServer) Done() bool { return s.round >= s.rounds }

// noisyClient uploads its private values plus noise for its items.
type noisyClient struct {
	id    int
	items []int32
	vals  []float32
	up    Upload
	fail  bool
}

func (c *noisyClient) ID() int { return c.id }

func (c *noisyClient) Round(b *Broadcast, r *rand.Rand) (*Upload, error) {
	if c.fail {
		return nil, errors.New("boom")
	}
	if len(c.items) == 0 {
		return nil, nil
	}
	c.up.Client, c.up.Round, c.up.Items = c.id, b.Round, c.items
	c.up.Values = c.up.Values[:0]
	c.up.Counts = c.up.Counts[:0]
	for k := range c.items {
		for d := 0; d < b.Dim; d++ {
			c.up.Values = append(c.up.Values, c.vals[k]+float32(r.NormFloat64()))
		}
		c.up.Counts = append(c.up.Counts, 1)
	}
	return &c.up, nil
}

func makeClients(n, numItems int, seed uint64) []Client {
	r := rand.New(rand.NewPCG(seed, 1))
	cs := make([]Client, n)
	for k := range cs {
		c := &noisyClient{id: k}
		for i := 0; i < numItems; i++ {
			if r.IntN(4) == 0 {
				c.items = append(c.items, int32(i))
				c.vals = append(c.vals, float32(r.IntN(5)+1))
			}
		}
		cs[k] = c
	}
	return cs
}

func runSum(t *testing.T, workers int, seed uint64, tr io.Writer) []float32 {
	t.Helper()
	srv := newSumServer(50, 3, 4)
	err := Run(context.Background(), srv, makeClients(2000, 50, 7), RunOptions{Workers: workers, Seed: seed, Transcript: tr, Header: TranscriptHeader{Method: "sum"}})
	if err != nil {
		t.Fatal(err)
	}
	return srv.v
}

func TestRunDeterministicAcrossWorkers(t *testing.T) {
	want := runSum(t, 1, 42, nil)
	for _, w := range []int{2, 8} {
		got := runSum(t, w, 42, nil)
		for k := range want {
			if got[k] != want[k] {
				t.Fatalf("workers %d: V[%d] = %v, want %v (1 worker)", w, k, got[k], want[k])
			}
		}
	}
	other := runSum(t, 2, 43, nil)
	same := true
	for k := range want {
		same = same && other[k] == want[k]
	}
	if same {
		t.Fatal("seeds 42 and 43 gave identical results")
	}
}

func TestTranscriptRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	v := runSum(t, 2, 9, &buf)
	tr, err := NewTranscriptReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if h := tr.Header(); h.Method != "sum" || h.Seed != 9 || h.NumClients != 2000 {
		t.Fatalf("header %+v", h)
	}
	// Replaying the transcript's uploads through a fresh server must give
	// the same V: the transcript is all the server saw.
	srv := newSumServer(50, 3, 4)
	rounds := 0
	for {
		rec, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.Round != rounds || rec.Broadcast.Round != rounds || len(rec.Uploads) == 0 {
			t.Fatalf("record %d: round %d, %d uploads", rounds, rec.Round, len(rec.Uploads))
		}
		if err := srv.Aggregate(rec.Round, rec.Uploads); err != nil {
			t.Fatal(err)
		}
		rounds++
	}
	if rounds != 4 {
		t.Fatalf("%d rounds in transcript, want 4", rounds)
	}
	for k := range v {
		if srv.v[k] != v[k] {
			t.Fatalf("replayed V[%d] = %v, want %v", k, srv.v[k], v[k])
		}
	}
	if _, err := NewTranscriptReader(bytes.NewReader([]byte("not a transcript"))); !errors.Is(err, ErrTranscript) {
		t.Fatalf("garbage header: err = %v, want ErrTranscript", err)
	}
}

// badServer broadcasts a malformed message.
type badServer struct{ sumServer }

func (s *badServer) Broadcast(round int) (*Broadcast, error) {
	b, _ := s.sumServer.Broadcast(round)
	b.V = b.V[:1]
	return b, nil
}

// liarClient uploads an out-of-range item.
type liarClient struct{ noisyClient }

func (c *liarClient) Round(b *Broadcast, r *rand.Rand) (*Upload, error) {
	return &Upload{Client: c.id, Round: b.Round, Items: []int32{int32(b.NumItems)}}, nil
}

func TestRunErrors(t *testing.T) {
	ctx := context.Background()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		srv     Server
		clients []Client
		want    error
	}{
		{"client error", ctx, newSumServer(5, 2, 2), []Client{&noisyClient{id: 0}, &noisyClient{id: 1, fail: true}}, ErrClient},
		{"duplicate IDs", ctx, newSumServer(5, 2, 2), []Client{&noisyClient{id: 3}, &noisyClient{id: 3}}, ErrClient},
		{"bad broadcast", ctx, &badServer{*newSumServer(5, 2, 2)}, []Client{&noisyClient{id: 0}}, ErrMessage},
		{"bad upload", ctx, newSumServer(5, 2, 2), []Client{&liarClient{noisyClient{id: 0}}}, ErrMessage},
		{"cancelled", cancelled, newSumServer(5, 2, 2), []Client{&noisyClient{id: 0}}, context.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Run(tc.ctx, tc.srv, tc.clients, RunOptions{Workers: 2})
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestRunHooksAndLimit(t *testing.T) {
	var infos []RoundInfo
	srv := newSumServer(10, 2, 3)
	err := Run(context.Background(), srv, makeClients(20, 10, 1), RunOptions{OnRound: func(ri RoundInfo) error {
		infos = append(infos, ri)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 3 || infos[2].Round != 2 || infos[0].Uploads == 0 || infos[0].Items < infos[0].Uploads {
		t.Fatalf("hook infos %+v", infos)
	}
	stop := errors.New("stop")
	err = Run(context.Background(), newSumServer(10, 2, 3), makeClients(5, 10, 1), RunOptions{OnRound: func(RoundInfo) error { return stop }})
	if !errors.Is(err, stop) {
		t.Fatalf("hook error: got %v", err)
	}
	err = Run(context.Background(), newSumServer(10, 2, 30), makeClients(5, 10, 1), RunOptions{MaxRounds: 2})
	if !errors.Is(err, ErrRounds) {
		t.Fatalf("round limit: got %v", err)
	}
}
