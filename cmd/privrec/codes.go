package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/privrec/privrec/authority"
	"github.com/privrec/privrec/deploy"
)

func (a *app) enrollCodesCmd() *cobra.Command {
	var (
		state string
		n     int
		imp   string
	)
	cmd := &cobra.Command{
		Use:   "enroll-codes",
		Short: "Issue one-time enrolment codes for a server's devices",
		Long: `enroll-codes makes N one-time enrolment codes for the run in --state and
prints them, one a line; the state keeps only their hashes. Hand one code
to each device: privrec client --code CODE (or --code-file) enrols it as
one client, once, as a party of its own. A retry of the same enrolment
(same code and secret) succeeds; any other use of a spent code
is refused.

The shared token in STATE/enroll-token is for a vendor that holds many
users as one party (privrec client --token-file --simulate): all the
clients it enrols count as one party in the colluding fraction that
secure aggregation is provisioned for.

--import FILE adds codes made by an enrolment authority instead (privrec
authority codes): FILE holds their SHA-256 hashes, one a line in hex
(code-hashes.txt), so the aggregator never sees a code. A hash already
imported is skipped.

The command opens the server's state store, so issue codes before
privrec serve starts, or stop the server first (it resumes where it was).`,
		Example: `  privrec enroll-codes --state run1 -n 100 > codes.txt
  privrec enroll-codes --state run1 --import codes/code-hashes.txt`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if state == "" {
				return errors.New("--state DIR is required")
			}
			if imp != "" {
				if cmd.Flags().Changed("n") {
					return errors.New("--import adds the codes of a file: drop -n")
				}
				hashes, err := authority.ReadCodeHashes(imp)
				if err != nil {
					return fmt.Errorf("--import: %w", err)
				}
				added, err := deploy.ImportCodes(state, hashes)
				if err != nil {
					return err
				}
				fmt.Fprintf(a.stderr, "imported %d code hashes (%d already there)\n", added, len(hashes)-added)
				return nil
			}
			codes, err := deploy.IssueCodes(state, n)
			if err != nil {
				return err
			}
			for _, c := range codes {
				fmt.Fprintln(a.stdout, c)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&state, "state", "", "the server's state directory (required)")
	f.IntVarP(&n, "n", "n", 1, "how many codes to issue")
	f.StringVar(&imp, "import", "", "add the codes whose SHA-256 hashes this file holds, one a line in hex (code-hashes.txt of privrec authority codes)")
	return cmd
}
