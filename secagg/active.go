package secagg

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
)

// The active-server protocol (Params.Active): identities the server cannot
// mint, a neighbour graph it cannot choose, and a consistency round. See
// the package documentation, "Against a server that lies".

// ErrIdentity is returned (wrapped) when a certificate or a signature does
// not verify: a neighbour's key advertisement that the pinned authority
// did not certify or its owner did not sign, a key set that does not
// contain the client's own advertisement, or a consistency signature that
// is wrong. The client aborts the session: the server (or a relay) lied,
// so the client releases nothing further in it.
var ErrIdentity = errors.New("secagg: identity or signature check failed")

const (
	certMagic    = "privrec/secagg/v2 certificate\x00"
	advertLabel  = "privrec/secagg/v2 advertise\x00"
	commitLabel  = "privrec/secagg/v2 commit\x00"
	graphLabel   = "privrec/secagg/v2 graph\x00"
	hideLabel    = "privrec/secagg/v2 hiding commitment\x00"
	setLabel     = "privrec/secagg/v2 commitment set\x00"
	consistLabel = "privrec/secagg/v2 survivors\x00"
)

// Certificate binds a client's long-term Ed25519 identity key to its
// client ID in one run, signed by an enrolment authority that the
// aggregator does not control. Roster is the number of clients the
// authority certified for the run: a client refuses a round with more
// positions than that.
type Certificate struct {
	Run    string
	Client uint32
	Roster uint32
	Key    ed25519.PublicKey
	Sig    []byte
}

func (c *Certificate) body() []byte {
	b := make([]byte, 0, len(certMagic)+4+len(c.Run)+8+ed25519.PublicKeySize)
	b = append(b, certMagic...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(c.Run)))
	b = append(b, c.Run...)
	b = binary.BigEndian.AppendUint32(b, c.Client)
	b = binary.BigEndian.AppendUint32(b, c.Roster)
	return append(b, c.Key...)
}

// Certify returns the authority's certificate of key as client ID client
// of run, whose roster has roster clients.
func Certify(authority ed25519.PrivateKey, run string, client, roster uint32, key ed25519.PublicKey) *Certificate {
	c := &Certificate{Run: run, Client: client, Roster: roster, Key: slices.Clone(key)}
	c.Sig = ed25519.Sign(authority, c.body())
	return c
}

// Verify checks the certificate's signature under the authority's key.
func (c *Certificate) Verify(authority ed25519.PublicKey) error {
	if len(authority) != ed25519.PublicKeySize || len(c.Key) != ed25519.PublicKeySize || len(c.Sig) != ed25519.SignatureSize {
		return fmt.Errorf("%w: certificate of client %d: bad key or signature size", ErrIdentity, c.Client)
	}
	if !ed25519.Verify(authority, c.body(), c.Sig) {
		return fmt.Errorf("%w: certificate of client %d is not signed by the pinned authority", ErrIdentity, c.Client)
	}
	return nil
}

// Marshal encodes the certificate (the body, then the signature).
func (c *Certificate) Marshal() []byte { return append(c.body(), c.Sig...) }

// ParseCertificate decodes a certificate from Marshal. It does not verify
// it.
func ParseCertificate(b []byte) (*Certificate, error) {
	bad := fmt.Errorf("%w: malformed certificate", ErrIdentity)
	if !bytes.HasPrefix(b, []byte(certMagic)) {
		return nil, bad
	}
	b = b[len(certMagic):]
	if len(b) < 4 {
		return nil, bad
	}
	n := binary.BigEndian.Uint32(b)
	b = b[4:]
	if uint64(len(b)) != uint64(n)+8+ed25519.PublicKeySize+ed25519.SignatureSize {
		return nil, bad
	}
	c := &Certificate{Run: string(b[:n])}
	b = b[n:]
	c.Client, c.Roster = binary.BigEndian.Uint32(b), binary.BigEndian.Uint32(b[4:])
	b = b[8:]
	c.Key = slices.Clone(b[:ed25519.PublicKeySize])
	c.Sig = slices.Clone(b[ed25519.PublicKeySize:])
	return c, nil
}

// Auth is what a client of the active protocol holds besides Params: the
// authority's public key it pins, its identity key and certificate, the
// session context every signature is bound to (the caller encodes the
// run, round and session in it), and the client ID at each position.
type Auth struct {
	Authority ed25519.PublicKey
	Key       ed25519.PrivateKey
	Cert      *Certificate
	// Context binds signatures to one session of one round of one run;
	// every client of the session must use the same bytes.
	Context []byte
	// Order is the client ID at each position (len N). A neighbour's
	// certificate must name the client ID of its position, and the IDs
	// must be distinct, so one certified identity cannot fill several
	// positions.
	Order []uint32
}

func (a *Auth) check(p Params, id uint32) error {
	if a == nil {
		return fmt.Errorf("%w: the active protocol needs an identity (Auth)", ErrIdentity)
	}
	if a.Cert == nil || len(a.Key) != ed25519.PrivateKeySize {
		return fmt.Errorf("%w: no identity key or certificate", ErrIdentity)
	}
	if err := a.Cert.Verify(a.Authority); err != nil {
		return err
	}
	if !bytes.Equal(a.Cert.Key, a.Key.Public().(ed25519.PublicKey)) {
		return fmt.Errorf("%w: the certificate is of another key", ErrIdentity)
	}
	if int64(p.N) > int64(a.Cert.Roster) {
		return fmt.Errorf("%w: the round has %d positions, the certified roster %d", ErrIdentity, p.N, a.Cert.Roster)
	}
	if len(a.Order) != p.N {
		return fmt.Errorf("%w: %d client IDs for %d positions", ErrIdentity, len(a.Order), p.N)
	}
	if a.Order[id] != a.Cert.Client {
		return fmt.Errorf("%w: position %d is client %d, the certificate says %d", ErrIdentity, id, a.Order[id], a.Cert.Client)
	}
	seen := make(map[uint32]bool, len(a.Order))
	for _, c := range a.Order {
		if seen[c] {
			return fmt.Errorf("%w: client %d holds two positions", ErrIdentity, c)
		}
		seen[c] = true
	}
	return nil
}

// advertMsg is what a client signs to advertise its keys.
func advertMsg(ctx []byte, base *[32]byte, from, client uint32, mask, enc []byte) []byte {
	b := make([]byte, 0, len(advertLabel)+4+len(ctx)+32+8+len(mask)+len(enc))
	b = append(b, advertLabel...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(ctx)))
	b = append(b, ctx...)
	b = append(b, base[:]...)
	b = binary.BigEndian.AppendUint32(b, from)
	b = binary.BigEndian.AppendUint32(b, client)
	b = append(b, mask...)
	return append(b, enc...)
}

// Commitment is one advertisement's digest in the committed key set.
//
// In the opened commitment set of a KeysBroadcast it is the opening of a
// KeyCommit: the advertisement's digest and the nonce the commitment hid.
type Commitment struct {
	From   uint32
	Digest [32]byte
	Nonce  [32]byte
}

// NonceSize is the size of the nonce a KeyCommit hides.
const NonceSize = 32

// hide is the hiding commitment of a KeyCommit: SHA-256 over the
// position, the advertisement's digest and the nonce. With a fresh
// 32-byte nonce it reveals nothing of the advertisement, and it binds the
// client to both.
func hide(from uint32, digest, nonce *[32]byte) [32]byte {
	h := sha256.New()
	h.Write([]byte(hideLabel))
	var x [4]byte
	binary.BigEndian.PutUint32(x[:], from)
	h.Write(x[:])
	h.Write(digest[:])
	h.Write(nonce[:])
	return [32]byte(h.Sum(nil))
}

// CommitSetHash is the hash of a session's commitment set: the round's
// public seed and every KeyCommit, which must be sorted by position. A
// client receives it before it reveals its advertisement (Client.Reveal)
// and later checks the opened set against it.
func CommitSetHash(base [32]byte, commits []KeyCommit) [32]byte {
	h := sha256.New()
	h.Write([]byte(setLabel))
	h.Write(base[:])
	var x [4]byte
	for _, c := range commits {
		binary.BigEndian.PutUint32(x[:], c.From)
		h.Write(x[:])
		h.Write(c.Digest[:])
	}
	return [32]byte(h.Sum(nil))
}

// Commit (active protocol, before Reveal) draws the round's secrets and
// the client's advertisement as AdvertiseKeys does, with a fresh nonce,
// and returns only a hiding commitment to them. Nobody — the server, the
// corrupt clients — learns an honest client's keys before every
// commitment of the session is fixed, so nobody can choose the graph
// seed, which hashes the opened set (GraphSeed).
func (c *Client) Commit() (*KeyCommit, error) {
	if !c.p.Active || c.own != nil {
		return nil, fmt.Errorf("%w: Commit outside the active protocol, or twice", ErrState)
	}
	m, err := c.drawKeys()
	if err != nil {
		return nil, err
	}
	m.Nonce = make([]byte, NonceSize)
	if _, err := io.ReadFull(c.rand, m.Nonce); err != nil {
		return nil, c.abort(fmt.Errorf("secagg: nonce: %w", err))
	}
	m.Cert = c.auth.Cert.Marshal()
	m.Sig = ed25519.Sign(c.auth.Key, advertMsg(c.auth.Context, &c.p.Seed, c.id, c.auth.Cert.Client, m.MaskKey, m.EncKey))
	c.own = m
	d := advertDigest(m)
	return &KeyCommit{From: c.id, Digest: hide(c.id, &d, (*[32]byte)(m.Nonce))}, nil
}

// Reveal (active protocol, after Commit) records the hash of the
// session's commitment set (CommitSetHash, from the server) and returns
// the client's advertisement with its nonce. ShareKeys later refuses an
// opened set that does not hash to it: a server that changes a committed
// key, adds or drops a commitment after seeing the reveals, is caught.
func (c *Client) Reveal(set [32]byte) (*AdvertiseKeys, error) {
	if err := c.enter(stageKeys); err != nil {
		return nil, err
	}
	if c.own == nil {
		return nil, fmt.Errorf("%w: Reveal before Commit", ErrState)
	}
	c.commitSet = set
	c.stage = stageShares
	m := *c.own
	return &m, nil
}

// advertDigest commits to everything an advertisement says.
func advertDigest(m *AdvertiseKeys) [32]byte {
	h := sha256.New()
	h.Write([]byte(commitLabel))
	var x [4]byte
	binary.BigEndian.PutUint32(x[:], m.From)
	h.Write(x[:])
	for _, f := range [][]byte{m.MaskKey, m.EncKey, m.Cert, m.Sig} {
		binary.BigEndian.PutUint32(x[:], uint32(len(f)))
		h.Write(x[:])
		h.Write(f)
	}
	return [32]byte(h.Sum(nil))
}

// GraphSeed is the seed of the neighbour graph of the active protocol: a
// hash of the round's public seed and of the committed key set (every
// advertisement of U1, sorted by position), fixed only once every key is.
//
// The set is the opened commitment set: each entry carries the nonce its
// KeyCommit hid, so the seed is unknown to anyone until every client of
// the set has revealed, and it was fixed (CommitSetHash) before any did.
func GraphSeed(base [32]byte, committed []Commitment) [32]byte {
	h := sha256.New()
	h.Write([]byte(graphLabel))
	h.Write(base[:])
	var x [4]byte
	for _, c := range committed {
		binary.BigEndian.PutUint32(x[:], c.From)
		h.Write(x[:])
		h.Write(c.Digest[:])
		h.Write(c.Nonce[:])
	}
	return [32]byte(h.Sum(nil))
}

// AddCommit records a client's KeyCommit (active protocol, before any
// AddKeys).
func (s *Server) AddCommit(m *KeyCommit) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.p.Active || s.commitClosed {
		return fmt.Errorf("%w: commitment outside the active protocol's first step", ErrState)
	}
	if err := s.enter(stageKeys); err != nil {
		return err
	}
	if err := s.from(m.From); err != nil {
		return err
	}
	if s.commits == nil {
		s.commits = map[uint32][32]byte{}
	}
	if _, ok := s.commits[m.From]; ok {
		return fmt.Errorf("%w: commitment of %d twice", ErrMessage, m.From)
	}
	s.commits[m.From] = m.Digest
	return nil
}

// FinishCommit closes the commitments (active protocol) and returns the
// hash of the commitment set (CommitSetHash), which every committed
// client receives before it reveals its keys. From now on AddKeys takes
// only the advertisement a client committed to, and FinishKeys needs
// every committed client's.
func (s *Server) FinishCommit() ([32]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.p.Active || s.commitClosed {
		return [32]byte{}, fmt.Errorf("%w: FinishCommit outside the active protocol's first step", ErrState)
	}
	if err := s.enter(stageKeys); err != nil {
		return [32]byte{}, err
	}
	if err := s.enough("Commit", len(s.commits)); err != nil {
		return [32]byte{}, err
	}
	s.commitClosed = true
	return CommitSetHash(s.p.Seed, s.commitList()), nil
}

// commitList returns the commitments sorted by position.
func (s *Server) commitList() []KeyCommit {
	out := make([]KeyCommit, 0, len(s.commits))
	for u, d := range s.commits {
		out = append(out, KeyCommit{From: u, Digest: d})
	}
	slices.SortFunc(out, func(a, b KeyCommit) int { return int(int64(a.From) - int64(b.From)) })
	return out
}

// checkReveal (active protocol) refuses an advertisement that is not the
// one its sender committed to.
func (s *Server) checkReveal(m *AdvertiseKeys) error {
	want, ok := s.commits[m.From]
	switch {
	case !s.commitClosed:
		return fmt.Errorf("%w: keys of %d before the commitments closed", ErrState, m.From)
	case !ok:
		return fmt.Errorf("%w: keys of %d, which did not commit", ErrMessage, m.From)
	case len(m.Nonce) != NonceSize:
		return fmt.Errorf("%w: keys of %d with a %d-byte nonce", ErrMessage, m.From, len(m.Nonce))
	}
	d := advertDigest(m)
	if hide(m.From, &d, (*[32]byte)(m.Nonce)) != want {
		return fmt.Errorf("%w: keys of %d are not the ones it committed to", ErrMessage, m.From)
	}
	return nil
}

// opened (active protocol) returns the opened commitment set: every
// committed client's advertisement digest and nonce, sorted by position.
// A committed client that did not reveal makes it fail: the graph seed
// needs every nonce, and a server free to leave some out could choose
// among seeds after seeing the others.
func (s *Server) opened() ([]Commitment, error) {
	out := make([]Commitment, 0, len(s.commits))
	for _, kc := range s.commitList() {
		k := s.keys[kc.From]
		if k == nil {
			return nil, fmt.Errorf("%w: client %d committed and did not reveal its keys; the session cannot fix its graph", ErrTooFew, kc.From)
		}
		out = append(out, Commitment{From: kc.From, Digest: advertDigest(k), Nonce: [32]byte(k.Nonce)})
	}
	return out, nil
}

// graphParams returns p with the graph seed in place of the round seed,
// for NewGraph and Neighbours only (key derivations keep p.Seed).
func graphParams(p Params, seed [32]byte) Params {
	p.Seed = seed
	return p
}

// consistMsg is what a surviving client signs: the set of survivors U3 it
// was told of.
func consistMsg(ctx []byte, base, graph *[32]byte, survived []byte) []byte {
	b := make([]byte, 0, len(consistLabel)+4+len(ctx)+64+len(survived))
	b = append(b, consistLabel...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(ctx)))
	b = append(b, ctx...)
	b = append(b, base[:]...)
	b = append(b, graph[:]...)
	return append(b, survived...)
}

func bit(bm []byte, v uint32) bool { return bm[v/8]&(1<<(v%8)) != 0 }

// ChooseParamsActive is ChooseParams for a server that may lie about who
// survived. Against the split attack (some of u's neighbours told u
// survived, others that it dropped; each honest neighbour answers one
// request and never reveals both kinds of share of u), the server needs T
// shares of each kind from u's K neighbours, c of them corrupt: 2T ≤ K+c.
// So on top of ChooseParams' conditions it requires
//
//	(split)  n · P[Hyp(n-1, ⌊γn⌋, K) ≥ 2T−K] ≤ 2^-40
//
// i.e. 2T > K + c for every honest client except with probability 2^-40,
// which implies secrecy (2T−K ≤ T). It returns the smallest even K for
// which the largest T meeting correctness also meets this.
func ChooseParamsActive(n int, dropout, collusion float64) (k, t int, err error) {
	if n < 2 || dropout < 0 || collusion < 0 || dropout+collusion >= 1 {
		return 0, 0, fmt.Errorf("secagg: ChooseParamsActive(%d, %g, %g): need n ≥ 2 and dropout+collusion < 1", n, dropout, collusion)
	}
	corrupt := int(math.Floor(collusion * float64(n)))
	dropped := int(math.Floor(dropout * float64(n)))
	logN := math.Log2(float64(n))
	for k = 2; ; k += 2 {
		k = min(k, n-1)
		if k < n-1 && 2*logN-1+float64(k)*math.Log2(dropout+collusion) > -SecurityBits {
			continue
		}
		for t = k; t >= 1; t-- {
			if logN+log2Tail(n-1, dropped, k, k-t+1) <= -CorrectnessBits {
				break
			}
		}
		if t >= 1 && 2*t-k >= 1 && logN+log2Tail(n-1, corrupt, k, 2*t-k) <= -SecurityBits {
			return k, t, nil
		}
		if k == n-1 {
			return 0, 0, ErrNoParams
		}
	}
}

// CheckActiveParams is a client's check of the K and T a server chose for
// n positions of which at most corrupt may be corrupt: the split
// condition of ChooseParamsActive, n · P[Hyp(n-1, corrupt, K) ≥ 2T−K] ≤
// 2^-40 (which implies T > K/2 and secrecy). Correctness is the server's
// concern: too large a T only makes the round abort.
func CheckActiveParams(n, k, t, corrupt int) error {
	p := Params{N: n, K: k, T: t, Bits: 1, Len: 1}
	if err := p.Validate(); err != nil {
		return err
	}
	if 2*t-k < 1 || math.Log2(float64(n))+log2Tail(n-1, min(corrupt, n-1), k, 2*t-k) > -SecurityBits {
		return fmt.Errorf("secagg: K = %d, T = %d for %d positions with up to %d corrupt clients: a server that lies can unmask a client (need n·P[corrupt neighbours ≥ 2T−K] ≤ 2^-%d)",
			k, t, n, corrupt, SecurityBits)
	}
	return nil
}

// CheckPlan is a client's check, before any key leaves it, of an active
// plan p against the roster its certificate names: no more positions
// than the roster, and K and T that withstand a lying server colluding
// with collusion of it (CheckActiveParams).
func CheckPlan(p Params, roster int, collusion float64) error {
	if p.N > roster {
		return fmt.Errorf("the plan has %d positions, the certified roster %d: refusing", p.N, roster)
	}
	if err := CheckActiveParams(p.N, p.K, p.T, int(math.Floor(collusion*float64(roster)))); err != nil {
		k, t, _ := ChooseParamsActive(p.N, ProvisionedDropout(float64(p.N)/float64(roster)), collusion)
		return fmt.Errorf("refusing the server's parameters (ChooseParamsActive gives K = %d, T = %d here): %w", k, t, err)
	}
	return nil
}

// CheckSurvivors is a client's check, before it signs the survivor set
// (a bitmap over positions) and so before it reveals any share, that at
// least floor of the certified roster survived: the noise shares were
// calibrated for that many clients.
func CheckSurvivors(survived []byte, roster int, floor float64) error {
	n := 0
	for _, x := range survived {
		n += bits.OnesCount8(x)
	}
	if need := int(math.Ceil(floor*float64(roster) - 1e-9)); n < need {
		return fmt.Errorf("%d survivors of a certified roster of %d, below the pinned %g (%d): refusing to reveal shares", n, roster, floor, need)
	}
	return nil
}
