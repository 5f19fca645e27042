package secagg

import (
	"crypto/ecdh"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
)

var (
	// ErrTooFew is returned (wrapped) when a round has fewer survivors
	// than the protocol needs: fewer than T in a neighbourhood, or fewer
	// than Params.MinClients in total. The party aborts and releases
	// nothing further.
	ErrTooFew = errors.New("secagg: too few surviving clients")
	// ErrBothShares is returned (wrapped) by Client.Unmask when the
	// request would reveal both the self-mask share and the mask-key
	// share of one neighbour, which would unmask that neighbour's input.
	ErrBothShares = errors.New("secagg: request would reveal both shares of a client")
	// ErrState is returned (wrapped) when a method is called out of
	// order, twice, or after the party aborted.
	ErrState = errors.New("secagg: call out of protocol order")
	// ErrMessage is returned (wrapped) for a malformed message: wrong
	// recipient, unknown or duplicated client, wrong length.
	ErrMessage = errors.New("secagg: malformed message")
	// ErrExcluded is returned (wrapped) by Client.MaskedInput when the
	// server excluded the client itself after the check round (a
	// neighbour reported its shares as failing authentication).
	ErrExcluded = errors.New("secagg: client excluded from the round")
)

type stage int

const (
	stageKeys stage = iota
	stageShares
	stageInput
	stageUnmask
	stageDone
	stageAborted
)

var expanders = sync.Pool{New: func() any { return new(expander) }}

// peer is what a client knows about one neighbour that advertised keys.
type peer struct {
	maskPub   *ecdh.PublicKey
	encSecret []byte // X25519 secret of the two encryption key pairs
	inU2      bool   // its shares reached us
	bad       bool   // excluded by the server after the check: a dropout
	maskShare []byte // our share of its mask-key seed
	selfShare []byte // our share of its self-mask seed
}

// Client is one client's side of a round. Its methods must be called in
// protocol order, once each: AdvertiseKeys, ShareKeys, MaskedInput,
// Unmask. After any error the client has aborted and refuses further
// calls. A Client is not safe for concurrent use.
type Client struct {
	id    uint32
	p     Params
	rand  io.Reader
	nbrs  []uint32
	stage stage

	maskSeed [SeedSize]byte
	selfSeed [SeedSize]byte
	maskPriv *ecdh.PrivateKey
	encPriv  *ecdh.PrivateKey
	peers    map[uint32]*peer
	checked  bool // CheckShares was called
}

// NewClient returns client id's side of the round with parameters p.
// rand supplies all secret randomness (crypto/rand.Reader in production).
func NewClient(id uint32, p Params, rand io.Reader) (*Client, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if int64(id) >= int64(p.N) {
		return nil, fmt.Errorf("secagg: client ID %d out of range [0, %d)", id, p.N)
	}
	return &Client{id: id, p: p, rand: rand, nbrs: Neighbours(p, id)}, nil
}

// ID returns the client's ID.
func (c *Client) ID() uint32 { return c.id }

// Neighbours returns the client's neighbours in the round graph.
func (c *Client) Neighbours() []uint32 { return c.nbrs }

func (c *Client) enter(s stage) error {
	if c.stage != s {
		return fmt.Errorf("%w: client %d is in stage %d, not %d", ErrState, c.id, c.stage, s)
	}
	return nil
}

func (c *Client) abort(err error) error {
	c.stage = stageAborted
	c.peers = nil
	return err
}

// AdvertiseKeys (round 0) draws the round's secrets — the mask-key seed,
// from which the mask key pair is derived, the encryption key pair and
// the self-mask seed — and returns the public keys.
func (c *Client) AdvertiseKeys() (*AdvertiseKeys, error) {
	if err := c.enter(stageKeys); err != nil {
		return nil, err
	}
	if _, err := io.ReadFull(c.rand, c.maskSeed[:]); err != nil {
		return nil, c.abort(fmt.Errorf("secagg: mask-key seed: %w", err))
	}
	if _, err := io.ReadFull(c.rand, c.selfSeed[:]); err != nil {
		return nil, c.abort(fmt.Errorf("secagg: self-mask seed: %w", err))
	}
	enc, err := ecdh.X25519().GenerateKey(c.rand)
	if err != nil {
		return nil, c.abort(fmt.Errorf("secagg: encryption key: %w", err))
	}
	c.encPriv = enc
	c.maskPriv = maskKeyFromSeed(&c.maskSeed, &c.p.Seed)
	c.stage = stageShares
	return &AdvertiseKeys{
		From:    c.id,
		MaskKey: c.maskPriv.PublicKey().Bytes(),
		EncKey:  enc.PublicKey().Bytes(),
	}, nil
}

// ShareKeys (round 1) reads the neighbours' public keys, Shamir-shares
// the two seeds among those neighbours with threshold T, and returns each
// neighbour's shares encrypted to it. It aborts if fewer than T
// neighbours advertised keys.
func (c *Client) ShareKeys(b *KeysBroadcast) (*ShareKeys, error) {
	if err := c.enter(stageShares); err != nil {
		return nil, err
	}
	if b.To != c.id {
		return nil, c.abort(fmt.Errorf("%w: keys for client %d delivered to %d", ErrMessage, b.To, c.id))
	}
	c.peers = make(map[uint32]*peer, len(b.Keys))
	ids := make([]uint32, 0, len(b.Keys))
	for _, k := range b.Keys {
		if !c.isNeighbour(k.From) {
			return nil, c.abort(fmt.Errorf("%w: keys of %d, not a neighbour of %d", ErrMessage, k.From, c.id))
		}
		if c.peers[k.From] != nil {
			return nil, c.abort(fmt.Errorf("%w: keys of %d twice", ErrMessage, k.From))
		}
		mp, ep, err := parseKeys(&k)
		if err != nil {
			return nil, c.abort(err)
		}
		s, err := c.encPriv.ECDH(ep)
		if err != nil {
			return nil, c.abort(fmt.Errorf("%w: encryption key of %d: %v", ErrMessage, k.From, err))
		}
		c.peers[k.From] = &peer{maskPub: mp, encSecret: s}
		ids = append(ids, k.From)
	}
	if len(ids) < c.p.T {
		return nil, c.abort(fmt.Errorf("%w: client %d has %d neighbours with keys, threshold %d", ErrTooFew, c.id, len(ids), c.p.T))
	}
	slices.Sort(ids)
	ms, err := shareSeed(c.rand, &c.maskSeed, c.p.T, ids)
	if err != nil {
		return nil, c.abort(err)
	}
	ss, err := shareSeed(c.rand, &c.selfSeed, c.p.T, ids)
	if err != nil {
		return nil, c.abort(err)
	}
	out := &ShareKeys{From: c.id, Shares: make([]EncryptedShare, len(ids))}
	for i, v := range ids {
		a := shareAEAD(c.peers[v].encSecret, &c.p.Seed, c.id, v)
		ct, err := sealShares(a, c.rand, &c.p.Seed, c.id, v, ms[i], ss[i])
		if err != nil {
			return nil, c.abort(err)
		}
		out.Shares[i] = EncryptedShare{From: c.id, To: v, Ciphertext: ct}
	}
	c.stage = stageInput
	return out, nil
}

func (c *Client) isNeighbour(v uint32) bool {
	_, ok := slices.BinarySearch(c.nbrs, v)
	return ok
}

func parseKeys(k *AdvertiseKeys) (mask, enc *ecdh.PublicKey, err error) {
	mask, err = ecdh.X25519().NewPublicKey(k.MaskKey)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: mask key of %d: %v", ErrMessage, k.From, err)
	}
	enc, err = ecdh.X25519().NewPublicKey(k.EncKey)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: encryption key of %d: %v", ErrMessage, k.From, err)
	}
	return mask, enc, nil
}

// probeKey is a fixed X25519 private key used only to test public keys.
var probeKey = func() *ecdh.PrivateKey {
	k, err := ecdh.X25519().NewPrivateKey([]byte("privrec/secagg/v1 low-order test"))
	if err != nil {
		panic(err)
	}
	return k
}()

// ErrLowOrder is returned (wrapped) for a public key of small order: every
// agreement with it gives the all-zero secret, so a client advertising
// one would make each neighbour's key agreement fail (or, worse, be
// predictable). The server refuses such keys at AdvertiseKeys, so the
// client counts as dropped before anyone depends on it.
var ErrLowOrder = errors.New("secagg: public key of small order")

// checkOrder returns ErrLowOrder when pub is a point of small order:
// X25519 with any (clamped) scalar gives zero for exactly those points,
// which crypto/ecdh reports as an error.
func checkOrder(from uint32, what string, pub *ecdh.PublicKey) error {
	if _, err := probeKey.ECDH(pub); err != nil {
		return fmt.Errorf("%w: %s key of %d", ErrLowOrder, what, from)
	}
	return nil
}

// CheckShares (round 2a, optional) decrypts the shares that neighbours
// sent and reports those that fail authentication: a bad neighbour's
// doing (or a relay's), which makes the neighbour a dropout rather than a
// reason to abort. The server excludes every reported client from the
// round before any masked input is taken (Server.AddCheck,
// FinishCheck), and hands each client the list to pass to MaskedInput in
// SharesDelivery.Excluded.
func (c *Client) CheckShares(d *SharesDelivery) (*ShareCheck, error) {
	if err := c.enter(stageInput); err != nil {
		return nil, err
	}
	if c.checked {
		return nil, fmt.Errorf("%w: client %d checked its shares twice", ErrState, c.id)
	}
	if d.To != c.id {
		return nil, c.abort(fmt.Errorf("%w: shares for client %d delivered to %d", ErrMessage, d.To, c.id))
	}
	out := &ShareCheck{From: c.id}
	seen := make(map[uint32]bool, len(d.Shares))
	for _, s := range d.Shares {
		pr := c.peers[s.From]
		if s.To != c.id || pr == nil || seen[s.From] {
			return nil, c.abort(fmt.Errorf("%w: share %d→%d delivered to %d, not from a neighbour with keys, or twice", ErrMessage, s.From, s.To, c.id))
		}
		seen[s.From] = true
		a := shareAEAD(pr.encSecret, &c.p.Seed, s.From, c.id)
		if _, _, err := openShares(a, &c.p.Seed, s.From, c.id, s.Ciphertext); err != nil {
			out.Reported = append(out.Reported, s.From)
		}
	}
	slices.Sort(out.Reported)
	c.checked = true
	return out, nil
}

// MaskedInput (round 2) decrypts the shares that neighbours sent, and
// returns x masked: y = x + PRG(b_u) + Σ_v ±PRG(s_uv) mod 2^Bits, over
// the neighbours v whose shares arrived (v in U2) and that the server did
// not exclude after the check (d.Excluded), with + when u < v and − when
// u > v. x must have Len values below 2^Bits; it is not modified. It
// aborts if fewer than T neighbours remain (the masks would then hide x
// behind too few neighbours), if the client itself is excluded, or if a
// share of a neighbour that was not excluded fails authentication.
func (c *Client) MaskedInput(d *SharesDelivery, x []uint32) (*MaskedInput, error) {
	if err := c.enter(stageInput); err != nil {
		return nil, err
	}
	if d.To != c.id {
		return nil, c.abort(fmt.Errorf("%w: shares for client %d delivered to %d", ErrMessage, d.To, c.id))
	}
	if len(x) != c.p.Len {
		return nil, c.abort(fmt.Errorf("%w: input has %d values, want %d", ErrMessage, len(x), c.p.Len))
	}
	mask := c.p.mask()
	for i, v := range x {
		if v&^mask != 0 {
			return nil, c.abort(fmt.Errorf("%w: input[%d] = %d does not fit in %d bits", ErrMessage, i, v, c.p.Bits))
		}
	}
	excluded := make(map[uint32]bool, len(d.Excluded))
	for _, v := range d.Excluded {
		if v == c.id {
			return nil, c.abort(fmt.Errorf("%w: client %d was excluded from the round", ErrExcluded, c.id))
		}
		excluded[v] = true
	}
	n := 0
	for _, s := range d.Shares {
		pr := c.peers[s.From]
		if s.To != c.id {
			return nil, c.abort(fmt.Errorf("%w: share %d→%d delivered to %d", ErrAuth, s.From, s.To, c.id))
		}
		if pr == nil {
			return nil, c.abort(fmt.Errorf("%w: share from %d, which is not a neighbour with keys", ErrMessage, s.From))
		}
		if pr.inU2 {
			return nil, c.abort(fmt.Errorf("%w: two shares from %d", ErrMessage, s.From))
		}
		if excluded[s.From] {
			pr.bad = true // dropped: no mask with it, never asked for its shares
			continue
		}
		a := shareAEAD(pr.encSecret, &c.p.Seed, s.From, c.id)
		ms, ss, err := openShares(a, &c.p.Seed, s.From, c.id, s.Ciphertext)
		if err != nil {
			return nil, c.abort(err)
		}
		pr.inU2, pr.maskShare, pr.selfShare = true, ms, ss
		n++
	}
	if n < c.p.T {
		return nil, c.abort(fmt.Errorf("%w: client %d received shares from %d neighbours, threshold %d", ErrTooFew, c.id, n, c.p.T))
	}
	y := slices.Clone(x)
	e := expanders.Get().(*expander)
	defer expanders.Put(e)
	k := selfMaskKey(&c.selfSeed, &c.p.Seed, c.id)
	e.add(y, &k, false)
	for _, v := range c.nbrs {
		pr := c.peers[v]
		if pr == nil || !pr.inU2 {
			continue
		}
		k, err := pairwiseKey(c.maskPriv, pr.maskPub, &c.p.Seed, c.id, v)
		if err != nil {
			return nil, c.abort(err)
		}
		e.add(y, &k, c.id > v)
	}
	for i := range y {
		y[i] &= mask
	}
	c.stage = stageUnmask
	return &MaskedInput{From: c.id, Y: y}, nil
}

// Unmask (round 3) answers the server's request: for each surviving
// neighbour the share of its self-mask seed, for each dropped neighbour
// the share of its mask-key seed. It refuses (ErrBothShares) a request
// naming a neighbour in both lists, and answers at most once per round,
// so it never reveals both shares of any client. Both lists name
// neighbours only; a request listing the client itself is refused.
func (c *Client) Unmask(r *UnmaskRequest) (*UnmaskResponse, error) {
	if err := c.enter(stageUnmask); err != nil {
		return nil, err
	}
	if r.To != c.id {
		return nil, c.abort(fmt.Errorf("%w: unmask request for %d delivered to %d", ErrMessage, r.To, c.id))
	}
	kind := make(map[uint32]bool, len(r.Survivors)+len(r.Dropped)) // true: survivor
	out := &UnmaskResponse{From: c.id}
	add := func(v uint32, survivor bool) error {
		if prev, seen := kind[v]; seen {
			if prev != survivor {
				return fmt.Errorf("%w: client %d asked for both shares of %d", ErrBothShares, c.id, v)
			}
			return fmt.Errorf("%w: %d listed twice", ErrMessage, v)
		}
		kind[v] = survivor
		pr := c.peers[v]
		if pr == nil || !pr.inU2 || pr.bad {
			return fmt.Errorf("%w: client %d holds no shares of %d", ErrMessage, c.id, v)
		}
		if survivor {
			out.SelfShares = append(out.SelfShares, RevealedShare{Owner: v, Share: pr.selfShare})
		} else {
			out.MaskShares = append(out.MaskShares, RevealedShare{Owner: v, Share: pr.maskShare})
		}
		return nil
	}
	for _, v := range r.Survivors {
		if v == c.id {
			return nil, c.abort(fmt.Errorf("%w: client %d is listed as its own neighbour", ErrMessage, c.id))
		}
		if err := add(v, true); err != nil {
			return nil, c.abort(err)
		}
	}
	for _, v := range r.Dropped {
		if v == c.id {
			return nil, c.abort(fmt.Errorf("%w: client %d is told it dropped", ErrMessage, c.id))
		}
		if err := add(v, false); err != nil {
			return nil, c.abort(err)
		}
	}
	c.stage = stageDone
	c.peers = nil
	return out, nil
}
