// Package budget holds privrec's privacy specifications: who gets which ε.
//
// Under personalized or heterogeneous differential privacy not every
// subject is protected alike. A specification assigns each user, item or
// rating its own budget: an ε (personalized DP, PDP-PMF) or a privacy
// weight in (0, 1] that scales a maximum budget (heterogeneous (ε, v)-DP,
// HDPMF). The mechanisms of package dp then calibrate their noise to these
// budgets, and package accountant checks what each user has spent against
// them.
//
//   - Groups is the three-group simulation of Jorgensen, Yu and Cormode
//     (conservative, moderate, liberal) that both papers use; DefaultPDP
//     and DefaultHDPMF are the papers' settings.
//   - PDPSpec draws one ε per rating; HDPMFSpec draws user and item weights
//     (HDPWeights), whose product is a rating's weight; Uniform gives every
//     subject the same ε.
//   - ValidateBudgets and ValidateWeights check budgets and weights from
//     any source; Threshold reduces per-rating budgets to the single
//     threshold of the sample mechanism.
//
// Every error about a specification wraps ErrSpec. The generators draw from
// their own rng stream, so a specification's seed never shares randomness
// with a mechanism's.
package budget
