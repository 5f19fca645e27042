package secagg

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// A lie is what a lying client does to its own message of a step: it
// returns the message to send instead, or nil to send nothing. c is the
// client's honest state machine, which the lie may read.
type lie func(c *Client, m Message) Message

// runLiars runs one session in process, every client honest except those
// in lies, and returns the server and the session's result. A liar's
// refused message or failed step puts it out of the session; an honest
// client's error, or the server's, is returned.
func runLiars(t *testing.T, p Params, auths []*Auth, v *Verifier, inputs [][]uint32, lies map[uint32]lie, seed uint64) (*Server, []uint32, error) {
	t.Helper()
	srv, err := NewServer(p)
	if err != nil {
		t.Fatal(err)
	}
	if v != nil {
		if err := srv.SetVerifier(v); err != nil {
			t.Fatal(err)
		}
	}
	ses := NewSession(srv, nil)
	ctx := context.Background()
	rnd := &lockedReader{r: testRand(seed)}
	clients := make([]*Client, p.N)
	msgs := make([]Message, p.N)
	for u := range clients {
		if auths != nil {
			clients[u], err = NewActiveClient(uint32(u), p, rnd, auths[u])
		} else {
			clients[u], err = NewClient(uint32(u), p, rnd)
		}
		if err != nil {
			t.Fatal(err)
		}
		if msgs[u], err = clients[u].Start(inputs[u]); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var honestErr error
	fail := func(u int, err error) {
		mu.Lock()
		defer mu.Unlock()
		if honestErr == nil {
			honestErr = fmt.Errorf("honest client %d: %w", u, err)
		}
	}
	for ses.Open() < NumSteps {
		st := ses.Open()
		_ = parallel(p.N, runtime.GOMAXPROCS(0), func(u int) error {
			if msgs[u] == nil {
				return nil
			}
			l := lies[uint32(u)]
			if l != nil {
				if msgs[u] = l(clients[u], msgs[u]); msgs[u] == nil {
					return nil
				}
			}
			if err := ses.Add(ctx, msgs[u]); err != nil {
				if l == nil {
					fail(u, err)
				}
				msgs[u] = nil
			}
			return nil
		})
		if honestErr != nil {
			return srv, nil, honestErr
		}
		if _, err := ses.Close(ctx); err != nil {
			return srv, nil, err
		}
		ses.Release()
		_ = parallel(p.N, runtime.GOMAXPROCS(0), func(u int) error {
			if msgs[u] == nil {
				return nil
			}
			r, err := ses.Reply(ctx, st, uint32(u))
			if err == nil {
				msgs[u], err = clients[u].Next(r)
			}
			if err != nil {
				if !errors.Is(err, ErrNoReply) && lies[uint32(u)] == nil {
					fail(u, err)
				}
				msgs[u] = nil
			}
			return nil
		})
		if honestErr != nil {
			return srv, nil, honestErr
		}
	}
	sum, err := ses.Result()
	return srv, sum, err
}

// The lies of the red team.
var (
	// reportAll reports every neighbour that sent it shares.
	reportAll lie = func(c *Client, m Message) Message {
		if chk, ok := m.(*ShareCheck); ok {
			chk.Reported = chk.Reported[:0]
			for _, s := range c.delivery.Shares {
				chk.Reported = append(chk.Reported, s.From)
			}
			slices.Sort(chk.Reported)
		}
		return m
	}
	// wrongShares reveals every share with one bit flipped.
	wrongShares lie = func(_ *Client, m Message) Message {
		if r, ok := m.(*UnmaskResponse); ok {
			for _, l := range [][]RevealedShare{r.SelfShares, r.MaskShares} {
				for i := range l {
					l[i].Share = slices.Clone(l[i].Share)
					l[i].Share[0] ^= 1
				}
			}
		}
		return m
	}
	// noReveal sends its masked input, then nothing.
	noReveal lie = func(_ *Client, m Message) Message {
		if m.Step() == StepReveal {
			return nil
		}
		return m
	}
	// badConsistency signs the survivor set with garbage.
	badConsistency lie = func(_ *Client, m Message) Message {
		if s, ok := m.(*SurvivorSig); ok {
			s.Sig = make([]byte, len(s.Sig))
		}
		return m
	}
	// badAdvert commits to, and reveals, its keys under a signature of
	// garbage: every neighbour that checks it would abort.
	badAdvert lie = func(c *Client, m Message) Message {
		if kc, ok := m.(*KeyCommit); ok {
			c.own.Sig = make([]byte, len(c.own.Sig))
			d := advertDigest(c.own)
			kc.Digest = hide(c.id, &d, (*[32]byte)(c.own.Nonce))
		}
		return m
	}
	// commitOnly commits to its keys and never reveals them.
	commitOnly lie = func(_ *Client, m Message) Message {
		if m.Step() == StepKeys {
			return nil
		}
		return m
	}
)

// TestLiarsCannotStopARound: 10 lying clients of 1,000 — false reports
// against every neighbour, wrong revealed shares, a masked input and no
// reveal — do not stop the round: it releases the sum of all 1,000
// inputs (every liar's masked input is in it), and exactly the share
// liars are named as cheaters.
func TestLiarsCannotStopARound(t *testing.T) {
	n := 1000
	if testing.Short() {
		n = 300
	}
	k, th, err := ChooseParams(n, DefaultDropout, DefaultCollusion)
	if err != nil {
		t.Fatal(err)
	}
	p := Params{N: n, K: k, T: th, Bits: 32, Len: 4, Seed: [32]byte{7}}
	in := randomInputs(rand.New(testRand(11)), p)
	r := rand.New(testRand(12))
	perm := r.Perm(n)
	lies := map[uint32]lie{}
	var share []uint32
	for i, u := range perm[:10] {
		switch {
		case i < 4:
			lies[uint32(u)] = reportAll
		case i < 7:
			lies[uint32(u)] = wrongShares
			share = append(share, uint32(u))
		default:
			lies[uint32(u)] = noReveal
		}
	}
	slices.Sort(share)
	srv, sum, err := runLiars(t, p, nil, nil, in, lies, 13)
	if err != nil {
		t.Fatalf("10 liars of %d stopped the round: %v", n, err)
	}
	if want := plainSum(p, in, nil); !slices.Equal(sum, want) {
		t.Fatal("the released sum is not the sum of every input")
	}
	if got := srv.Cheaters(); !slices.Equal(got, share) {
		t.Fatalf("Cheaters() = %v, want the share liars %v", got, share)
	}
	t.Logf("n = %d, K = %d, T = %d: the sum of all %d inputs released; cheaters %v", n, k, th, len(srv.Survivors()), share)
}

// TestActiveLiarsCannotStopARound: under the active protocol with the
// server checking signatures (Verifier), false reports, wrong shares, a
// missing reveal and a garbage consistency signature do not stop the
// round, and no honest client aborts.
func TestActiveLiarsCannotStopARound(t *testing.T) {
	n := 60
	k, th, err := ChooseParamsActive(n, 0.2, 0.05)
	if err != nil {
		t.Fatal(err)
	}
	p := Params{N: n, K: k, T: th, Bits: 32, Len: 4, Seed: [32]byte{8}, Active: true}
	_, auths, _ := testIdentities(p, testRand(21), "session-liars")
	a := auths[0]
	v := &Verifier{Authority: a.Authority, Run: a.Cert.Run, Context: a.Context, Order: a.Order}
	in := randomInputs(rand.New(testRand(22)), p)
	lies := map[uint32]lie{3: reportAll, 17: wrongShares, 29: noReveal, 41: badConsistency}
	srv, sum, err := runLiars(t, p, auths, v, in, lies, 23)
	if err != nil {
		t.Fatalf("4 liars of %d stopped the active round: %v", n, err)
	}
	if want := plainSum(p, in, nil); !slices.Equal(sum, want) {
		t.Fatal("the released sum is not the sum of every input")
	}
	if got := srv.Cheaters(); !slices.Equal(got, []uint32{17}) {
		t.Fatalf("Cheaters() = %v, want [17]", got)
	}
}

// TestActiveBadAdvertIsUnrevealed: a committed client whose revealed keys
// carry a bad signature, or that never reveals, fails the session at its
// keys step (the graph needs every committed nonce) without any honest
// client aborting, and Unrevealed names exactly those clients, so the
// round's next session can run without them.
func TestActiveBadAdvertIsUnrevealed(t *testing.T) {
	n := 40
	k, th, err := ChooseParamsActive(n, 0.2, 0.05)
	if err != nil {
		t.Fatal(err)
	}
	p := Params{N: n, K: k, T: th, Bits: 32, Len: 4, Seed: [32]byte{9}, Active: true}
	_, auths, _ := testIdentities(p, testRand(31), "session-adverts")
	a := auths[0]
	v := &Verifier{Authority: a.Authority, Run: a.Cert.Run, Context: a.Context, Order: a.Order}
	in := randomInputs(rand.New(testRand(32)), p)
	for _, tc := range []struct {
		name string
		lies map[uint32]lie
		want []uint32
	}{
		{"bad advert signature", map[uint32]lie{5: badAdvert}, []uint32{5}},
		{"commit without reveal", map[uint32]lie{11: commitOnly}, []uint32{11}},
		{"both", map[uint32]lie{5: badAdvert, 11: commitOnly}, []uint32{5, 11}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _, err := runLiars(t, p, auths, v, in, tc.lies, 33)
			if !errors.Is(err, ErrTooFew) {
				t.Fatalf("err = %v, want the keys step to fail with ErrTooFew", err)
			}
			if got := srv.Unrevealed(); !slices.Equal(got, tc.want) {
				t.Fatalf("Unrevealed() = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestDealerOfInconsistentShares: a dealer whose committed shares do not
// lie on one polynomial (each holder's share matches the commitment it
// got, so no holder reports) is named, and no holder is.
func TestDealerOfInconsistentShares(t *testing.T) {
	p := testParams(30, 12, 7, 32, 6)
	in := randomInputs(rand.New(testRand(41)), p)
	const dealer = 4
	r := rand.New(testRand(42))
	spoil := func(c *Client, m Message) Message {
		sk, ok := m.(*ShareKeys)
		if !ok {
			return m
		}
		// Re-deal one holder's pair of shares as fresh random scalars,
		// sealed with commitments to them.
		e := &sk.Shares[r.IntN(len(sk.Shares))]
		ms, ss := make([]byte, ShareSize), make([]byte, ShareSize)
		ms[0], ss[0] = byte(r.Uint32()), byte(r.Uint32())
		pr := c.peers[e.To]
		ct, err := sealShares(shareAEAD(pr.encSecret, &c.p.Seed, c.id, e.To), testRand(43), &c.p.Seed, c.id, e.To, ms, ss)
		if err != nil {
			panic(err)
		}
		e.Ciphertext = ct
		return m
	}
	srv, _, err := runLiars(t, p, nil, nil, in, map[uint32]lie{dealer: spoil}, 44)
	if !errors.Is(err, ErrShares) {
		t.Fatalf("err = %v, want ErrShares", err)
	}
	if got := srv.Cheaters(); !slices.Equal(got, []uint32{dealer}) {
		t.Fatalf("Cheaters() = %v, want the dealer [%d]", got, dealer)
	}
}

// TestAbortBeforeRevealWhenHoldersDrop: a client that dropped before its
// masked input, whose share holders all dropped too, but with which a
// neighbour that reported its shares still masked, needs its mask key
// removed and no one can give it: the server aborts before any share is
// revealed.
func TestAbortBeforeRevealWhenHoldersDrop(t *testing.T) {
	p := testParams(12, 4, 2, 32, 4)
	in := randomInputs(rand.New(testRand(51)), p)
	g := NewGraph(p)
	const victim = 0
	nb := g.Neighbours(victim)
	reporter := nb[0]
	lies := map[uint32]lie{
		victim: func(_ *Client, m Message) Message { // shares, then drops
			if m.Step() >= StepMasked {
				return nil
			}
			return m
		},
		reporter: func(c *Client, m Message) Message { // reports victim only
			if chk, ok := m.(*ShareCheck); ok {
				chk.Reported = []uint32{victim}
			}
			return m
		},
	}
	for _, v := range nb[1:] { // the other holders drop before the masked input
		lies[v] = func(_ *Client, m Message) Message {
			if m.Step() >= StepMasked {
				return nil
			}
			return m
		}
	}
	srv, _, err := runLiars(t, p, nil, nil, in, lies, 52)
	// The victim is position 0, the first the server checks: the abort
	// must be for its mask key.
	if !errors.Is(err, ErrTooFew) || !strings.Contains(err.Error(), "client 0 has 0 surviving neighbours") {
		t.Fatalf("err = %v, want ErrTooFew for the victim's mask key, before any reveal", err)
	}
	if srv.stage != stageAborted || count(srv.unmsk) > 0 {
		t.Fatalf("server stage %d with %d unmask responses, want aborted before any", srv.stage, count(srv.unmsk))
	}
}

// BenchmarkServerChecks is the server's cost per client of checking the
// active protocol's identities (SetVerifier): the certificate and the
// signature of its advertisement, and its consistency signature.
func BenchmarkServerChecks(b *testing.B) {
	p := Params{N: 4, K: 2, T: 2, Bits: 32, Len: 1, Seed: [32]byte{3}, Active: true}
	_, auths, _ := testIdentities(p, testRand(61), "bench")
	a := auths[0]
	c, err := NewActiveClient(0, p, testRand(62), a)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := c.Commit(); err != nil {
		b.Fatal(err)
	}
	adv := *c.own
	srv, _ := NewServer(p)
	if err := srv.SetVerifier(&Verifier{Authority: a.Authority, Run: a.Cert.Run, Context: a.Context, Order: a.Order}); err != nil {
		b.Fatal(err)
	}
	survived := []byte{0x0f}
	srv.requests = map[uint32]*UnmaskRequest{0: {To: 0, Survived: survived}}
	sig := &SurvivorSig{From: 0, Sig: ed25519.Sign(a.Key, consistMsg(a.Context, &p.Seed, &srv.graphSeed, survived))}
	for b.Loop() {
		if err := srv.verifyAdvert(&adv); err != nil {
			b.Fatal(err)
		}
		if err := srv.verifyConsistency(sig); err != nil {
			b.Fatal(err)
		}
	}
}
