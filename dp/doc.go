// Package dp holds privrec's noise mechanisms: the samplers and
// calibrations every private method draws its noise from. Package budget
// says how much each user, item or rating is protected, and package
// accountant counts what each user has spent.
//
// # Mechanisms
//
// A mechanism turns a value that depends on private data into one whose
// distribution changes by at most a factor e^ε when one protected unit (a
// rating, or all of a user's ratings) changes. The samplers here draw from
// seeded math/rand/v2 streams (see package rng) so that experiments repeat
// exactly.
//
//   - SampleLaplace, SampleGamma, FillSphere and FillL2Laplace (density
//     ∝ exp(−ε‖η‖₂/Δ): a Gamma(K, Δ/ε) radius times a uniform direction,
//     for DP-PMF);
//   - distributed Laplace noise: n users each add a share so that the server
//     sees only the noisy sum. GammaShares (each share G1 − G2 with G1, G2 ~
//     Gamma(1/n, b)) is the default: the shares sum to exactly Laplace(b)
//     and the server learns nothing about the noise; FillGammaShares32 and
//     FillGammaSharesZ32 (the same law in SampleGammaShare's form) are its
//     fast float32 samplers for many users (a stated e^−40 cut-off).
//     MixtureShares is the papers' construction, in which the server draws
//     h ~ Exp(1); a server that knows h sees Gaussian noise, and
//     MixtureServerDelta computes the δ it leaks (about 0.19 at ε = 1);
//   - randomized response: RandomizedResponse, and the two-stage PRR + IRR
//     of SDCF (SolveTwoStageRR), whose permanent answers come from a per-user
//     secret (PRRSource) so they survive a restart; TruncationBound;
//   - personalized sampling (KeepProb, SampleKeep), HDPMF's stretching
//     (Stretch, HDPMFNoiseScale), DPAverage and DPItemAverages.
//
// # Checked, not asserted
//
// The tests check every sampler against its exact CDF with a
// Kolmogorov–Smirnov test and RR rates with binomial tests. Package audit,
// next to the attacks, audits each mechanism empirically on neighbouring
// inputs: it must pass at its claimed ε while a copy with 0.85 × the noise
// scale must fail. Its server's-view audit shows the leak of MixtureShares
// and its absence in GammaShares.
package dp
