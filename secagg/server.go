package secagg

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// shareSet collects the revealed shares of one seed.
type shareSet struct {
	holders []uint32
	values  [][]byte
}

// Server is the server's side of a round. It relays messages, sums the
// masked inputs and, from the shares revealed in round 3, removes the
// masks that do not cancel. Each round is Add* for every message that
// arrives in time, then Finish* (which fixes the round's survivors and
// returns the messages for the next round); Result ends the protocol.
// Methods are safe for concurrent use.
type Server struct {
	mu    sync.Mutex
	p     Params
	g     *Graph
	stage stage

	keys  []*AdvertiseKeys   // by client; non-nil: in U1
	sent  []bool             // ShareKeys received: in U2
	inbox [][]EncryptedShare // by recipient
	in3   []bool             // MaskedInput received: in U3
	sum   []uint32
	unmsk []bool // UnmaskResponse received

	self map[uint32]*shareSet // self-mask seed shares, by owner in U3
	mask map[uint32]*shareSet // mask-key seed shares, by owner in U2\U3

	// The optional check round: checks[u] is u's ShareCheck (nil: none);
	// checking is set once FinishCheck ran, excluded by it.
	checks   []*ShareCheck
	checking bool
	excluded []bool

	// The active protocol: the graph seed, the unmask requests of
	// FinishMaskedInput, the survivors' signatures, and whether the
	// consistency round closed.
	graphSeed [32]byte
	requests  map[uint32]*UnmaskRequest
	sigs      map[uint32]*SurvivorSig
	consisted bool
	// The commitments (AddCommit) and whether FinishCommit closed them.
	commits      map[uint32][32]byte
	commitClosed bool

	// Robustness against lying clients (robust.go): each dealt share's
	// commitment (by edge(dealer, holder)), the pairs whose holder
	// reported the dealer's shares (edge(holder, dealer): it holds none),
	// the clients proven to have lied, and the active protocol's
	// verifier with the identity keys it certified.
	shareCommits map[uint64][commitSize]byte
	lacks        map[uint64]bool
	cheaters     map[uint32]string
	verifier     *Verifier
	idKeys       []ed25519.PublicKey
}

// NewServer returns the server's side of the round with parameters p.
func NewServer(p Params) (*Server, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	s := &Server{
		p:    p,
		keys: make([]*AdvertiseKeys, p.N), sent: make([]bool, p.N),
		inbox: make([][]EncryptedShare, p.N), in3: make([]bool, p.N),
		unmsk: make([]bool, p.N), sum: make([]uint32, p.Len),
	}
	if !p.Active { // the active protocol's graph is fixed by FinishKeys
		s.g = NewGraph(p)
	}
	return s, nil
}

// Graph returns the round's neighbour graph (in the active protocol, nil
// before FinishKeys).
func (s *Server) Graph() *Graph { return s.g }

func (s *Server) enter(st stage) error {
	if s.stage != st {
		return fmt.Errorf("%w: server is in stage %d, not %d", ErrState, s.stage, st)
	}
	return nil
}

func (s *Server) from(v uint32) error {
	if int64(v) >= int64(s.p.N) {
		return fmt.Errorf("%w: client ID %d out of range", ErrMessage, v)
	}
	return nil
}

func (s *Server) abort(err error) error {
	s.stage = stageAborted
	s.inbox, s.sum, s.self, s.mask = nil, nil, nil, nil
	return err
}

func count(b []bool) int {
	n := 0
	for _, x := range b {
		if x {
			n++
		}
	}
	return n
}

func (s *Server) enough(round string, n int) error {
	if n < s.p.minClients() {
		return s.abort(fmt.Errorf("%w: %d clients survived %s, minimum %d", ErrTooFew, n, round, s.p.minClients()))
	}
	return nil
}

// AddKeys records a client's AdvertiseKeys (round 0).
func (s *Server) AddKeys(m *AdvertiseKeys) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(stageKeys); err != nil {
		return err
	}
	if err := s.from(m.From); err != nil {
		return err
	}
	if s.keys[m.From] != nil {
		return fmt.Errorf("%w: keys of %d twice", ErrMessage, m.From)
	}
	mk, ek, err := parseKeys(m)
	if err != nil {
		return err
	}
	if err := checkOrder(m.From, "mask", mk); err != nil {
		return err
	}
	if err := checkOrder(m.From, "encryption", ek); err != nil {
		return err
	}
	if s.p.Active && (len(m.Cert) == 0 || len(m.Sig) == 0) {
		return fmt.Errorf("%w: keys of %d carry no certificate or signature", ErrMessage, m.From)
	}
	if s.p.Active {
		if err := s.checkReveal(m); err != nil {
			return err
		}
		if s.verifier != nil {
			if err := s.verifyAdvert(m); err != nil {
				return err
			}
		}
	}
	s.keys[m.From] = &AdvertiseKeys{From: m.From, MaskKey: slices.Clone(m.MaskKey), EncKey: slices.Clone(m.EncKey),
		Cert: slices.Clone(m.Cert), Sig: slices.Clone(m.Sig), Nonce: slices.Clone(m.Nonce)}
	return nil
}

// FinishKeys closes round 0: the clients that advertised are U1. It
// returns, for each of them, its neighbours' keys within U1.
func (s *Server) FinishKeys() ([]*KeysBroadcast, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(stageKeys); err != nil {
		return nil, err
	}
	var committed []Commitment
	if s.p.Active {
		var err error
		if committed, err = s.opened(); err != nil {
			return nil, s.abort(err)
		}
		s.graphSeed = GraphSeed(s.p.Seed, committed)
		s.g = NewGraph(graphParams(s.p, s.graphSeed))
	}
	var out []*KeysBroadcast
	for u, k := range s.keys {
		if k == nil {
			continue
		}
		b := &KeysBroadcast{To: uint32(u), Committed: committed}
		for _, v := range s.g.Neighbours(uint32(u)) {
			if s.keys[v] != nil {
				b.Keys = append(b.Keys, *s.keys[v])
			}
		}
		out = append(out, b)
	}
	if err := s.enough("AdvertiseKeys", len(out)); err != nil {
		return nil, err
	}
	s.stage = stageShares
	return out, nil
}

// AddShares records a client's ShareKeys (round 1): one share for exactly
// each of its neighbours in U1.
func (s *Server) AddShares(m *ShareKeys) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(stageShares); err != nil {
		return err
	}
	if err := s.from(m.From); err != nil {
		return err
	}
	if s.keys[m.From] == nil {
		return fmt.Errorf("%w: shares from %d, which did not advertise keys", ErrMessage, m.From)
	}
	if s.sent[m.From] {
		return fmt.Errorf("%w: shares from %d twice", ErrMessage, m.From)
	}
	var want []uint32
	for _, v := range s.g.Neighbours(m.From) {
		if s.keys[v] != nil {
			want = append(want, v)
		}
	}
	if len(m.Shares) != len(want) {
		return fmt.Errorf("%w: %d sent %d shares for %d neighbours with keys", ErrMessage, m.From, len(m.Shares), len(want))
	}
	seen := make(map[uint32]bool, len(want))
	for _, e := range m.Shares {
		switch {
		case e.From != m.From:
			return fmt.Errorf("%w: ShareKeys of %d holds a share from %d", ErrMessage, m.From, e.From)
		case !s.g.Adjacent(m.From, e.To) || s.keys[e.To] == nil || seen[e.To]:
			return fmt.Errorf("%w: share %d→%d is not for a neighbour with keys, or repeated", ErrMessage, m.From, e.To)
		case len(e.Ciphertext) != CiphertextSize:
			return fmt.Errorf("%w: share %d→%d has %d bytes", ErrMessage, m.From, e.To, len(e.Ciphertext))
		}
		seen[e.To] = true
	}
	if s.shareCommits == nil {
		s.shareCommits = make(map[uint64][commitSize]byte)
	}
	for _, e := range m.Shares {
		s.inbox[e.To] = append(s.inbox[e.To], EncryptedShare{From: e.From, To: e.To, Ciphertext: slices.Clone(e.Ciphertext)})
		s.shareCommits[edge(e.From, e.To)] = [commitSize]byte(e.Ciphertext[:commitSize])
	}
	s.sent[m.From] = true
	return nil
}

// FinishShares closes round 1: the clients that shared are U2. It returns
// for each of them the shares addressed to it.
func (s *Server) FinishShares() ([]*SharesDelivery, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(stageShares); err != nil {
		return nil, err
	}
	var out []*SharesDelivery
	for u, ok := range s.sent {
		if ok {
			out = append(out, &SharesDelivery{To: uint32(u), Shares: s.inbox[u]})
		}
	}
	s.inbox = nil
	if err := s.enough("ShareKeys", len(out)); err != nil {
		return nil, err
	}
	s.stage = stageInput
	return out, nil
}

// AddCheck records a client's ShareCheck (the optional round 2a, after
// FinishShares and before any masked input).
func (s *Server) AddCheck(m *ShareCheck) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(stageInput); err != nil {
		return err
	}
	if s.checking || count(s.in3) > 0 {
		return fmt.Errorf("%w: check of %d after the check round closed", ErrState, m.From)
	}
	if err := s.from(m.From); err != nil {
		return err
	}
	if !s.sent[m.From] {
		return fmt.Errorf("%w: check from %d, which did not share keys", ErrMessage, m.From)
	}
	if s.checks == nil {
		s.checks = make([]*ShareCheck, s.p.N)
	}
	if s.checks[m.From] != nil {
		return fmt.Errorf("%w: check of %d twice", ErrMessage, m.From)
	}
	for k, v := range m.Reported {
		if int64(v) >= int64(s.p.N) || !s.g.Adjacent(m.From, v) || !s.sent[v] || (k > 0 && v <= m.Reported[k-1]) {
			return fmt.Errorf("%w: check of %d reports %d: not a neighbour that shared, or out of order", ErrMessage, m.From, v)
		}
	}
	s.checks[m.From] = &ShareCheck{From: m.From, Reported: slices.Clone(m.Reported)}
	return nil
}

// FinishCheck closes the check round. A report costs only its reporter:
// it says the reporter holds no valid share of the reported client, so
// the reporter is never asked for one, and the two still mask with each
// other (no pairwise mask is dropped because of a report, which the
// server cannot check). A client is excluded — treated as dropped before
// its masked input, which is refused — when it sent no check, or when
// fewer than T of its neighbours that remain hold valid shares of it (a
// dealer of garbage; a liar excludes nobody unless K−T others report the
// same client). It returns, for each client that remains, its
// SharesDelivery.Excluded list: the neighbours it must not mask with.
func (s *Server) FinishCheck() ([]*SharesDelivery, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(stageInput); err != nil {
		return nil, err
	}
	if s.checking || count(s.in3) > 0 {
		return nil, fmt.Errorf("%w: check round closed twice or after masked inputs", ErrState)
	}
	if s.checks == nil {
		s.checks = make([]*ShareCheck, s.p.N)
	}
	s.excluded = make([]bool, s.p.N)
	s.lacks = make(map[uint64]bool)
	for u, ok := range s.sent {
		if ok && s.checks[u] == nil {
			s.excluded[u] = true
		}
	}
	for _, c := range s.checks {
		if c == nil {
			continue
		}
		for _, v := range c.Reported {
			s.lacks[edge(c.From, v)] = true
		}
	}
	// Exclude every client too few remaining neighbours hold, until none
	// is left: an exclusion removes a holder of others.
	for changed := true; changed; {
		changed = false
		for u, ok := range s.sent {
			if !ok || s.excluded[u] {
				continue
			}
			holders := 0
			for _, v := range s.g.Neighbours(uint32(u)) {
				if s.sent[v] && !s.excluded[v] && !s.lacks[edge(v, uint32(u))] {
					holders++
				}
			}
			if holders < s.p.T {
				s.excluded[u], changed = true, true
			}
		}
	}
	var out []*SharesDelivery
	for u, ok := range s.sent {
		if !ok || s.excluded[u] {
			continue
		}
		d := &SharesDelivery{To: uint32(u)}
		for _, v := range s.g.Neighbours(uint32(u)) {
			if s.sent[v] && s.excluded[v] {
				d.Excluded = append(d.Excluded, v)
			}
		}
		out = append(out, d)
	}
	for u, x := range s.excluded {
		if x {
			s.sent[u] = false // as if it never shared: no one masks with it
		}
	}
	s.checking = true
	if err := s.enough("the share check", len(out)); err != nil {
		return nil, err
	}
	return out, nil
}

// Reports returns, for each client reported in the check round, the
// clients that reported it, sorted.
func (s *Server) Reports() map[uint32][]uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[uint32][]uint32{}
	for _, c := range s.checks {
		if c == nil {
			continue
		}
		for _, v := range c.Reported {
			out[v] = append(out[v], c.From)
		}
	}
	return out
}

// AddMaskedInput adds a client's masked vector (round 2) to the running
// sum; the vector itself is not kept.
func (s *Server) AddMaskedInput(m *MaskedInput) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(stageInput); err != nil {
		return err
	}
	if err := s.from(m.From); err != nil {
		return err
	}
	if !s.sent[m.From] || s.in3[m.From] {
		return fmt.Errorf("%w: masked input from %d, which did not share keys, was excluded, or sent twice", ErrMessage, m.From)
	}
	if s.checks != nil && !s.checking {
		return fmt.Errorf("%w: masked input of %d before the check round closed", ErrState, m.From)
	}
	if len(m.Y) != s.p.Len {
		return fmt.Errorf("%w: masked input of %d has %d values, want %d", ErrMessage, m.From, len(m.Y), s.p.Len)
	}
	mask := s.p.mask()
	for i, y := range m.Y {
		if y&^mask != 0 {
			return fmt.Errorf("%w: masked input of %d: value %d exceeds %d bits", ErrMessage, m.From, i, s.p.Bits)
		}
	}
	for i, y := range m.Y {
		s.sum[i] += y
	}
	s.in3[m.From] = true
	return nil
}

// FinishMaskedInput closes round 2: the clients whose masked input arrived
// are U3. It checks that every secret the server will need — the
// self-mask seed of each survivor, the mask-key seed of each dropped
// client in U2 that has surviving neighbours — has at least T holders in
// U3, and aborts otherwise, before any share is revealed. It returns, for
// each survivor, which of its neighbours survived and which dropped.
func (s *Server) FinishMaskedInput() ([]*UnmaskRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(stageInput); err != nil {
		return nil, err
	}
	if err := s.enough("MaskedInput", count(s.in3)); err != nil {
		return nil, err
	}
	var out []*UnmaskRequest
	var survived []byte
	if s.p.Active {
		survived = make([]byte, (s.p.N+7)/8)
		for u, ok := range s.in3 {
			if ok {
				survived[u/8] |= 1 << (u % 8)
			}
		}
		s.requests = make(map[uint32]*UnmaskRequest)
		s.sigs = make(map[uint32]*SurvivorSig)
	}
	for u := range s.p.N {
		if !s.sent[u] {
			continue
		}
		// holders: u's surviving neighbours that hold valid shares of
		// it; r: the neighbours u is asked about, less those whose
		// shares it reported.
		holders, masked := 0, false
		r := &UnmaskRequest{To: uint32(u), Survived: survived}
		for _, v := range s.g.Neighbours(uint32(u)) {
			if s.in3[v] && !s.lacks[edge(v, uint32(u))] {
				holders++
			}
			masked = masked || s.in3[v]
			switch {
			case s.lacks[edge(uint32(u), v)]:
			case s.in3[v]:
				r.Survivors = append(r.Survivors, v)
			case s.sent[v]:
				r.Dropped = append(r.Dropped, v)
			}
		}
		// u's secret is needed if u survived (self mask) or if u dropped
		// but a surviving neighbour masked with it (pairwise masks) —
		// which a neighbour that reported u's shares did too.
		if (s.in3[u] || masked) && holders < s.p.T {
			return nil, s.abort(fmt.Errorf("%w: client %d has %d surviving neighbours, threshold %d", ErrTooFew, u, holders, s.p.T))
		}
		if s.in3[u] {
			out = append(out, r)
			if s.requests != nil {
				s.requests[uint32(u)] = r
			}
		}
	}
	s.self = make(map[uint32]*shareSet)
	s.mask = make(map[uint32]*shareSet)
	s.stage = stageUnmask
	return out, nil
}

// AddUnmask records a client's revealed shares (round 3). Shares must be
// of the kind the server asked for: self-mask shares of surviving
// neighbours, mask-key shares of dropped ones.
func (s *Server) AddUnmask(m *UnmaskResponse) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(stageUnmask); err != nil {
		return err
	}
	if err := s.from(m.From); err != nil {
		return err
	}
	if !s.in3[m.From] || s.unmsk[m.From] {
		return fmt.Errorf("%w: unmask response from %d, which is not a survivor or answered twice", ErrMessage, m.From)
	}
	if s.p.Active && (!s.consisted || s.sigs[m.From] == nil) {
		return fmt.Errorf("%w: unmask response from %d before the consistency round closed, or without its signature", ErrMessage, m.From)
	}
	seen := make(map[uint32]bool)
	check := func(list []RevealedShare, survivor bool) error {
		for _, r := range list {
			v := r.Owner
			if int64(v) >= int64(s.p.N) || !s.g.Adjacent(m.From, v) || seen[v] ||
				s.in3[v] != survivor || !s.sent[v] || len(r.Share) != ShareSize || s.lacks[edge(m.From, v)] {
				return fmt.Errorf("%w: unmask response of %d: unexpected share of %d", ErrMessage, m.From, v)
			}
			seen[v] = true
			kind := byte(kindMask)
			if survivor {
				kind = kindSelf
			}
			if err := s.checkRevealed(m.From, v, kind, r.Share); err != nil {
				if errors.Is(err, ErrCheat) {
					// Proof: m.From opened this share and accepted it.
					// It answers no more; the others' shares suffice.
					s.cheat(m.From, err.Error())
					s.unmsk[m.From] = true
				}
				return err
			}
		}
		return nil
	}
	if err := check(m.SelfShares, true); err != nil {
		return err
	}
	if err := check(m.MaskShares, false); err != nil {
		return err
	}
	put := func(sets map[uint32]*shareSet, list []RevealedShare) {
		for _, r := range list {
			set := sets[r.Owner]
			if set == nil {
				set = &shareSet{}
				sets[r.Owner] = set
			}
			set.holders = append(set.holders, m.From)
			set.values = append(set.values, slices.Clone(r.Share))
		}
	}
	put(s.self, m.SelfShares)
	put(s.mask, m.MaskShares)
	s.unmsk[m.From] = true
	return nil
}

// Result reconstructs the needed seeds, removes the self masks of the
// survivors and the pairwise masks between survivors and dropped
// clients, and returns Σ_{u∈U3} x_u mod 2^Bits. It aborts (ErrTooFew) if
// some needed seed has fewer than T shares, and fails (ErrShares) if the
// shares do not reconstruct a valid seed or a mask key that matches the
// advertised public key.
func (s *Server) Result() ([]uint32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys, err := s.unmaskKeys()
	if err != nil {
		return nil, err
	}
	sum := s.sum
	removeMasks(sum, 0, keys)
	mask := s.p.mask()
	out := make([]uint32, len(sum))
	for i, x := range sum {
		out[i] = x & mask
	}
	return out, nil
}

// unmaskKeys ends the round: it reconstructs the needed seeds and returns
// the masks to remove from the sum of the masked inputs (Result,
// MaskStreams).
func (s *Server) unmaskKeys() ([]MaskStream, error) {
	if err := s.enter(stageUnmask); err != nil {
		return nil, err
	}
	// The masks to remove: the self mask of each survivor, the pairwise
	// masks between each dropped client in U2 and its surviving
	// neighbours (unmask.go derives them on all cores).
	u := &unmaskPlan{p: &s.p, keys: s.keys}
	for v := range s.p.N {
		if !s.in3[v] {
			continue
		}
		set := s.self[uint32(v)]
		if set == nil || len(set.holders) < s.p.T {
			return nil, s.abort(fmt.Errorf("%w: %d shares of the self mask of %d, threshold %d", ErrTooFew, lenHolders(set), v, s.p.T))
		}
		u.owners = append(u.owners, uint32(v))
		u.sets = append(u.sets, set)
	}
	u.nSelf = len(u.owners)
	u.survOff = append(u.survOff, 0)
	for v := range s.p.N {
		if !s.sent[v] || s.in3[v] {
			continue
		}
		n0 := len(u.surv)
		for _, w := range s.g.Neighbours(uint32(v)) {
			if s.in3[w] {
				u.surv = append(u.surv, w)
			}
		}
		if len(u.surv) == n0 {
			continue
		}
		set := s.mask[uint32(v)]
		if set == nil || len(set.holders) < s.p.T {
			return nil, s.abort(fmt.Errorf("%w: %d shares of the mask key of dropped client %d, threshold %d", ErrTooFew, lenHolders(set), v, s.p.T))
		}
		u.owners = append(u.owners, uint32(v))
		u.sets = append(u.sets, set)
		u.survOff = append(u.survOff, len(u.surv))
	}
	keys, bad, err := u.maskKeys()
	for _, v := range bad {
		// Every share used was checked against v's own commitments, so
		// shares that do not give v's seed are v's doing.
		s.cheat(v, fmt.Sprintf("its committed shares do not reconstruct one valid seed: %v", err))
	}
	if err != nil {
		return nil, s.abort(err)
	}
	s.stage = stageDone
	return keys, nil
}

// Ready reports whether the shares revealed so far suffice for Result:
// T of the self-mask seed of every survivor and of the mask-key seed of
// every dropped client that a survivor masked with. It changes nothing,
// so a caller can wait for more shares while it is false.
func (s *Server) Ready() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stage != stageUnmask {
		return false
	}
	for u := range s.p.N {
		if s.in3[u] && lenHolders(s.self[uint32(u)]) < s.p.T {
			return false
		}
	}
	for v := range s.p.N {
		if !s.sent[v] || s.in3[v] {
			continue
		}
		for _, u := range s.g.Neighbours(uint32(v)) {
			if s.in3[u] {
				if lenHolders(s.mask[uint32(v)]) < s.p.T {
					return false
				}
				break
			}
		}
	}
	return true
}

func lenHolders(s *shareSet) int {
	if s == nil {
		return 0
	}
	return len(s.holders)
}

// Survivors returns the clients whose inputs are in the sum (U3), once
// round 2 is closed.
func (s *Server) Survivors() []uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []uint32
	for u, ok := range s.in3 {
		if ok {
			out = append(out, uint32(u))
		}
	}
	return out
}

// AddConsistency records a survivor's signature of the survivor set
// (active protocol, between FinishMaskedInput and FinishConsistency).
// Each client verifies its neighbours'; with a Verifier the server
// refuses one that does not verify.
func (s *Server) AddConsistency(m *SurvivorSig) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(stageUnmask); err != nil {
		return err
	}
	if !s.p.Active || s.consisted {
		return fmt.Errorf("%w: consistency signature outside the consistency round", ErrState)
	}
	if err := s.from(m.From); err != nil {
		return err
	}
	if !s.in3[m.From] || s.sigs[m.From] != nil || len(m.Sig) != ed25519.SignatureSize {
		return fmt.Errorf("%w: consistency signature from %d, not a survivor, twice, or malformed", ErrMessage, m.From)
	}
	if s.verifier != nil {
		// A bad signature is refused here, so its sender is not asked
		// for shares, rather than relayed to abort its neighbours.
		if err := s.verifyConsistency(m); err != nil {
			return err
		}
	}
	s.sigs[m.From] = &SurvivorSig{From: m.From, Sig: slices.Clone(m.Sig)}
	return nil
}

// FinishConsistency closes the consistency round: for each survivor that
// signed, its unmask request with the signatures of its neighbours that
// signed. Only those clients are asked for shares.
func (s *Server) FinishConsistency() ([]*UnmaskRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(stageUnmask); err != nil {
		return nil, err
	}
	if !s.p.Active || s.consisted {
		return nil, fmt.Errorf("%w: FinishConsistency outside the consistency round", ErrState)
	}
	if err := s.enough("Consistency", len(s.sigs)); err != nil {
		return nil, err
	}
	var out []*UnmaskRequest
	for u := range s.p.N {
		if s.sigs[uint32(u)] == nil {
			continue
		}
		r := *s.requests[uint32(u)]
		for _, v := range s.g.Neighbours(uint32(u)) {
			if sg := s.sigs[v]; sg != nil {
				r.Signatures = append(r.Signatures, *sg)
			}
		}
		out = append(out, &r)
	}
	s.consisted = true
	return out, nil
}

// GraphSeed returns the seed of the round's neighbour graph: Params.Seed,
// or in the active protocol the hash of the committed key set (zero
// before FinishKeys).
func (s *Server) GraphSeed() [32]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.p.Active {
		return s.p.Seed
	}
	return s.graphSeed
}
