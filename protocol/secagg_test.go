package protocol

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"testing"
)

// TestSecureSum checks that under secure aggregation the server computes
// the same model (up to float32 summation order) and its transcript holds
// one summed upload per round, never a single client's.
func TestSecureSum(t *testing.T) {
	plain := runSum(t, 2, 5, nil)
	var buf bytes.Buffer
	srv := newSumServer(50, 3, 4)
	clients := makeClients(2000, 50, 7)
	err := Run(context.Background(), srv, clients, RunOptions{Workers: 2, Seed: 5, Aggregation: AggIdeal,
		Transcript: &buf, Header: TranscriptHeader{Method: "sum"}})
	if err != nil {
		t.Fatal(err)
	}
	for k := range plain {
		if d := math.Abs(float64(plain[k] - srv.v[k])); d > 1e-3 {
			t.Fatalf("V[%d] = %v under secure sum, %v plain", k, srv.v[k], plain[k])
		}
	}
	tr, err := NewTranscriptReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	rounds := 0
	for {
		rec, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		rounds++
		if len(rec.Uploads) != 1 || rec.Uploads[0].Client != -1 {
			t.Fatalf("round %d: server received %d uploads (first from client %d), want one sum", rec.Round, len(rec.Uploads), rec.Uploads[0].Client)
		}
		var n int32
		for _, c := range rec.Uploads[0].Counts {
			n += c
		}
		var want int
		for _, c := range clients {
			want += len(c.(*noisyClient).items)
		}
		if int(n) != want {
			t.Errorf("round %d: counts sum to %d, want %d ratings", rec.Round, n, want)
		}
	}
	if rounds != 4 {
		t.Errorf("transcript has %d rounds, want 4", rounds)
	}
}

func TestSecureSumNoUploads(t *testing.T) {
	srv := newSumServer(5, 2, 2)
	clients := []Client{&noisyClient{id: 0}, &noisyClient{id: 1}}
	if err := Run(context.Background(), srv, clients, RunOptions{Aggregation: AggIdeal}); err != nil {
		t.Fatal(err)
	}
}
