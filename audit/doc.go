// Package audit checks privrec's privacy claims by attacking them: it runs
// the attacks a curious server can mount on what it receives, the
// protocol's transcripts, and reports each attack's success with a
// confidence interval against the bound the attacked method's claim
// implies.
//
// # Trusting an audit
//
// An attack that fails against a private method proves nothing if it
// would also fail against an unprotected one. So every attack has a
// control, the naive variant it must break (plain federated MF, fresh
// randomized response, LDP-OP's basic scheme, the papers' mixture noise),
// and the audit fails when a control holds. A protected method fails when
// the attack beats its bound with 95% confidence. Findings are
// configurations outside a claim (secure aggregation switched off), shown
// for information.
//
// # The attacks
//
//   - inversion: rating reconstruction from gradients (two-round
//     gradient inversion, as against FedMF): fedmf and SGLD MF (controls)
//     versus DPMF and HDPMF; the reconstruction must be no better than the
//     global mean, within a margin. SDMF, which claims rating existence
//     and not values, is a finding.
//   - difference: the difference attack on repeated objective noise:
//     LDP-OP's basic scheme (control) versus LDP-OP Alg. 2.
//   - average: the average attack on randomized response: fresh per-round
//     RR and a PRR that a restart redraws (controls) versus SDMF's PRR +
//     IRR, whose accuracy must stay within e^ε∞/(1+e^ε∞), ε∞ the PRR bound,
//     also across client restarts.
//   - shape: existence inference from which items receive contributions
//     and from message sizes: fedmf (control) versus SDMF and LDP-OP.
//   - grid: existence inference from the values a server recovers:
//     sdcf's u[0] = 1 gives away each upload's implied rating, real
//     ratings lie on the rating grid and SDMF's fakes do not. SGLD MF and
//     SDMF at temperature 0 (controls) must beat SDMF's existence bound;
//     SDMF as shipped is a finding (its claim assumes no value recovery),
//     and it beats the bound too.
//   - server-h: the server-knows-h audit of the papers' distributed
//     Laplace (mixture shares, control) versus the server-blind gamma
//     shares.
//   - canary: the sensitivity canary. Each private federated method
//     (HDPMF, HDPMF-R, DPMF, PDPMF, LDP-OP) runs on two neighbouring
//     datasets under its own unit (a rating changed 1→5, a rating added,
//     all of a user's ratings changed or removed), the noise off and the
//     same random streams on both sides, the server's broadcasts replayed
//     to both; every round's release is compared with the sensitivity the
//     figure charged. Protected rows (the proven user-level figures) must
//     stay at a ratio ≤ 1; controls (each paper's per-rating figure, HDPMF
//     without its user clip, the proven figure understated) must exceed
//     it. dp-als and dp-biases run with one user added (their unit), on
//     the Gaussian path (each release of a round against its zCDP
//     ledger's L2) and on the integer path; HDPMF and DPMF run on the
//     integer path too (secagg=masked, the Skellam shares off, the words
//     summed mod 2^32 as secure aggregation sums them and compared as
//     signed integers against the calibration's integer sensitivities).
//     The SDCF family has no canary: randomized response and a truncated
//     fake error have no sensitivity; the attacks above audit it.
//
// Run runs them (all, or one attack, or the attacks of one method) and
// Report.Markdown writes the report, docs/results/audit.md in the
// repository; the command is privrec audit.
//
// # What is observed
//
// The federated methods (privrec/federated), LDP-OP (privrec/ldpop) and
// the SDCF family (privrec/sdcf: SGLD MF and SDMF) are observed through
// their Config.Transcript, streamed to the attacker as the run writes it;
// the public parameters an attack needs (Λ, ε_I, ε_P, z, ...) come from
// the transcript header. Only the average attack's naive controls, which
// are not any shipped method (fresh per-round randomized response, a PRR
// redrawn at every restart), are simulations of send sets, and the report
// says so on their rows.
//
// Attackers are given more than a server has wherever that is simpler
// (each user's randomized-response parameters, HDPMF's user weights, an
// affine calibration of reconstructed ratings against the truth): the
// audit errs on the side of finding leaks.
package audit
