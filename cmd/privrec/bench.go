package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/privrec/privrec/internal/vec"
	"github.com/privrec/privrec/method"
)

// benchReport is what privrec bench --json prints.
type benchReport struct {
	Dataset string          `json:"dataset"`
	Ratings int             `json:"ratings"`
	Method  string          `json:"method"`
	Config  json.RawMessage `json:"config"`
	Epochs  int             `json:"epochs"`
	// SecondsPerEpoch is the median wall time of an epoch (a round for the
	// federated methods), the first one (with its setup) left out when
	// there are several; UpdatesPerSecond is the training ratings over it.
	SecondsPerEpoch  float64 `json:"seconds_per_epoch"`
	UpdatesPerSecond float64 `json:"updates_per_second"`
	// TrainSeconds is the whole training, loading excluded.
	TrainSeconds float64 `json:"train_seconds"`
	// Kernels names the vector kernels in use: avx512, avx2 or generic
	// (pure Go; PRIVREC_SIMD=off forces it).
	Kernels string `json:"kernels"`
}

func (a *app) benchCmd() *cobra.Command {
	var (
		df     dataFlags
		mfl    methodFlags
		seed   uint64
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Time a method's training on all of a dataset: rating updates per second",
		Long: `bench trains the method on all of --data (no split) with its flags
(--dim, --epochs, ...) and prints the median seconds per epoch (per round
for the federated methods: every client's work, the noise, the server's
aggregation) and the training ratings processed per second, loading
excluded. The first epoch, which carries the setup, is left out of the
median when there are several. It also names the vector kernels in use
(avx512, avx2, or generic: pure Go, which PRIVREC_SIMD=off forces).`,
		Example: `  privrec bench --data ml-1m --method mf --dim 50 --epochs 10 --json
  privrec bench --data ml-1m --method hdpmf --secagg masked --epochs 5`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := mfl.validate(); err != nil {
				return err
			}
			df.catalog = mfl.spec.Catalog
			d, err := a.load(&df)
			if err != nil {
				return err
			}
			var marks []time.Duration
			start := time.Now()
			_, _, err = mfl.spec.Fit(cmd.Context(), d, mfl.cfg, seed, func(p method.Progress) {
				marks = append(marks, time.Since(start))
			})
			if err != nil {
				return err
			}
			total := time.Since(start)
			var epochs []float64
			prev := time.Duration(0)
			for _, m := range marks {
				epochs = append(epochs, (m - prev).Seconds())
				prev = m
			}
			if len(epochs) == 0 { // a method without epochs: one pass
				epochs = []float64{total.Seconds()}
			}
			if len(epochs) > 1 {
				epochs = epochs[1:]
			}
			slices.Sort(epochs)
			med := epochs[len(epochs)/2]
			if len(epochs)%2 == 0 {
				med = (epochs[len(epochs)/2-1] + epochs[len(epochs)/2]) / 2
			}
			rep := benchReport{Dataset: df.data, Ratings: d.Len(), Method: mfl.spec.Name, Config: mfl.config(),
				Epochs: max(len(marks), 1), SecondsPerEpoch: med, TrainSeconds: total.Seconds(),
				Kernels: vec.Current().String()}
			if med > 0 {
				rep.UpdatesPerSecond = float64(d.Len()) / med
			}
			if asJSON {
				enc := json.NewEncoder(a.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			fmt.Fprintf(a.stdout, "%s on %s (%d ratings): %.4g s per epoch (median of %d), %.3g rating updates/s; %.2f s in all; %s kernels\n",
				mfl.String(), df.data, d.Len(), med, len(epochs), rep.UpdatesPerSecond, total.Seconds(), rep.Kernels)
			return nil
		},
	}
	df.register(cmd.Flags())
	mfl.register(cmd.Flags(), a.args)
	cmd.SetFlagErrorFunc(mfl.flagError)
	mfl.nameFlagsInErrors(cmd)
	cmd.Flags().Uint64Var(&seed, "seed", 1, "random seed of the training")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}
