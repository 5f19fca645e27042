// Package model holds the trained model that every privrec method
// produces: a factor model. A prediction for user u and item i is
//
//	r̂(u, i) = U[u]·V[i] / (UserWeight[u]·ItemWeight[i]) + Offset[u] + Mean + BU[u] + BI[i]
//
// where every term but the first is present only when the method has it,
// and U[u], V[i] are rows of the NumUsers×Dim and NumItems×Dim factor
// matrices. Plain matrix factorization has U and V (and, biased, Mean and
// the biases); HDPMF adds the weights that undo its stretching; SDMF keeps
// each user's mean rating as Offset; the baselines have Dim 0 and only
// Mean (the global mean) or BI (the item means). One type serves them all,
// so evaluation, ranking, saving and serving are written once.
//
// In a federated or local-DP deployment the parts live in different
// places. V (and BI, ItemWeight) is public: the server trains or
// aggregates it and broadcasts it. U[u], BU[u], Offset[u], UserWeight[u]
// and Rated[u] belong to user u's device and never leave it; a Model
// holding all users' rows together is the evaluation harness's view, or a
// trusted recommender's. A device that serves itself needs only its own
// row and the public part.
//
// Users and items that the model does not know (an index out of range, or
// a user without training ratings when Rated is set) get Default plus the
// bias the model knows. Predict clamps to the rating scale; a ranking
// model (BPR) returns its raw score, which is not a rating.
//
// A model file (Save, Load, WriteTo, ReadModel) records all of the above:
// the dimensions, the factors, every optional term, the rating scale, the
// original user and item IDs and item titles, and metadata naming the
// method that trained it, its hyperparameters and the privacy it claims and
// spent. The file is checksummed and written atomically; version 1 files
// (matrix factorization only, written before this package existed) still
// load.
package model
