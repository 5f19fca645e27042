package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// modulePath is the module privrec is built from, reported when the
// binary carries no build information.
const modulePath = "github.com/privrec/privrec"

// buildVersion describes the running binary from its build information:
// the module version ("(devel)" when built inside a checkout, a tag or
// pseudo-version when installed with go install MODULE@VERSION) and the VCS
// commit, its time and whether the tree was modified (recorded by go build
// and go install in a checkout; go run records none).
type buildVersion struct {
	Module   string `json:"module"`
	Version  string `json:"version"`
	Commit   string `json:"commit,omitempty"`
	Time     string `json:"commit_time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
}

// readVersion reads the build information of the running binary.
func readVersion() buildVersion {
	v := buildVersion{Module: modulePath, Version: "(unknown)", Go: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if bi.Main.Path != "" {
		v.Module = bi.Main.Path
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	if v.Commit == "" {
		v.Commit = pseudoRevision(v.Version)
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// String is the one line of privrec --version.
func (v buildVersion) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "privrec %s (%s", v.Version, v.Module)
	switch {
	case v.Commit != "":
		fmt.Fprintf(&b, ", commit %s", v.Commit)
		if v.Time != "" {
			fmt.Fprintf(&b, " of %s", v.Time)
		}
		if v.Modified {
			b.WriteString(", modified")
		}
	default:
		b.WriteString(", commit not recorded: go build and go install record it in a git clone, not go run, a git worktree or -buildvcs=false")
	}
	fmt.Fprintf(&b, ", %s)", v.Go)
	return b.String()
}

// versionCmd is privrec version, the same line as privrec --version.
func (a *app) versionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the module version and VCS commit privrec was built from (also: privrec --version)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			v := readVersion()
			if asJSON {
				enc := json.NewEncoder(a.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(v)
			}
			_, err := fmt.Fprintln(a.stdout, v)
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// pseudoRevision returns the commit prefix of a pseudo-version such as
// v0.0.0-20261126191845-e05e9507cca7 (what go install MODULE@latest stamps
// on an untagged module, without vcs.* settings), or "".
func pseudoRevision(version string) string {
	version, _, _ = strings.Cut(version, "+")
	parts := strings.Split(version, "-")
	if len(parts) < 3 {
		return ""
	}
	rev, stamp := parts[len(parts)-1], parts[len(parts)-2]
	if i := strings.LastIndexByte(stamp, '.'); i >= 0 {
		stamp = stamp[i+1:] // v1.2.4-0.20261126191845-...
	}
	if len(rev) != 12 || len(stamp) != 14 || strings.Trim(rev, "0123456789abcdef") != "" || strings.Trim(stamp, "0123456789") != "" {
		return ""
	}
	return rev
}
