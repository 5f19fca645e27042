package secagg

import (
	"bytes"
	"crypto/ecdh"
	"crypto/ed25519"
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
	encSecret []byte            // X25519 secret of the two encryption key pairs
	inU2      bool              // its shares reached us
	bad       bool              // excluded by the server after the check: a dropout
	noShares  bool              // we reported its shares: we mask with it and hold none of its
	maskShare []byte            // our share of its mask-key seed
	selfShare []byte            // our share of its self-mask seed
	idKey     ed25519.PublicKey // active protocol: its certified identity key
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
	checked  bool            // CheckShares was called
	reported map[uint32]bool // the neighbours whose shares CheckShares reported

	// The active protocol (p.Active).
	auth      *Auth
	graphSeed [32]byte
	survived  []byte         // the survivor set this client signed
	own       *AdvertiseKeys // its own advertisement
	commitSet [32]byte       // the commitment set's hash (Reveal)

	// The state machine (Start, Next).
	input    []uint32        // the input to mask, until its masked copy
	started  bool            // Start was called
	delivery *SharesDelivery // the shares, until the check's answer
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
	if p.Active {
		return nil, fmt.Errorf("%w: the active protocol needs NewActiveClient", ErrIdentity)
	}
	return &Client{id: id, p: p, rand: rand, nbrs: Neighbours(p, id)}, nil
}

// NewActiveClient returns client id's side of a round of the active
// protocol (p.Active): a holds the pinned authority key, the client's
// identity and the session context. Its neighbours are known only once
// the committed key set arrives (ShareKeys).
func NewActiveClient(id uint32, p Params, rand io.Reader, a *Auth) (*Client, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if !p.Active {
		return nil, fmt.Errorf("secagg: NewActiveClient with Params.Active unset")
	}
	if int64(id) >= int64(p.N) {
		return nil, fmt.Errorf("secagg: client ID %d out of range [0, %d)", id, p.N)
	}
	if err := a.check(p, id); err != nil {
		return nil, err
	}
	return &Client{id: id, p: p, rand: rand, auth: a}, nil
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
//
// In the active protocol a client commits first (Commit, then Reveal):
// AdvertiseKeys refuses.
func (c *Client) AdvertiseKeys() (*AdvertiseKeys, error) {
	if c.p.Active {
		return nil, fmt.Errorf("%w: the active protocol advertises keys by Commit and Reveal", ErrState)
	}
	m, err := c.drawKeys()
	if err != nil {
		return nil, err
	}
	c.stage = stageShares
	return m, nil
}

// drawKeys draws the round's secrets and returns the public keys.
func (c *Client) drawKeys() (*AdvertiseKeys, error) {
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
	return &AdvertiseKeys{
		From:    c.id,
		MaskKey: c.maskPriv.PublicKey().Bytes(),
		EncKey:  enc.PublicKey().Bytes(),
	}, nil
}

// commitGraph (active protocol) checks the committed key set of b — sorted
// positions, the client's own advertisement in it unchanged — and fixes
// the neighbour graph from its hash.
func (c *Client) commitGraph(b *KeysBroadcast, own *AdvertiseKeys) error {
	commits := make([]KeyCommit, len(b.Committed))
	for i, cm := range b.Committed {
		if int64(cm.From) >= int64(c.p.N) || (i > 0 && cm.From <= b.Committed[i-1].From) {
			return fmt.Errorf("%w: committed key set not sorted by position or out of range", ErrIdentity)
		}
		commits[i] = KeyCommit{From: cm.From, Digest: hide(cm.From, &cm.Digest, &cm.Nonce)}
	}
	if CommitSetHash(c.p.Seed, commits) != c.commitSet {
		return fmt.Errorf("%w: the opened key set is not the commitment set fixed before the reveal", ErrIdentity)
	}
	i, ok := slices.BinarySearchFunc(b.Committed, c.id, func(cm Commitment, v uint32) int { return int(int64(cm.From) - int64(v)) })
	if !ok || b.Committed[i].Digest != advertDigest(own) || !bytes.Equal(b.Committed[i].Nonce[:], own.Nonce) {
		return fmt.Errorf("%w: the committed key set does not hold client %d's own advertisement", ErrIdentity, c.id)
	}
	c.graphSeed = GraphSeed(c.p.Seed, b.Committed)
	c.nbrs = Neighbours(graphParams(c.p, c.graphSeed), c.id)
	return nil
}

// verifyAdvert (active protocol) checks a neighbour's advertisement: a
// certificate of the pinned authority for this run, naming the client ID
// of the position, a valid signature by the certified key, and the digest
// committed in the key set.
func (c *Client) verifyAdvert(k *AdvertiseKeys, committed []Commitment) (ed25519.PublicKey, error) {
	cert, err := ParseCertificate(k.Cert)
	if err != nil {
		return nil, fmt.Errorf("advertisement of %d: %w", k.From, err)
	}
	if err := cert.Verify(c.auth.Authority); err != nil {
		return nil, err
	}
	if cert.Run != c.auth.Cert.Run || cert.Client != c.auth.Order[k.From] {
		return nil, fmt.Errorf("%w: position %d shows a certificate of client %d in run %q, want client %d in run %q",
			ErrIdentity, k.From, cert.Client, cert.Run, c.auth.Order[k.From], c.auth.Cert.Run)
	}
	if !ed25519.Verify(cert.Key, advertMsg(c.auth.Context, &c.p.Seed, k.From, cert.Client, k.MaskKey, k.EncKey), k.Sig) {
		return nil, fmt.Errorf("%w: keys of position %d are not signed by its certified identity", ErrIdentity, k.From)
	}
	i, ok := slices.BinarySearchFunc(committed, k.From, func(cm Commitment, v uint32) int { return int(int64(cm.From) - int64(v)) })
	if !ok || committed[i].Digest != advertDigest(k) {
		return nil, fmt.Errorf("%w: keys of position %d are not the ones committed", ErrIdentity, k.From)
	}
	return cert.Key, nil
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
	if c.p.Active {
		if err := c.commitGraph(b, c.own); err != nil {
			return nil, c.abort(err)
		}
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
		var idKey ed25519.PublicKey
		if c.p.Active {
			if idKey, err = c.verifyAdvert(&k, b.Committed); err != nil {
				return nil, c.abort(err)
			}
		}
		s, err := c.encPriv.ECDH(ep)
		if err != nil {
			return nil, c.abort(fmt.Errorf("%w: encryption key of %d: %v", ErrMessage, k.From, err))
		}
		c.peers[k.From] = &peer{maskPub: mp, encSecret: s, idKey: idKey}
		ids = append(ids, k.From)
	}
	if c.p.Active {
		// Every committed neighbour's keys must be delivered: the server
		// may not thin a neighbourhood it has committed to.
		for _, v := range c.nbrs {
			_, ok := slices.BinarySearchFunc(b.Committed, v, func(cm Commitment, v uint32) int { return int(int64(cm.From) - int64(v)) })
			if ok && c.peers[v] == nil {
				return nil, c.abort(fmt.Errorf("%w: neighbour %d is in the committed key set and its keys were withheld", ErrIdentity, v))
			}
		}
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
// sent and reports those that fail authentication or do not match their
// dealer's commitments: a bad neighbour's doing (or a relay's), which is
// never a reason to abort. The client then holds no share of a reported
// neighbour and still masks with it (MaskedInput); the server excludes a
// client only when too few neighbours hold its shares (Server.FinishCheck)
// and hands each client the list to pass to MaskedInput in
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
	c.reported = make(map[uint32]bool, len(out.Reported))
	for _, v := range out.Reported {
		c.reported[v] = true
	}
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
// share of a neighbour that it neither reported nor saw excluded fails
// authentication. A neighbour it reported is masked with, and none of its
// shares held.
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
		if c.reported[s.From] {
			// A report costs only the reporter: the neighbour stays in
			// the round (others hold its shares), so we mask with it,
			// and we hold none of its shares, so we reveal none.
			pr.inU2, pr.noShares = true, true
			n++
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
	if c.p.Active {
		if err := c.verifySurvivors(r); err != nil {
			return nil, c.abort(err)
		}
		r = c.derivedRequest()
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
		if pr.noShares {
			return nil // reported by us: the server does not count on us for it
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

// ErrInconsistent is returned (wrapped) by Client.Consistency and
// Client.Unmask in the active protocol when the survivor set the server
// presents is inconsistent with what the client knows, or fewer than T
// neighbours signed the same set: the server told different clients
// different things, and the client reveals nothing.
var ErrInconsistent = errors.New("secagg: inconsistent survivor sets")

// Consistency (active protocol, after MaskedInput) checks the survivor set
// U3 that the server announces (r.Survived) against what the client
// knows — it survived itself; each neighbour listed as a survivor sent it
// shares and was not excluded — and signs it. It may be called once; the
// signature commits the client to that one set: Unmask reveals only
// according to it.
func (c *Client) Consistency(r *UnmaskRequest) (*SurvivorSig, error) {
	if err := c.enter(stageUnmask); err != nil {
		return nil, err
	}
	if !c.p.Active || c.survived != nil {
		return nil, fmt.Errorf("%w: consistency round outside the active protocol, or twice", ErrState)
	}
	if r.To != c.id {
		return nil, c.abort(fmt.Errorf("%w: unmask request for %d delivered to %d", ErrMessage, r.To, c.id))
	}
	if len(r.Survived) != (c.p.N+7)/8 {
		return nil, c.abort(fmt.Errorf("%w: survivor bitmap of %d bytes for %d clients", ErrMessage, len(r.Survived), c.p.N))
	}
	if !bit(r.Survived, c.id) {
		return nil, c.abort(fmt.Errorf("%w: client %d is told it did not survive", ErrInconsistent, c.id))
	}
	if c.p.N%8 != 0 && r.Survived[len(r.Survived)-1]>>(c.p.N%8) != 0 {
		return nil, c.abort(fmt.Errorf("%w: survivor bitmap has bits past N", ErrMessage))
	}
	for _, v := range c.nbrs {
		pr := c.peers[v]
		if bit(r.Survived, v) && (pr == nil || !pr.inU2 || pr.bad) {
			return nil, c.abort(fmt.Errorf("%w: neighbour %d is listed as a survivor and sent client %d no valid shares", ErrInconsistent, v, c.id))
		}
	}
	c.survived = slices.Clone(r.Survived)
	sig := ed25519.Sign(c.auth.Key, consistMsg(c.auth.Context, &c.p.Seed, &c.graphSeed, c.survived))
	return &SurvivorSig{From: c.id, Sig: sig}, nil
}

// verifySurvivors checks, before any share is revealed, that the request
// repeats the survivor set the client signed and carries valid signatures
// of that same set from at least T neighbours that it lists as survivors;
// any signature that does not verify (a neighbour told another set, or a
// forgery) aborts.
func (c *Client) verifySurvivors(r *UnmaskRequest) error {
	if c.survived == nil {
		return fmt.Errorf("%w: Unmask before the consistency round", ErrState)
	}
	if !bytes.Equal(r.Survived, c.survived) {
		return fmt.Errorf("%w: the unmask request's survivor set differs from the one client %d signed", ErrInconsistent, c.id)
	}
	msg := consistMsg(c.auth.Context, &c.p.Seed, &c.graphSeed, c.survived)
	seen := make(map[uint32]bool, len(r.Signatures))
	for _, sg := range r.Signatures {
		pr := c.peers[sg.From]
		if pr == nil || pr.idKey == nil || seen[sg.From] || !bit(c.survived, sg.From) {
			return fmt.Errorf("%w: a survivor signature from %d, not a surviving neighbour of %d, or twice", ErrInconsistent, sg.From, c.id)
		}
		if !ed25519.Verify(pr.idKey, msg, sg.Sig) {
			return fmt.Errorf("%w: neighbour %d did not sign the survivor set client %d was told of", ErrInconsistent, sg.From, c.id)
		}
		seen[sg.From] = true
	}
	if len(seen) < c.p.T {
		return fmt.Errorf("%w: %d neighbours of client %d signed its survivor set, threshold %d", ErrInconsistent, len(seen), c.id, c.p.T)
	}
	return nil
}

// derivedRequest is the unmask request that the signed survivor set
// implies for the client's neighbourhood: the server's own lists are not
// used.
func (c *Client) derivedRequest() *UnmaskRequest {
	r := &UnmaskRequest{To: c.id}
	for _, v := range c.nbrs {
		pr := c.peers[v]
		switch {
		case pr == nil || !pr.inU2 || pr.bad || pr.noShares:
		case bit(c.survived, v):
			r.Survivors = append(r.Survivors, v)
		default:
			r.Dropped = append(r.Dropped, v)
		}
	}
	return r
}
