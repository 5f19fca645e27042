package secagg

import (
	"crypto/ecdh"

	"fmt"
	"github.com/cloudflare/circl/dh/x25519"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// unmaskCase is a round prepared up to Server.Result: every survivor has
// revealed its shares.
type unmaskCase struct {
	srv  *Server
	want uint32 // the expected sum[1]: the number of survivors
}

var (
	unmaskMu    sync.Mutex
	unmaskCases = map[[2]int]*unmaskCase{}
)

// prepareUnmask runs a round as BenchmarkRound does (ML-1M sized vectors,
// K and T from ChooseParams(n, 0.1, 0.1)) with a fraction dropPct/100 of
// the clients dropping before the masked input, up to the server's
// Result, once per (n, dropPct) and process: the clients' work is not
// what BenchmarkUnmask measures.
func prepareUnmask(b *testing.B, n, dropPct int) *unmaskCase {
	unmaskMu.Lock()
	defer unmaskMu.Unlock()
	if c := unmaskCases[[2]int{n, dropPct}]; c != nil {
		return c
	}
	k, th, err := ChooseParams(n, 0.1, 0.1)
	if err != nil {
		b.Fatal(err)
	}
	p := Params{N: n, K: k, T: th, Bits: 32, Len: 3706 * 10}
	p.Seed[0] = 1
	x := make([]uint32, p.Len)
	for i := range x {
		x[i] = uint32(i)
	}
	drop := dropSome(rand.New(testRand(1)), n, float64(dropPct)/100, DropBeforeInput)
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	srv, err := NewServer(p)
	must(err)
	rnd := testRand(2)
	cs := make([]*Client, n)
	for u := range cs {
		cs[u], err = NewClient(uint32(u), p, rnd)
		must(err)
		m, err := cs[u].AdvertiseKeys()
		must(err)
		must(srv.AddKeys(m))
	}
	kb, err := srv.FinishKeys()
	must(err)
	for _, m := range kb {
		s, err := cs[m.To].ShareKeys(m)
		must(err)
		must(srv.AddShares(s))
	}
	sd, err := srv.FinishShares()
	must(err)
	want := uint32(0)
	for _, d := range sd {
		if drop[d.To] == DropBeforeInput {
			continue
		}
		m, err := cs[d.To].MaskedInput(d, x)
		must(err)
		must(srv.AddMaskedInput(m))
		want++
	}
	ur, err := srv.FinishMaskedInput()
	must(err)
	for _, r := range ur {
		m, err := cs[r.To].Unmask(r)
		must(err)
		must(srv.AddUnmask(m))
	}
	c := &unmaskCase{srv: srv, want: want}
	unmaskCases[[2]int{n, dropPct}] = c
	return c
}

// resultCopy returns a server in the state of s before Result, sharing
// everything Result only reads: Result may run on it once.
func resultCopy(s *Server) *Server {
	return &Server{p: s.p, g: s.g, stage: s.stage, keys: s.keys, sent: s.sent, in3: s.in3,
		unmsk: s.unmsk, sum: slices.Clone(s.sum), self: s.self, mask: s.mask}
}

// BenchmarkUnmask measures Server.Result alone — reconstructing the
// seeds and removing the self masks of the survivors and the pairwise
// masks of the dropped clients — on rounds prepared as BenchmarkRound's
// (the preparation is done once per n and process, outside the timer).
func BenchmarkUnmask(b *testing.B) {
	// drop=10: the rounds of docs/results/secagg/unmask.md; drop=0: only
	// the survivors' self masks to remove (the floor the issue counted).
	for _, dropPct := range []int{10, 0} {
		for _, n := range []int{1000, 6040, 10000} {
			k, th, err := ChooseParams(n, 0.1, 0.1)
			if err != nil {
				b.Fatal(err)
			}
			name := fmt.Sprintf("n=%d/K=%d/T=%d", n, k, th)
			if dropPct != 10 {
				name = fmt.Sprintf("drop=%d/%s", dropPct, name)
			}
			b.Run(name, func(b *testing.B) {
				c := prepareUnmask(b, n, dropPct)
				var cpu time.Duration
				for b.Loop() {
					b.StopTimer()
					s := resultCopy(c.srv)
					b.StartTimer()
					t0 := processCPU()
					sum, err := s.Result()
					cpu += processCPU() - t0
					if err != nil {
						b.Fatal(err)
					}
					if sum[0] != 0 || sum[1] != c.want {
						b.Fatalf("sum[0:2] = %v, want [0 %d]", sum[:2], c.want)
					}
				}
				// CPU seconds a Result, all cores together: less sensitive
				// than ns/op to other processes on a shared machine.
				b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
			})
		}
	}
}

// BenchmarkX25519 compares the two X25519 implementations at hand for the
// server's pairwise agreements (one per dropped client and surviving
// neighbour): crypto/ecdh and circl's dh/x25519.
func BenchmarkX25519(b *testing.B) {
	priv, err := ecdh.X25519().GenerateKey(testRand(1))
	if err != nil {
		b.Fatal(err)
	}
	peer, err := ecdh.X25519().GenerateKey(testRand(2))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("crypto-ecdh", func(b *testing.B) {
		for b.Loop() {
			if _, err := priv.ECDH(peer.PublicKey()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("circl", func(b *testing.B) {
		var s, p, out x25519.Key
		copy(s[:], priv.Bytes())
		copy(p[:], peer.PublicKey().Bytes())
		for b.Loop() {
			if !x25519.Shared(&out, &s, &p) {
				b.Fatal("low-order point")
			}
		}
	})
}
