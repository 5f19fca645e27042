package method

import (
	"errors"
	"fmt"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
)

// Federated is a method's client/server protocol built in halves, for a
// deployment: the server from public information only, the clients from
// their users' own ratings.
//
// Protocol.Run(ctx, server, clients.List, protocol.RunOptions{Seed: seed,
// Aggregation: Aggregation(cfg)}) followed by clients.Finish gives the
// model and Result of Spec.Fit with the same seed, bit for bit, when the
// server and the clients are built with that seed too (on data already on
// the Internal scale; Spec.NewServer and Spec.NewClients map other scales
// as Fit does).
type Federated struct {
	// Server builds the server for a catalog of numItems items on the
	// public rating scale, from the config (a pointer of the type New
	// returns) and the seed of the server's own randomness.
	Server func(cfg any, numItems int, scale ratings.Scale, seed uint64) (protocol.Stateful, error)
	// Clients builds one client per user of train (every user index, or
	// only those with ratings, exactly as the in-process run does, in the
	// same order), with the clients' seed.
	Clients func(cfg any, train *ratings.Dataset, seed uint64) (*Clients, error)
	// Aggregation reports how cfg has the server receive uploads (the
	// server may see only per-item sums).
	Aggregation func(cfg any) protocol.Aggregation
	// ServerFor, when not nil, builds the server from the public catalog
	// itself rather than its size: items holds the item IDs, the public
	// scale (mapped as Server's) and the items' public side features
	// (items.Side), and no ratings. A method whose server needs the items'
	// public attributes (SD-FM) sets it; Spec.NewServerFor uses it.
	ServerFor func(cfg any, items *ratings.Dataset, seed uint64) (protocol.Stateful, error)
	// Rounds returns the number of rounds the server of cfg broadcasts
	// (numbered 0 to Rounds−1), from the configuration alone: the
	// clients of a deployment answer no round past it
	// (protocol.Method.Rounds). Every federated method sets it;
	// TestRoundsIsTheRun checks it against the server's run.
	Rounds func(cfg any) (int, error)
	// Participation returns how often one client takes part in a run of
	// cfg (protocol.Method.Participation); nil means a roster run, every
	// client in every round.
	Participation func(cfg any) protocol.Participation
}

// roundsOf returns a Federated.Rounds for a method whose config type is
// C: the config's type checked, then rounds.
func roundsOf[C any](rounds func(cfg *C) (int, error)) func(cfg any) (int, error) {
	return func(cfg any) (int, error) {
		c, err := typedConfig[C](cfg)
		if err != nil {
			return 0, err
		}
		n, err := rounds(c)
		if err != nil && !errors.Is(err, ErrParam) {
			err = invalid(err)
		}
		return n, err
	}
}

// Clients is the client half of a run.
type Clients struct {
	// List holds the clients in client order; List[k].ID() is the user
	// index.
	List []protocol.Client
	// Finish gathers the model from the clients' private state and the
	// server's final V (on the scale of the data Clients was given — map
	// back like Fit does), and the run's Result as Fit reports it.
	Finish func(v []float32) (*model.Model, *Result, error)
}

// ErrNotFederated is wrapped by the error of NewServer and NewClients for
// a method without a client/server protocol.
var ErrNotFederated = errors.New("not a client/server method")

// federated returns the Federated of a method whose config type is C,
// checking the config's type before calling the typed halves.
func federated[C any](server func(cfg *C, numItems int, scale ratings.Scale, seed uint64) (protocol.Stateful, error),
	clients func(cfg *C, train *ratings.Dataset, seed uint64) (*Clients, error), agg func(cfg *C) protocol.Aggregation) *Federated {
	typed := typedConfig[C]
	return &Federated{
		Server: func(cfg any, numItems int, scale ratings.Scale, seed uint64) (protocol.Stateful, error) {
			c, err := typed(cfg)
			if err != nil {
				return nil, err
			}
			return server(c, numItems, scale, seed)
		},
		Clients: func(cfg any, train *ratings.Dataset, seed uint64) (*Clients, error) {
			c, err := typed(cfg)
			if err != nil {
				return nil, err
			}
			if train == nil {
				return nil, fmt.Errorf("%w: no training data", ErrParam)
			}
			return clients(c, train, seed)
		},
		Aggregation: func(cfg any) protocol.Aggregation {
			c, err := typed(cfg)
			if err != nil {
				return protocol.AggOff
			}
			return agg(c)
		},
	}
}

// standard returns the Federated of a method package of the standard
// shape: NewServer(cfg, catalog, seed), NewClients(train, cfg) and
// Clients.Finish(v). prepare checks the registry's config and completes
// it for a run seeded by seed; list returns the clients; result turns the
// package's report into the Result; agg says the config's aggregation.
// The server is built from the public catalog itself (ServerFor), or
// from a catalog of the size and scale NewServer is given.
func standard[C, CL, R any](prepare func(cfg *C, seed uint64) (C, error),
	newServer func(cfg C, catalog *ratings.Dataset, seed uint64) (protocol.Stateful, error),
	newClients func(train *ratings.Dataset, cfg C) (CL, error), list func(CL) []protocol.Client,
	finish func(cl CL, v []float32) (*model.Model, R, error), result func(cfg C, rep R, train *ratings.Dataset) *Result,
	agg func(cfg *C) protocol.Aggregation) *Federated {
	server := func(cfg *C, catalog *ratings.Dataset, seed uint64) (protocol.Stateful, error) {
		c, err := prepare(cfg, seed)
		if err != nil {
			return nil, err
		}
		return newServer(c, catalog, seed)
	}
	f := federated(
		func(cfg *C, numItems int, scale ratings.Scale, seed uint64) (protocol.Stateful, error) {
			return server(cfg, ratings.AnonymousItems(numItems, scale), seed)
		},
		func(cfg *C, train *ratings.Dataset, seed uint64) (*Clients, error) {
			c, err := prepare(cfg, seed)
			if err != nil {
				return nil, err
			}
			cl, err := newClients(train, c)
			if err != nil {
				return nil, err
			}
			return &Clients{List: list(cl), Finish: func(v []float32) (*model.Model, *Result, error) {
				m, rep, err := finish(cl, v)
				if err != nil {
					return nil, nil, err
				}
				return m, result(c, rep, train), nil
			}}, nil
		}, agg)
	f.ServerFor = func(cfg any, items *ratings.Dataset, seed uint64) (protocol.Stateful, error) {
		c, err := typedConfig[C](cfg)
		if err != nil {
			return nil, err
		}
		return server(c, items, seed)
	}
	return f
}

// typedConfig returns cfg as the non-nil *C it must be.
func typedConfig[C any](cfg any) (*C, error) {
	c, ok := cfg.(*C)
	if !ok || c == nil {
		return nil, fmt.Errorf("%w: the config is a %T, want a non-nil %T", ErrParam, cfg, new(C))
	}
	return c, nil
}

// federatedScale checks that s has a client/server protocol, cfg is its
// config and scale may be used: a private method refuses a scale read
// off the ratings, as Fit does.
func (s Spec) federatedScale(cfg any, scale ratings.Scale, name string) error {
	if s.Federated == nil {
		return fmt.Errorf("%s: %w", s.Name, ErrNotFederated)
	}
	if err := s.check(cfg); err != nil {
		return err
	}
	if scale.Inferred && s.Claim.Unit != "none" {
		return fmt.Errorf("%s: %w: the scale %v of %s was read off its ratings; declare the public scale",
			s.Name, ErrUndeclaredScale, scale, name)
	}
	return nil
}

// NewServer returns the server half of method s for a catalog of
// numItems items whose ratings lie on the public scale, with the seed of
// the server's randomness. Like Fit, it trains on the Internal scale:
// the server's V is on that scale whatever scale is. It fails for a method
// without a client/server protocol (ErrNotFederated), for a config of
// another method and, for a private method, for an inferred scale.
func (s Spec) NewServer(cfg any, numItems int, scale ratings.Scale, seed uint64) (protocol.Stateful, error) {
	if err := s.federatedScale(cfg, scale, "the catalog"); err != nil {
		return nil, err
	}
	srv, err := s.Federated.Server(cfg, numItems, internalScale(scale), seed)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Name, err)
	}
	return srv, nil
}

// NewServerFor returns the server half of method s for the public
// catalog items: its item IDs, declared scale and public side features
// (the ratings, if any, are not passed on). It is NewServer for a method
// whose server needs only the catalog's size, and Federated.ServerFor for
// one that needs the items' attributes.
func (s Spec) NewServerFor(cfg any, items *ratings.Dataset, seed uint64) (protocol.Stateful, error) {
	if items == nil {
		return nil, fmt.Errorf("%s: %w: no catalog", s.Name, ErrParam)
	}
	if s.Federated == nil || s.Federated.ServerFor == nil {
		return s.NewServer(cfg, items.NumItems(), items.Scale, seed)
	}
	if err := s.federatedScale(cfg, items.Scale, "the catalog"); err != nil {
		return nil, err
	}
	cat := &ratings.Dataset{Name: items.Name, Scale: internalScale(items.Scale), UserIDs: items.UserIDs,
		ItemIDs: items.ItemIDs, ItemTitles: items.ItemTitles, Side: items.Side}
	srv, err := s.Federated.ServerFor(cfg, cat, seed)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Name, err)
	}
	return srv, nil
}

// NewClients returns the client half of method s for the users of train,
// with the clients' seed: train is mapped onto the Internal scale as Fit
// maps it, and Finish maps the model back to train's declared scale and
// records the method, its config and its privacy report, as Fit does.
// Run the clients with a server from NewServer for train.NumItems() items
// and train.Scale, under the aggregation s.Federated.Aggregation(cfg) names.
func (s Spec) NewClients(cfg any, train *ratings.Dataset, seed uint64) (*Clients, error) {
	if train == nil {
		return nil, fmt.Errorf("%s: %w: no training data", s.Name, ErrParam)
	}
	if err := s.federatedScale(cfg, train.Scale, train.Name); err != nil {
		return nil, err
	}
	if err := s.checkPrivateData(train); err != nil {
		return nil, err
	}
	in, a, b := toInternal(train)
	cl, err := s.Federated.Clients(cfg, in, seed)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Name, err)
	}
	finish := cl.Finish
	return &Clients{List: cl.List, Finish: func(v []float32) (*model.Model, *Result, error) {
		m, res, err := finish(v)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", s.Name, err)
		}
		s.finish(m, res, cfg, train, in != train, a, b)
		return m, res, nil
	}}, nil
}
