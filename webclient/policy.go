package webclient

import (
	"errors"
	"fmt"

	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/secagg"
)

// The page's policy on what a server asks of it: deploy's client checks
// (checkBroadcast, checkPlan, checkSurvivors), for one person.

// checkBroadcast is the page's policy on a new round, before anything of
// it is remembered or answered: no round past the plan's round count,
// one setup round per plan, and, with an authority pinned, the checks
// of privrec client --authority-key on the quantities that calibrate
// the noise shares (deploy's checkBroadcast): a masked round calibrated
// by a roster of at most the certified one, no count above it, and no
// noise-share fraction above the pinned MinShare.
func (c *Client) checkBroadcast(b *protocol.Broadcast) error {
	if b.Round < 0 || b.Round >= c.rounds {
		return fmt.Errorf("%w: round %d is past the plan's %d rounds (%s): refusing", errRefused, b.Round, c.rounds, c.plan.Method)
	}
	if b.Phase == protocol.PhaseSetup && c.setup >= 0 && int(c.setup) != b.Round {
		return fmt.Errorf("%w: round %d is a second setup phase (this plan's setup was round %d): refusing", errRefused, b.Round, c.setup)
	}
	if c.trust == nil {
		return nil
	}
	cert, err := c.certificate()
	if err != nil {
		return err
	}
	roster := int(cert.Roster)
	if b.Words > 0 {
		switch r, ok := b.Params[protocol.ParamRoster]; {
		case !ok || protocol.Roster(b) == 0:
			return fmt.Errorf("%w: masked round %d calibrates the noise shares by the server's counts, not by a roster (%s = %g): refusing (a server could shrink every share)", errRefused, b.Round, protocol.ParamRoster, r)
		case protocol.Roster(b) > roster:
			return fmt.Errorf("%w: round %d calibrates the noise shares for a roster of %d clients, above the certified %d: refusing", errRefused, b.Round, protocol.Roster(b), roster)
		}
	}
	for j, n := range b.Counts {
		if int(n) > roster {
			return fmt.Errorf("%w: round %d announces %d raters of item %d, above the certified roster of %d: refusing", errRefused, b.Round, n, j, roster)
		}
	}
	if n, ok := b.Params["clients"]; ok && n > float64(roster) {
		return fmt.Errorf("%w: round %d announces %g clients, above the certified roster of %d: refusing", errRefused, b.Round, n, roster)
	}
	if rho, ok := b.Params[protocol.ParamMinShare]; ok && rho > c.trust.MinShare {
		return fmt.Errorf("%w: round %d asks for noise shares calibrated for %g of the clients, above the pinned %g: refusing", errRefused, b.Round, rho, c.trust.MinShare)
	}
	return nil
}

// certificate returns the page's checked certificate, checking the one
// kept with its identity on first use.
func (c *Client) certificate() (*secagg.Certificate, error) {
	if c.cert != nil {
		return c.cert, nil
	}
	if c.ident == nil || len(c.ident.Cert) == 0 {
		return nil, fmt.Errorf("%w: an enrolment authority is pinned and this page's identity is not certified by it", errRefused)
	}
	cert, err := c.checkCert(c.ident.Cert)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errRefused, err)
	}
	c.cert = cert
	return cert, nil
}

// checkPlan is the page's policy on a masked round's plan, deploy's
// checkPlan: without a pinned authority nothing, unless the person
// allowed the honest-but-curious protocol (AllowInsecure; the page has
// no certified identity for the active one); with one, only the
// active protocol, with no more positions than the certified roster and
// with K and T that withstand a lying server colluding with the pinned
// fraction of that roster (secagg.CheckActiveParams). It is checked
// before any key leaves the page.
func (c *Client) checkPlan(p secagg.Params) error {
	if c.trust == nil {
		if p.Active {
			return errors.New("the server runs the active secure-aggregation protocol and this page pins no enrolment authority: it has no certified identity")
		}
		if !c.insecure {
			return errors.New("the server's plan runs the honest-but-curious secure-aggregation protocol and this page pins no enrolment authority: " +
				"a server that lies could unmask this page. Open the link the run's enrolment authority hands out (it pins the authority), " +
				"or add insecure=1 to the address to accept the weaker protocol")
		}
		return nil
	}
	if !p.Active {
		return errors.New("an enrolment authority is pinned and the server's plan is not the active secure-aggregation protocol (a server that lies could unmask the page): refusing")
	}
	cert, err := c.certificate()
	if err != nil {
		return err
	}
	return secagg.CheckPlan(p, int(cert.Roster), c.trust.Collusion)
}

// checkSurvivors refuses, before the page signs the survivor set (and
// so before it reveals any share), a set smaller than the pinned
// MinShare of the certified roster: the noise shares were calibrated
// for that many clients (deploy's checkSurvivors).
func (c *Client) checkSurvivors(bitmap []byte) error {
	if err := secagg.CheckSurvivors(bitmap, int(c.cert.Roster), c.trust.MinShare); err != nil {
		return fmt.Errorf("%w: %w", errRefused, err)
	}
	return nil
}
