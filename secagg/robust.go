package secagg

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
)

// What one lying client can do to a session, and what stops it (see the
// package documentation, "No client can stop a session"): a false report
// costs only the reporter (Server.FinishCheck), a wrong revealed share is
// refused against its dealer's commitment and names its sender
// (Server.AddUnmask, Cheaters), shares that do not lie on one polynomial
// name their dealer (Server.Result), and under the active protocol the
// server checks every certificate and signature (Verifier) so that a bad
// one is its sender's dropout, not its neighbours' abort.

// ErrCheat is returned (wrapped) when a client's message is proof that it
// lied: a revealed share that is not the one its dealer committed to. The
// message is refused and the client named in Server.Cheaters.
var ErrCheat = errors.New("secagg: a client sent what it provably did not receive")

// Verifier is what the server of the active protocol checks identities
// with: the pinned authority's key, the run every certificate must name,
// the session context every signature is bound to, and the client ID at
// each position, as the clients' Auth holds them. With it (SetVerifier)
// the server refuses an advertisement whose certificate or signature does
// not verify, and a consistency signature that does not verify, so that a
// client sending either only drops itself out (Unrevealed, or it is not
// asked for shares) instead of making its honest neighbours abort.
type Verifier struct {
	Authority ed25519.PublicKey
	Run       string
	Context   []byte
	Order     []uint32
}

// SetVerifier makes the server check the active protocol's certificates
// and signatures (Verifier). It must be called before any message is
// added.
func (s *Server) SetVerifier(v *Verifier) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case !s.p.Active:
		return fmt.Errorf("%w: a verifier outside the active protocol", ErrState)
	case s.stage != stageKeys || len(s.commits) > 0:
		return fmt.Errorf("%w: SetVerifier after the session began", ErrState)
	case len(v.Authority) != ed25519.PublicKeySize:
		return fmt.Errorf("%w: verifier's authority key has %d bytes", ErrIdentity, len(v.Authority))
	case len(v.Order) != s.p.N:
		return fmt.Errorf("%w: verifier has %d client IDs for %d positions", ErrIdentity, len(v.Order), s.p.N)
	}
	s.verifier = &Verifier{Authority: slices.Clone(v.Authority), Run: v.Run, Context: slices.Clone(v.Context), Order: slices.Clone(v.Order)}
	s.idKeys = make([]ed25519.PublicKey, s.p.N)
	return nil
}

// verifyAdvert checks an advertisement's certificate and signature as
// every honest neighbour will, and records the certified identity key.
func (s *Server) verifyAdvert(m *AdvertiseKeys) error {
	v := s.verifier
	cert, err := ParseCertificate(m.Cert)
	if err != nil {
		return fmt.Errorf("advertisement of %d: %w", m.From, err)
	}
	if err := cert.Verify(v.Authority); err != nil {
		return err
	}
	if cert.Run != v.Run || cert.Client != v.Order[m.From] || int64(cert.Roster) < int64(s.p.N) {
		return fmt.Errorf("%w: position %d shows a certificate of client %d in run %q for %d clients, want client %d in run %q",
			ErrIdentity, m.From, cert.Client, cert.Run, cert.Roster, v.Order[m.From], v.Run)
	}
	if !ed25519.Verify(cert.Key, advertMsg(v.Context, &s.p.Seed, m.From, cert.Client, m.MaskKey, m.EncKey), m.Sig) {
		return fmt.Errorf("%w: keys of position %d are not signed by its certified identity", ErrIdentity, m.From)
	}
	s.idKeys[m.From] = cert.Key
	return nil
}

// verifyConsistency checks a survivor's signature of the survivor set.
func (s *Server) verifyConsistency(m *SurvivorSig) error {
	r := s.requests[m.From]
	if r == nil || !ed25519.Verify(s.idKeys[m.From], consistMsg(s.verifier.Context, &s.p.Seed, &s.graphSeed, r.Survived), m.Sig) {
		return fmt.Errorf("%w: consistency signature of %d does not verify", ErrIdentity, m.From)
	}
	return nil
}

// Unrevealed returns, in the active protocol, the positions that
// committed to their keys and did not reveal them (or revealed keys that
// were refused), sorted. A session with any fails at its keys step (the
// graph needs every committed nonce); its caller can run the round's
// next session without them.
func (s *Server) Unrevealed() []uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []uint32
	for u := range s.commits {
		if s.keys[u] == nil {
			out = append(out, u)
		}
	}
	slices.Sort(out)
	return out
}

// Cheaters returns the positions proven to have lied in this session,
// sorted: a client that revealed a share other than the one its dealer
// committed to (it had opened and accepted that share, or it would have
// reported it), and a dealer whose committed shares do not reconstruct
// one valid seed. A report, which the server cannot check, never makes a
// cheater.
func (s *Server) Cheaters() []uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]uint32, 0, len(s.cheaters))
	for u := range s.cheaters {
		out = append(out, u)
	}
	slices.Sort(out)
	return out
}

func (s *Server) cheat(u uint32, why string) {
	if s.cheaters == nil {
		s.cheaters = map[uint32]string{}
	}
	if _, ok := s.cheaters[u]; !ok {
		s.cheaters[u] = why
	}
}

// edge keys a directed pair of positions.
func edge(a, b uint32) uint64 { return uint64(a)<<32 | uint64(b) }

// checkRevealed checks a share that holder revealed of owner's seed of
// kind against the commitment owner dealt it with.
func (s *Server) checkRevealed(holder, owner uint32, kind byte, share []byte) error {
	c, ok := s.shareCommits[edge(owner, holder)]
	if !ok {
		return fmt.Errorf("%w: %d revealed a share of %d, which dealt it none", ErrMessage, holder, owner)
	}
	want := c[:sha256.Size]
	if kind == kindSelf {
		want = c[sha256.Size:]
	}
	got := shareCommit(&s.p.Seed, owner, holder, kind, share)
	if !bytes.Equal(got[:], want) {
		return fmt.Errorf("%w: %d revealed a share of %d that is not the one %d committed to", ErrCheat, holder, owner, owner)
	}
	return nil
}
