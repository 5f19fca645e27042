package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/privrec/privrec/datasets"
	"github.com/privrec/privrec/eval"
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
			if test != nil {
				e := eval.Rating(m, test)
				fmt.Fprintf(a.stdout, "test (%d ratings): RMSE %.4f  MAE %.4f\n", test.Len(), e.RMSE, e.MAE)
			}
			return nil
		},
	}
	df.register(cmd.Flags())
	mfl.register(cmd.Flags(), a.args)
	cmd.SetFlagErrorFunc(mfl.flagError)
	tun.register(cmd.Flags(), &df)
	cmd.Flags().StringVarP(&out, "out", "o", "", "model file to write")
	cmd.Flags().StringVar(&split, "split", "", "train on the training part of this split and report the test error (default: all data)")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "random seed")
	return cmd
}

func (a *app) recommendCmd() *cobra.Command {
	var (
		modelPath, user, data string
		n                     int
		asJSON                bool
	)
	cmd := &cobra.Command{
		Use:   "recommend",
		Short: "Recommend items to a user from a saved model",
		Long: `recommend prints the top-n items for a user (by the original user ID of
the data the model was trained on), with scores on the rating scale. With
--data, the items the user has already rated there are excluded.`,
		Example: `  privrec recommend --model model.prm --data ml-latest-small --user 1 -n 10`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if n < 1 {
				return fmt.Errorf("-n %d: must be ≥ 1", n)
			}
			m, err := model.Load(modelPath)
			if err != nil {
				return err
			}
			var rated []string
			if data != "" {
				d, _, err := datasets.Open(data, ratings.LoadOptions{})
				if err != nil {
					return err
				}
				rated = ratedItems(d, user)
			} else {
				a.log.Warn("no --data: items the user has rated are not excluded")
			}
			recs, err := m.RecommendUser(user, n, rated)
			if err != nil {
				return fmt.Errorf("--user: %w (model %s)", err, modelPath)
			}
			if asJSON {
				return json.NewEncoder(a.stdout).Encode(recs)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "rank\titem\tscore\ttitle")
			for _, r := range recs {
				fmt.Fprintf(tw, "%d\t%s\t%.3f\t%s\n", r.Rank, r.Item, r.Score, r.Title)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&modelPath, "model", "", "model file written by privrec train")
	cmd.Flags().StringVar(&user, "user", "", "original ID of the user")
	cmd.Flags().StringVar(&data, "data", "", "the ratings to exclude already-rated items from (usually the training data)")
	cmd.Flags().IntVarP(&n, "n", "n", 10, "number of items")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.MarkFlagRequired("model")
	cmd.MarkFlagRequired("user")
	return cmd
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
