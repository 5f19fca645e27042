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
// Train returns a model.Model, the one model type of privrec. Through the
// method registry this is the method "mf"; its defaults (DefaultConfig)
// were chosen on validation splits of MovieLens training data.
package mf
