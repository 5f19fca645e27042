// Package maskplan is the integer path of the user-level methods that
// run under real secure aggregation (dp-als, dp-ease): each release
// is one dense integer vector per user, summed mod 2^32 by SecAgg+, with
// the noise added by the clients as shares of distributed Skellam noise
// (Agarwal, Kairouz and Liu, NeurIPS 2021).
//
// Quantization: each coordinate e of a user's float statistics x_u (the
// Gaussian path's upload) is divided by the Gaussian σ of its block (the
// σ the method's zCDP ledger charges for it), so the normalized vector
// has L2 sensitivity √(2ρ_t) for the release's zCDP share ρ_t, then
// scaled by γ_t = G/√(2ρ_t) and rounded stochastically (unbiased). A user
// moves the integer sum by at most Δ2 = G + √d in L2 (the rounding adds
// at most 1 per coordinate, d the release's coordinates) and Δ1 =
// min(√d·Δ2, Δ2²) in L1.
//
// Calibration: release t gets Skellam(μ_t) in total per coordinate, μ_t =
// (1+η)·Δ2²/(4ρ_t), so that its Rényi curve's Gaussian term is the
// ledger's αρ_t/(1+η); η is the least value for which the Skellam curves
// of all releases (with their divergence excess) compose to the target
// (ε, δ) by rdp.ToDP. Each client adds Skellam(μ_t/s), s the share count
// (protocol.NoiseShares): any s arriving shares carry the calibrated
// noise. Each upload ends with an arrival word 1, so the server knows how
// many shares arrived and accounts the noise that did (Step.Curve).
//
// A Plan is a method's releases calibrated together: the method describes
// only its block layout (NewStep: block sizes, σ and sensitivities); the
// Plan owns the calibration, the accounting of the noise that arrived
// (Spent, StepSpent, Coverage), the noise shares a client draws for
// (Shares) and the check of every unmasked sum (Check).
package maskplan
