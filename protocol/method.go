package protocol

import (
	"encoding/json"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
)

// Method is a federated method as a transport serves it, without
// importing it: how its configuration travels in a run's plan, what its
// server is, and what the model it publishes records. Package method
// provides one for every registered method with a client/server protocol
// (method.Protocol); a transport such as package deploy depends on this
// interface only.
type Method interface {
	// Name is the method's registry name.
	Name() string
	// Configure parses the configuration a plan carries (keys left out
	// keep the method's defaults); Text writes cfg back, every key; JSON
	// is cfg as a published model records it.
	Configure(text map[string]string) (any, error)
	Text(cfg any) map[string]string
	JSON(cfg any) json.RawMessage
	// Aggregation says what the server of cfg receives. NeedsSums says
	// whether the method is private only against a server that sees sums
	// (its default aggregation is secure), so that a network run must
	// aggregate masked.
	Aggregation(cfg any) Aggregation
	NeedsSums() bool
	// Rounds returns the number of rounds the server of cfg broadcasts,
	// numbered 0 to Rounds−1, as the method's server loop runs them: a
	// client answers no round numbered past it, whatever a server says.
	Rounds(cfg any) (int, error)
	// Participation returns how often one client takes part in a run of
	// cfg (cohort size, rounds per client, gap between them); the zero
	// value for a roster run.
	Participation(cfg any) Participation
	// Server builds the method's server for the public catalog items
	// (item IDs, declared scale, public side features; no ratings), with
	// the seed of the server's own randomness.
	Server(cfg any, items *ratings.Dataset, seed uint64) (Stateful, error)
	// Claim is the method's privacy claim under cfg, without the amounts
	// spent.
	Claim(cfg any) model.Privacy
	// Ranks says whether the published model's scores rank items rather
	// than predict ratings.
	Ranks() bool
	// Affine returns the map x ↦ a·x + b from the scale the server
	// trains on to the catalog's declared scale sc, which the published
	// model's biases go through (model.Model.Affine).
	Affine(sc ratings.Scale) (a, b float32)
}
