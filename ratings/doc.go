// Package ratings is privrec's rating data model: loading real rating files,
// holding them compactly in memory, filtering them and splitting them for
// experiments.
//
// A Dataset is a set of (user, item, rating) triples over dense int32
// indices. User u is UserIDs[u] in the source file, item i is ItemIDs[i]. The
// triples are kept in three parallel flat slices (Users, Items, Values), which
// is what training loops want; ByUser and ByItem build compressed sparse row
// (CSR) views for per-user and per-item access. The rating scale travels with
// the data, so predictions can be clamped and noise calibrated to it.
//
// Splits (Holdout, LeaveKOut, KFold, ...) return datasets that share the
// index space of their parent: user u in a training set is user u in the test
// set. Filters (MinCounts) build a new, re-indexed dataset.
//
// Loaders detect the file format (MovieLens 100K, 1M/10M, 20M/25M/latest,
// the Netflix Prize format, any delimited file), read .gz transparently and
// report malformed input as a *ParseError naming file, line and field.
//
// Side features: Load attaches to a dataset whose folder holds MovieLens
// side files a SideSource (Dataset.Side) that reads them on first use —
// the items' genres and release years (u.item, movies.dat through
// item_map.tsv for the shared renumbered ML-1M copy, movies.csv) and the
// users' gender, age and occupation (u.user, users.dat) — keyed by ID, so
// every split and filter shares them.
package ratings
