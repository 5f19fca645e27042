package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/privrec/privrec/model"
)

// claimNotice tells the person, before any of their data leaves, what
// the run they are joining protects and what it does not: the unit of
// its privacy claim, who must be trusted, and what the neighbouring
// relation leaves public (for HDPMF's family, which items a user rated).
func claimNotice(w io.Writer, method string, p model.Privacy) {
	fmt.Fprintf(w, "privrec client: joining a %s run. Before any of your data leaves:\n", method)
	unit := p.Unit
	if unit == "" || unit == "none" {
		unit = "nothing (no differential privacy)"
	}
	fmt.Fprintf(w, "  protected:      %s\n", unit)
	fmt.Fprintf(w, "  trusted:        %s\n", p.Trusted)
	if p.Neighbouring != "" {
		fmt.Fprintf(w, "  the guarantee:  %s\n", p.Neighbouring)
	}
	if public := publicPart(p); public != "" {
		fmt.Fprintf(w, "  NOT protected:  %s\n", public)
	}
}

// publicPart extracts what a claim says is left unprotected: the
// parenthesis "(which items ... is not protected ...)" of a note, or the
// part of a neighbouring relation after ";" that names what is public.
func publicPart(p model.Privacy) string {
	if i := strings.Index(p.Note, "which items a user rated is not protected"); i >= 0 {
		s := p.Note[i:]
		if j := strings.IndexByte(s, ')'); j >= 0 {
			s = s[:j]
		}
		return s
	}
	for _, part := range strings.Split(p.Neighbouring, ";") {
		if strings.Contains(part, "public") {
			return strings.TrimSpace(part)
		}
	}
	return ""
}
