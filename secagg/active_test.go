package secagg

import (
	"crypto/ecdh"
	"crypto/ed25519"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// The attacks of a server that lies (issue 31), each mounted against the
// real Client code: first on the honest-but-curious protocol, where it
// recovers a client's input exactly (the control), then on the active
// protocol (Params.Active), where it must fail.

// testIdentities returns an authority's key and an Auth for every
// position of p, clients i = position, roster = p.N.
func testIdentities(p Params, rnd *rand.ChaCha8, ctx string) (ed25519.PrivateKey, []*Auth, []ed25519.PrivateKey) {
	_, authority, _ := ed25519.GenerateKey(rnd)
	order := make([]uint32, p.N)
	for i := range order {
		order[i] = uint32(i)
	}
	auths := make([]*Auth, p.N)
	keys := make([]ed25519.PrivateKey, p.N)
	for u := range auths {
		pub, priv, _ := ed25519.GenerateKey(rnd)
		keys[u] = priv
		auths[u] = &Auth{Authority: authority.Public().(ed25519.PublicKey), Key: priv,
			Cert: Certify(authority, "run-1", uint32(u), uint32(p.N), pub), Context: []byte(ctx), Order: order}
	}
	return authority, auths, keys
}

// advertiseAll runs the key step of every client in cs: in the active
// protocol the commitments, FinishCommit and the reveals.
func advertiseAll(t *testing.T, srv *Server, cs []*Client) {
	t.Helper()
	if cs[0].p.Active {
		for _, c := range cs {
			m, err := c.Commit()
			if err != nil {
				t.Fatal(err)
			}
			if err := srv.AddCommit(m); err != nil {
				t.Fatal(err)
			}
		}
		set, err := srv.FinishCommit()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			m, err := c.Reveal(set)
			if err != nil {
				t.Fatal(err)
			}
			if err := srv.AddKeys(m); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	for _, c := range cs {
		m, err := c.AdvertiseKeys()
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.AddKeys(m); err != nil {
			t.Fatal(err)
		}
	}
}

func TestActiveSimulate(t *testing.T) {
	for _, ph := range []Phase{Stay, DropBeforeKeys, DropBeforeShares, DropBeforeInput, DropBeforeUnmask} {
		t.Run(fmt.Sprint(ph), func(t *testing.T) {
			p := testParams(60, 30, 20, 32, 16)
			p.Active = true
			r := rand.New(testRand(3))
			in := randomInputs(r, p)
			drop := dropSome(r, p.N, 0.1, ph)
			_, auths, _ := testIdentities(p, testRand(4), "round 1")
			got, err := SimulateActive(p, auths, in, drop, testRand(5))
			if err != nil {
				t.Fatal(err)
			}
			if want := plainSum(p, in, drop); !slices.Equal(got, want) {
				t.Fatalf("sum differs")
			}
		})
	}
}

func TestCertificate(t *testing.T) {
	rnd := testRand(1)
	_, authority, _ := ed25519.GenerateKey(rnd)
	pub, _, _ := ed25519.GenerateKey(rnd)
	c := Certify(authority, "run", 7, 100, pub)
	d, err := ParseCertificate(c.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Verify(authority.Public().(ed25519.PublicKey)); err != nil {
		t.Fatal(err)
	}
	d.Roster = 101
	if err := d.Verify(authority.Public().(ed25519.PublicKey)); !errors.Is(err, ErrIdentity) {
		t.Fatalf("a certificate with a changed roster verified: %v", err)
	}
	_, other, _ := ed25519.GenerateKey(rnd)
	if err := c.Verify(other.Public().(ed25519.PublicKey)); !errors.Is(err, ErrIdentity) {
		t.Fatalf("a certificate verified under another authority: %v", err)
	}
}

// unmaskOne removes from client u's masked vector y its self mask and the
// pairwise masks with the given neighbours' public mask keys, from u's
// two seeds: what a server holding both seeds of u does.
func unmaskOne(p Params, u uint32, y []uint32, self, maskSeed [SeedSize]byte, nbrMask map[uint32][]byte) []uint32 {
	x := slices.Clone(y)
	var e expander
	k := selfMaskKey(&self, &p.Seed, u)
	e.add(x, &k, true)
	priv := maskKeyFromSeed(&maskSeed, &p.Seed)
	for v, pubb := range nbrMask {
		pub, _ := ecdh.X25519().NewPublicKey(pubb)
		k, _ := pairwiseKey(priv, pub, &p.Seed, u, v)
		e.add(x, &k, u < v) // u added it when u < v
	}
	for i := range x {
		x[i] &= p.mask()
	}
	return x
}

// TestAttackKeySubstitution: the server replaces, in the key list it
// relays to a target, every neighbour's keys by its own. The target then
// encrypts its shares to the server and masks with keys the server holds:
// its input falls out. Against the active protocol the substituted keys
// carry no certificate of the pinned authority (or, signed by the
// server's own "authority", a certificate the client does not trust), and
// the client aborts before it sends a share.
func TestAttackKeySubstitution(t *testing.T) {
	for _, active := range []bool{false, true} {
		t.Run(fmt.Sprintf("active=%v", active), func(t *testing.T) {
			p := testParams(40, 20, 11, 32, 8)
			p.Active = active
			const u = 5
			rnd := testRand(9)
			_, auths, _ := testIdentities(p, rnd, "round 1")
			var c *Client
			var err error
			if active {
				c, err = NewActiveClient(u, p, rnd, auths[u])
			} else {
				c, err = NewClient(u, p, rnd)
			}
			if err != nil {
				t.Fatal(err)
			}
			var own *AdvertiseKeys
			var kc *KeyCommit
			if active {
				kc, err = c.Commit()
			} else {
				own, err = c.AdvertiseKeys()
			}
			if err != nil {
				t.Fatal(err)
			}
			// The server's own keys for every other position, and its
			// own authority's certificates for them, committed to in a
			// commitment set of its making.
			_, fakeAuthority, _ := ed25519.GenerateKey(rnd)
			fakeMask := map[uint32]*ecdh.PrivateKey{}
			fakeEnc := map[uint32]*ecdh.PrivateKey{}
			ads := []AdvertiseKeys{}
			committed := make([]Commitment, p.N)
			commits := make([]KeyCommit, p.N)
			for v := range uint32(p.N) {
				if v == u {
					continue
				}
				fakeMask[v], _ = ecdh.X25519().GenerateKey(rnd)
				fakeEnc[v], _ = ecdh.X25519().GenerateKey(rnd)
				ad := AdvertiseKeys{From: v, MaskKey: fakeMask[v].PublicKey().Bytes(), EncKey: fakeEnc[v].PublicKey().Bytes()}
				if active {
					pub, priv, _ := ed25519.GenerateKey(rnd)
					ad.Cert = Certify(fakeAuthority, "run-1", v, uint32(p.N), pub).Marshal()
					ad.Sig = ed25519.Sign(priv, advertMsg([]byte("round 1"), &p.Seed, v, v, ad.MaskKey, ad.EncKey))
				}
				ads = append(ads, ad)
				committed[v] = Commitment{From: v, Digest: advertDigest(&ad)}
				rnd.Read(committed[v].Nonce[:])
				commits[v] = KeyCommit{From: v, Digest: hide(v, &committed[v].Digest, &committed[v].Nonce)}
			}
			if active {
				commits[u] = *kc
				if own, err = c.Reveal(CommitSetHash(p.Seed, commits)); err != nil {
					t.Fatal(err)
				}
				committed[u] = Commitment{From: u, Digest: advertDigest(own), Nonce: [32]byte(own.Nonce)}
			}
			b := &KeysBroadcast{To: u, Committed: committed}
			if active {
				c.commitGraph(b, own) // the server computes the graph the client will
			}
			for _, ad := range ads {
				if slices.Contains(c.nbrs, ad.From) {
					b.Keys = append(b.Keys, ad)
				}
			}
			if active {
				c.nbrs = nil
			}
			sk, err := c.ShareKeys(b)
			if active {
				if !errors.Is(err, ErrIdentity) {
					t.Fatalf("ShareKeys with substituted keys: %v, want ErrIdentity", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// The server opens u's shares and forges its neighbours'.
			var holders []uint32
			var selfV, maskV [][]byte
			d := &SharesDelivery{To: u}
			encPub, _ := ecdh.X25519().NewPublicKey(own.EncKey)
			for _, es := range sk.Shares {
				sec, _ := fakeEnc[es.To].ECDH(encPub)
				ms, ss, err := openShares(shareAEAD(sec, &p.Seed, u, es.To), &p.Seed, u, es.To, es.Ciphertext)
				if err != nil {
					t.Fatal(err)
				}
				holders, maskV, selfV = append(holders, es.To), append(maskV, ms), append(selfV, ss)
				ct, _ := sealShares(shareAEAD(sec, &p.Seed, es.To, u), rnd, &p.Seed, es.To, u, make([]byte, ShareSize), make([]byte, ShareSize))
				d.Shares = append(d.Shares, EncryptedShare{From: es.To, To: u, Ciphertext: ct})
			}
			x := make([]uint32, p.Len)
			for i := range x {
				x[i] = uint32(1000*u + i)
			}
			mi, err := c.MaskedInput(d, x)
			if err != nil {
				t.Fatal(err)
			}
			self, err := recoverSeed(p.T, holders, selfV)
			if err != nil {
				t.Fatal(err)
			}
			mseed, err := recoverSeed(p.T, holders, maskV)
			if err != nil {
				t.Fatal(err)
			}
			nm := map[uint32][]byte{}
			for _, v := range holders {
				nm[v] = fakeMask[v].PublicKey().Bytes()
			}
			got := unmaskOne(p, u, mi.Y, self, mseed, nm)
			if !slices.Equal(got, x) {
				t.Fatalf("control: the substitution did not recover x_%d", u)
			}
			t.Logf("honest-but-curious protocol: x_%d recovered exactly by key substitution", u)
		})
	}
}

// splitAttack runs a round of n clients honestly up to the masked inputs,
// then mounts the split attack on one target u with c of u's neighbours
// corrupt (the server holds their shares and identity keys): it tells
// the first T−c honest neighbours that u survived and the others that u
// dropped (and every other client that u survived), delivering to each
// honest client the survivor signatures that agree with what it was told
// and signing with the corrupt identities whatever is needed. It returns
// how many shares of u's self-mask seed and of its mask-key seed the
// server collects, and whether x_u came out exactly.
func splitAttack(t *testing.T, p Params, c int) (selfN, maskN int, recovered bool) {
	t.Helper()
	rnd := testRand(11)
	_, auths, idKeys := testIdentities(p, rnd, "round 1")
	srv, err := NewServer(p)
	if err != nil {
		t.Fatal(err)
	}
	cs := make([]*Client, p.N)
	for u := range cs {
		if p.Active {
			cs[u], err = NewActiveClient(uint32(u), p, rnd, auths[u])
		} else {
			cs[u], err = NewClient(uint32(u), p, rnd)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	advertiseAll(t, srv, cs)
	sd := shareAll(t, srv, cs)
	const u = 3
	x := make([]uint32, p.Len)
	for i := range x {
		x[i] = uint32(7*i + 1)
	}
	var yu []uint32
	for _, d := range sd {
		in := make([]uint32, p.Len)
		if d.To == u {
			in = x
		}
		m, err := cs[d.To].MaskedInput(d, in)
		if err != nil {
			t.Fatal(err)
		}
		if d.To == u {
			yu = m.Y
		}
		if err := srv.AddMaskedInput(m); err != nil {
			t.Fatal(err)
		}
	}
	ur, err := srv.FinishMaskedInput()
	if err != nil {
		t.Fatal(err)
	}
	nbrs := srv.Graph().Neighbours(u)
	corrupt := map[uint32]bool{}
	for _, v := range nbrs[:c] {
		corrupt[v] = true
	}
	// The two views: A (the truth, u survived) and B (u dropped).
	viewB := map[uint32]bool{}
	for i, v := range nbrs[c:] {
		if i >= p.T-c {
			viewB[v] = true
		}
	}
	bmA := make([]byte, (p.N+7)/8)
	for v := range p.N {
		bmA[v/8] |= 1 << (v % 8)
	}
	bmB := slices.Clone(bmA)
	bmB[u/8] &^= 1 << (u % 8)
	req := map[uint32]*UnmaskRequest{}
	for _, r := range ur {
		r2 := &UnmaskRequest{To: r.To, Survived: bmA}
		for _, v := range r.Survivors {
			if v == u && viewB[r.To] {
				r2.Dropped = append(r2.Dropped, v)
			} else {
				r2.Survivors = append(r2.Survivors, v)
			}
		}
		if viewB[r.To] {
			r2.Survived = bmB
		}
		req[r.To] = r2
	}
	if p.Active {
		sigs := map[uint32]*SurvivorSig{}
		for w, r := range req {
			if corrupt[w] {
				continue
			}
			s, err := cs[w].Consistency(r)
			if err != nil {
				t.Fatalf("client %d: %v", w, err)
			}
			sigs[w] = s
		}
		g := srv.Graph()
		for w, r := range req {
			if corrupt[w] {
				continue
			}
			for _, v := range g.Neighbours(w) {
				switch {
				case corrupt[v]: // a corrupt neighbour signs whatever w was told
					r.Signatures = append(r.Signatures, SurvivorSig{From: v,
						Sig: ed25519.Sign(idKeys[v], consistMsg([]byte("round 1"), &p.Seed, &cs[w].graphSeed, r.Survived))})
				case viewB[v] == viewB[w] && v != u || v == u && !viewB[w]:
					r.Signatures = append(r.Signatures, *sigs[v])
				}
			}
		}
	}
	var holdS, holdM []uint32
	var valS, valM [][]byte
	for _, v := range nbrs {
		if corrupt[v] {
			pr := cs[v].peers[u]
			holdS, valS = append(holdS, v), append(valS, pr.selfShare)
			holdM, valM = append(holdM, v), append(valM, pr.maskShare)
			continue
		}
		resp, err := cs[v].Unmask(req[v])
		if err != nil {
			continue // refused: nothing revealed
		}
		for _, s := range resp.SelfShares {
			if s.Owner == u {
				holdS, valS = append(holdS, v), append(valS, s.Share)
			}
		}
		for _, s := range resp.MaskShares {
			if s.Owner == u {
				holdM, valM = append(holdM, v), append(valM, s.Share)
			}
		}
	}
	if len(holdS) < p.T || len(holdM) < p.T {
		return len(holdS), len(holdM), false
	}
	self, err1 := recoverSeed(p.T, holdS, valS)
	mseed, err2 := recoverSeed(p.T, holdM, valM)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	nm := map[uint32][]byte{}
	for _, v := range nbrs {
		nm[v] = srv.keys[v].MaskKey
	}
	return len(holdS), len(holdM), slices.Equal(unmaskOne(p, u, yu, self, mseed, nm), x)
}

// TestAttackSplit: the split attack at the deploy package's parameters
// for ρ = 0.8 (δ = 0.25) and ρ = 1 (δ = 0.05), γ = 0.1. On the
// honest-but-curious protocol with ChooseParams it recovers x_u exactly
// (at ρ = 0.8 with no corrupt client, at ρ = 1 with 2T−K corrupt
// neighbours); on the active protocol with ChooseParamsActive, with as
// many corrupt neighbours as the parameters allow for (2T−K−1), the
// server collects fewer than T shares of one kind.
func TestAttackSplit(t *testing.T) {
	const n = 300
	for _, rho := range []float64{0.8, 1} {
		delta := 1 - rho + 0.05
		for _, active := range []bool{false, true} {
			choose := ChooseParams
			if active {
				choose = ChooseParamsActive
			}
			k, th, err := choose(n, delta, 0.1)
			if err != nil {
				t.Fatal(err)
			}
			c := max(0, 2*th-k) // what the attack needs
			if active {
				c = 2*th - k - 1 // the most the parameters provision for
			}
			t.Run(fmt.Sprintf("rho=%g/active=%v/K=%d/T=%d/c=%d", rho, active, k, th, c), func(t *testing.T) {
				p := Params{N: n, K: k, T: th, Bits: 32, Len: 8, Active: active}
				p.Seed[0] = 42
				selfN, maskN, ok := splitAttack(t, p, c)
				t.Logf("shares of the target's self-mask seed %d, of its mask-key seed %d, threshold %d; x recovered: %v", selfN, maskN, th, ok)
				if ok != !active {
					t.Fatalf("x recovered = %v, want %v", ok, !active)
				}
			})
		}
	}
}

// TestChooseParamsActive prints ChooseParamsActive beside ChooseParams and
// checks that a client's CheckActiveParams accepts the first and refuses
// the second (the split attack works there).
func TestChooseParamsActive(t *testing.T) {
	for _, n := range []int{1000, 6040, 10000} {
		for _, delta := range []float64{0.05, 0.15, 0.25} {
			k, th, err := ChooseParamsActive(n, delta, 0.1)
			if err != nil {
				t.Fatal(err)
			}
			kp, tp, err := ChooseParams(n, delta, 0.1)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("n=%5d δ=%.2f γ=0.10: active K=%3d T=%3d (2T−K=%3d); honest-but-curious K=%3d T=%3d (2T−K=%3d)", n, delta, k, th, 2*th-k, kp, tp, 2*tp-kp)
			if err := CheckActiveParams(n, k, th, n/10); err != nil {
				t.Errorf("CheckActiveParams refuses ChooseParamsActive's own choice: %v", err)
			}
			if err := CheckActiveParams(n, kp, tp, n/10); err == nil {
				t.Errorf("n=%d δ=%g: CheckActiveParams accepts ChooseParams' K=%d T=%d", n, delta, kp, tp)
			}
		}
	}
}

// TestAttackChosenGraph: the server fixes the positions and, in the
// honest-but-curious protocol, the graph seed, so it can seat T corrupt
// clients around a target u, which then hold T shares of both its seeds
// (the control: u's neighbours under the round seed are all corrupt).
// In the active protocol the graph comes from the committed key set,
// fixed only after the positions: the same seating gives u a random
// neighbourhood with fewer than T corrupt clients; and a client refuses
// a committed set without its own advertisement or with an altered one
// (what the server would need to steer the seed through u's entry).
func TestAttackChosenGraph(t *testing.T) {
	p := testParams(120, 40, 30, 32, 4)
	const u = 7
	seated := map[uint32]bool{}
	for _, v := range Neighbours(p, u) { // the server seats corrupt clients here
		seated[v] = true
	}
	if len(seated) < p.T {
		t.Fatalf("control: %d corrupt neighbours, threshold %d", len(seated), p.T)
	}
	p.Active = true
	_, auths, _ := testIdentities(p, testRand(21), "round 1")
	srv, err := NewServer(p)
	if err != nil {
		t.Fatal(err)
	}
	cs := make([]*Client, p.N)
	for v := range cs {
		if cs[v], err = NewActiveClient(uint32(v), p, testRand(uint64(100+v)), auths[v]); err != nil {
			t.Fatal(err)
		}
	}
	advertiseAll(t, srv, cs)
	kb, err := srv.FinishKeys()
	if err != nil {
		t.Fatal(err)
	}
	corrupt := 0
	for _, v := range srv.Graph().Neighbours(u) {
		if seated[v] {
			corrupt++
		}
	}
	t.Logf("corrupt neighbours of %d: %d under the server's seed, %d under the committed-key graph (threshold %d)", u, p.K, corrupt, p.T)
	if corrupt >= p.T {
		t.Fatalf("%d corrupt neighbours under the committed-key graph, threshold %d", corrupt, p.T)
	}
	// The server alters or drops u's own entry to steer the seed.
	var b *KeysBroadcast
	for _, m := range kb {
		if m.To == u {
			b = m
		}
	}
	for name, edit := range map[string]func([]Commitment) []Commitment{
		"unchanged": func(c []Commitment) []Commitment { return c },
		"altered":   func(c []Commitment) []Commitment { c[u].Digest[0] ^= 1; return c },
		"dropped":   func(c []Commitment) []Commitment { return slices.Delete(c, u, u+1) },
	} {
		bad := *b
		bad.Committed = edit(slices.Clone(b.Committed))
		if err := cs[u].commitGraph(&bad, cs[u].own); (err == nil) != (name == "unchanged") {
			t.Errorf("%s own entry: %v", name, err)
		}
	}
}

// TestAttackGrindSeed: the graph seed hashes the opened commitment set.
// Before, it hashed the advertisements themselves, which the server and
// its corrupt clients saw before the set closed: a corrupt client could
// re-draw its keys, or the server leave clients out, until the seed gave
// a target corrupt neighbours (2^g tries cost g of the 40 bits). Now each
// client commits to its advertisement and a fresh nonce (Commit), the
// server fixes the commitment set (FinishCommit, its hash sent to every
// client) and only then are advertisements revealed. Every way to steer
// the seed after the reveals — a corrupt client's keys re-drawn, a
// committed client left out, a nonce changed — changes a committed value,
// and the target refuses it (ErrIdentity) before sending any share; the
// server's own checks refuse a reveal that is not the committed one, and
// a session in which a committed client does not reveal.
func TestAttackGrindSeed(t *testing.T) {
	p := testParams(40, 20, 14, 32, 4)
	p.Active = true
	const u, v, w = 3, 9, 17 // the target, a corrupt client, an honest one
	_, auths, _ := testIdentities(p, testRand(31), "round 1")
	setup := func() (*Server, []*Client, *KeysBroadcast) {
		srv, err := NewServer(p)
		if err != nil {
			t.Fatal(err)
		}
		cs := make([]*Client, p.N)
		for c := range cs {
			if cs[c], err = NewActiveClient(uint32(c), p, testRand(uint64(200+c)), auths[c]); err != nil {
				t.Fatal(err)
			}
		}
		advertiseAll(t, srv, cs)
		kb, err := srv.FinishKeys()
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range kb {
			if b.To == u {
				return srv, cs, b
			}
		}
		t.Fatal("no keys for the target")
		return nil, nil, nil
	}
	// The corrupt client's second advertisement, validly certified and
	// signed, drawn after it saw the honest reveals.
	cv, err := NewActiveClient(v, p, testRand(999), auths[v])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cv.Commit(); err != nil {
		t.Fatal(err)
	}
	redrawn, err := cv.Reveal([32]byte{})
	if err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(b *KeysBroadcast){
		"unchanged": func(b *KeysBroadcast) {},
		"corrupt client's keys re-drawn": func(b *KeysBroadcast) {
			b.Committed[v] = Commitment{From: v, Digest: advertDigest(redrawn), Nonce: [32]byte(redrawn.Nonce)}
			for i := range b.Keys {
				if b.Keys[i].From == v {
					b.Keys[i] = *redrawn
				}
			}
		},
		"committed client left out": func(b *KeysBroadcast) { b.Committed = slices.Delete(b.Committed, w, w+1) },
		"nonce changed":             func(b *KeysBroadcast) { b.Committed[w].Nonce[0] ^= 1 },
	} {
		_, cs, b := setup()
		bad := *b
		bad.Committed = slices.Clone(b.Committed)
		bad.Keys = slices.Clone(b.Keys)
		edit(&bad)
		if name != "unchanged" && GraphSeed(p.Seed, bad.Committed) == GraphSeed(p.Seed, b.Committed) {
			t.Fatalf("%s: the edit leaves the graph seed as it was", name)
		}
		_, err := cs[u].ShareKeys(&bad)
		switch {
		case name == "unchanged" && err != nil:
			t.Fatalf("the honest opened set refused: %v", err)
		case name != "unchanged" && !errors.Is(err, ErrIdentity):
			t.Errorf("%s: ShareKeys %v, want ErrIdentity", name, err)
		}
	}

	// The server's side: a reveal that is not the committed one, or from
	// a client that did not commit, is refused; a committed client that
	// does not reveal fails the session's keys.
	srv, err := NewServer(p)
	if err != nil {
		t.Fatal(err)
	}
	cs := make([]*Client, p.N)
	for c := range cs {
		if cs[c], err = NewActiveClient(uint32(c), p, testRand(uint64(300+c)), auths[c]); err != nil {
			t.Fatal(err)
		}
		if c == w {
			continue // w does not commit
		}
		m, err := cs[c].Commit()
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.AddCommit(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.AddKeys(redrawn); err == nil {
		t.Error("keys taken before the commitments closed")
	}
	set, err := srv.FinishCommit()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.AddKeys(redrawn); err == nil {
		t.Error("keys other than the committed ones taken")
	}
	if _, err := cs[w].Commit(); err != nil {
		t.Fatal(err)
	}
	wk, err := cs[w].Reveal(set)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.AddKeys(wk); err == nil {
		t.Error("keys of a client that did not commit taken")
	}
	for c := range cs {
		if c == w || c == v {
			continue // v withholds its reveal
		}
		m, err := cs[c].Reveal(set)
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.AddKeys(m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := srv.FinishKeys(); !errors.Is(err, ErrTooFew) {
		t.Errorf("FinishKeys with a committed client unrevealed: %v, want ErrTooFew", err)
	}
}
