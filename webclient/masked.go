package webclient

import (
	"context"
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
func (c *Client) masked(ctx context.Context, b *protocol.Broadcast, plan *secaggPlan, me protocol.Client, again bool) (time.Duration, error) {
	if again {
		return 0, nil
	}
	if plan.Active {
		return 0, fmt.Errorf("%w: the server runs the active secure-aggregation protocol, which needs an identity certified by an enrolment authority; the page has none", errRefused)
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
	p := secagg.Params{N: len(plan.Order), K: int(plan.Degree), T: int(plan.Threshold), Bits: int(plan.Bits), Len: int(plan.Words)}
	copy(p.Seed[:], plan.Seed)
	if err := p.Validate(); err != nil {
		return 0, fmt.Errorf("webclient: round %d: the server's secure-aggregation plan: %w", b.Round, err)
	}
	compute := time.Since(t0)
	sc, err := secagg.NewClient(uint32(pos), p, crand.Reader)
	if err != nil {
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
		if r, err = fromWireReply(me32, m.Step(), resp); err != nil {
			break
		}
		err = step(func() (err error) { m, err = sc.Next(r); return })
	}
	return compute, err
}

// toWireStep encodes the client's message of a step in the passive
// protocol, as deploy's does.
func toWireStep(m secagg.Message, p secagg.Params) *secaggRequest {
	req := &secaggRequest{}
	switch m := m.(type) {
	case *secagg.AdvertiseKeys:
		req.Keys = &secaggKeys{Position: m.From, MaskKey: m.MaskKey, EncKey: m.EncKey}
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
// step, refusing an answer without the part the step needs.
func fromWireReply(me uint32, step secagg.Step, resp *secaggResponse) (secagg.Reply, error) {
	switch step {
	case secagg.StepKeys:
		if resp.Keys == nil {
			return nil, noPart("keys")
		}
		kb := &secagg.KeysBroadcast{To: me}
		for _, k := range resp.Keys.Keys {
			kb.Keys = append(kb.Keys, secagg.AdvertiseKeys{From: k.Position, MaskKey: k.MaskKey, EncKey: k.EncKey})
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
	case secagg.StepMasked:
		if resp.Unmask == nil {
			return nil, noPart("unmask")
		}
		return &secagg.UnmaskRequest{To: me, Survivors: resp.Unmask.Survivors, Dropped: resp.Unmask.Dropped, Survived: resp.Unmask.Survived}, nil
	case secagg.StepReveal:
		return &secagg.Done{To: me}, nil
	}
	return nil, fmt.Errorf("webclient: the %s step of the active protocol, which the page does not run", step)
}

// noPart is the error of a server's answer without the part a step needs.
func noPart(want string) error {
	return fmt.Errorf("webclient: the server's answer has no %s", want)
}
