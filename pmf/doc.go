// Package pmf implements probabilistic matrix factorization and its two
// private variants of Zhang, Liu, Chen and Zhong, "Probabilistic Matrix
// Factorization with Personalized Differential Privacy" (KBS 2019):
// DP-PMF (§4, Thm 4, Alg. 2) and PDP-PMF (§5, Alg. 1-2, Thm 6).
//
// Train is plain PMF in the scaling of Salakhutdinov and Mnih's pmf.m
// (see Config): the paper's γ = 50, λ = 0.01, k1 = 50, d = 20 only make
// sense with gradients averaged over a mini-batch (of 10⁵ ratings, with
// momentum 0.8); with the per-rating gradients of eqs. (2)-(5) γ = 50
// diverges at once. Even so, d = 20 with γ = 50 diverges on ML-1M
// (pmf.m used d = 10); γ = 25 trains.
//
// # DP-PMF
//
// TrainDP fits U by PMF (stage 1, no noise), scales every u_i to norm ≤ 1
// (the proof's assumption), then sets V̄ to the minimizer of objective (8),
// the squared error plus (λ_v/2)Σ‖v_j‖² plus Σ η_jᵀv_j, with one η_j per
// item of density ∝ exp(−ε‖η_j‖₂/Δ) (a Gamma(d, Δ/ε) norm times a uniform
// direction; mean norm d·Δ/ε).
//
// Privacy claim: unit a rating value (a changed r_ij, Remark 7's bounded
// DP, Δ = r_max − r_min); trusted party the recommender; ε once (one
// release, no rounds); δ = 0. 1% of ε (DPConfig.MeanShare) buys the DP
// mean rating that centers the ratings, the rest is the noise's ε
// (sequential composition). The claim covers V̄ as a function of the
// ratings with U held fixed, which is what Theorem 4 proves: U is fitted
// without noise and kept by the recommender, and a prediction u_iᵀv̄_j
// uses it, so predictions shown to users carry no proven guarantee. This
// gap is the paper's.
//
// Theorem 4's proof needs the exact minimizer (∇Ẽ = 0 at V̄ for both
// neighbours), which SolverExact computes per item by a d×d Cholesky
// solve. Alg. 2 as printed instead starts V̄ at the non-private V and takes
// k2 gradient steps drawing a fresh η_j each step; SolverPaper does that,
// to reproduce the paper's figures, and makes no claim. With the exact
// minimizer the paper's λ_v = 0.01 lets the noise, ‖η_j‖ ≈ 80 at ε = 1
// on a 1-5 scale, blow v̄_j up by 1/λ_v; the default λ_v grows with the
// noise variance instead (see DPConfig.RegV).
//
// # PDP-PMF
//
// TrainPDP draws the RSM sample (Alg. 1): rating k is kept with
// probability (e^{ε_k} − 1)/(e^t − 1) if ε_k < t, else always; DP-PMF at
// ε = t runs on the sample. Theorem 6 gives rating k the guarantee
// min(ε_k, t) against adding or removing it; for a changed value (our
// unit) Remark 7 gives 2·min(ε_k, t), and that is what the method
// registry reports. The same U caveat applies.
//
// # Defaults beyond MovieLens
//
// At ε = 1 the exact solver's λ_v = 1 + 6.25·(Δ/ε)² = 101 (PDP-PMF, at
// ε = t ≈ 0.39: about 660) shrinks V̄ almost to zero, so both predict
// about their DP mean: they beat the global mean on the MovieLens sets but
// are level with it or slightly worse on Douban and Yelp
// (docs/results/defaults; the registry's Spec.Limits gives the numbers).
package pmf
