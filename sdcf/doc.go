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
//     each v_j by the mean of the gradients it received for j.
//   - SDMF (§3, Alg. 1-2): the same gradients, but which items a client
//     uploads for is decided by two-stage randomized response: a permanent
//     PRR vector B' drawn once from a per-user secret (ε_P, Thm 1) and a
//     fresh IRR draw every round (ε_I, Thm 2, tuned so that a client sends z
//     gradients per round on average, eq. 12). For unrated items chosen, the
//     client sends a fake gradient whose error is drawn from the normal
//     fitted to its own current errors, truncated to [−α, α] with α from ε_g
//     (Thm 3, dp.TruncationBound). EpsG = 0 means α = ∞ (no truncation,
//     the paper's "SDMF α = ∞"). Clients may drop out of a round
//     (Config.Dropout); the server averages whatever arrives.
//   - BPR-MF by SGLD and SD-BPRMF (§4.1 Task 2, Lemma 2): the same with the
//     BPR pairwise loss on one-class data; SD-BPRMF sends real gradients for
//     the unrated items IRR picks (the BPR gradient of a sampled negative),
//     so it needs no fake errors and no ε_g.
//   - ISGLD (§4.1): PerturbRatings adds Laplace noise to every rating on
//     the device (ε-DP for the rating value), then SGLD MF.
//
// Privacy accounting. The paper bounds one round only (§3.4). Train charges
// a dp.Accountant per user for each of ε_g, ε_I (every round the user
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
// Deviations from the paper, all documented on Config: Λ ~ Gamma(shape 1,
// rate 100) (mean 0.01; with scale 100 the prior would shrink every factor
// to zero), per-item averaging on the server (Alg. 2 divides by a global
// count), ratings centred on the device at the user's own mean (kept there
// with u_i, like a user bias; the paper's u·v has no offset and learns
// far slower from a mean-gradient step), Langevin noise scaled by
// Config.Temp, and a learning
// rate that learns in 100 rounds (the paper's η_0 = 5·10⁻⁶ does not move a
// mean-gradient step).
package sdcf
