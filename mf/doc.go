// Package mf trains matrix factorization by stochastic gradient descent,
// the non-private reference every private method is measured against.
//
// A model predicts r̂(u, i) = μ + b_u + b_i + u·v (Config.Biased) or u·v,
// and Train fits it to the training ratings by SGD with L2
// regularization. The ratings are arranged into a grid of NumBlocks ×
// NumBlocks blocks of users and items balanced by their counts; workers
// update blocks that share no user and no item at the same time, so the
// updates never race, and the order of the blocks and of the ratings
// within a block is drawn from Config.Seed alone. The result is therefore
// the same bit for bit at any worker count.
//
// The inner loop over a block is vec.SGD: AVX-512 or AVX2 assembly where
// the CPU has it, over factor rows padded to 64-byte cache lines, else
// pure Go (PRIVREC_SIMD=off forces the pure Go kernels). The kernels sum
// in different orders, so models trained on CPUs with different kernels
// differ in the last bits; their test RMSE agrees to about 1e-9 on ML-1M
// (TestSIMDMatchesPureGoML1M).
//
// Train returns a model.Model, the one model type of privrec. Through the
// method registry this is the method "mf"; its defaults (DefaultConfig)
// were chosen on validation splits of MovieLens training data.
package mf
