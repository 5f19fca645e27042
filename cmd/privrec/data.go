package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/privrec/privrec/datasets"
	"github.com/privrec/privrec/internal/atomicfile"
	"github.com/privrec/privrec/internal/progress"
	"github.com/privrec/privrec/ratings"
)

func (a *app) dataCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "data",
		Short: "Inspect, split and download rating datasets",
	}
	cmd.AddCommand(a.dataInfoCmd(), a.dataSplitCmd(), a.dataFetchCmd(), a.dataListCmd())
	return cmd
}

func (a *app) dataInfoCmd() *cobra.Command {
	var df dataFlags
	cmd := &cobra.Command{
		Use:     "info",
		Short:   "Print the size, density and rating distribution of a dataset",
		Example: "  privrec data info --data ml-latest-small\n  privrec data info --data ratings.tsv --skip-bad",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := a.load(&df)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "%s (scale %v: %s)\n%v", df.data, d.Scale.Declared(), df.scaleFrom, ratings.Describe(d))
			return nil
		},
	}
	df.register(cmd.Flags())
	return cmd
}

func (a *app) dataListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List every dataset --data NAME resolves: the known ones and the folders of $PRIVREC_DATA and the fetch cache",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "name\twhere\tcontents")
			for _, in := range datasets.Names() {
				where := "not here: privrec data fetch " + in.Name
				switch {
				case in.Embedded:
					where = "embedded"
				case in.Available:
					where = in.Path
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\n", in.Name, where, in.Description)
			}
			// Every other name --data NAME resolves: the folders of
			// $PRIVREC_DATA and the fetch cache.
			for _, in := range datasets.Found() {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", in.Name, in.Path, in.Description)
			}
			return tw.Flush()
		},
	}
}

func (a *app) dataSplitCmd() *cobra.Command {
	var (
		df    dataFlags
		split string
		seed  uint64
		out   string
	)
	cmd := &cobra.Command{
		Use:   "split",
		Short: "Split a dataset and write train and test files",
		Long: `split writes, for each split, OUT/trainN.tsv and OUT/testN.tsv with lines
"user TAB item TAB rating" in the original IDs, and, when the dataset's rating
scale is declared (not read off the ratings), OUT/scale.txt, which declares it
for every file of OUT: private methods accept the files as they accept the
dataset. Files are written whole or not at all.`,
		Example: "  privrec data split --data ml-latest-small --split random:0.8 --seed 7 --out splits/",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return fmt.Errorf("--out: an output folder is required")
			}
			sp, err := parseSplitFlag(split, &df)
			if err != nil {
				return err
			}
			d, err := a.load(&df)
			if err != nil {
				return err
			}
			splits, err := sp(d, seed)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			for k, s := range splits {
				for _, part := range []struct {
					name string
					d    *ratings.Dataset
				}{{"train", s.Train}, {"test", s.Test}} {
					p := filepath.Join(out, fmt.Sprintf("%s%d.tsv", part.name, k+1))
					if err := writeTSV(p, part.d); err != nil {
						return err
					}
					fmt.Fprintf(a.stdout, "%s: %d ratings\n", p, part.d.Len())
				}
			}
			return a.writeSplitScale(out, df.data, d.Scale)
		},
	}
	df.register(cmd.Flags())
	cmd.Flags().StringVar(&split, "split", "random:0.9", "split spec: random:F, leave:K, loo, kfold:K, official[:N]")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "random seed")
	cmd.Flags().StringVarP(&out, "out", "o", "", "output folder")
	return cmd
}

// writeSplitScale writes the ratings.ScaleFileName of a split's folder
// out, declaring the scale of the dataset data, so its files load on that
// scale. A scale read off the ratings is not a declaration and gets no
// file: the files are then as undeclared as the dataset was.
func (a *app) writeSplitScale(out, data string, s ratings.Scale) error {
	p := filepath.Join(out, ratings.ScaleFileName)
	if s.Inferred {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			return err
		}
		fmt.Fprintf(a.stderr, "privrec: %s: no %s written: the scale %v was read off the ratings; declare it with --scale when you load the split\n",
			out, ratings.ScaleFileName, s.Declared())
		return nil
	}
	note := fmt.Sprintf("the public rating scale of %s, which privrec reads for every rating file in this folder", data)
	if err := atomicfile.Write(p, func(f *os.File) error {
		_, err := f.WriteString(ratings.FormatScaleFile(s, note))
		return err
	}); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "%s: scale %v\n", p, s)
	return nil
}

// writeTSV writes d as user TAB item TAB rating lines to path, through a
// temporary file renamed into place, so path is whole or absent.
func writeTSV(path string, d *ratings.Dataset) error {
	return atomicfile.Write(path, func(f *os.File) error {
		w := bufio.NewWriter(f)
		var buf []byte
		for k := range d.Values {
			buf = append(buf[:0], d.UserIDs[d.Users[k]]...)
			buf = append(buf, '\t')
			buf = append(buf, d.ItemIDs[d.Items[k]]...)
			buf = append(buf, '\t')
			buf = strconv.AppendFloat(buf, float64(d.Values[k]), 'g', -1, 32)
			buf = append(buf, '\n')
			if _, err := w.Write(buf); err != nil {
				return err
			}
		}
		return w.Flush()
	})
}

func (a *app) dataFetchCmd() *cobra.Command {
	var cache string
	cmd := &cobra.Command{
		Use:   "fetch NAME",
		Short: "Download an official MovieLens archive into the cache, verified by SHA-256",
		Long: `fetch downloads a GroupLens archive (ml-100k, ml-1m, ml-10m, ml-20m, ml-25m,
ml-latest-small, ml-latest) into the cache folder ($PRIVREC_CACHE, or the
user cache folder), verifies its SHA-256, and unpacks it. An interrupted
download resumes where it stopped. Afterwards --data NAME finds it.`,
		Example: "  privrec data fetch ml-1m\n  privrec evaluate --data ml-1m",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var bar *progress.Bar
			opt := datasets.FetchOptions{CacheDir: cache, Progress: func(done, total int64) {
				if bar == nil {
					bar = progress.New(a.stderr, total, "downloading "+args[0], "B")
				}
				bar.Set(done)
			}}
			dir, err := datasets.Fetch(cmd.Context(), args[0], opt)
			bar.Finish()
			if err != nil {
				return err
			}
			fmt.Fprintln(a.stdout, dir)
			return nil
		},
	}
	cmd.Flags().StringVar(&cache, "cache", "", "cache folder (default $PRIVREC_CACHE or the user cache folder)")
	return cmd
}
