package secagg

import (
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

// testRand is a deterministic io.Reader for reproducible tests.
func testRand(seed uint64) *rand.ChaCha8 {
	var s [32]byte
	s[0], s[1] = byte(seed), byte(seed>>8)
	return rand.NewChaCha8(s)
}

func testParams(n, k, t, bits, l int) Params {
	p := Params{N: n, K: k, T: t, Bits: bits, Len: l}
	p.Seed[0] = byte(n)
	p.Seed[1] = byte(k)
	return p
}

func randomInputs(r *rand.Rand, p Params) [][]uint32 {
	in := make([][]uint32, p.N)
	for u := range in {
		in[u] = make([]uint32, p.Len)
		for i := range in[u] {
			in[u][i] = r.Uint32() & p.mask()
		}
	}
	return in
}

// plainSum is the expected result: the sum over clients whose masked
// input reached the server.
func plainSum(p Params, in [][]uint32, drop []Phase) []uint32 {
	s := make([]uint32, p.Len)
	for u, x := range in {
		if drop != nil && drop[u] != Stay && drop[u] != DropBeforeUnmask {
			continue
		}
		for i, v := range x {
			s[i] += v
		}
	}
	for i := range s {
		s[i] &= p.mask()
	}
	return s
}

func dropSome(r *rand.Rand, n int, frac float64, ph ...Phase) []Phase {
	d := make([]Phase, n)
	for i, u := range r.Perm(n)[:int(frac*float64(n))] {
		d[u] = ph[i%len(ph)]
	}
	return d
}

func TestSimulateSum(t *testing.T) {
	tests := []struct {
		name       string
		n, k, th   int
		bits       int
		frac       float64
		phases     []Phase
		minClients int
	}{
		{"no dropouts", 50, 20, 11, 32, 0, []Phase{Stay}, 0},
		{"10% after upload", 100, 24, 13, 16, 0.10, []Phase{DropBeforeUnmask}, 0},
		{"30% after upload", 100, 30, 12, 20, 0.30, []Phase{DropBeforeUnmask}, 0},
		{"10% before input", 100, 24, 13, 32, 0.10, []Phase{DropBeforeInput}, 0},
		{"30% before input", 200, 30, 15, 24, 0.30, []Phase{DropBeforeInput}, 0},
		{"30% at every phase", 200, 30, 15, 32, 0.30,
			[]Phase{DropBeforeKeys, DropBeforeShares, DropBeforeInput, DropBeforeUnmask}, 0},
		{"complete graph 30% mixed", 50, 49, 25, 8, 0.30,
			[]Phase{DropBeforeInput, DropBeforeUnmask, DropBeforeShares}, 20},
		{"1-bit values", 51, 50, 26, 1, 0.10, []Phase{DropBeforeInput}, 0},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := testParams(tc.n, tc.k, tc.th, tc.bits, 100)
			p.MinClients = tc.minClients
			r := rand.New(testRand(uint64(i)))
			in := randomInputs(r, p)
			drop := dropSome(r, p.N, tc.frac, tc.phases...)
			got, err := Simulate(p, in, drop, testRand(uint64(100+i)))
			if err != nil {
				t.Fatal(err)
			}
			if want := plainSum(p, in, drop); !slices.Equal(got, want) {
				t.Fatalf("sum differs: got %v…, want %v…", got[:4], want[:4])
			}
		})
	}
}

func TestSimulateCryptoRand(t *testing.T) {
	p := testParams(40, 12, 7, 32, 100)
	in := randomInputs(rand.New(testRand(7)), p)
	drop := dropSome(rand.New(testRand(8)), p.N, 0.1, DropBeforeInput)
	got, err := Simulate(p, in, drop, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, plainSum(p, in, drop)) {
		t.Fatal("sum differs")
	}
}

func TestAbortTooFew(t *testing.T) {
	tests := []struct {
		name  string
		frac  float64
		phase Phase
		min   int
		where string
	}{
		// 60% drop before input: some client keeps fewer than T=8 of its
		// 10 neighbours, and the server aborts before any share is revealed.
		{"neighbourhood below T before unmasking", 0.6, DropBeforeInput, 0, "FinishMaskedInput"},
		// Survivors upload but 60% never answer the unmask request: the
		// server lacks T shares of some self mask.
		{"too few unmask answers", 0.6, DropBeforeUnmask, 0, "Result"},
		// Total survivors below MinClients.
		{"below MinClients", 0.5, DropBeforeShares, 20, "FinishShares"},
		// Clients with fewer than T neighbours holding keys refuse to share.
		{"clients refuse thin neighbourhood", 0.7, DropBeforeKeys, 0, "client"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := testParams(30, 10, 8, 32, 100)
			p.MinClients = tc.min
			in := randomInputs(rand.New(testRand(uint64(i))), p)
			drop := dropSome(rand.New(testRand(uint64(50+i))), p.N, tc.frac, tc.phase)
			got, err := Simulate(p, in, drop, testRand(uint64(i)))
			if !errors.Is(err, ErrTooFew) {
				t.Fatalf("err = %v, want ErrTooFew", err)
			}
			if got != nil {
				t.Fatal("aborted round returned a sum")
			}
			t.Logf("%s: %v", tc.where, err)
		})
	}
}

// shareAll runs the key-distribution and share steps of a round whose
// clients cs have advertised their keys to srv, failing t at any error,
// and returns the server's deliveries of the shares.
func shareAll(t *testing.T, srv *Server, cs []*Client) []*SharesDelivery {
	t.Helper()
	kb, err := srv.FinishKeys()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range kb {
		m, err := cs[b.To].ShareKeys(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.AddShares(m); err != nil {
			t.Fatal(err)
		}
	}
	sd, err := srv.FinishShares()
	if err != nil {
		t.Fatal(err)
	}
	return sd
}

// runTo runs a round without dropouts up to the UnmaskRequests.
func runTo(t *testing.T, p Params, in [][]uint32) (*Server, []*Client, []*UnmaskRequest) {
	srv, cs, ur, _ := runToMasked(t, p, in, 3)
	return srv, cs, ur
}

// runToMasked is runTo that also returns the masked inputs by client.
func runToMasked(t *testing.T, p Params, in [][]uint32, seed uint64) (*Server, []*Client, []*UnmaskRequest, [][]uint32) {
	t.Helper()
	srv, err := NewServer(p)
	if err != nil {
		t.Fatal(err)
	}
	rnd := testRand(seed)
	cs := make([]*Client, p.N)
	ys := make([][]uint32, p.N)
	for u := range cs {
		cs[u], err = NewClient(uint32(u), p, rnd)
		if err != nil {
			t.Fatal(err)
		}
		m, err := cs[u].AdvertiseKeys()
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.AddKeys(m); err != nil {
			t.Fatal(err)
		}
	}
	sd := shareAll(t, srv, cs)
	for _, d := range sd {
		m, err := cs[d.To].MaskedInput(d, in[d.To])
		if err != nil {
			t.Fatal(err)
		}
		ys[d.To] = m.Y
		if err := srv.AddMaskedInput(m); err != nil {
			t.Fatal(err)
		}
	}
	ur, err := srv.FinishMaskedInput()
	if err != nil {
		t.Fatal(err)
	}
	return srv, cs, ur, ys
}

// chiSquare returns the χ² statistic of the counts against uniform.
func chiSquare(counts []int) float64 {
	n := 0
	for _, c := range counts {
		n += c
	}
	e := float64(n) / float64(len(counts))
	x := 0.0
	for _, c := range counts {
		x += (float64(c) - e) * (float64(c) - e) / e
	}
	return x
}

// TestMaskedLooksUniform checks the server's view of one upload: for the
// constant inputs 0 and 2^b−1 (the extremes), the masked vector passes a
// χ² test of uniformity on its values (b = 8) or top 8 bits (b = 32), and
// the two masked vectors are indistinguishable by the same test.
func TestMaskedLooksUniform(t *testing.T) {
	const l = 1 << 14
	// χ² with 255 degrees of freedom: P[χ² > 340] ≈ 3·10⁻⁴.
	const crit = 340
	for _, bits := range []int{8, 32} {
		p := testParams(20, 8, 5, bits, l)
		hist := make([][]int, 2)
		for i, x := range []uint32{0, p.mask()} {
			in := randomInputs(rand.New(testRand(uint64(bits))), p)
			for j := range in[0] {
				in[0][j] = x
			}
			_, _, _, ys := runToMasked(t, p, in, uint64(10+i))
			hist[i] = make([]int, 256)
			for _, y := range ys[0] {
				hist[i][y>>(bits-8)]++
			}
			if x2 := chiSquare(hist[i]); x2 > crit {
				t.Errorf("bits=%d x=%d: χ² = %.0f > %d", bits, x, x2, crit)
			} else {
				t.Logf("bits=%d x=%#x: χ² = %.0f (df 255)", bits, x, x2)
			}
		}
		// Two-sample χ² homogeneity test of the two views.
		x2 := 0.0
		for b := range 256 {
			a, c := float64(hist[0][b]), float64(hist[1][b])
			if a+c > 0 {
				x2 += (a - c) * (a - c) / (a + c)
			}
		}
		if x2 > crit {
			t.Errorf("bits=%d: views of inputs 0 and max differ: χ² = %.0f", bits, x2)
		}
		t.Logf("bits=%d: two-sample χ² = %.0f (df 255)", bits, x2)
	}
}

func TestRefuseBothShares(t *testing.T) {
	p := testParams(20, 8, 5, 32, 10)
	in := randomInputs(rand.New(testRand(1)), p)
	_, cs, ur := runTo(t, p, in)
	r := ur[0]
	c := cs[r.To]
	v := r.Survivors[0]
	evil := &UnmaskRequest{To: r.To, Survivors: r.Survivors, Dropped: []uint32{v}}
	if _, err := c.Unmask(evil); !errors.Is(err, ErrBothShares) {
		t.Fatalf("err = %v, want ErrBothShares", err)
	}
	// The client aborted: even the honest request is now refused.
	if _, err := c.Unmask(r); !errors.Is(err, ErrState) {
		t.Fatalf("after refusal: err = %v, want ErrState", err)
	}
	// A client that answered once refuses a second request that would
	// reveal the other share of a neighbour.
	c2 := cs[ur[1].To]
	if _, err := c2.Unmask(ur[1]); err != nil {
		t.Fatal(err)
	}
	second := &UnmaskRequest{To: ur[1].To, Dropped: ur[1].Survivors[:1]}
	if _, err := c2.Unmask(second); !errors.Is(err, ErrState) {
		t.Fatalf("second request: err = %v, want ErrState", err)
	}
}

func TestTamperedShares(t *testing.T) {
	p := testParams(12, 4, 3, 32, 10)
	in := randomInputs(rand.New(testRand(2)), p)
	tests := []struct {
		name   string
		mutate func(d []*SharesDelivery)
	}{
		{"flipped ciphertext bit", func(d []*SharesDelivery) {
			d[0].Shares[0].Ciphertext[20] ^= 1
		}},
		{"flipped nonce bit", func(d []*SharesDelivery) {
			d[0].Shares[0].Ciphertext[0] ^= 0x80
		}},
		{"wrong claimed sender", func(d []*SharesDelivery) {
			d[0].Shares[0].From, d[0].Shares[1].From = d[0].Shares[1].From, d[0].Shares[0].From
		}},
		{"misrouted to another client", func(d []*SharesDelivery) {
			// A share meant for d[0].To, relabelled and delivered to a
			// neighbour of its sender that is not its recipient.
			s := d[0].Shares[0]
			for _, e := range d {
				if e.To != s.To && e.To != s.From && slices.ContainsFunc(e.Shares, func(x EncryptedShare) bool { return x.From == s.From }) {
					for j := range e.Shares {
						if e.Shares[j].From == s.From {
							e.Shares[j].Ciphertext = s.Ciphertext
						}
					}
					d[0] = e
					return
				}
			}
			panic("no second neighbour")
		}},
		{"truncated", func(d []*SharesDelivery) {
			d[0].Shares[0].Ciphertext = d[0].Shares[0].Ciphertext[:40]
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := NewServer(p)
			cs := make([]*Client, p.N)
			rnd := testRand(4)
			for u := range cs {
				cs[u], _ = NewClient(uint32(u), p, rnd)
				m, _ := cs[u].AdvertiseKeys()
				srv.AddKeys(m)
			}
			kb, _ := srv.FinishKeys()
			for _, b := range kb {
				m, err := cs[b.To].ShareKeys(b)
				if err != nil {
					t.Fatal(err)
				}
				srv.AddShares(m)
			}
			sd, _ := srv.FinishShares()
			tc.mutate(sd)
			// With the check round, the client reports the bad share
			// rather than aborting.
			chk, err := cs[sd[0].To].CheckShares(sd[0])
			if err != nil {
				t.Fatalf("check: %v", err)
			}
			if len(chk.Reported) == 0 {
				t.Fatal("no neighbour reported")
			}
			// A report costs only the reporter: it still masks with the
			// sender (the server did not exclude it) and holds none of
			// its shares, so it is never asked to reveal one.
			c := cs[sd[0].To]
			if _, err := c.MaskedInput(sd[0], in[sd[0].To]); err != nil {
				t.Fatalf("masked input after a report: %v", err)
			}
			for _, v := range chk.Reported {
				if pr := c.peers[v]; pr == nil || !pr.inU2 || !pr.noShares {
					t.Fatalf("reported neighbour %d: %+v, want masked with and no shares held", v, pr)
				}
			}
		})
	}
}

// TestBadNeighbourIsDropout: a client that sends share ciphertexts that
// fail authentication to every neighbour makes none of them abort: they
// report it in the check round, the server excludes it before any masked
// input, they do not mask with it, and the round unmasks the exact sum of
// every other client.
func TestBadNeighbourIsDropout(t *testing.T) {
	p := testParams(30, 10, 6, 32, 16)
	in := randomInputs(rand.New(testRand(9)), p)
	const bad = 7
	srv, _ := NewServer(p)
	cs := make([]*Client, p.N)
	rnd := testRand(10)
	for u := range cs {
		cs[u], _ = NewClient(uint32(u), p, rnd)
		m, _ := cs[u].AdvertiseKeys()
		if err := srv.AddKeys(m); err != nil {
			t.Fatal(err)
		}
	}
	kb, _ := srv.FinishKeys()
	for _, b := range kb {
		m, err := cs[b.To].ShareKeys(b)
		if err != nil {
			t.Fatal(err)
		}
		if m.From == bad {
			for j := range m.Shares {
				m.Shares[j].Ciphertext[30] ^= 0x55
			}
		}
		if err := srv.AddShares(m); err != nil {
			t.Fatal(err)
		}
	}
	sd, _ := srv.FinishShares()
	for _, d := range sd {
		chk, err := cs[d.To].CheckShares(d)
		if err != nil {
			t.Fatalf("client %d aborted its check: %v", d.To, err)
		}
		if err := srv.AddCheck(chk); err != nil {
			t.Fatal(err)
		}
	}
	ex, err := srv.FinishCheck()
	if err != nil {
		t.Fatal(err)
	}
	byTo := map[uint32]*SharesDelivery{}
	for _, d := range sd {
		byTo[d.To] = d
	}
	for _, e := range ex {
		d := byTo[e.To]
		d.Excluded = e.Excluded
		m, err := cs[d.To].MaskedInput(d, in[d.To])
		if err != nil {
			t.Fatalf("client %d aborted: %v", d.To, err)
		}
		if err := srv.AddMaskedInput(m); err != nil {
			t.Fatal(err)
		}
	}
	// The excluded client's masked input is refused.
	if m, err := cs[bad].MaskedInput(byTo[bad], in[bad]); err == nil {
		if err := srv.AddMaskedInput(m); err == nil {
			t.Fatal("the excluded client's masked input was taken")
		}
	}
	ur, err := srv.FinishMaskedInput()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range ur {
		m, err := cs[r.To].Unmask(r)
		if err != nil {
			t.Fatalf("client %d: %v", r.To, err)
		}
		if err := srv.AddUnmask(m); err != nil {
			t.Fatal(err)
		}
	}
	got, err := srv.Result()
	if err != nil {
		t.Fatal(err)
	}
	drop := make([]Phase, p.N)
	drop[bad] = DropBeforeInput
	if want := plainSum(p, in, drop); !slices.Equal(got, want) {
		t.Fatal("sum differs from the plain sum of every client but the bad one")
	}
	rep := srv.Reports()
	if len(rep) != 1 || !slices.Equal(rep[bad], Neighbours(p, bad)) {
		t.Fatalf("reported %v, want client %d by all of %v", rep, bad, Neighbours(p, bad))
	}
}

// TestLowOrderKeysRefused: the server refuses an advertisement with a key
// of small order (the all-zero agreement would make every neighbour's key
// agreement fail), so the client counts as dropped before keys go out.
func TestLowOrderKeysRefused(t *testing.T) {
	p := testParams(12, 4, 3, 32, 4)
	good := make([]byte, 32)
	good[0] = 9 // the base point
	order8, _ := hex.DecodeString("e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800")
	pMinus1, _ := hex.DecodeString("ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f")
	one := make([]byte, 32)
	one[0] = 1
	for _, tc := range []struct {
		name      string
		mask, enc []byte
	}{
		{"zero mask key", make([]byte, 32), good},
		{"one as encryption key", good, one},
		{"order-8 mask key", order8, good},
		{"p-1 encryption key", good, pMinus1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := NewServer(p)
			err := srv.AddKeys(&AdvertiseKeys{From: 3, MaskKey: tc.mask, EncKey: tc.enc})
			if !errors.Is(err, ErrLowOrder) {
				t.Fatalf("err = %v, want ErrLowOrder", err)
			}
		})
	}
	srv, _ := NewServer(p)
	if err := srv.AddKeys(&AdvertiseKeys{From: 3, MaskKey: good, EncKey: good}); err != nil {
		t.Fatalf("the base point refused: %v", err)
	}
}

func TestServerRejectsWrongShares(t *testing.T) {
	p := testParams(20, 8, 5, 32, 10)
	in := randomInputs(rand.New(testRand(5)), p)
	srv, cs, ur := runTo(t, p, in)
	liar := ur[0].To
	for _, r := range ur {
		m, err := cs[r.To].Unmask(r)
		if err != nil {
			t.Fatal(err)
		}
		if r.To == liar { // one client reveals wrong shares
			for j := range m.SelfShares {
				m.SelfShares[j].Share = slices.Clone(m.SelfShares[j].Share)
				m.SelfShares[j].Share[0] ^= 1
			}
		}
		err = srv.AddUnmask(m)
		if (r.To == liar) != errors.Is(err, ErrCheat) {
			t.Fatalf("client %d (liar %d): AddUnmask: %v", r.To, liar, err)
		}
	}
	got, err := srv.Result()
	if err != nil {
		t.Fatalf("Result with one liar: %v", err)
	}
	if want := plainSum(p, in, nil); !slices.Equal(got, want) {
		t.Fatal("the sum differs from the inputs' sum")
	}
	if c := srv.Cheaters(); !slices.Equal(c, []uint32{liar}) {
		t.Fatalf("Cheaters() = %v, want [%d]", c, liar)
	}
}

// TestReady: the server is ready to unmask once every needed seed has T
// revealed shares, and not before.
func TestReady(t *testing.T) {
	p := testParams(20, 8, 5, 32, 10)
	in := randomInputs(rand.New(testRand(6)), p)
	srv, cs, ur := runTo(t, p, in)
	if srv.Ready() {
		t.Fatal("ready before any share")
	}
	for k, r := range ur {
		m, err := cs[r.To].Unmask(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.AddUnmask(m); err != nil {
			t.Fatal(err)
		}
		if k < p.T-1 && srv.Ready() {
			t.Fatalf("ready after %d answers, fewer than T = %d", k+1, p.T)
		}
	}
	if !srv.Ready() {
		t.Fatal("not ready with every answer")
	}
	if _, err := srv.Result(); err != nil {
		t.Fatal(err)
	}
}
