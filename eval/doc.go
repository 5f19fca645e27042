// Package eval measures recommenders: rating-prediction errors (RMSE, MSE,
// MAE, the cumulative distribution of absolute errors), top-k ranking quality
// (precision, recall, NDCG, AUC) and the statistics used to compare methods
// over repeated runs (mean ± sample standard deviation, the paired t-test).
//
// Models are seen only through two small interfaces, Predictor and Scorer,
// so eval does not depend on how a model is trained; model.Model satisfies both.
//
// Undefined quantities are NaN rather than zero, so an empty test set is
// never mistaken for a perfect score: the RMSE of no predictions, the AUC of
// a user with no negative items, the mean of no runs.
package eval
