package webclient

import (
	"context"
	"fmt"

	"github.com/privrec/privrec/protocol"
)

// The page's side of participation limits and cohort rounds, deploy's
// client_cohort.go for one person.
//
// The page answers a training round only if the plan's participation
// limits (protocol.Participation: MaxRounds, MinGap) allow it given the
// training rounds it answered before, which it keeps in its memory
// across reloads (PlanMemory.Trained, saved before any answer leaves).
// In a cohort run it offers to join (GetRound with join) only a round
// its limits allow, and answers only a round whose cohort it asked to
// join and was taken into while the cohort was gathered: a server that
// names it in a round's plan without that gets nothing from it. So the
// limits hold whatever the server asks. The final round takes no cohort.

// allowed reports whether the page may answer round r of phase by the
// plan's participation limits (a setup or final round: always; a setup
// is answered once per plan, which checkBroadcast enforces).
func (c *Client) allowed(r int, phase string) bool {
	if phase != protocol.PhaseTrain {
		return true
	}
	return c.part.Allows(c.trained, r)
}

// takes reports whether the page answers round b: its limits allow it
// and, in a cohort run (but for the final round, which takes no cohort),
// it was taken into b's cohort while the cohort was gathered.
func (c *Client) takes(b *protocol.Broadcast) bool {
	cohort := c.part.Cohort > 0 && b.Phase != protocol.PhaseFinal
	return c.allowed(b.Round, b.Phase) && (!cohort || int(c.joined) == b.Round)
}

// joinCohort offers the page to the cohort gathered in g (the round
// after `after`) when its limits allow that round, and, once it is
// taken, waits for the round to open. It returns the answer to go on
// with: the round open, the run's end, or, when the gathering ended
// without opening the round or no longer holds the page (a server
// restart gathers afresh), an answer without a broadcast, after which
// the page polls, and joins, again. It returns nil when the page takes
// no part in the round: its limits refuse it, or it was not taken.
func (c *Client) joinCohort(ctx context.Context, after int32, g *gathering) (*getRoundResponse, error) {
	r := int(g.Round)
	if r < 0 || r >= c.rounds {
		return nil, fmt.Errorf("%w: a cohort is gathered for round %d, past the plan's rounds (0 to %d): refusing", errRefused, r, c.rounds-1)
	}
	if !c.allowed(r, g.Phase) {
		c.logf("round %d: not joining its cohort (the plan's limits: %d training rounds at most, %d apart; answered %v)", r, c.part.MaxRounds, c.part.MinGap, c.trained)
		c.sitOut(r, false)
		return nil, nil
	}
	var resp getRoundResponse
	err := c.retry(ctx, func() error {
		return c.call(ctx, "GetRound", &getRoundRequest{After: after, Join: true}, &resp)
	})
	if err != nil {
		return nil, err
	}
	if !resp.InCohort || resp.Gathering == nil || resp.Gathering.Round != g.Round {
		// Not taken while the cohort was gathered. (An answer that the
		// round already opened with the page in it is not a join: a
		// server may name anyone in a round's plan.)
		c.logf("round %d: not taken into its cohort", r)
		c.sitOut(r, true)
		return nil, nil
	}
	c.joined = g.Round
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var open getRoundResponse
		err := c.retry(ctx, func() error {
			return c.call(ctx, "GetRound", &getRoundRequest{After: after}, &open)
		})
		if err != nil {
			return nil, err
		}
		if open.State == "RUN_STATE_DONE" || open.Broadcast != nil {
			return &open, nil
		}
		if w := open.Gathering; w == nil || w.Round != g.Round || !open.InCohort {
			// The gathering ended without opening the round, or no
			// longer holds the page: poll, and join, again.
			c.joined = -1
			return &open, nil
		}
	}
}

// sitOut tells the page's status that it sits out round r: not taken
// into its cohort (allowed), or refused by its limits.
func (c *Client) sitOut(r int, allowed bool) {
	if c.status == nil {
		return
	}
	why := "limits"
	if allowed {
		why = "cohort"
	}
	c.status(Status{State: "running", SatOut: &SitOut{Round: r, Why: why, Trained: append([]int{}, c.trained...),
		MaxRounds: c.part.MaxRounds, MinGap: c.part.MinGap}})
}

// leaves reports whether the page is done with the cohort run whose
// progress resp shows: its limits let it answer no training round from
// the round now gathered or open, and that round is past the last
// training round it answered (so that round's release, if it released,
// is out). A page that answered no training round waits for the final
// model, as every client reads it.
func (c *Client) leaves(resp *getRoundResponse) bool {
	if resp.Gathering == nil && resp.Broadcast == nil {
		return false
	}
	now := 0
	if resp.Gathering != nil {
		now = int(resp.Gathering.Round)
	}
	if resp.Broadcast != nil {
		now = max(now, int(resp.Broadcast.Round))
	}
	// Training rounds follow the setup round, up to lastTraining.
	return c.part.Done(c.trained, now, c.lastTraining())
}
