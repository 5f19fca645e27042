// Package hdpmf is decentralized matrix factorization on the
// client/server protocol of package protocol, with the untrusted-server
// Laplace family of Hu and Fang (HDPMF, "Decentralized Matrix
// Factorization with Heterogeneous Differential Privacy"): HDPMF, its
// ablation HDPMF-R, and the baselines DPMF and PDPMF of its §5.1.2, plus
// Plain, the same protocol without noise, as an attack target.
//
// # Roles
//
// The server holds only the public item factors V (unbiased MF, as in the
// paper: r̂ = u·v, no biases) and the public per-item counts n_j. Every
// client is one user's device: it holds that user's ratings (stretched by
// the privacy weights W_ij for HDPMF), its weights and its user vector u_i,
// all in unexported fields the server has no path to. The server sees
// nothing but []*protocol.Upload.
//
// A run is:
//
//  1. a setup round: each client announces the items it rated (PDPMF: the
//     items it kept after its local sampling). The counts n_j tell the
//     server how many noise shares to provision per item. Under secure
//     aggregation the server sees only the counts; without it, this
//     reveals which items a user rated. The methods protect rating values,
//     not rating existence;
//  2. T training rounds: each client (from round 2 on) first updates u_i
//     by one gradient step against the new V and projects it into the unit
//     L2 ball, then sends, for every rated item j, its gradient
//     2(u_i·v_j − W_ij r_ij)u_i plus its share of the item's Laplace noise.
//     The server sums the rows per item and takes one gradient step on V;
//  3. a final round: the server broadcasts the table it publishes and
//     each client folds its user in against it (model.FoldIn with ridge
//     FoldReg on the user's own, unstretched ratings: u_i and an offset,
//     the user's mean rating) and sends nothing. For HDPMF and HDPMF-R the
//     table is the posterior mean of the item factors under the noise
//     variance the rounds carried into them (shrink.go; post-processing of
//     released quantities, so the privacy claim is unchanged), for HDPMF
//     unstretched by γ_j (the paper's rescaling, applied to the items
//     rather than at prediction); for DPMF and PDPMF, whose noise is
//     calibrated on the users' data, it is V.
//
// The model is the clients' U rows and offsets with the published table;
// Train gathers them in process into a model.Model, which predicts u·ṽ +
// offset clamped to the rating scale, and the middle of the scale for a
// user without training ratings. privrec recommend --ratings folds a
// user into the published model by the same model.FoldIn, so a device's
// list and recommend's are the same list. (Before, the devices predicted
// u·v/W_ij with the unshrunk V: on ml-latest-small at 20 rounds a test
// RMSE of 1.40 in process and 1.24 served, worse than the global mean, and
// a top 10 of items rated by one or two users with scores 20–32, the
// noise divided by γ_j = 0.1; recommend's ridge fold-in gave another
// list.) Config.PaperPredict (method parameter paper-predict) keeps the
// paper's rule, V published as trained and u·v/W_ij with the devices'
// gradient-trained u, for the paper-reproduction experiments
// (experiment/specs/hdpmf-*.yaml set it).
//
// Train builds the two halves apart, as a deployment does: NewServer from
// public information only (the config, the catalog size, the scale, the
// item weights γ drawn from the public specification), NewClients from
// the users' ratings (with the noise calibration and the accountant of
// their spending); Clients.Model gathers the model from a final V.
//
// # Step size
//
// The paper steps by η times the summed gradient. Summed over thousands
// of raters that step diverges for popular items at the paper's rates, so
// Train preconditions both updates by the public count:
// v_j ← v_j − η/(n_j + n0)·(Σ_i g_ij + x_j + 2λv_j), and likewise u_i with
// the user's own count. This is post-processing of the same noisy sum, so
// privacy is unchanged; Config.Pseudo is n0.
//
// # Privacy
//
// The proven claim (the headline: Report.UserEpsRound, UserEpsTotal,
// UserDelta; method's eps_round, eps_total; the ledger's Spent):
//
//   - Unit and neighbouring relation: two training sets that differ in
//     the values of one user's ratings, any number of them changed in any
//     way within the public scale; the set of items each user rated is
//     the same on both (it is not protected: the setup round's counts n_j
//     are exact). A rating changed is one such pair.
//   - Trusted: nobody with raw data; the server sees only the per-item
//     sums (secure aggregation, below). The weights W_ij are the users'
//     privacy preferences, not the data the unit changes.
//   - Per round: given everything released before (the broadcasts, which
//     both neighbours see alike), a round's release is Σ_i g_i + Laplace
//     noise of scale b = 2√K·Δ/ε_w per coordinate, g_i user i's noise-free
//     upload (ε_w: ε for HDPMF and HDPMF-R, DPMF's floor, PDPMF's t). Only
//     g_i depends on user i's data: the other users' u_k depend on the
//     broadcasts and their own data. Each device scales g_i to ‖g_i‖₁ ≤
//     C·√K·Δ and ‖g_i‖₂ ≤ C·Δ (Config.UserClip = C), so the release moves
//     by at most 2C·√K·Δ in L1 and the round is ε_r = C·ε_w-DP.
//   - In total: the rounds compose adaptively; over the n rounds a user
//     uploaded in, the smaller of n·ε_r (basic, δ = 0) and the (ε, δ) of
//     n·ε_r²/2-zCDP (pure ε-DP implies ε²/2-zCDP, Bun and Steinke 2016) at
//     δ = Config.Delta. On the integer path (secagg=masked) the clip is
//     taken after rounding (L2 ≤ C·Δ·64 integer units, hence L1 ≤ its
//     square) and the rounds compose in Rényi DP with the Skellam
//     mechanism's curve at those sensitivities.
//
// At the defaults (C = 8, ε = 1, T = 100) HDPMF's proven figure is 8 a
// round and 800 in total; the user clip costs accuracy (ml-latest-small,
// random 90/10: test RMSE 1.343 unclipped, 1.597 at C = 8, 1.847 at C =
// 1). privrec/audit's canary (privrec audit --attack canary) checks the
// per-round sensitivity on neighbouring datasets with the same
// randomness.
//
// As the paper computes it (Report.EpsRound, EpsTotal; method stats
// eps_round_paper, eps_total_paper), and not an upper bound: each item's
// noisy sum is a Laplace mechanism in which one rating changes only its
// own row, by at most 2W_ijΔ in L2 norm (‖u_i‖ ≤ 1) and 2√K·W_ijΔ in L1,
// so a rating spends W_ij·ε per round and T·W_ij·ε over T rounds (basic
// composition; the accountant also reports advanced composition). That
// assumption fails from round 2: u_i is updated with all of the user's
// ratings, so a changed rating moves every row the user rated, and the
// release can move by more than 2W_ijΔ (the canary measures it above the
// charge: a rating changed 1→5 moved a release by more than the charged
// 2Δ). The papers make the same assumption. The paper's Theorem 2 states
// ε for the final V; its argument fixes the noise of an objective and
// does not cover the T released iterates either.
//
// The guarantee holds for what an observer of the per-item sums sees, and
// by default that is all the server sees: Train runs the protocol under
// secure aggregation (Config.Aggregation ideal, protocol.SecureSum, the
// ideal functionality of Bonawitz et al.; a network deployment must
// realize it with masked sums: Aggregation masked, the integer path). The server then learns, each round, only
// the noisy sum of each item's gradients, and from the setup round only the
// per-item counts n_j, not which user rated what. With
// Aggregation off, the server reads single uploads: one client's
// share carries only 1/n_j of the noise, so against such a server ratings
// have no finite ε guarantee, and the setup round reveals which items each
// user rated. The mixture shares of the paper (Thm 3) leak even through
// the sums, since the server knows h (see dp.MixtureServerDelta); the
// default gamma shares do not. privrec/audit runs these attacks.
//
// Plain (no noise, no secure aggregation) is the unprotected FedMF-style
// control for those audits: its uploads are exact gradients, from which a
// server recovers the ratings (Chai et al., FedMF, 2020).
//
// # Defaults beyond MovieLens
//
// At the defaults (Table 2's weights, ε = 1 a round) the three methods do
// not all beat the global mean (docs/results/defaults, random 90/10):
// DPMF runs every rating at the smallest budget, 0.01 a round, and is far
// worse everywhere; HDPMF and PDPMF put their noise on per-item sums, so
// on sparse sets (ml-latest-small, Douban, Yelp; PDPMF also ML-100K) items
// with few raters drown in it. On ML-1M both beat the mean. The registry's
// Spec.Limits gives the numbers. Those runs used the paper's prediction
// rule (now PaperPredict); with the default posterior-mean table and
// fold-in, HDPMF beats the global mean on ml-latest-small, ML-100K,
// Douban and Yelp (random 90/10, seed 1: 0.949, 1.050, 0.839, 1.118
// against 1.060, 1.136, 0.899, 1.124).
package hdpmf
