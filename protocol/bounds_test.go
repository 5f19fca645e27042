package protocol

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/privrec/privrec/secagg"
)

// boundedServer runs masked rounds of small words: each client uploads
// words at most maxWord, so an honest sum has every word at most
// inputs·maxWord. It adds the sums it folds into total.
type boundedServer struct {
	rounds, round, words int
	maxWord              uint32
	total                []uint64
	folded               []bool // per round: Aggregate got a sum
	inputs               []int  // per round: the inputs CheckSum saw
	malformed            bool   // CheckSum fails with a non-bounds error
	b                    Broadcast
}

func (s *boundedServer) Broadcast(round int) (*Broadcast, error) {
	s.b = Broadcast{Round: round, Phase: PhaseTrain, NumItems: 1, Words: s.words, Bits: 32}
	return &s.b, nil
}

func (s *boundedServer) CheckSum(round int, sum *Upload, inputs int) error {
	s.inputs = append(s.inputs, inputs)
	if s.malformed {
		return fmt.Errorf("%w: broken sum", ErrMessage)
	}
	bound := uint64(inputs) * uint64(s.maxWord)
	for k, w := range sum.Words {
		if uint64(w) > bound {
			return fmt.Errorf("%w: round %d word %d = %d above %d", ErrOutOfBounds, round, k, w, bound)
		}
	}
	return nil
}

func (s *boundedServer) Aggregate(round int, ups []*Upload) error {
	got := false
	for _, u := range ups {
		if u == nil {
			continue
		}
		got = true
		for k, w := range u.Words {
			s.total[k] += uint64(w)
		}
	}
	s.folded = append(s.folded, got)
	s.round++
	return nil
}

func (s *boundedServer) Done() bool { return s.round >= s.rounds }

// smallClient uploads random words at most max; from round hostileFrom
// on (when hostileFrom > 0) it adds 2^28 to its first word.
type smallClient struct {
	id          int
	max         uint32
	hostileFrom int
	up          Upload
}

func (c *smallClient) ID() int { return c.id }
func (c *smallClient) Round(b *Broadcast, r *rand.Rand) (*Upload, error) {
	w := make([]uint32, b.Words)
	for k := range w {
		w[k] = uint32(r.IntN(int(c.max) + 1))
	}
	if c.hostileFrom > 0 && b.Round >= c.hostileFrom {
		w[0] += 1 << 28
	}
	c.up = Upload{Client: c.id, Round: b.Round, Words: w}
	return &c.up, nil
}

// TestRunChecksMaskedSums: RunTransport checks every masked sum of a
// SumChecker with the number of inputs, folds the honest ones, and skips
// a sum out of bounds (Aggregate gets nil, the hook sees Rejected) while
// the run goes on; a check failing otherwise stops the run.
func TestRunChecksMaskedSums(t *testing.T) {
	const n, words, rounds = 12, 8, 4
	for _, tc := range []struct {
		name        string
		hostileFrom int // round from which client 3 adds 2^28; 0: never
		protocol    SumProtocol
		rejected    []bool
	}{
		{"honest", 0, nil, []bool{false, false, false, false}},
		{"honest over SecAgg+", 0, secagg.SimulateSum, []bool{false, false, false, false}},
		{"hostile from round 2", 2, nil, []bool{false, false, true, true}},
		{"hostile over SecAgg+", 1, secagg.SimulateSum, []bool{false, true, true, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var clients []Client
			for k := range n {
				c := &smallClient{id: k, max: 100}
				if k == 3 {
					c.hostileFrom = tc.hostileFrom
				}
				clients = append(clients, c)
			}
			srv := &boundedServer{rounds: rounds, words: words, maxWord: 100, total: make([]uint64, words)}
			var infos []RoundInfo
			err := Run(context.Background(), srv, clients, RunOptions{Seed: 4, Aggregation: AggMasked, MaskProtocol: tc.protocol,
				OnRound: func(ri RoundInfo) error { infos = append(infos, ri); return nil }})
			if err != nil {
				t.Fatal(err)
			}
			for r, want := range tc.rejected {
				info := infos[r]
				if got := info.Rejected != nil; got != want || srv.folded[r] == want {
					t.Fatalf("round %d: rejected %v (%v), folded %v; want rejected %v", r, got, info.Rejected, srv.folded[r], want)
				}
				if want && (!errors.Is(info.Rejected, ErrOutOfBounds) || info.Uploads != 0) {
					t.Fatalf("round %d: Rejected %v, Uploads %d", r, info.Rejected, info.Uploads)
				}
				if !want && info.Uploads != 1 {
					t.Fatalf("round %d: %d uploads folded, want the one sum", r, info.Uploads)
				}
				if srv.inputs[r] != n {
					t.Fatalf("round %d: CheckSum saw %d inputs, want %d", r, srv.inputs[r], n)
				}
			}
			var sum uint64
			for _, x := range srv.total {
				sum += x
			}
			if bound := uint64(rounds * n * words * 100); sum > bound {
				t.Fatalf("folded total %d above what honest rounds give (%d): a hostile sum was folded", sum, bound)
			}
		})
	}

	// A check that fails without ErrOutOfBounds stops the run.
	srv := &boundedServer{rounds: 2, words: 4, maxWord: 1, total: make([]uint64, 4), malformed: true}
	err := Run(context.Background(), srv, []Client{&smallClient{id: 0, max: 1}, &smallClient{id: 1, max: 1}}, RunOptions{Aggregation: AggMasked})
	if !errors.Is(err, ErrMessage) || len(srv.folded) != 0 {
		t.Fatalf("malformed sum: err %v, %d rounds folded", err, len(srv.folded))
	}
}

// silentClient never uploads.
type silentClient int

func (c silentClient) ID() int                                       { return int(c) }
func (c silentClient) Round(*Broadcast, *rand.Rand) (*Upload, error) { return nil, nil }

// countingTransport is a transport without SumInputs that returns one
// masked sum of its inner MaskedSum.
type countingTransport struct{ *MaskedSum }

func (c countingTransport) SumInputs() {} // not the SumInputs interface

// TestSumInputsFallsBackToNumClients: a transport that does not report
// its inputs is checked with NumClients, an upper bound.
func TestSumInputsFallsBackToNumClients(t *testing.T) {
	var clients []Client
	for k := range 4 {
		clients = append(clients, &smallClient{id: k, max: 3})
	}
	clients = append(clients, silentClient(4)) // sends nothing: not an input
	tr, err := NewInMem(clients, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	srv := &boundedServer{rounds: 2, words: 3, maxWord: 3, total: make([]uint64, 3)}
	if err := RunTransport(context.Background(), srv, countingTransport{NewMaskedSum(tr, 1)}, RunOptions{}); err != nil {
		t.Fatal(err)
	}
	if srv.inputs[0] != 5 || srv.inputs[1] != 5 {
		t.Fatalf("inputs %v, want NumClients 5", srv.inputs)
	}
	// MaskedSum itself reports the 4 inputs.
	srv = &boundedServer{rounds: 2, words: 3, maxWord: 3, total: make([]uint64, 3)}
	if err := RunTransport(context.Background(), srv, NewMaskedSum(tr, 1), RunOptions{}); err != nil {
		t.Fatal(err)
	}
	if srv.inputs[0] != 4 || srv.inputs[1] != 4 {
		t.Fatalf("inputs %v, want the 4 that uploaded", srv.inputs)
	}
}
