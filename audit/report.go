package audit

import (
	"fmt"
	"io"
	"strings"
)

// Counts returns how many controls were broken, how many protected rows
// held, and how many rows failed.
func (r *Report) Counts() (broken, within, failed int) {
	for _, x := range r.Results {
		switch x.Status {
		case Broken:
			broken++
		case Within:
			within++
		case Failed:
			failed++
		}
	}
	return broken, within, failed
}

// Markdown writes the report: the command that made it, the verdict, one
// summary table, and per attack its method, every row with its setting,
// interval, bound and note, and the curves.
func (r *Report) Markdown(w io.Writer, command string) error {
	var b strings.Builder
	broken, within, failed := r.Counts()
	fmt.Fprintf(&b, "# Privacy audit: the attacks a curious server can mount\n\n")
	fmt.Fprintf(&b, "Made by `%s` (seed %d%s) in %.0f s. Every figure below comes from that run.\n\n", command, r.Seed, quickText(r.Quick), r.Elapsed.Seconds())
	fmt.Fprintf(&b, "Data of the data-driven attacks: %s.\n\n", r.Data)
	verdict := "**Passed**"
	if failed > 0 {
		verdict = "**FAILED**"
	}
	fmt.Fprintf(&b, "%s: %d controls broken, %d protected rows within their bounds, %d failures.\n\n", verdict, broken, within, failed)
	b.WriteString("Each attack reads only what the server receives: the protocol transcript (`protocol.TranscriptWriter`), streamed to the attacker as the run writes it. ")
	b.WriteString("A control is the naive variant the attack must break: it counts as broken when its whole 95% interval lies beyond the bound. ")
	b.WriteString("A protected row holds when its interval reaches back to the bound (no significant evidence that the attack beats it). ")
	b.WriteString("Findings are configurations outside a method's claim, shown for information. ")
	b.WriteString("Intervals: Wilson for accuracies, a percentile bootstrap over users (400 resamples) for error ratios; the server-knows-h rows compare δ̂ with its sampling tolerance.\n\n")

	b.WriteString("| attack | method | role | metric | value | 95% interval | bound | status |\n|---|---|---|---|---|---|---|---|\n")
	for _, x := range r.Results {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", x.Attack, x.name(), x.Role, x.Metric, num(x.Value), interval(x), num(x.Bound), x.Status)
	}
	b.WriteString("\n")
	for _, a := range Attacks() {
		var rows []Result
		for _, x := range r.Results {
			if x.Attack == a.Name {
				rows = append(rows, x)
			}
		}
		if len(rows) == 0 {
			continue
		}
		fmt.Fprintf(&b, "## %s: %s\n\n%s\n\n", a.Name, a.Title, a.Doc)
		fmt.Fprintf(&b, "Command for this attack alone: `privrec audit --attack %s%s`.\n\n", a.Name, quickFlag(r.Quick))
		for _, x := range rows {
			fmt.Fprintf(&b, "- **%s** (%s, %s): %s %s, 95%% interval %s, bound %s, baseline %s, n = %d; %s. %s. Setting: %s. (%.1f s)\n",
				x.name(), x.Role, x.Status, x.Metric, num(x.Value), interval(x), num(x.Bound), num(x.Baseline), x.N,
				verdictText(x), x.Note, x.Setting, x.Elapsed.Seconds())
		}
		b.WriteString("\n")
		for _, x := range rows {
			if len(x.Curve) == 0 {
				continue
			}
			fmt.Fprintf(&b, "%s (%s; %s), %s against %s:\n\n| %s | value | 95%% interval |\n|---|---|---|\n", x.name(), x.Role, x.Setting, x.Metric, x.CurveX, x.CurveX)
			for _, p := range x.Curve {
				fmt.Fprintf(&b, "| %g | %s | [%s, %s] |\n", p.X, num(p.Value), num(p.Lo), num(p.Hi))
			}
			b.WriteString("\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func interval(x Result) string {
	if x.Lo == x.Hi && x.Lo == x.Value {
		return "–"
	}
	return "[" + num(x.Lo) + ", " + num(x.Hi) + "]"
}

func verdictText(x Result) string {
	dir := "above"
	if !x.HigherLeaks {
		dir = "below"
	}
	switch x.Status {
	case Broken:
		return "the attack beats the bound (interval " + dir + " it)"
	case Within:
		return "no significant evidence that the attack beats the bound"
	case Failed:
		if x.Role == Control {
			return "the control was NOT broken: the attack is too weak to vouch for anything"
		}
		return "the attack beats the bound: the method LEAKS beyond its claim"
	}
	return "for information"
}

func quickText(q bool) string {
	if q {
		return ", quick"
	}
	return ""
}

func quickFlag(q bool) string {
	if q {
		return " --quick"
	}
	return ""
}
