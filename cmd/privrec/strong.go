package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/topn"
)

// strongFoldFrac is the share of a held-out user's ratings folded in.
const strongFoldFrac = 0.8

// strongReport is the JSON of evaluate --protocol strong.
type strongReport struct {
	Dataset      string             `json:"dataset"`
	Method       string             `json:"method"`
	Protocol     string             `json:"protocol"`
	HeldOut      float64            `json:"held_out_users_fraction"`
	Seed         uint64             `json:"seed"`
	Train        int                `json:"train_ratings"`
	Fold         int                `json:"fold_in_ratings"`
	Test         int                `json:"test_ratings"`
	Relevant     float64            `json:"relevant"`
	Metrics      map[string]float64 `json:"metrics"`
	Users        int                `json:"users"`
	TrainSeconds float64            `json:"train_seconds"`
}

// parseProtocol reads --protocol: "" or "random" (the --split), or
// "strong[:F]" with F the fraction of users held out (default 0.1).
func parseProtocol(s string) (strong bool, frac float64, err error) {
	if s == "" || s == "random" {
		return false, 0, nil
	}
	rest, ok := strings.CutPrefix(s, "strong")
	if !ok {
		return false, 0, fmt.Errorf("--protocol %q: want random or strong[:F]", s)
	}
	frac = 0.1
	if f, ok := strings.CutPrefix(rest, ":"); ok {
		if frac, err = strconv.ParseFloat(f, 64); err != nil || !(frac > 0 && frac < 1) {
			return false, 0, fmt.Errorf("--protocol %q: the held-out fraction must be in (0, 1)", s)
		}
	} else if rest != "" {
		return false, 0, fmt.Errorf("--protocol %q: want random or strong[:F]", s)
	}
	return true, frac, nil
}

// evaluateStrong runs the strong-generalisation protocol (Liang et al.,
// WWW 2018): a fraction frac of the users is held out, the method trains
// on the others, and each held-out user's history is split 80/20: the
// model folds in the 80% and ranks every other item.
func (a *app) evaluateStrong(cmd *cobra.Command, df *dataFlags, mfl *methodFlags, tun *tuneFlags, d *ratings.Dataset,
	frac float64, seed uint64, ks []int, relev float64, asJSON bool) error {
	train, fold, test, err := eval.StrongSplit(d, frac, strongFoldFrac, seed)
	if err != nil {
		return err
	}
	start := time.Now()
	m, err := tun.fit(cmd.Context(), a, mfl, train, seed, new(tuneReports))
	if err != nil {
		return err
	}
	secs := time.Since(start).Seconds()
	rep, rks, err := rankStrong(m, fold, test, ks, relev)
	if err != nil {
		return err
	}
	rep.Dataset, rep.Method, rep.HeldOut, rep.Seed, rep.Train, rep.TrainSeconds = df.data, mfl.String(), frac, seed, train.Len(), secs
	return a.printStrong(rep, rks, asJSON)
}

// rankStrong folds each held-out user of a StrongSplit (fold, test) in
// against m by its ranking rule (topn.History) and ranks them at every k
// of ks: the report's protocol, fold-in and metric fields.
func rankStrong(m *model.Model, fold, test *ratings.Dataset, ks []int, relev float64) (*strongReport, []eval.Ranking, error) {
	h, err := topn.History(m)
	if err != nil {
		return nil, nil, fmt.Errorf("--protocol strong: %w", err)
	}
	rks := eval.RankStrong(h, fold, test, ks, float32(relev), 0)
	rep := &strongReport{Fold: fold.Len(), Test: test.Len(), Relevant: relev, Metrics: map[string]float64{}}
	for _, r := range rks {
		rep.Users = r.Users
		rep.Metrics[fmt.Sprintf("precision@%d", r.K)] = r.Precision
		rep.Metrics[fmt.Sprintf("recall@%d", r.K)] = r.Recall
		rep.Metrics[fmt.Sprintf("ndcg@%d", r.K)] = r.NDCG
		rep.Metrics["auc"] = r.AUC
	}
	return rep, rks, nil
}

// printStrong prints a strong-generalisation report, as a table or with
// asJSON as one JSON object.
func (a *app) printStrong(rep *strongReport, rks []eval.Ranking, asJSON bool) error {
	rep.Protocol = fmt.Sprintf("strong generalisation (Liang et al. 2018): %g of the users held out; each held-out user's ratings split %g/%g at random, the model folds in the first part and ranks every other item; relevant = test rating ≥ %g",
		rep.HeldOut, strongFoldFrac, 1-strongFoldFrac, rep.Relevant)
	if asJSON {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(a.stdout, "%s: method %s\n%s\n", rep.Dataset, rep.Method, rep.Protocol)
	fmt.Fprintf(a.stdout, "train %d ratings; held-out users %d (fold-in %d ratings, test %d)\n\n", rep.Train, rep.Users, rep.Fold, rep.Test)
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "metric\tvalue")
	for _, r := range rks {
		fmt.Fprintf(tw, "recall@%d\t%.4f\nndcg@%d\t%.4f\n", r.K, r.Recall, r.K, r.NDCG)
	}
	fmt.Fprintf(tw, "auc\t%.4f\ntrain_seconds\t%.2f\n", rks[0].AUC, rep.TrainSeconds)
	return tw.Flush()
}
