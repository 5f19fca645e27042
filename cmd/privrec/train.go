package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/privrec/privrec/datasets"
	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/internal/progress"
	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
)

func (a *app) trainCmd() *cobra.Command {
	var (
		df    dataFlags
		mfl   methodFlags
		out   string
		split string
		seed  uint64
		tun   tuneFlags
	)
	cmd := &cobra.Command{
		Use:   "train",
		Short: "Train a model on a dataset and save it",
		Long: `train fits a factor model on all of the data (or, with --split, on its
training part, reporting the test error) and saves it to --out. The file is
written whole or not at all.`,
		Example: `  privrec train --data ml-latest-small --out model.prm
  privrec recommend --model model.prm --data ml-latest-small --user 1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := mfl.validate(); err != nil {
				return err
			}
			df.catalog = mfl.spec.Catalog
			if out == "" {
				return fmt.Errorf("--out: a model file is required")
			}
			d, err := a.load(&df)
			if err != nil {
				return err
			}
			train, test := d, (*ratings.Dataset)(nil)
			if split != "" {
				sp, err := parseSplitFlag(split, &df)
				if err != nil {
					return err
				}
				splits, err := sp(d, seed)
				if err != nil {
					return err
				}
				train, test = splits[0].Train, splits[0].Test
			}
			start := time.Now()
			m, err := tun.fit(cmd.Context(), a, &mfl, train, seed, nil)
			if err != nil {
				return err
			}
			secs := time.Since(start).Seconds()
			if err := m.Save(out); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "method %s\ntrained on %d ratings in %.2fs; saved %s\n", &mfl, train.Len(), secs, out)
			if p := m.Privacy; p.Unit != "none" {
				fmt.Fprintf(a.stdout, "privacy: protects %s, trusts %s; ε per round %.4g, in total %.4g\n", p.Unit, p.Trusted, p.EpsRound, p.EpsTotal)
			}
			if test != nil && mfl.spec.Ranks {
				rk := eval.Rank(m, train, rankable(train, test), defaultRankK, float32(defaultRelevant(train.Scale)))
				fmt.Fprintf(a.stdout, "test (%d ratings): AUC %.4f  NDCG@%d %.4f (no RMSE: %s is a ranking-only method, its scores are not ratings)\n",
					test.Len(), rk.AUC, defaultRankK, rk.NDCG, mfl.spec.Name)
			} else if test != nil {
				e := eval.Rating(m, test)
				fmt.Fprintf(a.stdout, "test (%d ratings): RMSE %.4f  MAE %.4f\n", test.Len(), e.RMSE, e.MAE)
			}
			return nil
		},
	}
	df.register(cmd.Flags())
	mfl.register(cmd.Flags(), a.args)
	cmd.SetFlagErrorFunc(mfl.flagError)
	mfl.nameFlagsInErrors(cmd)
	tun.register(cmd.Flags(), &df)
	cmd.Flags().StringVarP(&out, "out", "o", "", "model file to write")
	cmd.Flags().StringVar(&split, "split", "", "train on the training part of this split and report the test error (default: all data)")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "random seed")
	return cmd
}

func (a *app) recommendCmd() *cobra.Command {
	var (
		modelPath, user, data string
		mine, stars           string
		reg, eps, delta       float64
		n                     int
		asJSON, skipBad       bool
		pub                   publicFlags
	)
	cmd := &cobra.Command{
		Use:   "recommend",
		Short: "Recommend items to a user, from a saved model or the best ranking method",
		Long: `recommend prints the top-n items for a user (by the original user ID of
the data the model was trained on). With --data, the items the user has
already rated there are excluded.

Without --model, recommend trains the best measured ranking method on
--data (at its defaults) and ranks with it, saying on stderr which method
and why: ease (docs/results/ranking.md: ML-1M Recall@20 0.3250, the best
non-private method), or ials when --data has more than 5000 items (ease
inverts an items×items matrix: 9 minutes and 2.5 GB on ml-latest-small's
9,724 items, against 14 s for ials); with --eps E, dp-ease at user-level (E, --delta) joint DP,
the best private one (Recall@20 0.1824 at ε = 1 against dp-pop's 0.1436,
docs/results/private-topn.md). With --ratings FILE the file's user joins
--data as one more user (ID "me") before training: for dp-ease, one of
the run's users, whose own list is computed from their own history.

` + recsHelp + `

How a list is ranked: every model ranks by its raw score. A
rating-prediction model (mf, dp-als, hdpmf, ...) ranks by its unclamped
predicted rating, global mean and biases included, with no popularity
prior, so a list can favour items few people rated, and recommend says so
on stderr; ranking-only models (pop, dp-pop, ease, ials, dp-ease, bpr-sgld,
...) were trained to rank. For a top-N list prefer ease or ials
(non-private) or dp-ease (user-level DP): docs/results/ranking.md measures
every method on the ranking protocol of privrec evaluate --rank.

--ratings FILE recommends instead for the one user whose ratings the file
holds (user,item,rating CSV, items by the model's IDs, ratings on its
scale), folding the user in: the user's vector is fitted to those ratings
against the model's item factors (ridge regression, --reg), here, and the
rated items are excluded. This is how a server's published model (item
factors only, privrec serve --out) recommends: the ratings stay with the
user. A ranking model folds in by its own rule: pop and dp-pop rank
every user alike, ease scores the user's items as an indicator vector,
ials solves the user's row as its training does, dp-ease scores the
user's indicator on the items the run broadcast, as its devices do (--reg
is not used); a dp-ease model saved before it recorded those items is
refused.

--stars RATINGMODEL keeps --model's list (a ranking model: dp-ease,
ease, ...) and fills the rating column from a rating model (dp-als, mf,
...), for the same user (--user, or the --ratings file folded in against
it too): the list of the model that ranks well, the stars of the model
that predicts ratings. Both models' privacy costs add up when they come
from separate runs on the same users. The file is read like --data: by its header's names if it has one
(userId,movieId,rating), else as user,item,rating. An item the model does
not know is an error naming the file, line and item; --skip-bad skips such
lines (and malformed ones) and says how many.`,
		Example: `  privrec recommend --data ml-1m --user 1 -n 10                 # trains ease
  privrec recommend --data ml-1m --ratings my-ratings.csv --eps 1  # trains dp-ease at user-level ε = 1
  privrec recommend --model model.prm --data ml-latest-small --user 1 -n 10
  privrec recommend --model served.prm --ratings my-ratings.csv -n 10`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if n < 1 {
				return fmt.Errorf("-n %d: must be ≥ 1", n)
			}
			if err := pub.validate(); err != nil {
				return err
			}
			if (user == "") == (mine == "") {
				return fmt.Errorf("give one of --user ID and --ratings FILE")
			}
			if modelPath == "" && stars != "" {
				return fmt.Errorf("--stars %s: give the ranking model as --model", stars)
			}
			if modelPath == "" {
				return a.recommendBest(cmd.Context(), data, user, mine, eps, delta, n, asJSON, skipBad, &pub)
			}
			if cmd.Flags().Changed("eps") || cmd.Flags().Changed("delta") {
				return fmt.Errorf("--eps and --delta choose dp-ease when no --model is given; a saved model's privacy was set when it was trained")
			}
			m, err := model.Load(modelPath)
			if err != nil {
				return err
			}
			var rated []string
			var side *ratings.SideSource
			if mine != "" {
				if m, user, rated, err = a.foldIn(m, mine, reg, skipBad); err != nil {
					return err
				}
			} else if data != "" {
				d, _, err := datasets.Open(data, ratings.LoadOptions{})
				if err != nil {
					return err
				}
				rated, side = ratedItems(d, user), d.Side
			} else {
				a.log.Warn("no --data: items the user has rated are not excluded")
			}
			recs, err := pub.recommend(a.stderr, m, side, user, n, rated)
			if err != nil {
				return fmt.Errorf("--user: %w (model %s)", err, modelPath)
			}
			if stars != "" {
				if err := a.addStars(recs, stars, user, mine, reg, skipBad); err != nil {
					return err
				}
			}
			if !m.Ranking { // after every error: the note is about a list
				fmt.Fprintln(a.stderr, rankingNote(m))
			}
			return printRecommendations(a.stdout, recs, asJSON)
		},
	}
	cmd.Flags().StringVar(&modelPath, "model", "", "model file written by privrec train (default: train the best ranking method on --data)")
	cmd.Flags().Float64Var(&eps, "eps", 0, "without --model: train dp-ease at this user-level ε (0: not private, ease or ials)")
	cmd.Flags().Float64Var(&delta, "delta", 1e-6, "without --model, with --eps: the user-level δ of dp-ease")
	cmd.Flags().StringVar(&user, "user", "", "original ID of the user")
	cmd.Flags().StringVar(&mine, "ratings", "", "recommend for the one user whose ratings this file holds (movieId,rating or user,item,rating; columns by header name), folded in against the model's item factors")
	cmd.Flags().StringVar(&stars, "stars", "", "with --model: a rating model (dp-als, mf, ...) whose predicted rating fills the rating column of --model's list")
	cmd.Flags().Float64Var(&reg, "reg", 1, "with --ratings: the ridge of the fold-in")
	cmd.Flags().StringVar(&data, "data", "", "the ratings to exclude already-rated items from (usually the training data)")
	cmd.Flags().IntVarP(&n, "n", "n", 10, "number of items")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&skipBad, "skip-bad", false, "with --ratings: skip lines whose item the model does not know, or that are malformed, and say how many")
	pub.register(cmd.Flags())
	return cmd
}

// recommendBest is recommend without --model: it trains the best measured
// ranking method (chooseRanking) on data, with the user of the --ratings
// file mine added as one more user when given, says on stderr which
// method and why, and prints the user's top n.
func (a *app) recommendBest(ctx context.Context, data, user, mine string, eps, delta float64, n int, asJSON, skipBad bool, pub *publicFlags) error {
	if data == "" {
		return fmt.Errorf("give --model MODEL (written by privrec train), or --data D to train the best ranking method on D")
	}
	if eps < 0 || math.IsNaN(eps) || math.IsInf(eps, 0) {
		return fmt.Errorf("--eps %v: want a finite ε > 0, or 0 for a non-private list", eps)
	}
	d, _, err := datasets.Open(data, ratings.LoadOptions{})
	if err != nil {
		return err
	}
	if eps > 0 && d.Scale.Inferred {
		return fmt.Errorf("--data %s: its rating scale %v was read off the ratings, and dp-ease needs a declared public scale: "+
			"train it with privrec train --method dp-ease --eps %g --scale MIN,MAX --out M, then recommend --model M --user ID",
			data, d.Scale.Declared(), eps)
	}
	var rated []string
	if mine != "" {
		one, err := a.oneUserRatings(mine, d.ItemIDs, "--data "+data, d.Scale, skipBad)
		if err != nil {
			return err
		}
		for _, i := range one.Items {
			rated = append(rated, d.ItemIDs[i])
		}
		d, user = withUser(d, one)
	} else {
		if !slices.Contains(d.UserIDs, user) {
			return fmt.Errorf("--user %q: no such user in --data %s", user, data)
		}
		rated = ratedItems(d, user)
	}
	c := chooseRanking(d.NumItems(), eps, delta)
	fmt.Fprintf(a.stderr, "privrec: no --model: training %s on %s (%d users, %d items, %d ratings): %s\n",
		c.method, data, d.NumUsers(), d.NumItems(), d.Len(), c.why)
	var bar *progress.Bar // on a terminal only
	m, err := trainRanking(ctx, c, d, func(p method.Progress) {
		if bar == nil {
			bar = progress.New(a.stderr, int64(p.Epochs), "training "+c.method, "epochs")
		}
		bar.Set(int64(p.Epoch))
	})
	bar.Finish()
	if err != nil {
		return err
	}
	recs, err := pub.recommend(a.stderr, m, d.Side, user, n, rated)
	if err != nil {
		return fmt.Errorf("--user: %w", err)
	}
	return printRecommendations(a.stdout, recs, asJSON)
}

// addStars sets the rating of each of recs to what the rating model in
// path predicts for the user (user, or the user of the --ratings file
// mine, folded in against that model). An item or user the rating model
// does not know keeps no rating.
func (a *app) addStars(recs []model.Recommendation, path, user, mine string, reg float64, skipBad bool) error {
	sm, err := model.Load(path)
	if err != nil {
		return fmt.Errorf("--stars: %w", err)
	}
	if sm.Ranking {
		return fmt.Errorf("--stars %s: a %s model ranks items and predicts no rating; give a rating model (dp-als, mf, ...)", path, sm.Method)
	}
	if mine != "" {
		if sm, user, _, err = a.foldIn(sm, mine, reg, skipBad); err != nil {
			return fmt.Errorf("--stars: %w", err)
		}
	}
	u, ok := sm.UserIndex(user)
	if !ok {
		return fmt.Errorf("--stars %s: user %q is not in the model", path, user)
	}
	for k := range recs {
		if i, ok := sm.ItemIndex(recs[k].Item); ok {
			r := sm.Predict(u, i)
			recs[k].Rating = &r
		}
	}
	return nil
}

// foldIn reads one user's ratings from path, read like --data (by its
// header's names, else as user,item,rating) on the model's scale and
// against its items, and returns m with that user folded in, the user's ID
// and the IDs of the items rated. An item the model does not know is an
// error naming the file, line and item, or under skipBad a skipped line,
// counted on stderr.
func (a *app) foldIn(m *model.Model, path string, reg float64, skipBad bool) (*model.Model, string, []string, error) {
	d, err := a.oneUserRatings(path, m.ItemIDs, "the model", m.Scale, skipBad)
	if err != nil {
		return nil, "", nil, err
	}
	rated := make([]string, len(d.Items))
	for k, i := range d.Items {
		rated[k] = m.ItemIDs[i]
	}
	f, err := m.FoldIn(d.UserIDs[0], d.Items, d.Values, reg)
	if err != nil {
		return nil, "", nil, fmt.Errorf("--ratings %s: %w", path, err)
	}
	return f, d.UserIDs[0], rated, nil
}

// oneUserRatings reads one user's ratings from path, read like --data (by
// its header's names, else as user,item,rating) on scale and against the
// fixed catalog items (named catalog in errors): item index k of the
// result is items[k]. A file without a user column (a header like
// "movieId,rating", or item,rating lines) is the ratings of a user "me".
// An item not in the catalog is an error naming the file, line and item,
// or under skipBad a skipped line, counted on stderr. A file with more
// than one user's ratings is an error.
func (a *app) oneUserRatings(path string, items []string, catalog string, scale ratings.Scale, skipBad bool) (*ratings.Dataset, error) {
	sc := scale.Declared()
	df := dataFlags{data: path, format: "delimited", header: "auto", skipBad: skipBad,
		scale: fmt.Sprintf("%g,%g,%g", sc.Min, sc.Max, sc.Step)}
	opt, err := df.options()
	if err != nil {
		return nil, fmt.Errorf("--ratings: %w", err)
	}
	opt.User = "me"
	d, rep, err := ratings.LoadForItems(path, items, catalog, opt)
	if err != nil {
		if !skipBad && !errors.Is(err, ratings.ErrFormat) && !errors.Is(err, ratings.ErrEmpty) {
			return nil, fmt.Errorf("--ratings: %w (--skip-bad skips such lines)", err)
		}
		return nil, fmt.Errorf("--ratings: %w", err)
	}
	a.reportSkipped("--ratings "+path, rep)
	if d.NumUsers() != 1 {
		return nil, fmt.Errorf("--ratings %s: ratings of %d users; the file holds one user's", path, d.NumUsers())
	}
	return d, nil
}

// ratedItems returns the original IDs of the items user rated in d.
func ratedItems(d *ratings.Dataset, user string) []string {
	du := slices.Index(d.UserIDs, user)
	if du < 0 {
		return nil
	}
	items, _ := d.ByUser().Row(du)
	rated := make([]string, len(items))
	for k, i := range items {
		rated[k] = d.ItemIDs[i]
	}
	return rated
}
