// Package rdp accounts for privacy in Rényi differential privacy (RDP), the
// accounting that privrec's integer noise path (Skellam noise under secure
// aggregation, see dp.FillSkellamShare) needs.
//
// # Rényi DP
//
// A mechanism M is (α, ε)-RDP (Mironov 2017) if for every pair of
// neighbouring inputs D, D′ the Rényi divergence of order α > 1 between its
// output laws is at most ε:
//
//	D_α(M(D) ‖ M(D′)) = 1/(α−1) · ln E_{x∼M(D′)}[(p_D(x)/p_D′(x))^α] ≤ ε.
//
// A mechanism is described by its curve α ↦ ε(α), kept here as a Curve on
// the fixed grid Orders. Two properties make RDP the right tool for many
// rounds of noisy sums:
//
//   - composition is addition: running mechanisms with curves ε1(α) and
//     ε2(α) (even adaptively) gives ε1(α) + ε2(α) at every order, so T
//     rounds of one mechanism cost T·ε(α) (Compose, Repeat);
//   - the curve converts to (ε, δ)-DP at any δ, by minimizing over the
//     orders a bound on ε (ToDP). That is much tighter than composing
//     (ε, δ) guarantees round by round.
//
// # Mechanisms
//
// The Gaussian mechanism with noise N(0, σ²) and L2 sensitivity Δ has
// ε(α) = αΔ²/(2σ²) exactly (Gaussian). The Skellam mechanism adds
// Skellam(μ) = Poisson(μ) − Poisson(μ) noise (variance 2μ) to each
// coordinate of an integer-valued query with L1 and L2 sensitivities Δ1,
// Δ2; Agarwal, Kairouz and Liu (NeurIPS 2021) bound its RDP by the
// Gaussian's at σ² = 2μ plus a discretization term that vanishes as μ
// grows (Skellam). Because Skellam noise is closed under sums, n clients
// each adding Skellam(μ/n) give the server exactly the Skellam(μ)
// mechanism; if only a fraction ρ of the shares arrive the sum is
// Skellam(ρμ) (SkellamPartial). SkellamMuFor inverts the accounting: the
// least μ reaching a target (ε, δ) after T rounds.
//
// # zCDP ledgers
//
// A run made of Gaussian releases (the Gaussian mechanism's curve is αρ
// with ρ = Δ²/(2σ²): zero-concentrated DP, Bun and Steinke 2016) keeps a
// Ledger: every named release with its sensitivity, σ and ρ, composed by
// adding ρ and converted to (ε, δ) by ZCDPToDP, the conversion of ToDP
// minimized over every real order rather than the grid. ZCDPRhoFor is the
// inverse a method calibrates from: the ρ a target (ε, δ) allows, divided
// among the releases before any data is read.
//
// Sensitivities are in the query's integer units (for quantized vectors,
// dp.Quantizer.Sensitivity). This package knows nothing of users or
// budgets; package accountant keeps per-user ledgers.
package rdp
