package protocol

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/privrec/privrec/secagg"
)

// wordsClient uploads a fixed random integer vector in every round that
// asks for words.
type wordsClient struct {
	id    int
	words []uint32
}

func (c *wordsClient) ID() int { return c.id }
func (c *wordsClient) Round(b *Broadcast, _ *rand.Rand) (*Upload, error) {
	if b.Words == 0 {
		return nil, nil
	}
	return &Upload{Client: c.id, Round: b.Round, Words: c.words}, nil
}

// TestMaskedSum: the real SecAgg+ protocol in process and the direct sum
// give the same bytes, the sum mod 2^Bits of the clients' words.
func TestMaskedSum(t *testing.T) {
	const n, words, bits = 40, 64, 20
	r := rand.New(rand.NewPCG(1, 2))
	var clients []Client
	want := make([]uint32, words)
	for k := range n {
		w := make([]uint32, words)
		for d := range w {
			w[d] = r.Uint32() & (1<<bits - 1)
			want[d] = (want[d] + w[d]) & (1<<bits - 1)
		}
		clients = append(clients, &wordsClient{id: k, words: w})
	}
	b := &Broadcast{Round: 3, Phase: PhaseTrain, NumItems: 1, Words: words, Bits: bits}
	for _, real := range []SumProtocol{nil, secagg.SimulateSum} {
		tr, err := NewInMem(clients, 2, 1)
		if err != nil {
			t.Fatal(err)
		}
		m := NewMaskedSum(tr, 9)
		m.Protocol = real
		ups, err := m.Exchange(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		if len(ups) != 1 || ups[0].Client != -1 || !slices.Equal(ups[0].Words, want) {
			t.Fatalf("protocol %t: got %v, want one sum %v", real != nil, ups, want[:4])
		}
	}
	// A word at or above 2^Bits is refused.
	clients[0].(*wordsClient).words[0] = 1 << bits
	tr, _ := NewInMem(clients, 2, 1)
	if _, err := NewMaskedSum(tr, 9).Exchange(context.Background(), b); err == nil {
		t.Fatal("a word beyond the modulus was summed")
	}
}

func TestParseAggregation(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Aggregation
		ok   bool
	}{{"masked", AggMasked, true}, {"ideal", AggIdeal, true}, {"off", AggOff, true},
		{"true", AggIdeal, true}, {"false", AggOff, true}, {"MASKED", AggMasked, true}, {"on", 0, false}} {
		got, err := ParseAggregation(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("ParseAggregation(%q) = %v, %v", tc.in, got, err)
		}
		if tc.ok && got.String() != tc.want.String() {
			t.Errorf("String of %v", got)
		}
	}
}
