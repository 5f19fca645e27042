package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/privrec/privrec/experiment"
)

func (a *app) experimentCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "experiment",
		Short: "Run the papers' experiments: every table and figure as one command",
		Long: `experiment runs declarative experiment specs (YAML, shipped in the binary):
datasets, split, seeds, methods with parameters and grids, a privacy
specification, a swept parameter, metrics and the paper's numbers. Results
go to an output folder: cells.jsonl (every finished cell, so an interrupted
run resumes), cells.csv, summary.csv, plots (PNG and SVG) and report.md.`,
	}
	cmd.AddCommand(a.experimentListCmd(), a.experimentShowCmd(), a.experimentRunCmd())
	return cmd
}

// loadSpec returns a shipped spec by name, or a spec file by path.
func loadSpec(name string) (*experiment.Spec, error) {
	if strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml") {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		return experiment.Parse(b, name)
	}
	return experiment.Get(name)
}

func (a *app) experimentListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the shipped experiments and what they still need",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "name\tpaper\tstatus\ttitle")
			for _, n := range experiment.Names() {
				s, err := experiment.Get(n)
				if err != nil {
					return err
				}
				status := "ready"
				if miss := s.Missing(); len(miss) > 0 {
					status = "needs: " + strings.Join(miss, ", ")
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", n, s.Paper, status, s.Title)
			}
			return tw.Flush()
		},
	}
}

func (a *app) experimentShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show NAME",
		Short: "Print an experiment's spec",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := experiment.Source(args[0])
			if err != nil {
				return err
			}
			_, err = a.stdout.Write(b)
			return err
		},
	}
}

func (a *app) experimentRunCmd() *cobra.Command {
	var (
		quick               bool
		out, dataRoot       string
		only                []string
		workers, methodWork int
	)
	cmd := &cobra.Command{
		Use:   "run NAME|FILE.yaml",
		Short: "Run an experiment (resuming from the output folder's cells)",
		Long: `run expands the spec into cells (dataset × variant × sweep value × method
× seed × fold), runs them in parallel and stores each finished cell at once
in OUT/cells.jsonl. Rerunning resumes: finished cells are reused, and a
changed spec recomputes only the cells whose configuration changed. Methods
that are not built yet are listed and skipped. --quick applies the spec's
quick: overrides (fewer seeds, epochs, sweep points, a small dataset).`,
		Example: `  privrec experiment run smoke --quick --out /tmp/exp
  privrec experiment run hdpmf-table3 --data-root "$PRIVREC_DATA"   # a folder holding ml-1m/, ...`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := loadSpec(args[0])
			if err != nil {
				return err
			}
			if quick {
				s = s.ApplyQuick()
			}
			if len(only) > 0 {
				if s, err = s.OnlyDatasets(only); err != nil {
					return err
				}
			}
			if out == "" {
				out = resultsDir(s.Name, quick)
			}
			if miss := s.Missing(); len(miss) > 0 {
				fmt.Fprintf(a.stderr, "privrec: %s: not built yet, skipped: %s\n", s.Name, strings.Join(miss, ", "))
			}
			o, err := experiment.Run(cmd.Context(), s, experiment.Options{
				Out: out, DataRoot: dataRoot, Workers: workers, MethodWorkers: methodWork, Progress: a.stderr,
				Command: "privrec " + strings.Join(os.Args[1:], " "),
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "%s: %d cells computed, %d reused, %s; report %s\n",
				s.Name, o.Computed, o.Reused, o.Wall.Round(1e7), filepath.Join(out, "report.md"))
			return nil
		},
	}
	cmd.Flags().BoolVar(&quick, "quick", false, "apply the spec's quick overrides")
	cmd.Flags().StringSliceVar(&only, "datasets", nil, "run only these of the spec's datasets (comma-separated)")
	cmd.Flags().StringVar(&out, "out", "", "output folder (default: where the committed report is, docs/results/PAPER/REST for PAPER-REST (hdpmf-table3: docs/results/hdpmf/table3), else docs/results/NAME; with --quick the folder's name ends in -quick)")
	cmd.Flags().StringVar(&dataRoot, "data-root", "", "folder searched first for datasets by name (ROOT/ml-1m)")
	cmd.Flags().IntVar(&workers, "workers", 0, "cells run at once (default: cores / --method-workers)")
	cmd.Flags().IntVar(&methodWork, "method-workers", 1, "the workers parameter of each method")
	return cmd
}

// paperPrefixes are the experiment-name prefixes whose results sit in a
// folder per paper under docs/results.
var paperPrefixes = []string{"hdpmf", "ldp-op", "multivendor", "pdp-pmf", "sdcf"}

// resultsDir is the default output folder of experiment name: where its
// committed report is, docs/results/PAPER/REST for PAPER-REST
// ("hdpmf-table3": docs/results/hdpmf/table3), else docs/results/NAME;
// with quick, the last element ends in -quick, away from the committed
// results.
func resultsDir(name string, quick bool) string {
	dir := filepath.Join("docs", "results", name)
	for _, p := range paperPrefixes {
		if rest, ok := strings.CutPrefix(name, p+"-"); ok && rest != "" {
			dir = filepath.Join("docs", "results", p, rest)
			break
		}
	}
	if quick {
		dir += "-quick"
	}
	return dir
}
