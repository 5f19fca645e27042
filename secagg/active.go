package secagg

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
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
type Commitment struct {
	From   uint32
	Digest [32]byte
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
func GraphSeed(base [32]byte, committed []Commitment) [32]byte {
	h := sha256.New()
	h.Write([]byte(graphLabel))
	h.Write(base[:])
	var x [4]byte
	for _, c := range committed {
		binary.BigEndian.PutUint32(x[:], c.From)
		h.Write(x[:])
		h.Write(c.Digest[:])
	}
	return [32]byte(h.Sum(nil))
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
