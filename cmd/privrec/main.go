// Command privrec trains, evaluates and serves matrix-factorization
// recommenders, including ones learned under differential privacy.
//
// Usage:
//
//	privrec evaluate --data ml-latest-small --method mf --split random:0.9 --json
//	privrec train --data ml-latest-small --out model.prm
//	privrec recommend --model model.prm --data ml-latest-small --user 1
//	privrec data info|split|fetch ...
//
// Run privrec help COMMAND for the flags of each command.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/privrec/privrec/method"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := newRoot(os.Stdout, os.Stderr, os.Args[1:]).ExecuteContext(ctx)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			fmt.Fprintln(os.Stderr, "privrec: interrupted")
			os.Exit(130)
		}
		fmt.Fprintln(os.Stderr, "privrec:", err)
		os.Exit(1)
	}
}

// app holds what every command shares: where output goes and the logger.
type app struct {
	stdout, stderr io.Writer
	verbose        bool
	log            *slog.Logger
	args           []string // the command line, without the program name
}

// newRoot returns the privrec command for args (without the program
// name): the method commands read --method from args before parsing, to
// register that method's flags.
func newRoot(stdout, stderr io.Writer, args []string) *cobra.Command {
	a := &app{stdout: stdout, stderr: stderr, args: args}
	root := &cobra.Command{
		Use:   "privrec",
		Short: "Recommendations learned from ratings the recommender never sees",
		Long: `privrec trains matrix-factorization recommenders, non-private and under
differential privacy, evaluates them under the protocols of the papers it
implements, and recommends items.

The default dataset, ml-latest-small (MovieLens, GroupLens), is embedded.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(cmd *cobra.Command, args []string) {
			level := slog.LevelWarn
			if a.verbose {
				level = slog.LevelDebug
			}
			a.log = slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: level}))
			if f := cmd.Flags().Lookup("seed"); f != nil && f.Changed {
				// --seed given: the reproducible test mode, as serve and
				// client define it (methods with secret noise label it).
				cmd.SetContext(method.WithTestMode(cmd.Context()))
			}
		},
	}
	root.Version = readVersion().String()
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().BoolVarP(&a.verbose, "verbose", "v", false, "log progress details to stderr")
	root.AddCommand(a.evaluateCmd(), a.trainCmd(), a.recommendCmd(), a.methodsCmd(), a.dataCmd())
	root.AddCommand(a.experimentCmd())
	root.AddCommand(a.auditCmd())
	root.AddCommand(a.serveCmd(), a.clientCmd(), a.ledgerCmd(), a.benchCmd(), a.enrollCodesCmd(), a.authorityCmd())
	root.AddCommand(a.versionCmd())
	root.AddCommand(a.aggregateCmd(), a.natsConfigCmd(), a.frontCmd())
	return root
}
