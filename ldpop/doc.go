// Package ldpop implements LDP-OP, matrix factorization under local
// differential privacy by objective perturbation (Wang, Luo, Deng and Gao,
// Chinese Journal of Computers, 2025, doi 10.11897/SP.J.1016.2025.00451),
// its broken basic scheme and its noise-free control RSMF, on the
// client/server protocol of package protocol.
//
// # The scheme
//
// The server holds the item factors V (m × d); each user i keeps her
// ratings and her vector u_i on her device. Training has two stages:
//
//  1. Every user fits u_i once, on the device, to her own ratings
//     (objective (2) of the paper), and keeps it fixed from then on.
//  2. The server learns V by gradient steps on the perturbed objective (8),
//     Σ_ij y_ij (r_ij − u_i·v_j)² + λ Σ_j ‖v_j‖² + Σ_j η_j·v_j, whose noise
//     η_j is the sum of the users' shares η_j^i. Each user uploads her
//     share of the gradient of (8); the server averages the n uploads
//     (÷ n) and steps V ← V − γ_t·mean, with γ_t = γ_0·decay^t.
//
// The three variants differ in what a user uploads:
//
//   - Basic (Alg. 1, §4.2): every round, the whole m × d gradient with the
//     SAME noise share η^i (drawn once: it is a term of the objective).
//     The difference of two rounds' uploads cancels the noise: for an item
//     the user did not rate it is exactly λ(v_j^t − v_j^(t−1)), for a rated
//     item it is not, so the server learns the set of rated items (the
//     paper's difference attack). It is kept as the attack target.
//   - LDP-OP (Alg. 2 with C2, §4.3): the server keeps a mark matrix M;
//     each round it names one unmarked position p = (j, l) of V, drawn
//     without replacement, and marks it; every user, rated j or not,
//     uploads only (md − t)·[∂_p + η_p^i], the p-th element of her gradient
//     plus her noise share, scaled by md − t so that the sparse upload is an
//     unbiased estimate of the full gradient (Thm 2). No position is ever
//     uploaded twice in a pass, so no two uploads share noise.
//   - RSMF (§6.1): the sampling of LDP-OP without noise.
//
// # Noise
//
// The summed noise of a position is Laplace(b) with b = 2ΔB/ε (Thm 1),
// where Δ = r_max − r_min and B bounds ‖u_i‖. It is split among the n
// users (dp's distributed Laplace shares): by default each user adds a
// GammaShares share (dp.SampleGammaShare), which sums to exactly
// Laplace(b) while the server learns nothing about the noise; Noise =
// dp.MixtureShares is the paper's construction η^i = b·sqrt(2H_p)·C^i
// with the server's H_p ~ Exp(1) and the user's C^i ~ N(0, 1/n) (Lemma
// 1), which a server that knows H sees as Gaussian (see
// dp.MixtureServerDelta).
//
// # Readings of what the paper leaves open (documented choices)
//
//   - Alg. 2 step 2, "users minimize objective (2) by SGD to get u_i",
//     before V is trained: we read it as each user fitting u_i to her own
//     ratings against the broadcast initial V⁰, on the device, and keeping
//     it (the paper's proof needs U fixed). We compute the point SGD
//     converges to exactly: the minimizer of (1/2N_i)Σ_j (r_ij − u·v_j⁰)² +
//     (λ/2)‖u‖² subject to ‖u‖ ≤ B (the bound the noise is calibrated to),
//     by a d × d Cholesky solve and bisection on the Lagrange multiplier.
//     Config.Refit (0 by default, the paper) instead refits u_i against the
//     current V every Refit rounds: alternating minimization, more accurate,
//     outside the paper.
//   - V⁰ is random, N(0, InitScale²) per coordinate, except that the first
//     coordinate starts at r_max/B (a public constant): the model has no
//     bias term, and this lets u_i's first coordinate carry the user's
//     mean rating, as a bias would.
//   - The paper gives no d; the default is 10.
//   - LDP-OP and RSMF clip the residual r_ij − u_i·v_j of every gradient
//     to [−Δ, Δ], so that adding or removing a rating changes a user's
//     contribution to a position by at most 2Δ|u_il| ≤ 2ΔB: without the
//     clip the existence claim has no sensitivity bound. The basic scheme
//     does not clip (its gradient stays linear in V, see Privacy).
//   - C2 line 4 omits the sign and factor of ∂(r − u·v)²/∂v; we upload
//     −2·y_ij·u_il·e_ij + λ·v_jl, the gradient whose sensitivity 2ΔB the
//     noise is calibrated to; each user adds λ·v_jl as C2 says.
//   - "Decay 0.95" is per round (per iteration, as the paper says); with
//     DecayEvery > 1 the rate decays once every DecayEvery rounds.
//   - The paper never runs Alg. 1 and gives it no iter; the basic scheme
//     defaults to 100 rounds (each a dense m × d upload per user; the
//     decayed steps after round 100 add 0.6%).
//   - Alg. 2 stops before M is full (iter ≤ md). When Rounds·PerRound
//     exceeds md, we start a new pass: M is cleared, positions are drawn
//     again, and every upload has fresh noise (a new H under
//     MixtureShares), which costs ε again (see below).
//   - PerRound (1 by default, the paper) names several positions per round;
//     each upload is then scaled by R/k, R the positions left in the pass
//     and k the positions named (R = md − t for k = 1).
//
// # What the faithful defaults do
//
// With one position per round, 1000 rounds touch at most 1000 of the md
// elements of V (6% of V on ML-100K at d = 10) and the rate decays as
// 0.95^t, so only the first hundred or so rounds move V at all: the model
// stays near V⁰, and predictions come from the users' fit against V⁰
// (roughly each user's mean rating), whatever ε is. The scale md − t turns
// the first steps into jumps of hundreds of times the gradient. Measured on
// ML-100K, random 80/20, 3 seeds (privrec evaluate --repeats 3), RMSE:
//
//	ldp-op, paper's schedule, ε = 1 / 0.1         1.0511 / 1.0673
//	ldp-op, 1 round (V⁰ and the user fit only)    1.0489
//	rsmf, paper's schedule                         1.0504
//	ldp-op-basic, 100 rounds, ε = 1               1.0426
//	global mean / item means / MF (non-private)    1.1231 / 1.0212 / 0.9197
//	rsmf, every position for 20 rounds, γ 1, no decay, refit 5    0.9436
//	ldp-op, the same, ε = 1 (63 in total) / ε = 0.1 (6.3)        0.9449 / 1.0242
//
// PerRound, Decay and Refit are the documented knobs that make V learn;
// each pass over V then costs ε·√d again.
//
// # Deployment
//
// NewServer builds the server from public information only (the config,
// the catalog size, the scale's maximum, its seed); it averages the
// uploads over the clients that announce themselves in the setup round
// (an upload with Scalars {1}, summed under secure aggregation).
// NewClients builds the clients from the users' ratings; they split the
// noise among the users of the data they were given, and keep their own
// copy of the ε accounting from the positions the broadcasts name, which
// Clients.Report reports. Train runs the two over protocol.Run.
//
// # Privacy, honestly
//
// The proven claim (the headline: Report.EpsRoundUser, EpsTotalUser;
// method's eps_round, eps_total):
//
//   - Unit and neighbouring relation: two training sets that differ in
//     any of one user's ratings, values and existence; the user takes
//     part on both (every user announces herself and adds noise shares,
//     rated items or not, so the number of users n is the same).
//   - Trusted: nobody with raw data; the server sees only the
//     per-position sums (Config.Aggregation ideal or masked). The paper's
//     server reads every upload; one upload carries only a share of the
//     noise (variance 2b²/n), so against such a server there is no
//     guarantee (the method layer reports ε Inf at secagg=off).
//   - Per round: given the broadcasts, which both neighbours see alike,
//     only user i's own upload depends on her data. At a released position
//     (j, l) it is scale·(λv_jl − e_ij·u_il) with e_ij = 2·clip(r_ij −
//     u_i·v_j) ∈ [−2Δ, 2Δ] for a rated j and 0 otherwise, and |u_il| ≤ ‖u_i‖
//     ≤ B; u_i is fitted to all of her ratings, so both e_ij and u_i
//     change, and the position moves by at most 4ΔB·scale, twice the
//     2ΔB·scale the Laplace noise b·scale is calibrated to; within a row,
//     ‖e_ij u_i − e'_ij u'_i‖₂ ≤ 4ΔB. So the releases of row j in a round
//     cost 2ε·√(positions of row j), and a round 2ε·Σ_j √(positions of
//     row j): 2ε with one position per round.
//   - In total: basic composition over the rounds, row by row (Cauchy–
//     Schwarz over a row's positions): 2ε·Σ_j ‖c_j‖₂, c_jl the times
//     (j, l) was released, summed over refit segments. On the integer
//     path the same rows compose in Rényi DP with the Skellam curve at
//     twice the per-rating sensitivity.
//
// As the paper computes it (Report.EpsRound, EpsTotal; method stats
// eps_round_paper, eps_total_paper), and not an upper bound: per
// released position a rating (i, j) moves the sum by at most 2Δ|u_il|
// with u_i held fixed (as Thm 1 assumes), so the releases of row j
// compose to ε·Σ_l c_jl|u_il|/B ≤ ε·‖c_j‖₂: ε per round with one position
// per round, ε·max_j ‖c_j‖₂ in total (at most ε·√d per pass; the paper's
// ε-LDP assumes an L2 sensitivity with a per-coordinate Laplace, which is
// off by up to √d). A changed or added rating moves u_i and so every row
// the user rated, which that figure charges nothing for: privrec/audit's
// canary measures releases of other rows moving.
//
// # The integer path
//
// Config.Aggregation masked (the deployment's default) runs the rounds
// under secure aggregation for real: every client uploads, for the named
// positions, its quantized gradient element (64 units per float unit) plus
// a share of distributed Skellam noise, dense over the round's positions,
// and one arrival word; the server receives only the sum mod 2^32. The
// noise of a position is Skellam(μ), μ calibrated so that the run's passes
// over V, each a release of every row, compose in Rényi DP to ε·√d per
// pass at δ (Config.Delta): the total the Laplace path reports for a full
// pass, so the two compare at equal total ε. The accounting (Report) is
// Rényi DP per row over the releases the broadcasts named, converted to
// (ε, δ): the L2 geometry of the Skellam mechanism bounds a whole row's
// release by 2ΔB·64 + 2√d in integer units, where the Laplace path pays
// per coordinate. Measured on ML-100K (random 80/20, seed 1, V learned:
// every position each round, 20 rounds, γ 1, no decay, refit 5), test
// RMSE Laplace vs Skellam: 0.9437 vs 0.9422 at total ε 63.2, 1.0282 vs
// 0.9475 at total ε 6.32 (δ = 1e-6 for Skellam): composition in Rényi DP
// over 20 passes is what buys the difference.
//
// The basic scheme releases the whole gradient with the same noise every
// round, so it has no proven ε: differences of rounds cancel the noise,
// also in the sums, where S_j^t − S_j^(t−1) = nλΔv_j + 2·Σ_i y_ij (u_i·Δv_j)u_i
// exposes every rater's u_i u_iᵀ, and u_i is fitted to her ratings; and
// existence falls to the difference attack. The paper's reading (stats
// eps_total_paper) is that the values enter each round's sum only through
// the fixed term −2Σ_i y_ij u_i r_ij, at ε·√d in total, which holds only
// with u_i independent of the ratings.
package ldpop
