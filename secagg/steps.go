package secagg

import "fmt"

// Step names a step of a session, in the order a client takes them. A
// client sends one Message in each step and the server answers each,
// once the step has closed, with the Reply the client's next step takes.
// The passive protocol skips StepCommit and StepConsistency.
type Step int

// The steps of a session.
const (
	StepCommit      Step = iota // *KeyCommit → *CommitSet (active protocol)
	StepKeys                    // *AdvertiseKeys → *KeysBroadcast
	StepShares                  // *ShareKeys → *SharesDelivery
	StepCheck                   // *ShareCheck → *Exclusion
	StepMasked                  // *MaskedInput → *UnmaskRequest
	StepConsistency             // *SurvivorSig → *UnmaskRequest (active protocol)
	StepReveal                  // *UnmaskResponse → *Done
	NumSteps                    // the number of steps
)

var stepNames = [NumSteps]string{"commit", "keys", "shares", "check", "masked", "consistency", "reveal"}

// String returns the step's name.
func (s Step) String() string {
	if s < 0 || s >= NumSteps {
		return fmt.Sprintf("step(%d)", int(s))
	}
	return stepNames[s]
}

// First returns the first step of a session: StepCommit in the active
// protocol, StepKeys in the passive one.
func First(active bool) Step {
	if active {
		return StepCommit
	}
	return StepKeys
}

// Next returns the step a client takes after s: the following one, past
// the active protocol's steps when the session runs the passive one;
// NumSteps after StepReveal.
func (s Step) Next(active bool) Step {
	n := s + 1
	for !active && (n == StepCommit || n == StepConsistency) {
		n++
	}
	return n
}

// A Message is what a client sends in one step: *KeyCommit,
// *AdvertiseKeys, *ShareKeys, *ShareCheck, *MaskedInput, *SurvivorSig or
// *UnmaskResponse. Step says which; Sender, the position that sent it.
type Message interface {
	Step() Step
	Sender() uint32
}

// Step returns StepCommit.
func (*KeyCommit) Step() Step { return StepCommit }

// Step returns StepKeys.
func (*AdvertiseKeys) Step() Step { return StepKeys }

// Step returns StepShares.
func (*ShareKeys) Step() Step { return StepShares }

// Step returns StepCheck.
func (*ShareCheck) Step() Step { return StepCheck }

// Step returns StepMasked.
func (*MaskedInput) Step() Step { return StepMasked }

// Step returns StepConsistency.
func (*SurvivorSig) Step() Step { return StepConsistency }

// Step returns StepReveal.
func (*UnmaskResponse) Step() Step { return StepReveal }

// Sender returns From.
func (m *KeyCommit) Sender() uint32 { return m.From }

// Sender returns From.
func (m *AdvertiseKeys) Sender() uint32 { return m.From }

// Sender returns From.
func (m *ShareKeys) Sender() uint32 { return m.From }

// Sender returns From.
func (m *ShareCheck) Sender() uint32 { return m.From }

// Sender returns From.
func (m *MaskedInput) Sender() uint32 { return m.From }

// Sender returns From.
func (m *SurvivorSig) Sender() uint32 { return m.From }

// Sender returns From.
func (m *UnmaskResponse) Sender() uint32 { return m.From }

// A Reply is the server's answer to one client's message of a step,
// which is that client's input to its next step: *CommitSet,
// *KeysBroadcast, *SharesDelivery, *Exclusion, *UnmaskRequest (to the
// masked input, and in the active protocol to the consistency round) or
// *Done. Recipient says which client it is for.
type Reply interface {
	Recipient() uint32
}

// CommitSet is the active protocol's answer to KeyCommit: the hash of
// the session's commitment set (CommitSetHash).
type CommitSet struct {
	To   uint32
	Hash [32]byte
}

// Exclusion is the answer to ShareCheck: the client's neighbours that
// the server excluded after the check (SharesDelivery.Excluded).
type Exclusion struct {
	To       uint32
	Excluded []uint32
}

// Done is the answer to UnmaskResponse: the client's part is over.
type Done struct{ To uint32 }

// Recipient returns To.
func (r *CommitSet) Recipient() uint32 { return r.To }

// Recipient returns To.
func (r *KeysBroadcast) Recipient() uint32 { return r.To }

// Recipient returns To.
func (r *SharesDelivery) Recipient() uint32 { return r.To }

// Recipient returns To.
func (r *Exclusion) Recipient() uint32 { return r.To }

// Recipient returns To.
func (r *UnmaskRequest) Recipient() uint32 { return r.To }

// Recipient returns To.
func (r *Done) Recipient() uint32 { return r.To }

// Start begins the client's part of a session as a state machine over
// any transport: it keeps x, the input to mask, and returns the first
// message to send (a commitment in the active protocol, the keys in the
// passive one). Each reply of the server then goes to Next, which
// returns the message of the client's next step:
//
//	m, err := c.Start(x)
//	for err == nil && m != nil {
//		var r secagg.Reply
//		if r, err = send(m); err == nil { // the transport
//			m, err = c.Next(r)
//		}
//	}
//
// x must have Params.Len values below 2^Bits; it is not modified.
func (c *Client) Start(x []uint32) (Message, error) {
	if c.started || c.stage != stageKeys || c.own != nil {
		return nil, fmt.Errorf("%w: client %d started twice or after a step", ErrState, c.id)
	}
	if len(x) != c.p.Len {
		return nil, c.abort(fmt.Errorf("%w: input has %d values, want %d", ErrMessage, len(x), c.p.Len))
	}
	c.input, c.started = x, true
	if c.p.Active {
		return c.Commit()
	}
	return c.AdvertiseKeys()
}

// Next takes the server's reply to the client's last message and returns
// the client's next message; nil, with a nil error, once the server has
// answered the last one (*Done). A reply out of order, or of a step the
// client's session does not run, is refused with ErrState and aborts
// the client, as a malformed one does.
func (c *Client) Next(r Reply) (Message, error) {
	if !c.started {
		return nil, fmt.Errorf("%w: Next before Start", ErrState)
	}
	if r == nil || r.Recipient() != c.id {
		return nil, c.abort(fmt.Errorf("%w: a reply for another client, or none, delivered to %d", ErrMessage, c.id))
	}
	switch r := r.(type) {
	case *CommitSet:
		if !c.p.Active {
			break
		}
		return c.Reveal(r.Hash)
	case *KeysBroadcast:
		return c.ShareKeys(r)
	case *SharesDelivery:
		if c.delivery != nil {
			break
		}
		c.delivery = r
		return c.CheckShares(r)
	case *Exclusion:
		if c.delivery == nil || !c.checked {
			break
		}
		d := *c.delivery
		d.Excluded = r.Excluded
		c.delivery = nil
		m, err := c.MaskedInput(&d, c.input)
		// The input is not needed past its masked copy: a process that
		// runs thousands of clients at once frees it during the wait.
		c.input = nil
		return m, err
	case *UnmaskRequest:
		if c.p.Active && c.survived == nil {
			return c.Consistency(r)
		}
		return c.Unmask(r)
	case *Done:
		if c.stage == stageDone {
			return nil, nil
		}
	}
	return nil, c.abort(fmt.Errorf("%w: client %d got a %T out of order", ErrState, c.id, r))
}
