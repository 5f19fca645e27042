package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/privrec/privrec/deploy"
)

func (a *app) ledgerCmd() *cobra.Command {
	var state, server, ca string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ledger",
		Short: "Print a run's ledger: one line per folded round",
		Long: `ledger prints one line per round the server folded and committed: its
phase, the clients enrolled and answering, the uploads folded, the uploads
refused by reason, the share of each item's distributed noise that
arrived, its ε, the users the model published after it reads (continual
release: the distinct users of the training rounds released so far; a
cohort run also shows each round's cohort), and whether it was released (a masked round may be skipped,
or its sum refused as out of bounds). Each round appears once, whatever
crashes and restarts the run went through.

--state reads the state directory of a stopped server; --server reads the
ledger of a running one (its public /ledger route).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var led []deploy.LedgerEntry
			switch {
			case (state == "") == (server == ""):
				return fmt.Errorf("give one of --state DIR (a stopped server) or --server URL (a running one)")
			case server != "":
				hc, err := deploy.HTTPClient(ca)
				if err != nil {
					return err
				}
				resp, err := hc.Get(strings.TrimSuffix(server, "/") + "/ledger")
				if err != nil {
					return fmt.Errorf("--server: %w", err)
				}
				defer resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					return fmt.Errorf("--server: %s/ledger answered %s", server, resp.Status)
				}
				if err := json.NewDecoder(resp.Body).Decode(&led); err != nil {
					return fmt.Errorf("--server: the ledger: %w", err)
				}
			default:
				var err error
				if led, err = deploy.ReadLedger(state); err != nil {
					return err
				}
			}
			if asJSON {
				enc := json.NewEncoder(a.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(led)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			cohorts := slices.ContainsFunc(led, func(e deploy.LedgerEntry) bool { return e.Cohort > 0 })
			cohort := func(e deploy.LedgerEntry) string {
				if !cohorts {
					return ""
				}
				return fmt.Sprintf("%d\t", e.Cohort)
			}
			head := "round\tphase\tenrolled\t"
			if cohorts {
				head += "cohort\t"
			}
			fmt.Fprintln(tw, head+"answered\tuploads\trefused\tnoise\tε\tusers\tseconds\treleased")
			for _, e := range led {
				refused := 0
				for _, n := range e.Rejected {
					refused += n
				}
				noise, eps := "-", "-"
				if e.Coverage > 0 {
					noise = fmt.Sprintf("%.3f", e.Coverage)
				}
				switch {
				case e.Eps < 0:
					eps = "inf"
				case e.Eps > 0:
					eps = fmt.Sprintf("%.4g", e.Eps)
				}
				released := "yes"
				switch {
				case e.Skipped != "":
					released = "no: skipped (" + e.Skipped + ")"
				case e.Refused != "":
					released = "no: sum out of bounds"
				}
				fmt.Fprintf(tw, "%d\t%s\t%d\t%s%d\t%d\t%d\t%s\t%s\t%d\t%.3f\t%s\n", e.Round, e.Phase, e.Enrolled, cohort(e), e.Participants, e.Uploads, refused, noise, eps, e.Users, e.Seconds, released)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			var n, ups int
			var secs float64
			for _, e := range led {
				if e.Phase == "train" {
					n, ups, secs = n+1, ups+e.Uploads, secs+e.Seconds
				}
			}
			if n > 0 && secs > 0 {
				fmt.Fprintf(a.stdout, "training rounds: %d, %.3f s each on average: %.1f rounds/min, %.0f uploads/s\n",
					n, secs/float64(n), 60*float64(n)/secs, float64(ups)/secs)
			}
			if len(led) > 0 {
				switch last := led[len(led)-1]; {
				case last.EpsTotal < 0:
					fmt.Fprintln(a.stdout, "ε in total: unbounded (no finite ε holds against this server: a sum was refused as out of bounds, too few noise shares arrived, or the method's claim needs an aggregation the run did not use)")
				case last.EpsTotal > 0:
					fmt.Fprintf(a.stdout, "ε in total: %.4g at δ = %g (the method's own accountant, with the noise that arrived in each released round)\n", last.EpsTotal, last.Delta)
				}
			}
			if len(led) > 0 && led[len(led)-1].Parties > 0 {
				e := led[len(led)-1]
				fmt.Fprintf(a.stdout, "parties: %d among %d clients (a one-time code's client is one; the vendor token's clients are one together)\n",
					e.Parties, e.Enrolled)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&state, "state", "", "the state directory of a stopped server")
	cmd.Flags().StringVar(&server, "server", "", "the URL of a running server, e.g. https://127.0.0.1:7070")
	cmd.Flags().StringVar(&ca, "ca", "", "with --server: trust the server certificate(s) in this PEM file")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the ledger as JSON")
	return cmd
}
