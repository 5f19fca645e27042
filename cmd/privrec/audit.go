package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/privrec/privrec/audit"
	"github.com/privrec/privrec/internal/atomicfile"
)

// defaultAuditReport is where a full audit writes its report.
const defaultAuditReport = "docs/results/audit.md"

func (a *app) auditCmd() *cobra.Command {
	var (
		df             dataFlags
		attack, method string
		all, quick     bool
		seed           uint64
		workers        int
		out            string
	)
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Attack the private methods as a curious server would, and check every claim",
		Long: `audit runs the attacks a curious server can mount on what it receives (the
protocol's transcripts) and reports each attack's success with a 95%
confidence interval, against the bound the attacked method's claim implies.
Every attack also runs on a control, the naive variant it must break, so that
the audit can be trusted. Attacks: ` + strings.Join(audit.AttackNames(), ", ") + `.
Targets: ` + strings.Join(audit.MethodNames(), ", ") + `.

  privrec audit --attack inversion --method dpmf
  privrec audit --all --quick                        (CI: about a minute of CPU)
  privrec audit --all --data ml-100k                 (writes ` + defaultAuditReport + `)

The command fails (exit status 1) when a control is not broken or a
protected method leaks beyond its bound.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !all && attack == "" && method == "" {
				return fmt.Errorf("say what to run: --all, --attack NAME or --method NAME (attacks: %s)", strings.Join(audit.AttackNames(), ", "))
			}
			if all && (attack != "" || method != "") {
				return fmt.Errorf("--all runs every attack; drop --attack and --method, or --all")
			}
			if attack != "" {
				if _, err := audit.Lookup(attack); err != nil {
					return err
				}
			}
			d, err := a.load(&df)
			if err != nil {
				return err
			}
			cfg := audit.Config{Data: d, Quick: quick, Seed: seed, Workers: workers, Attack: attack, Method: method,
				Log: func(s string) { fmt.Fprintln(a.stderr, s) }}
			rep, err := audit.Run(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			var md bytes.Buffer
			if err := rep.Markdown(&md, commandLine()); err != nil {
				return err
			}
			dest := out
			if dest == "" && all && !quick {
				dest = defaultAuditReport
			}
			if dest == "" || dest == "-" {
				if _, err := a.stdout.Write(md.Bytes()); err != nil {
					return err
				}
			} else {
				if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
					return err
				}
				if err := atomicfile.Write(dest, func(f *os.File) error { _, err := f.Write(md.Bytes()); return err }); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "report: %s\n", dest)
			}
			broken, within, failed := rep.Counts()
			fmt.Fprintf(a.stdout, "%d controls broken, %d protected rows within bound, %d failures (%.0f s)\n", broken, within, failed, rep.Elapsed.Seconds())
			if failed > 0 {
				for _, f := range rep.Failures() {
					fmt.Fprintf(a.stderr, "FAIL %s on %s (%s): %s %.4g, bound %.4g\n", f.Attack, f.Method, f.Role, f.Metric, f.Value, f.Bound)
				}
				return fmt.Errorf("audit failed: %d row(s)", failed)
			}
			return nil
		},
	}
	f := cmd.Flags()
	df.register(f)
	f.StringVar(&attack, "attack", "", "run one attack: "+strings.Join(audit.AttackNames(), ", "))
	f.StringVar(&method, "method", "", "run the attacks on one target (with their controls): "+strings.Join(audit.MethodNames(), ", "))
	f.BoolVar(&all, "all", false, "run every attack on every target")
	f.BoolVar(&quick, "quick", false, "a reduced audit (first 200 users, fewer rounds and samples): about a minute of CPU")
	f.Uint64Var(&seed, "seed", 1, "seed of every random stream")
	f.IntVar(&workers, "workers", 0, "client goroutines (0: all cores); results do not depend on it")
	f.StringVar(&out, "out", "", `write the Markdown report here ("-": stdout; default: `+defaultAuditReport+` for a full --all run, stdout otherwise)`)
	return cmd
}

// commandLine returns the command as it was typed, for the report.
func commandLine() string {
	args := []string{"privrec"}
	for _, s := range os.Args[1:] {
		if strings.ContainsAny(s, " \t'\"") {
			s = "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
		args = append(args, s)
	}
	return strings.Join(args, " ")
}
