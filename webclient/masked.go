package webclient

import (
	"context"
	"crypto/ed25519"
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/secagg"
)

// masked runs one round of secure aggregation with the person's dense
// vector (zeros without ratings); again is true for a new session of a
// round whose masked vector may already have left, which the client sits
// out (no two sums of a round may differ by a known set of clients).
//
// The round runs the plan's protocol: the honest-but-curious one when
// no authority is pinned, secagg's active protocol (Params.Active: a
// certified, signed identity; a committed key set; a consistency round)
// when one is (Pin), exactly as privrec client --authority-key runs it
// (deploy's secaggFlow), with the same checks before any key leaves
// the page (checkPlan) and before it signs the survivor set
// (checkSurvivors). The round is remembered (Store) before the first
// message leaves.
func (c *Client) masked(ctx context.Context, b *protocol.Broadcast, plan *secaggPlan, me protocol.Client, again bool) (time.Duration, error) {
	if again {
		return 0, nil
	}
	id, err := c.id()
	if err != nil {
		return 0, err
	}
	pos := -1
	for k, o := range plan.Order {
		if o == id {
			pos = k
		}
	}
	if pos < 0 {
		return 0, nil // not in this round's session
	}
	p := secagg.Params{N: len(plan.Order), K: int(plan.Degree), T: int(plan.Threshold), Bits: int(plan.Bits), Len: int(plan.Words),
		Active: plan.Active}
	copy(p.Seed[:], plan.Seed)
	if err := p.Validate(); err != nil {
		return 0, fmt.Errorf("webclient: round %d: the server's secure-aggregation plan: %w", b.Round, err)
	}
	if err := c.checkPlan(p); err != nil {
		return 0, fmt.Errorf("%w: round %d: %w", errRefused, b.Round, err)
	}
	t0 := time.Now()
	up, err := answer(me, b)
	if err != nil {
		return 0, err
	}
	x := make([]uint32, b.Words)
	if up != nil {
		if err := up.Validate(b); err != nil {
			return 0, err
		}
		x = up.DenseWords(b)
	}
	compute := time.Since(t0)
	sc, err := c.secaggClient(b.Round, plan, p, uint32(pos))
	if err != nil {
		return 0, err
	}
	if err := c.remember(ctx, int32(b.Round), b.Phase); err != nil {
		return 0, err
	}
	me32 := uint32(pos)
	call := func(req *secaggRequest) (*secaggResponse, error) {
		req.Round, req.Session = int32(b.Round), plan.Session
		var resp secaggResponse
		// A step the server has not opened yet ("unavailable") and a
		// network failure are retried; a message the server took is
		// refused as a duplicate if sent again, never counted twice.
		err := c.retry(ctx, func() error { return c.call(ctx, "SecAgg", req, &resp) })
		return &resp, err
	}
	step := func(f func() error) error { // times the client's own work
		t := time.Now()
		err := f()
		compute += time.Since(t)
		return err
	}
	var m secagg.Message
	err = step(func() (err error) { m, err = sc.Start(x); return })
	for err == nil && m != nil {
		req := toWireStep(m, p)
		before := c.sent.Bytes
		var resp *secaggResponse
		resp, err = call(req)
		if req.Masked != nil {
			c.sent.MaskedRounds++
			c.sent.MaskedBytes += c.sent.Bytes - before
		}
		if err != nil {
			break
		}
		var r secagg.Reply
		if r, err = fromWireReply(me32, m.Step(), p, resp); err != nil {
			break
		}
		if um, ok := r.(*secagg.UnmaskRequest); ok && p.Active && m.Step() == secagg.StepMasked {
			if err = c.checkSurvivors(um.Survived); err != nil {
				break
			}
		}
		err = step(func() (err error) { m, err = sc.Next(r); return })
	}
	return compute, err
}

// secaggClient returns the page's secure-aggregation client at position
// pos of a session of round: the active protocol's, with the page's
// certified identity, when p.Active.
func (c *Client) secaggClient(round int, plan *secaggPlan, p secagg.Params, pos uint32) (*secagg.Client, error) {
	if !p.Active {
		return secagg.NewClient(pos, p, crand.Reader)
	}
	cert, err := c.certificate()
	if err != nil {
		return nil, err
	}
	// The session context of deploy's clients, byte for byte: every
	// client of the session signs under the same bytes.
	auth := &secagg.Auth{Authority: c.trust.AuthorityKey, Key: ed25519.PrivateKey(c.ident.Key), Cert: cert, Order: plan.Order,
		Context: protocol.SessionContext(cert.Run, round, plan.Session)}
	return secagg.NewActiveClient(pos, p, crand.Reader, auth)
}

// toWireStep encodes the client's message of a step, as deploy's does.
func toWireStep(m secagg.Message, p secagg.Params) *secaggRequest {
	req := &secaggRequest{}
	switch m := m.(type) {
	case *secagg.KeyCommit:
		req.Commit = &secaggCommit{Position: m.From, Digest: m.Digest[:]}
	case *secagg.AdvertiseKeys:
		req.Keys = &secaggKeys{Position: m.From, MaskKey: m.MaskKey, EncKey: m.EncKey, Cert: m.Cert, Sig: m.Sig, Nonce: m.Nonce}
	case *secagg.ShareKeys:
		req.Shares = &secaggShares{}
		for _, s := range m.Shares {
			req.Shares.Shares = append(req.Shares.Shares, secaggShare{From: s.From, To: s.To, Ciphertext: s.Ciphertext})
		}
	case *secagg.ShareCheck:
		req.Check = &secaggCheck{Reported: m.Reported}
	case *secagg.MaskedInput:
		data := make([]byte, 4*len(m.Y))
		for i, y := range m.Y {
			binary.LittleEndian.PutUint32(data[4*i:], y)
		}
		req.Masked = &maskedUpload{ModulusBits: uint32(p.Bits), Data: data}
	case *secagg.SurvivorSig:
		req.Consistency = &secaggSig{Position: m.From, Sig: m.Sig}
	case *secagg.UnmaskResponse:
		req.Reveal = &secaggReveal{}
		for _, s := range m.SelfShares {
			req.Reveal.SelfShares = append(req.Reveal.SelfShares, secaggRevealed{Owner: s.Owner, Share: s.Share})
		}
		for _, s := range m.MaskShares {
			req.Reveal.MaskShares = append(req.Reveal.MaskShares, secaggRevealed{Owner: s.Owner, Share: s.Share})
		}
	}
	return req
}

// fromWireReply decodes the server's answer to position me's message of
// step in a session of parameters p, refusing an answer without the part
// the step needs.
func fromWireReply(me uint32, step secagg.Step, p secagg.Params, resp *secaggResponse) (secagg.Reply, error) {
	switch step {
	case secagg.StepCommit:
		if resp.Committed == nil {
			return nil, noPart("committed")
		}
		if len(resp.Committed.SetHash) != 32 {
			return nil, fmt.Errorf("webclient: a commitment set hash of %d bytes", len(resp.Committed.SetHash))
		}
		return &secagg.CommitSet{To: me, Hash: [32]byte(resp.Committed.SetHash)}, nil
	case secagg.StepKeys:
		if resp.Keys == nil {
			return nil, noPart("keys")
		}
		kb := &secagg.KeysBroadcast{To: me}
		for _, k := range resp.Keys.Keys {
			kb.Keys = append(kb.Keys, secagg.AdvertiseKeys{From: k.Position, MaskKey: k.MaskKey, EncKey: k.EncKey, Cert: k.Cert, Sig: k.Sig})
		}
		if p.Active {
			var err error
			if kb.Committed, err = unpackCommitted(resp.Keys.Committed); err != nil {
				return nil, err
			}
		}
		return kb, nil
	case secagg.StepShares:
		if resp.Shares == nil {
			return nil, noPart("shares")
		}
		del := &secagg.SharesDelivery{To: me}
		for _, s := range resp.Shares.Shares {
			del.Shares = append(del.Shares, secagg.EncryptedShare{From: s.From, To: s.To, Ciphertext: s.Ciphertext})
		}
		return del, nil
	case secagg.StepCheck:
		if resp.Excluded == nil {
			return nil, noPart("excluded")
		}
		return &secagg.Exclusion{To: me, Excluded: resp.Excluded.Excluded}, nil
	case secagg.StepMasked, secagg.StepConsistency:
		if resp.Unmask == nil {
			return nil, noPart("unmask")
		}
		ur := &secagg.UnmaskRequest{To: me, Survivors: resp.Unmask.Survivors, Dropped: resp.Unmask.Dropped, Survived: resp.Unmask.Survived}
		for _, sg := range resp.Unmask.Signatures {
			ur.Signatures = append(ur.Signatures, secagg.SurvivorSig{From: sg.Position, Sig: sg.Sig})
		}
		return ur, nil
	case secagg.StepReveal:
		return &secagg.Done{To: me}, nil
	}
	return nil, fmt.Errorf("webclient: an answer to step %s, which the page does not know", step)
}

// commitSize is the wire size of one entry of the opened commitment set
// (SecAggKeyList.committed): position, advertisement digest, nonce.
const commitSize = 4 + 32 + secagg.NonceSize

// unpackCommitted decodes the opened commitment set, as deploy does.
func unpackCommitted(b []byte) ([]secagg.Commitment, error) {
	if len(b)%commitSize != 0 {
		return nil, fmt.Errorf("webclient: a committed key set of %d bytes, not a multiple of %d", len(b), commitSize)
	}
	out := make([]secagg.Commitment, len(b)/commitSize)
	for i := range out {
		e := b[i*commitSize:]
		out[i].From = binary.BigEndian.Uint32(e)
		copy(out[i].Digest[:], e[4:36])
		copy(out[i].Nonce[:], e[36:commitSize])
	}
	return out, nil
}

// noPart is the error of a server's answer without the part a step needs.
func noPart(want string) error {
	return fmt.Errorf("webclient: the server's answer has no %s", want)
}
