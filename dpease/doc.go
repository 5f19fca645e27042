// Package dpease is a private top-N recommender: EASE (Steck, WWW 2019)
// solved on item statistics released under user-level joint differential
// privacy.
//
// The protocol has two rounds between the users' devices and a server.
//
//  1. Counts: each device uploads its item indicator vector
//     scaled by 1/√n_u (n_u its number of items), so a user's whole
//     upload has L2 norm 1. The server receives the sum (secure
//     aggregation) and adds N(0, σ_c²) to every item: the noisy
//     popularity ŝ.
//  2. Gram: the server broadcasts the M items with the largest ŝ.
//     Each device forms x_u, its indicator on those items (n'_u of them),
//     and uploads the upper triangle (diagonal included) of
//     x_u x_uᵀ / max(n'_u, c): its L2 norm is at most √((1+1/c)/2). The
//     server adds N(0, σ_g²) to every entry of the summed triangle.
//
// Everything after is post-processing of the two releases: the server
// solves B = I − P·diag(P)⁻¹ with P = (G̃ + λI)⁻¹, λ = Lambda +
// LambdaNoise·σ_g·√M (the noise's spectral scale), and publishes the
// item factors: item i's row is column slot(i) of B, plus PopWeight·ŝ_i/
// max ŝ in a last coordinate. A device scores every item with its own
// history, x_u·B + PopWeight·ŝ_i/max ŝ, on the device: the history never
// leaves it. Items outside the top M are ranked by ŝ alone. When the
// counts are weak against their noise (fewer than M items with ŝ ≥
// PopDiagSNR·σ_c, default 2: few users for the budget), the top M items'
// popularity coordinate is PopWeight·(1 + G̃_ii/max G̃_jj) instead, from
// the Gram's diagonal (the larger share of ρ), above every other item's;
// a rule on the released counts alone, which keeps the ML-1M defaults.
//
// Graceful degradation (issue 41, Config.Shrink, the default): how much
// personalisation the releases can carry is decided by public and
// released quantities only, so that on any data the lists are at least
// DP popularity's at the same (ε, δ):
//
//   - Popularity mode, before anything is released: a user's Gram weights
//     sum to at most 1 on the diagonal, so the Gram's mass is at most the
//     public roster N (Config.Roster: the devices enrolled; in process the
//     training data's users). When N < RosterRidge·λ (4 times the ridge
//     the noise forces at the 0.1 split) the item-item weights cannot rise
//     above the ridge: the counts get PopularityFrac (0.99) of ρ and the
//     item-item weights are 0, so the list is DP popularity at nearly the
//     whole budget. Otherwise the counts get PersonalFrac (0.1). The
//     server broadcasts the split; devices calibrate their integer
//     uploads with it (any split keeps the total ρ).
//   - Personal weight, after the Gram: the item-item weights are scaled
//     by h·SNR/(h·SNR + 1) (PersonalWeight), the posterior-mean weight of
//     a score that sums h history items' weights, whose signals add
//     coherently and whose noise adds in quadrature; SNR is the released
//     off-diagonal entries' variance in excess of the known noise
//     variance σ_g², over σ_g², and h the release's typical history
//     1 + 2·Σ_off G̃/Σ_diag G̃. A weight of 0 lists DP popularity (the
//     result says so).
//
// A served run takes the roster from its enrolled count when enrolment
// closes (SetRoster, through protocol.RosterSetter), so it resolves the
// same split as in process; the personal weight applies on every path. Measured on seven datasets at
// ε = 1 and 10, 5 seeds (docs/results/dpease-any-data.md): at least 0.97
// of dp-pop's Recall@20 and NDCG@20 in 25 of 28 ratios, the other three
// (Douban and CiaoDVD at ε = 1, 0.93–0.96) within seed noise; ML-1M as
// before (1.34 × dp-pop at ε = 1, Recall@20 0.298 at ε = 10).
//
// Privacy: the unit is one user; the neighbouring relation is zero-out:
// one user's ratings all removed, the user's participation public (a
// deployment's server counts the participants exactly; a device without
// ratings contributes nothing, so the sensitivities are add/remove's of
// the user's ratings). Report.EpsReplace: one history replaced by any
// other. Each release has the sensitivity above, FracCounts of the zCDP
// budget ρ on the counts, the rest on the Gram, and ε is an upper bound
// over the whole run at Delta, listed release by release in
// Report.Ledger. A user's recommendations are computed from their own
// history on the device (joint DP). Hyperparameter tuning is not counted.
// Who is trusted depends on Config.Aggregation:
//
//   - ideal (in process): each release is the Gaussian mechanism, composed
//     in zCDP. The server is trusted to add the noise to the sum it
//     receives and with no single upload (the ideal functionality of
//     secure aggregation).
//   - masked (privrec serve's default; masked.go): the devices upload
//     quantized dense vectors with their shares of distributed Skellam
//     noise, summed by SecAgg+, so the server learns only the noisy sums
//     and is trusted with nothing; the devices are trusted to add their
//     shares. ε is the Rényi accounting of the two Skellam releases
//     (quantization slack included), calibrated to at most Eps.
//   - off: the server reads every upload; the ε holds only against
//     observers of the releases.
//
// Cohorts (issue 45; Config.Cohort, CohortRounds): each statistic is
// released over CohortRounds disjoint cohorts, its pooled sums after
// every round (the model after each cohort). Each device answers at most
// 2 training rounds at least CohortRounds apart, so whatever cohorts the
// server picks it enters the counts once and the Gram once: ε is the
// roster's, no amplification by sampling assumed, and cohort membership
// is visible to the server. The pooled sums carry one release's noise
// per cohort. On the integer path each device's Skellam share is drawn
// for the cohort, every broadcast names the catalog's size (a device in a
// Gram cohort may have answered no counts round), and Spent composes the
// costliest counts round and the costliest Gram round with the noise
// that arrived. Results: docs/results/dpals-cohorts.md.
//
// The noise (the server's, or the devices' shares and rounding) is drawn
// from crypto/rand unless Config.Seeded selects the reproducible test
// mode (noise from the run's seed; over the network, the devices' shares
// are reproducible when the deployment runs in its test mode, --seed).
package dpease
