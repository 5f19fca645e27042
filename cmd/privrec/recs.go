package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/privrec/privrec/model"
)

// recsHelp explains the columns of printRecommendations, for the help of
// the commands that print recommendations.
const recsHelp = `Recommendations print as rank, item, score, rating and title: score is
the model's raw, unclamped score, by which the items are ranked (so two
items predicted above the top of the scale still differ); rating is that
score clamped to the rating scale, the rating the model predicts ("-" for a
ranking-only model, whose scores are not ratings). --json prints the same
fields as an array of objects (no "rating" for a ranking-only model).`

// printRecommendations writes recs in the one format of privrec recommend
// and privrec client --ratings: a table, or with asJSON an indented JSON
// array of model.Recommendation.
func printRecommendations(w io.Writer, recs []model.Recommendation, asJSON bool) error {
	if asJSON {
		if recs == nil {
			recs = []model.Recommendation{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(recs)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "rank\titem\tscore\trating\ttitle")
	for _, r := range recs {
		rating := "-"
		if r.Rating != nil {
			rating = fmt.Sprintf("%.3f", *r.Rating)
		}
		fmt.Fprintf(tw, "%d\t%s\t%.3f\t%s\t%s\n", r.Rank, r.Item, r.Score, rating, r.Title)
	}
	return tw.Flush()
}
