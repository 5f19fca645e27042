// Package protocoltest has clients of the client/server protocol
// (package protocol) that misbehave, for the tests of the methods' masked
// paths: a client that tampers with its masked words, and one that drops
// out.
package protocoltest

import (
	"math/rand/v2"
	"slices"

	"github.com/privrec/privrec/protocol"
)

// Tamperer wraps a client: from round From on, Tamper rewrites a copy of
// each masked upload it sends (the words cloned first), a hostile client
// under secure aggregation. Uploads without words pass unchanged.
type Tamperer struct {
	protocol.Client
	From   int
	Tamper func(b *protocol.Broadcast, up *protocol.Upload)
}

// Round answers b as the wrapped client does, tampered.
func (h *Tamperer) Round(b *protocol.Broadcast, r *rand.Rand) (*protocol.Upload, error) {
	up, err := h.Client.Round(b, r)
	if err != nil || up == nil || b.Words == 0 || b.Round < h.From {
		return up, err
	}
	c := *up
	c.Words = slices.Clone(up.Words)
	h.Tamper(b, &c)
	return &c, nil
}

// Dropper wraps a client that sends nothing in a training round with
// probability P (its own random stream decides), and, with Setup set,
// nothing in the setup round.
type Dropper struct {
	protocol.Client
	P     float64
	Setup bool
}

// Round answers b as the wrapped client does, or drops the answer.
func (d *Dropper) Round(b *protocol.Broadcast, r *rand.Rand) (*protocol.Upload, error) {
	up, err := d.Client.Round(b, r)
	switch {
	case d.Setup && b.Phase == protocol.PhaseSetup:
		return nil, err
	case b.Phase == protocol.PhaseTrain && r.Float64() < d.P:
		return nil, err
	}
	return up, err
}
