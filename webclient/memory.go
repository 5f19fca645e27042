package webclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/privrec/privrec/dpals"
	"github.com/privrec/privrec/dpease"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
)

// Memory is what the page remembers of the runs it answered, across
// reloads: per plan (by webPlanDigest), the setup round it answered, the
// last round it answered and, for a plan with cohorts or participation
// limits, the training rounds it answered. A server that serves the same plan again
// (a replay, or the same run after the page reloaded) gets no second
// answer to any of those rounds, so no two sums over the person's data
// can be differenced.
type Memory struct {
	Plans map[string]*PlanMemory `json:"plans"`
}

// PlanMemory is the memory of one plan.
type PlanMemory struct {
	// Setup is the setup round answered, -1 if none.
	Setup int32 `json:"setup"`
	// Last is the last round answered, -1 if none.
	Last int32 `json:"last"`
	// Trained are the training rounds answered (ascending) of a plan
	// with cohorts or participation limits (protocol.Participation),
	// which the limits count (privrec client's memory keeps the same);
	// absent in a memory saved before the page kept them, and for other
	// plans.
	Trained []int `json:"trained,omitempty"`
}

// Store keeps the page's memory durably: Save returns only once the
// bytes are written (the page: an IndexedDB transaction completed), and
// the client sends no answer to a round before it returns.
type Store interface {
	Save(ctx context.Context, memory []byte) error
}

// maxPlans bounds the plans remembered; the oldest entries are not
// tracked, so the bound drops arbitrary old plans, never the current.
const maxPlans = 64

// Remember gives the client the page's memory (the bytes a Store last
// saved; nil or empty for none) and the store it saves it to. Train
// refuses without it: an answer must never leave before its round is
// remembered.
func (c *Client) Remember(memory []byte, st Store) error {
	if st == nil {
		return errors.New("webclient: no store for the page's memory")
	}
	m := Memory{Plans: map[string]*PlanMemory{}}
	if len(memory) > 0 {
		if err := json.Unmarshal(memory, &m); err != nil {
			return fmt.Errorf("webclient: the page's memory: %w", err)
		}
		if m.Plans == nil {
			m.Plans = map[string]*PlanMemory{}
		}
	}
	c.mem, c.store = &m, st
	if pm := m.Plans[c.digest]; pm != nil {
		c.last = max(c.last, pm.Last)
		c.setup = pm.Setup
		// The union of what this client answered and what the store
		// holds (another tab of the page may have answered since).
		c.trained = union(c.trained, pm.Trained)
	}
	return nil
}

// union returns the ascending union of a and b, without repeats.
func union(a, b []int) []int {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}

// Rounds returns the number of rounds of the run the plan configures
// (rounds 0 to Rounds()-1); the page answers no round past it.
func (c *Client) Rounds() int { return c.rounds }

// remember records, durably, that the client is about to answer round
// of phase before the answer leaves: the round, the setup round if it is
// one, and, in a plan with cohorts or participation limits, the training
// rounds answered, which the limits count.
func (c *Client) remember(ctx context.Context, round int32, phase string) error {
	if c.mem == nil || c.store == nil {
		return errors.New("webclient: no memory to record the round in (Remember): refusing to answer")
	}
	pm := c.mem.Plans[c.digest]
	if pm == nil {
		if len(c.mem.Plans) >= maxPlans {
			for k := range c.mem.Plans {
				delete(c.mem.Plans, k)
				break
			}
		}
		pm = &PlanMemory{Setup: -1, Last: -1}
		c.mem.Plans[c.digest] = pm
	}
	was := *pm
	pm.Last = max(pm.Last, round)
	if phase == protocol.PhaseSetup {
		pm.Setup = round
	}
	if phase == protocol.PhaseTrain && (c.part.Cohort > 0 || c.part.Limited()) {
		pm.Trained = union(union(pm.Trained, c.trained), []int{int(round)})
	}
	b, err := json.Marshal(c.mem)
	if err == nil {
		err = c.store.Save(ctx, b)
	}
	if err != nil {
		*pm = was
		return fmt.Errorf("%w: could not remember round %d before answering it: %w", errRefused, round, err)
	}
	c.setup = pm.Setup
	c.trained = union(c.trained, pm.Trained)
	return nil
}

// webPlanDigest is the plan's name in the page's memory:
// protocol.PlanDigest, as the command-line client names it, so that the
// two kinds of client agree on what one run is.
func webPlanDigest(h *Hello) string {
	scale := ratings.Scale{Min: float32(h.Scale.Min), Max: float32(h.Scale.Max), Step: float32(h.Scale.Step)}
	return protocol.PlanDigest(h.Method, h.Config, scale, h.Catalog.ItemIDs)
}

// dpalsRounds is the number of rounds of a dp-als (or dp-biases) run of
// cfg (Validate'd), as dpals' server schedules them: a setup round when
// masked, the global mean, the bias rounds, the warm start and the
// factor rounds when the run has factors, and the final round.
// TestRoundsOfConfig ties it to dpals.NewServer.
func dpalsRounds(cfg dpals.Config) int {
	n := 2 // the mean and the final round
	if cfg.Aggregation == protocol.AggMasked {
		n++
	}
	n += cfg.BiasRounds
	if cfg.Dim > 0 && (cfg.Rounds > 0 || cfg.InitItems > 0) {
		if cfg.InitItems > 0 {
			n++
		}
		n += cfg.Rounds
	}
	return n
}

// dpeaseRounds is the number of rounds of a dp-ease run of cfg: the
// counts and the Gram (over cohorts, CohortRounds rounds of each), after
// a setup round when masked. TestRoundsOfConfig ties it to
// dpease.NewServer.
func dpeaseRounds(cfg dpease.Config) int {
	n := 2
	if cfg.Cohort > 0 {
		n = 2 * max(1, cfg.CohortRounds)
	}
	if cfg.Aggregation == protocol.AggMasked {
		n++
	}
	return n
}

// lastTraining is the number of the plan's last training round: dp-als
// ends with a final round that releases nothing, dp-ease with the Gram.
func (c *Client) lastTraining() int {
	if c.ease != nil {
		return c.rounds - 1
	}
	return c.rounds - 2
}
