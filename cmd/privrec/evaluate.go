package main

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
)

// splitter produces the train/test pairs of one run.
type splitter func(d *ratings.Dataset, seed uint64) ([]ratings.Split, error)

// splitKinds lists every kind of --split, for errors.
const splitKinds = "random:F, leave:K, loo, kfold:K, official[:N] (the ML-100K folds u1..u5) or given (evaluate: the folder's train and test files)"

// parseSplitFlag understands the ratings package's split specs plus
// "official[:N]", the official ML-100K u1..u5 (or ua, ub) files.
func parseSplitFlag(s string, df *dataFlags) (splitter, error) {
	switch kind, _, _ := strings.Cut(s, ":"); kind {
	case ratings.SplitRandom, ratings.SplitLeave, ratings.SplitLOO, ratings.SplitKFold, "official", "given":
	case "":
		return nil, fmt.Errorf("--split: empty, want %s", splitKinds)
	default:
		return nil, fmt.Errorf("--split %s: unknown kind %q, want %s", s, kind, splitKinds)
	}
	if s == "given" {
		return nil, fmt.Errorf("--split given: only privrec evaluate reads a given train/test pair")
	}
	if s == "official" || strings.HasPrefix(s, "official:") {
		folds := []string{"1", "2", "3", "4", "5"}
		if f, ok := strings.CutPrefix(s, "official:"); ok {
			folds = []string{f}
		}
		dir, err := df.dataDir()
		if err != nil {
			return nil, fmt.Errorf("--split %s needs the ML-100K folder: %w", s, err)
		}
		return func(*ratings.Dataset, uint64) ([]ratings.Split, error) {
			var out []ratings.Split
			for _, f := range folds {
				tr, te, err := ratings.OfficialSplit(dir, f)
				if err != nil {
					return nil, err
				}
				out = append(out, ratings.Split{Train: tr, Test: te})
			}
			return out, nil
		}, nil
	}
	spec, err := ratings.ParseSplit(s)
	if err != nil {
		return nil, fmt.Errorf("--split: %w", err)
	}
	return spec.Apply, nil
}

// runResult is one trained and tested model.
type runResult struct {
	Seed         uint64   `json:"seed"`
	Fold         int      `json:"fold"`
	Train        int      `json:"train_ratings"`
	Test         int      `json:"test_ratings"`
	RMSE         float64  `json:"rmse"`
	MSE          float64  `json:"mse"`
	MAE          float64  `json:"mae"`
	TrainSeconds float64  `json:"train_seconds"`
	Precision    *float64 `json:"precision,omitempty"`
	Recall       *float64 `json:"recall,omitempty"`
	NDCG         *float64 `json:"ndcg,omitempty"`
	AUC          *float64 `json:"auc,omitempty"`
	// Coverage and Rare are catalog coverage and rare@K at the first
	// --rank cut-off (eval.Ranking).
	Coverage *float64 `json:"coverage,omitempty"`
	Rare     *float64 `json:"rare,omitempty"`
}

// evalReport is the JSON object `privrec evaluate --json` prints. Scripts
// depend on rmse, mae, mse and train_seconds; they are means over runs.
type evalReport struct {
	Dataset      string                  `json:"dataset"`
	Ratings      int                     `json:"ratings"`
	Users        int                     `json:"users"`
	Items        int                     `json:"items"`
	Method       string                  `json:"method"`
	Config       json.RawMessage         `json:"config"`
	Split        string                  `json:"split"`
	Seed         uint64                  `json:"seed"`
	RMSE         float64                 `json:"rmse"`
	MSE          float64                 `json:"mse"`
	MAE          float64                 `json:"mae"`
	TrainSeconds float64                 `json:"train_seconds"`
	Summary      map[string]eval.Summary `json:"summary"`
	// Privacy is the method's claim and what the last run spent.
	Privacy *model.Privacy `json:"privacy,omitempty"`
	// Stats are the last run's method-specific figures (method.Result's
	// Stats, such as a paper's own ε, eps_total_paper), finite ones only.
	Stats map[string]float64 `json:"stats,omitempty"`
	Runs  []runResult        `json:"runs"`
	// Tune is each run's hyperparameter selection (--tune).
	Tune tuneReports `json:"tune,omitempty"`
	// Settings is the method and its config as one line of text.
	Settings string `json:"-"`
	// Relevant is the --relevant threshold of the ranking metrics (with
	// --rank); RelevantNote says it in words.
	Relevant     *float64 `json:"relevant,omitempty"`
	RelevantNote string   `json:"-"`
	// RankNote says why a ranking-only method has no rating metrics.
	RankNote string `json:"-"`
	// RankKs are the cut-offs of --rank; Protocol states the ranking
	// protocol.
	RankKs   []int  `json:"rank_ks,omitempty"`
	Protocol string `json:"protocol,omitempty"`
	// PublicNote describes the --public-features re-ranking, if any.
	PublicNote string `json:"public_features,omitempty"`
	// ListSource names where the lists came from when the model's
	// release carried no personalisation (DP popularity, re-ranked by
	// public features where the dataset has them); empty otherwise.
	ListSource string `json:"list_source,omitempty"`
	// TestFileReport describes the test file of --test or --split given.
	*TestFileReport
}

// setRanking sets run's precision, recall, NDCG, AUC, coverage and rare
// from rk and
// passes each to add under its key ("precision", ...), leaving out NaN
// (no test user could be ranked; JSON has no NaN).
func setRanking(run *runResult, rk eval.Ranking, add func(key string, v float64)) {
	for _, x := range []struct {
		key string
		v   float64
		dst **float64
	}{{"precision", rk.Precision, &run.Precision}, {"recall", rk.Recall, &run.Recall},
		{"ndcg", rk.NDCG, &run.NDCG}, {"auc", rk.AUC, &run.AUC},
		{"coverage", rk.Coverage, &run.Coverage}, {"rare", rk.Rare, &run.Rare}} {
		if !math.IsNaN(x.v) {
			v := x.v
			*x.dst = &v
			add(x.key, v)
		}
	}
}

// defaultRankK is the k of the ranking metrics of a ranking-only method
// evaluated without --rank.
const defaultRankK = 10

// rankOnlyReport is the JSON of evaluate for a ranking-only method
// (method.Spec.Ranks): the report without rmse, mse and mae, whose fields
// it shadows, and a note saying why.
type rankOnlyReport struct {
	*evalReport
	RMSE *float64      `json:"rmse,omitempty"`
	MSE  *float64      `json:"mse,omitempty"`
	MAE  *float64      `json:"mae,omitempty"`
	Note string        `json:"note"`
	Runs []rankOnlyRun `json:"runs"`
}

// rankOnlyRun is a run of a ranking-only method, without rating metrics.
type rankOnlyRun struct {
	*runResult
	RMSE *float64 `json:"rmse,omitempty"`
	MSE  *float64 `json:"mse,omitempty"`
	MAE  *float64 `json:"mae,omitempty"`
}

func rankOnly(r *evalReport) rankOnlyReport {
	out := rankOnlyReport{evalReport: r, Runs: make([]rankOnlyRun, len(r.Runs)),
		Note: "ranking-only method: its scores order items and are not ratings, so it has no rmse, mse or mae"}
	for k := range r.Runs {
		out.Runs[k].runResult = &r.Runs[k]
	}
	return out
}

func (a *app) evaluateCmd() *cobra.Command {
	var (
		df      dataFlags
		mfl     methodFlags
		tun     tuneFlags
		split   string
		seed    uint64
		repeats int
		asJSON  bool
		rankK   int
		rankArg string
		proto   string
		relev   float64
		test    string
		pub     publicFlags
		pubPath string
		reg     float64
	)
	cmd := &cobra.Command{
		Use:   "evaluate",
		Short: "Train a method on a split of the data and report its test error",
		Long: `evaluate splits the data, trains the method on the training part and
reports RMSE, MSE and MAE on the test part. With --repeats it repeats over
seeds seed, seed+1, ... (new split and new initialization each time) and
reports means and standard deviations; k-fold and official splits average
over their folds.

Splits: random:F (train fraction F), leave:K (K test ratings per user),
loo (leave one out), kfold:K, official (ML-100K u1..u5), official:N, and
given: --data is a folder holding one *train* and one *test* rating file
(douban-monti: ratings_train.tsv, ratings_test.tsv); evaluate trains on the
first and tests on the second.

--test FILE trains on all of --data (no split; --split is then an error)
and tests on FILE, read with the same format flags and on the training
data's scale: a test rating off that scale is an error naming the file and
line (--skip-bad skips and counts it). Test users and items without a
training rating are counted (unseen_users, unseen_items, unseen_ratings in
--json) and get the model's fallback prediction, its default plus the
biases it knows; --rank leaves out the test ratings of unseen items.

--model FILE evaluates a published model instead of training one (privrec
serve --out, or an interim release from serve --releases): every user of
the split's training part is folded in from their training ratings against
the model's items, as their device would (a ranking model by its own rule,
dp-ease by the indicator of its user items; a rating model by a ridge of
--fold-reg), and scored on the test part. The data's items are matched to
the model's by ID.`,
		Example: `  privrec evaluate --data ml-latest-small --method mf --split random:0.9 --json
  privrec evaluate --data ml-100k --split official --dim 50 --epochs 40
  privrec evaluate --data douban-monti --split given --method mf
  privrec evaluate --data train.tsv --test test.tsv --rank 10
  privrec evaluate --model releases/round-0012.model --data population.csv --split random:0.9 --seed 1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := mfl.validate(); err != nil {
				return err
			}
			df.catalog = mfl.spec.Catalog
			if err := pub.validate(); err != nil {
				return err
			}
			if repeats < 1 {
				return fmt.Errorf("--repeats %d: must be ≥ 1", repeats)
			}
			d, sp, tf, err := a.evalData(cmd, &df, split, test)
			if err != nil {
				return err
			}
			var published *model.Model
			if pubPath != "" {
				for _, name := range []string{"method", "protocol", "tune"} {
					if f := cmd.Flags().Lookup(name); f != nil && f.Changed {
						return fmt.Errorf("--model evaluates the model in %s as published: leave out --%s", pubPath, name)
					}
				}
				if published, err = model.Load(pubPath); err != nil {
					return fmt.Errorf("--model: %w", err)
				}
			}
			// --rank K[,K...]: the first cut-off keeps the old
			// precision/recall/ndcg keys; every one gets key@K.
			var ks []int
			if rankArg != "" && rankArg != "0" {
				if ks, err = eval.ParseKs(rankArg); err != nil {
					return fmt.Errorf("--rank %s: %w", rankArg, err)
				}
				rankK = ks[0]
			}
			ranks := mfl.spec.Ranks
			if published != nil {
				ranks = published.Ranking
			}
			if ranks {
				if cmd.Flags().Changed("rank") && rankK <= 0 {
					return fmt.Errorf("--rank %s: %s is a ranking-only method: its scores order items and are not ratings, so it has no RMSE; evaluate it by ranking metrics with --rank K[,K] (default 10,20)", rankArg, mfl.spec.Name)
				}
				if rankK <= 0 {
					rankK, ks = defaultRankK, eval.DefaultKs
				}
			}
			if rankK > 0 && !cmd.Flags().Changed("relevant") {
				relev = defaultRelevant(d.Scale)
			}
			if strong, frac, err := parseProtocol(proto); err != nil {
				return err
			} else if strong {
				if pub.on() {
					return fmt.Errorf("--public-features: not measured under --protocol strong; use a random split (--split random:F)")
				}
				if len(ks) == 0 {
					ks = eval.DefaultKs
				}
				if !cmd.Flags().Changed("relevant") {
					relev = defaultRelevant(d.Scale)
				}
				return a.evaluateStrong(cmd, &df, &mfl, &tun, d, frac, seed, ks, relev, asJSON)
			}
			ctx := cmd.Context()
			rep := evalReport{Dataset: df.data, Ratings: d.Len(), Users: d.NumUsers(), Items: d.NumItems(),
				Method: mfl.spec.Name, Config: mfl.config(), Split: split, Seed: seed, Settings: mfl.String(), TestFileReport: tf}
			if published != nil {
				rep.Method, rep.Config, rep.Settings = published.Method, published.Config, publishedSettings(pubPath, published)
				rep.Privacy = &published.Privacy
			}
			if tf != nil && !cmd.Flags().Changed("split") {
				rep.Split = "test file"
			}
			if rankK > 0 {
				rep.Relevant = &relev
				rep.RelevantNote = relevanceNote(relev, !cmd.Flags().Changed("relevant"), d.Scale)
				rep.RankKs = ks
				rep.Protocol = rankProtocol
			}
			metrics := map[string][]float64{}
			for r := range repeats {
				s := seed + uint64(r)
				splits, err := sp(d, s)
				if err != nil {
					return err
				}
				for fold, spl := range splits {
					start := time.Now()
					var m *model.Model
					if published != nil {
						m, err = published.FoldInAll(spl.Train, reg)
					} else {
						m, err = tun.fit(ctx, a, &mfl, spl.Train, s, &rep.Tune)
					}
					if err != nil {
						return err
					}
					secs := time.Since(start).Seconds()
					if mfl.result != nil && published == nil {
						rep.Privacy = &mfl.result.Privacy
						rep.Stats = finiteStats(mfl.result.Stats)
					}
					e := eval.Rating(m, spl.Test)
					res := runResult{Seed: s, Fold: fold, Train: spl.Train.Len(), Test: spl.Test.Len(),
						RMSE: e.RMSE, MSE: e.MSE, MAE: e.MAE, TrainSeconds: secs}
					if !ranks {
						metrics["rmse"] = append(metrics["rmse"], e.RMSE)
						metrics["mse"] = append(metrics["mse"], e.MSE)
						metrics["mae"] = append(metrics["mae"], e.MAE)
					}
					metrics["train_seconds"] = append(metrics["train_seconds"], secs)
					if rankK > 0 {
						var sc eval.Scorer = m
						q, source := pub.forModel(m, spl.Train.Name, spl.Train.ItemIDs, spl.Train.Side)
						if source != "" && rep.ListSource != source {
							rep.ListSource = joinSources(rep.ListSource, source)
						}
						if q.on() {
							if sc, rep.PublicNote, err = q.rerank(m, !m.Personalised(), spl.Train, rankable(spl.Train, spl.Test), ks, relev, metrics); err != nil {
								return err
							}
						}
						rks := eval.RankAt(sc, spl.Train, rankable(spl.Train, spl.Test), ks, float32(relev), 0)
						rk := rks[0]
						for _, r := range rks {
							for key, v := range map[string]float64{"precision": r.Precision, "recall": r.Recall, "ndcg": r.NDCG,
								"coverage": r.Coverage, "rare": r.Rare} {
								if !math.IsNaN(v) {
									metrics[fmt.Sprintf("%s@%d", key, r.K)] = append(metrics[fmt.Sprintf("%s@%d", key, r.K)], v)
								}
							}
						}
						setRanking(&res, rk, func(key string, v float64) { metrics[key] = append(metrics[key], v) })
					}
					a.log.Info("run", "seed", s, "fold", fold, "rmse", e.RMSE, "mae", e.MAE, "seconds", secs)
					rep.Runs = append(rep.Runs, res)
				}
			}
			rep.Summary = map[string]eval.Summary{}
			for k, xs := range metrics {
				rep.Summary[k] = eval.Summarize(xs)
			}
			rep.RMSE, rep.MSE, rep.MAE = rep.Summary["rmse"].Mean, rep.Summary["mse"].Mean, rep.Summary["mae"].Mean
			rep.TrainSeconds = rep.Summary["train_seconds"].Mean
			if asJSON {
				enc := json.NewEncoder(a.stdout)
				enc.SetIndent("", "  ")
				if ranks {
					return enc.Encode(rankOnly(&rep))
				}
				return enc.Encode(rep)
			}
			if ranks {
				rep.RankNote = fmt.Sprintf("no RMSE, MSE or MAE: %s is a ranking-only method, its scores order items and are not ratings", rep.Method)
			}
			return printReport(a, &rep, rankK)
		},
	}
	df.register(cmd.Flags())
	mfl.register(cmd.Flags(), a.args)
	cmd.SetFlagErrorFunc(mfl.flagError)
	mfl.nameFlagsInErrors(cmd)
	tun.register(cmd.Flags(), &df)
	cmd.Flags().StringVar(&split, "split", "random:0.9", "how to split train and test (see above)")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "random seed of the split and the training")
	cmd.Flags().IntVar(&repeats, "repeats", 1, "number of seeds to repeat over")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	cmd.Flags().StringVar(&rankArg, "rank", "", "also report precision, recall and NDCG at these cut-offs, like 10,20, and AUC (0 or empty: off; ranking-only methods such as pop, ease, ials, bpr-sgld report only these, at 10,20 by default)")
	cmd.Flags().StringVar(&proto, "protocol", "", "random (the --split) or strong[:F]: Liang et al.'s strong generalisation, F of the users held out (default 0.1), each one's ratings split 80/20 into a fold-in history and a test part; ranking metrics only, for pop, dp-pop, ease, ials and dp-ease")
	cmd.Flags().Float64Var(&relev, "relevant", 0, "with --rank: a test rating at least this is relevant (default: the top quarter of the scale, min + 0.75·(max−min): 4 on 1–5)")
	pub.register(cmd.Flags())
	cmd.Flags().StringVar(&test, "test", "", "test on this rating file (read like --data, on its scale) after training on all of --data; not with --split")
	cmd.Flags().StringVar(&pubPath, "model", "", "evaluate this published model (privrec serve --out or --releases) instead of training: each user of the training part is folded in from their training ratings, as their device would")
	cmd.Flags().Float64Var(&reg, "fold-reg", 1, "with --model: the ridge of a rating model's fold-in")
	return cmd
}

// publishedSettings describes the published model in path for a report.
func publishedSettings(path string, m *model.Model) string {
	s := fmt.Sprintf("%s, published model %s", m.Method, path)
	if r := m.Release; r != nil {
		kind := "interim release"
		if r.Final {
			kind = "final release"
		}
		s += fmt.Sprintf(" (%s after round %d, %d users)", kind, r.Round, r.Users)
	}
	return s
}

func printReport(a *app, r *evalReport, rankK int) error {
	fmt.Fprintf(a.stdout, "%s: %d ratings, %d users, %d items\n", r.Dataset, r.Ratings, r.Users, r.Items)
	fmt.Fprintf(a.stdout, "method %s, split %s, %d run(s)\n", r.Settings, r.Split, len(r.Runs))
	if r.TestFileReport != nil {
		r.TestFileReport.print(a.stdout, rankK)
	}
	if r.Protocol != "" {
		fmt.Fprintln(a.stdout, r.Protocol)
	}
	if r.RelevantNote != "" {
		fmt.Fprintln(a.stdout, r.RelevantNote)
	}
	if r.RankNote != "" {
		fmt.Fprintln(a.stdout, r.RankNote)
	}
	if r.ListSource != "" {
		fmt.Fprintln(a.stdout, "list: "+r.ListSource)
	}
	if r.PublicNote != "" {
		fmt.Fprintln(a.stdout, r.PublicNote)
	}
	if p := r.Privacy; p != nil && p.Unit != "none" {
		fmt.Fprintf(a.stdout, "privacy: protects %s, trusts %s; ε per round %.4g, in total %.4g", p.Unit, p.Trusted, p.EpsRound, p.EpsTotal)
		if p.Delta > 0 {
			fmt.Fprintf(a.stdout, ", δ %.3g", p.Delta)
		}
		if p.Note != "" {
			fmt.Fprintf(a.stdout, " (%s)", p.Note)
		}
		fmt.Fprintln(a.stdout)
	}
	fmt.Fprintln(a.stdout)
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "metric\tmean\tstd\tn")
	keys := []string{"rmse", "mse", "mae"}
	if r.RankNote != "" {
		keys = nil
	}
	if rankK > 0 {
		keys = append(keys, "precision", "recall", "ndcg", "coverage", "rare")
		for _, k := range r.RankKs[min(1, len(r.RankKs)):] {
			keys = append(keys, fmt.Sprintf("precision@%d", k), fmt.Sprintf("recall@%d", k), fmt.Sprintf("ndcg@%d", k),
				fmt.Sprintf("coverage@%d", k), fmt.Sprintf("rare@%d", k))
		}
		keys = append(keys, "auc")
		keys = append(keys, publicKeys(r)...)
	}
	keys = append(keys, "train_seconds")
	for _, k := range keys {
		s := r.Summary[k]
		name := k
		if rankK > 0 && (k == "precision" || k == "recall" || k == "ndcg" || k == "coverage" || k == "rare") {
			name = fmt.Sprintf("%s@%d", k, rankK)
		}
		if s.N == 0 { // no run could compute it
			fmt.Fprintf(tw, "%s\t-\t-\t0\n", name)
			continue
		}
		fmt.Fprintf(tw, "%s\t%.4f\t%.4f\t%d\n", name, s.Mean, s.Std, s.N)
	}
	return tw.Flush()
}

// rankProtocol states the top-N protocol of evaluate --rank.
var rankProtocol = fmt.Sprintf("ranking: per test user, every item without a training rating is a candidate, ordered by the model's raw score (rating-prediction methods rank by their unclamped prediction); recall@K = hits/relevant, NDCG@K binary gain; coverage@K = share of the catalog in some test user's top K; rare@K = share of top-K slots holding an item with fewer than %d training ratings", eval.RareBelow)

// finiteStats returns the finite entries of stats (JSON has no NaN or
// infinity), or nil when there are none.
func finiteStats(stats map[string]float64) map[string]float64 {
	var out map[string]float64
	for k, v := range stats {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		if out == nil {
			out = map[string]float64{}
		}
		out[k] = v
	}
	return out
}
