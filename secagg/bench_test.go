package secagg

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// BenchmarkExpander measures the PRG as the protocol uses it.
func BenchmarkExpander(b *testing.B) {
	dst := make([]uint32, benchWords)
	var e expander
	var k [16]byte
	b.SetBytes(4 * benchWords)
	for b.Loop() {
		e.add(dst, &k, false)
	}
}

// Bytes of the messages with a plain fixed-width encoding (4-byte IDs and
// words); a transport adds its own framing.
func sizeKeys(m *AdvertiseKeys) int {
	return 4 + len(m.MaskKey) + len(m.EncKey) + len(m.Cert) + len(m.Sig) + len(m.Nonce)
}
func sizeShares(s []EncryptedShare) int {
	n := 4
	for _, e := range s {
		n += 8 + len(e.Ciphertext)
	}
	return n
}

// BenchmarkRound runs whole rounds in process, sequentially so that the
// time of each party is measured alone: ML-1M sized vectors (3706 items ×
// K=10 factors), 10% of the clients dropping before the masked input (the
// server must then reconstruct their mask keys), K and T from
// ChooseParams(n, 0.1, 0.1). Run with -benchtime=1x.
func BenchmarkRound(b *testing.B) {
	for _, n := range []int{1000, 6040, 10000} {
		k, th, err := ChooseParams(n, 0.1, 0.1)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("n=%d/K=%d/T=%d", n, k, th), func(b *testing.B) {
			p := Params{N: n, K: k, T: th, Bits: 32, Len: 3706 * 10}
			p.Seed[0] = 1
			x := make([]uint32, p.Len)
			for i := range x {
				x[i] = uint32(i)
			}
			drop := dropSome(rand.New(testRand(1)), n, 0.1, DropBeforeInput)
			for b.Loop() {
				benchRound(b, p, x, drop)
			}
		})
	}
}

// BenchmarkRoundActive is BenchmarkRound beside the active protocol
// (Params.Active: certificates and signatures, the committed key set,
// the consistency round) at the deploy package's parameters for
// --min-participants 0.9 (δ = 0.15, γ = 0.1): ChooseParams for the
// honest-but-curious protocol, ChooseParamsActive for the active one.
// Run with -benchtime=1x.
func BenchmarkRoundActive(b *testing.B) {
	for _, n := range []int{1000, 6040, 10000} {
		for _, active := range []bool{false, true} {
			choose := ChooseParams
			if active {
				choose = ChooseParamsActive
			}
			k, th, err := choose(n, 0.15, 0.1)
			if err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("n=%d/active=%v/K=%d/T=%d", n, active, k, th), func(b *testing.B) {
				p := Params{N: n, K: k, T: th, Bits: 32, Len: 3706 * 10, Active: active}
				p.Seed[0] = 1
				x := make([]uint32, p.Len)
				for i := range x {
					x[i] = uint32(i)
				}
				drop := dropSome(rand.New(testRand(1)), n, 0.1, DropBeforeInput)
				var auths []*Auth
				if active {
					_, auths, _ = testIdentities(p, testRand(7), "bench")
				}
				for b.Loop() {
					benchRoundAuth(b, p, auths, x, drop)
				}
			})
		}
	}
}

func benchRound(b *testing.B, p Params, x []uint32, drop []Phase) {
	benchRoundAuth(b, p, nil, x, drop)
}

func benchRoundAuth(b *testing.B, p Params, auths []*Auth, x []uint32, drop []Phase) {
	var tKeys, tShare, tMask, tConsist, tUnmask, tServer, tConsistSrv time.Duration
	var upConsist, downConsist int
	var up, down [4]int
	timed := func(d *time.Duration, f func()) {
		t0 := time.Now()
		f()
		*d += time.Since(t0)
	}
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	srv, err := NewServer(p)
	must(err)
	rnd := testRand(2)
	cs := make([]*Client, p.N)
	for u := range cs {
		if p.Active {
			cs[u], err = NewActiveClient(uint32(u), p, rnd, auths[u])
		} else {
			cs[u], err = NewClient(uint32(u), p, rnd)
		}
		must(err)
		if p.Active { // the commitment, before any key is revealed
			var m *KeyCommit
			timed(&tKeys, func() { m, err = cs[u].Commit() })
			must(err)
			up[0] += 4 + len(m.Digest)
			timed(&tServer, func() { err = srv.AddCommit(m) })
			must(err)
			continue
		}
		var m *AdvertiseKeys
		timed(&tKeys, func() { m, err = cs[u].AdvertiseKeys() })
		must(err)
		up[0] += sizeKeys(m)
		timed(&tServer, func() { err = srv.AddKeys(m) })
		must(err)
	}
	if p.Active {
		var set [32]byte
		timed(&tServer, func() { set, err = srv.FinishCommit() })
		must(err)
		for _, c := range cs {
			down[0] += len(set)
			var m *AdvertiseKeys
			timed(&tKeys, func() { m, err = c.Reveal(set) })
			must(err)
			up[0] += sizeKeys(m)
			timed(&tServer, func() { err = srv.AddKeys(m) })
			must(err)
		}
	}
	var kb []*KeysBroadcast
	timed(&tServer, func() { kb, err = srv.FinishKeys() })
	must(err)
	for _, m := range kb {
		down[0] += 4 + 68*len(m.Committed) // position, digest, nonce
		for i := range m.Keys {
			down[0] += sizeKeys(&m.Keys[i])
		}
		var s *ShareKeys
		timed(&tShare, func() { s, err = cs[m.To].ShareKeys(m) })
		must(err)
		up[1] += sizeShares(s.Shares)
		timed(&tServer, func() { err = srv.AddShares(s) })
		must(err)
	}
	var sd []*SharesDelivery
	timed(&tServer, func() { sd, err = srv.FinishShares() })
	must(err)
	for _, d := range sd {
		down[1] += sizeShares(d.Shares)
		if drop[d.To] == DropBeforeInput {
			continue
		}
		var m *MaskedInput
		timed(&tMask, func() { m, err = cs[d.To].MaskedInput(d, x) })
		must(err)
		up[2] += 4 + 4*len(m.Y)
		timed(&tServer, func() { err = srv.AddMaskedInput(m) })
		must(err)
	}
	var ur []*UnmaskRequest
	timed(&tServer, func() { ur, err = srv.FinishMaskedInput() })
	must(err)
	if p.Active {
		for _, r := range ur {
			down[3] += len(r.Survived)
			downConsist += len(r.Survived)
			var m *SurvivorSig
			timed(&tConsist, func() { m, err = cs[r.To].Consistency(r) })
			must(err)
			up[3] += 4 + len(m.Sig)
			upConsist += 4 + len(m.Sig)
			timed(&tConsistSrv, func() { err = srv.AddConsistency(m) })
			must(err)
		}
		timed(&tConsistSrv, func() { ur, err = srv.FinishConsistency() })
		must(err)
		tServer += tConsistSrv
		for _, r := range ur {
			downConsist += 68 * len(r.Signatures) // the signatures the added round brings
		}
	}
	for _, r := range ur {
		down[3] += 4 + 4*(len(r.Survivors)+len(r.Dropped)) + len(r.Survived) + 68*len(r.Signatures)
		var m *UnmaskResponse
		timed(&tUnmask, func() { m, err = cs[r.To].Unmask(r) })
		must(err)
		up[3] += 4 + 36*(len(m.SelfShares)+len(m.MaskShares))
		timed(&tServer, func() { err = srv.AddUnmask(m) })
		must(err)
	}
	var sum []uint32
	timed(&tServer, func() { sum, err = srv.Result() })
	must(err)
	want := uint32(0)
	for _, d := range drop {
		if d == Stay {
			want++
		}
	}
	if sum[1] != want || sum[0] != 0 {
		b.Fatalf("sum[0:2] = %v, want [0 %d]", sum[:2], want)
	}
	n := float64(p.N)
	ms := func(d time.Duration, per float64) float64 { return float64(d.Microseconds()) / 1e3 / per }
	nin := float64(len(ur))
	b.ReportMetric(ms(tKeys, n), "ms-advertise/client")
	b.ReportMetric(ms(tShare, float64(len(kb))), "ms-sharekeys/client")
	b.ReportMetric(ms(tMask, nin), "ms-maskedinput/client")
	b.ReportMetric(ms(tUnmask, nin), "ms-unmask/client")
	if p.Active {
		// The added round: a client's signing and checking, the
		// server's collection, and its bytes (a round trip on top).
		b.ReportMetric(ms(tConsist, nin), "ms-consistency/client")
		b.ReportMetric(ms(tConsistSrv, 1), "ms-server-consistency")
		b.ReportMetric(float64(upConsist)/nin, "B-up-consistency/client")
		b.ReportMetric(float64(downConsist)/nin, "B-down-consistency/client")
	}
	b.ReportMetric(ms(tServer, 1), "ms-server")
	b.ReportMetric(float64(up[0]+up[1]+up[3])/nin, "B-up-excl-vector/client")
	b.ReportMetric(float64(up[2])/nin, "B-up-vector/client")
	b.ReportMetric(float64(down[0]+down[1]+down[3])/nin, "B-down/client")
	b.Logf("n=%d: bytes up per surviving client: keys %.0f, shares %.0f, masked input %.0f, unmask %.0f; down: keys %.0f, shares %.0f, unmask request %.0f",
		p.N, float64(up[0])/n, float64(up[1])/float64(len(kb)), float64(up[2])/nin, float64(up[3])/nin,
		float64(down[0])/float64(len(kb)), float64(down[1])/float64(len(sd)), float64(down[3])/nin)
	b.Logf("n=%d: time: clients %.0f ms total (%.1f ms each), server %.0f ms",
		p.N, ms(tKeys+tShare+tMask+tConsist+tUnmask, 1), ms(tKeys+tShare+tMask+tConsist+tUnmask, n), ms(tServer, 1))
}
