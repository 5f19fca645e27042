// Package sdcf implements the SDCF family of Jiang, Li and Lin, "Towards a
// more reliable privacy-preserving recommender system" (Information
// Sciences 2019): matrix factorization trained by stochastic gradient
// Langevin dynamics (SGLD) between an untrusted server, which holds the
// item factors V, and clients, one per user, which hold their ratings and
// their user vector and never send either.
//
// Variants (Config.Loss, Config.Private):
//
//   - SGLD MF (§2.3, eq. 5, non-private): every client uploads the SGLD
//     gradient η_t(e_ij u_i + Λ_v v_j) − N(0, η_t I) of each rated item and
//     updates u_i by the mean of its own Langevin steps; the server moves
//     each v_j by the (damped, see below) mean of the gradients it received
//     for j.
//   - SDMF (§3, Alg. 1-2): the same gradients, but which items a client
//     uploads for is decided by two-stage randomized response: a permanent
//     PRR vector B' drawn once from a per-user secret (ε_P, Thm 1) and a
//     fresh IRR draw every round (ε_I, Thm 2, tuned so that a client sends z
//     gradients per round on average, eq. 12). For unrated items chosen, the
//     client sends a fake gradient whose error is drawn from the normal
//     fitted to its own current errors, truncated to [−α, α] with α from ε_g
//     (Thm 3, dp.TruncationBound, bisection as in §3.4). EpsG = 0 means α =
//     ∞ (no truncation, the paper's "SDMF α = ∞"). Clients may drop out of
//     a round (Config.Dropout); the server averages whatever arrives, and
//     Report compares the measured uploads per client and round with eq.
//     (12).
//   - BPR-MF by SGLD and SD-BPRMF (§4.1 Task 2, Lemma 2): the same with the
//     BPR pairwise loss on one-class data; SD-BPRMF sends real gradients for
//     the unrated items IRR picks (the BPR gradient of a sampled negative),
//     so it needs no fake errors and no ε_g.
//   - ISGLD (§4.1): PerturbRatings adds Laplace noise to every rating on
//     the device (ε-DP for the rating value), then SGLD MF.
//
// Privacy accounting. The paper bounds one round only (§3.4). Train charges
// an accountant.Accountant per user for each of ε_g, ε_I (every round the user
// takes part) and ε_P (once) and reports the per-round maximum and the
// total by basic composition (Report). The sets of items a user uploads
// for are a post-processing of B', so over the whole run they are at most
// ε_P-DP for the existence of the user's ratings, however many rounds; the
// values of the fake gradients add ε_g per round (Thm 3 bounds one fake
// gradient; like the paper we charge it once per round, which undercounts
// a round with several fake gradients). Rating values and the user vector
// are protected only by the Langevin noise, which the paper does not
// quantify.
//
// What the server sees. Config.Transcript records every broadcast and
// every upload the server aggregates (protocol.TranscriptWriter), headed by
// the run's public parameters; privrec/audit attacks SDMF through it.
//
// Existence against value recovery. SDMF's existence bound assumes the
// server learns nothing from the values of the gradients. It does: with
// ItemBias the user vector's first coordinate is 1, so one upload's rows
// give the server u_i and each row's implied centred rating u·v_j − e_ij,
// up to the Langevin noise only. A real gradient's rating plus the user's
// mean lies on the rating grid (the scale's steps); a fake's error, drawn
// from the normal fitted to the user's own errors, does not. At the
// shipped Temp = 10⁻⁴ this tells rated from unrated items beyond
// e^ε∞/(1+e^ε∞) (`privrec audit --attack grid`, a finding there). Two
// fixes, both untested: draw each fake as a grid rating r̃ from the user's
// own rating distribution and send the error r̃ − u_i·v_j, or raise the
// Langevin noise until it hides the grid.
//
// Deviations from the paper, each documented on Config and chosen on a
// validation split of training data (DefaultConfig):
//
//   - Steps act on mean gradients, as Alg. 1 line 15 does for u_i, and the
//     server averages per item; η_0 is therefore O(1), not the paper's
//     5·10⁻⁶ (which moves nothing in 100 rounds under either the per-item
//     or Alg. 2's global Count), and the Langevin noise is scaled by
//     Config.Temp = 10⁻⁴, about the paper's absolute noise level.
//   - Alg. 2 divides the sum of all gradients by one global Count; the
//     server here divides each item's sum by the number n of uploads it
//     received for that item plus a pseudo count n0 (ServerPseudo), so
//     that a rare item does not take the same step as a popular one nor
//     overshoot. Under SDMF n is about the same for every item (p*·|U|),
//     so there this is Alg. 2's rule up to a constant.
//   - Every upload carries the public prior term η_t Λ_v v_j; the server
//     applies it once and scales only the data part by κ (ServerStep).
//     Under SDMF about 94% of the uploads are fakes (measured and compared
//     with eq. (10)-(12) in Report.UnratedFraction), so the plain mean of
//     what arrives carries ~6% of the real signal while the prior counts
//     in full: with κ = 1 SDMF learns little more than the users' own means.
//     κ = 4 gives part of it back; full compensation (κ ≈ 16) diverges.
//   - Λ_u = Λ_v = 0.1·I fixed (Lambda); the paper's per-dimension draws from
//     "Gamma(1, 100)" remain available (Lambda = 0; read as shape 1, rate
//     100, mean 0.01, since with scale 100 every factor shrinks to zero) but
//     an exponential spread of precisions overfits the weak dimensions.
//   - Ratings are centred on the device at the user's own mean, and the
//     first coordinate of u_i is fixed at 1 (ItemBias), so v_j[0] is an
//     item offset; the paper's u·v has neither.
//   - The u_i step uses all the user's ratings each round (Alg. 1), the v_j
//     step only what the IRR sends; with ε_I/h_i small for every user (ε_I
//     ≤ 4 spread over h_i ≈ 85 ratings), q* ≈ p* and ε_I hardly changes
//     what is sent, as the paper observes.
//
// # Deployment
//
// NewServer builds the server from public information only (the config,
// the catalog size, its seed: the initial V and, with Lambda 0, Λ_v, which
// it broadcasts in Params "lambda-v/d"); NewClients builds the devices
// from the users' ratings (initial u_i, Λ_u, PRR secrets from their seed)
// and charges the ε ledger for their own uploads. Train runs the two over
// protocol.Run.
//
// # Defaults beyond MovieLens
//
// On Yelp (12 ratings per user over 14,284 items) every SGLD method at its
// defaults is worse than the global mean, the non-private SGLD MF too:
// Langevin noise and a device-side fit to so few ratings overfit. On the
// four other sets privrec ships they beat it (docs/results/defaults).
package sdcf
