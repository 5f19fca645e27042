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
	"github.com/privrec/privrec/mf"
	"github.com/privrec/privrec/ratings"
)

func (a *app) trainCmd() *cobra.Command {
	var (
		df    dataFlags
		mfl   methodFlags
		out   string
		split string
		seed  uint64
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
			m, err := mfl.fit(cmd.Context(), train, seed, a.stderr)
			if err != nil {
				return err
			}
			secs := time.Since(start).Seconds()
			saver, ok := m.(interface{ Save(path string) error })
			if !ok {
				return fmt.Errorf("--method %s: its models cannot be saved yet (mf models can)", mfl.method)
			}
			if err := saver.Save(out); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "trained on %d ratings in %.2fs; saved %s\n", train.Len(), secs, out)
			if test != nil {
				e := eval.Rating(m, test)
				fmt.Fprintf(a.stdout, "test (%d ratings): RMSE %.4f  MAE %.4f\n", test.Len(), e.RMSE, e.MAE)
			}
			return nil
		},
	}
	df.register(cmd.Flags())
	mfl.register(cmd.Flags())
	cmd.Flags().StringVarP(&out, "out", "o", "", "model file to write")
	cmd.Flags().StringVar(&split, "split", "", "train on the training part of this split and report the test error (default: all data)")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "random seed")
	return cmd
}

// recommendation is one line of `privrec recommend`.
type recommendation struct {
	Rank  int     `json:"rank"`
	Item  string  `json:"item"`
	Title string  `json:"title,omitempty"`
	Score float32 `json:"score"`
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
the data the model was trained on). With --data, the items the user has
already rated there are excluded.`,
		Example: `  privrec recommend --model model.prm --data ml-latest-small --user 1 -n 10`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if n < 1 {
				return fmt.Errorf("-n %d: must be ≥ 1", n)
			}
			m, err := mf.Load(modelPath)
			if err != nil {
				return err
			}
			u := -1
			for k, id := range m.UserIDs {
				if id == user {
					u = k
					break
				}
			}
			if u < 0 {
				return fmt.Errorf("--user %q: not a user of the model %s (%d users)", user, modelPath, m.NumUsers)
			}
			var rated []int32
			if data != "" {
				d, _, err := datasets.Open(data, ratings.LoadOptions{})
				if err != nil {
					return err
				}
				rated, err = ratedItems(d, m, user)
				if err != nil {
					return err
				}
			} else {
				a.log.Warn("no --data: items the user has rated are not excluded")
			}
			var recs []recommendation
			for k, s := range m.Recommend(int32(u), n, rated) {
				r := recommendation{Rank: k + 1, Item: m.ItemIDs[s.Item], Score: s.Score}
				if m.ItemTitles != nil {
					r.Title = m.ItemTitles[s.Item]
				}
				recs = append(recs, r)
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

// ratedItems returns the model's indices of the items user rated in d,
// sorted, matching original item IDs.
func ratedItems(d *ratings.Dataset, m *mf.Model, user string) ([]int32, error) {
	itemIdx := make(map[string]int32, len(m.ItemIDs))
	for k, id := range m.ItemIDs {
		itemIdx[id] = int32(k)
	}
	du := -1
	for k, id := range d.UserIDs {
		if id == user {
			du = k
			break
		}
	}
	if du < 0 {
		return nil, nil
	}
	var rated []int32
	byUser := d.ByUser()
	items, _ := byUser.Row(du)
	for _, i := range items {
		if k, ok := itemIdx[d.ItemIDs[i]]; ok {
			rated = append(rated, k)
		}
	}
	slices.Sort(rated)
	return rated, nil
}
