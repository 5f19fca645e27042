package method

import (
	"encoding/json"
	"fmt"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
)

// Protocol returns the federated method name as a transport serves it
// (protocol.Method): an error for an unknown method or one without a
// client/server protocol (ErrNotFederated).
func Protocol(name string) (protocol.Method, error) {
	s, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	if s.Federated == nil {
		return nil, fmt.Errorf("%s: %w", name, ErrNotFederated)
	}
	return served{s}, nil
}

// served is a Spec as a protocol.Method.
type served struct{ s Spec }

func (m served) Name() string                                  { return m.s.Name }
func (m served) Configure(text map[string]string) (any, error) { return m.s.Configure(text) }
func (m served) Text(cfg any) map[string]string                { return m.s.Text(cfg) }
func (m served) JSON(cfg any) json.RawMessage                  { return JSON(m.s.Fields(cfg)) }
func (m served) Ranks() bool                                   { return m.s.Ranks }
func (m served) Affine(sc ratings.Scale) (a, b float32)        { return FromInternal(sc) }

func (m served) Aggregation(cfg any) protocol.Aggregation {
	return m.s.Federated.Aggregation(cfg)
}

func (m served) NeedsSums() bool { return m.s.Federated.Aggregation(m.s.New()).Secure() }

func (m served) Rounds(cfg any) (int, error) {
	if m.s.Federated.Rounds == nil {
		return 0, fmt.Errorf("%s: the method does not say how many rounds a run has", m.s.Name)
	}
	return m.s.Federated.Rounds(cfg)
}

func (m served) Participation(cfg any) protocol.Participation {
	if m.s.Federated.Participation == nil {
		return protocol.Participation{}
	}
	return m.s.Federated.Participation(cfg)
}

func (m served) Server(cfg any, items *ratings.Dataset, seed uint64) (protocol.Stateful, error) {
	return m.s.NewServerFor(cfg, items, seed)
}

func (m served) Claim(cfg any) model.Privacy {
	p := m.s.Claim
	p.Aggregation = m.s.Federated.Aggregation(cfg).String()
	return p
}
