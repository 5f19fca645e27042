package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/privrec/privrec/model"
)

// TestChooseRanking: recommend without --model trains ease up to
// easeMaxItems items, ials above, and dp-ease at the given ε with --eps.
func TestChooseRanking(t *testing.T) {
	for _, c := range []struct {
		items      int
		eps        float64
		method     string
		paramEps   string
		whyContain string
	}{
		{1682, 0, "ease", "", "not private"},
		{easeMaxItems, 0, "ease", "", "Recall@20 " + r20EASE},
		{easeMaxItems + 1, 0, "ials", "", fmt.Sprintf("%d items is more than %d", easeMaxItems+1, easeMaxItems)},
		{9724, 1, "dp-ease", "1", "(ε, δ) = (1, 1e-06)"},
		{100, 10, "dp-ease", "10", "(ε, δ) = (10, 1e-06)"},
	} {
		got := chooseRanking(c.items, c.eps, 1e-6)
		if got.method != c.method || got.params["eps"] != c.paramEps || !strings.Contains(got.why, c.whyContain) {
			t.Errorf("chooseRanking(%d, %g) = %s %v %q, want %s eps %q, reason with %q",
				c.items, c.eps, got.method, got.params, got.why, c.method, c.paramEps, c.whyContain)
		}
	}
}

// twoTastes writes a ratings file of 40 users in two groups: group A rates
// items 1..10, group B items 11..20, each user all but one item of their
// group (a different one per user), and returns its path.
func twoTastes(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for u := 0; u < 40; u++ {
		first := 1 + 10*(u%2)
		for i := first; i < first+10; i++ {
			if i-first == (u/2)%10 {
				continue
			}
			fmt.Fprintf(&b, "%d\t%d\t%d\n", u+1, i, 3+(u+i)%3)
		}
	}
	path := filepath.Join(t.TempDir(), "tastes.tsv")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// recsOf decodes recommend --json output.
func recsOf(t *testing.T, out string) []model.Recommendation {
	t.Helper()
	var recs []model.Recommendation
	if err := json.Unmarshal([]byte(out), &recs); err != nil {
		t.Fatalf("output is not JSON recommendations: %v\n%s", err, out)
	}
	return recs
}

// TestRecommendWithoutModel: without --model, recommend trains ease on
// --data, says so on stderr, and ranks a user's own group's unrated items
// first, for a user of the data (--user) and for a --ratings file.
func TestRecommendWithoutModel(t *testing.T) {
	data := twoTastes(t)
	mine := filepath.Join(t.TempDir(), "mine.csv")
	if err := os.WriteFile(mine, []byte("user,item,rating\nx,11,5\nx,12,4\nx,13,5\nx,14,4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		args  []string
		rated []string // items the user rated: not recommended
		group int      // 1 or 11: the first item of the user's group
	}{
		// User 1 (group A) rated 2..10: item 1 is its group's only unrated one.
		{"user of the data", []string{"--user", "1", "-n", "3"}, []string{"2", "3", "10"}, 1},
		// User 4 (group B) did not rate item 12.
		{"user of group B", []string{"--user", "4", "-n", "1"}, []string{"11", "13"}, 11},
		{"ratings file", []string{"--ratings", mine, "-n", "6"}, []string{"11", "12", "13", "14"}, 11},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, err := run(t, append([]string{"recommend", "--data", data, "--json"}, c.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(errOut, "no --model: training ease") || !strings.Contains(errOut, "docs/results/ranking.md") {
				t.Errorf("stderr does not say which method and why: %q", errOut)
			}
			recs := recsOf(t, out)
			if len(recs) == 0 {
				t.Fatal("no recommendations")
			}
			var items []string
			for _, r := range recs {
				items = append(items, r.Item)
			}
			for _, r := range c.rated {
				if slices.Contains(items, r) {
					t.Errorf("recommended %s, which the user rated: %v", r, items)
				}
			}
			// The user's own group's unrated items come first.
			mine := 0
			for _, it := range items {
				var i int
				fmt.Sscan(it, &i)
				if i < c.group || i >= c.group+10 {
					break
				}
				mine++
			}
			want := min(len(items), 10-len(c.rated))
			if c.name != "ratings file" {
				want = 1
			}
			if mine < want {
				t.Errorf("list %v: %d of the user's group first, want %d", items, mine, want)
			}
		})
	}
}

// TestRecommendWithoutModelPrivateAndLarge runs the two other choices on
// the embedded ml-latest-small (9,724 items): ials for a user of the data,
// and dp-ease with --eps for a --ratings file, whose items are not
// recommended back.
func TestRecommendWithoutModelPrivateAndLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("trains ials and dp-ease on ml-latest-small")
	}
	mine := filepath.Join("..", "..", "examples", "my-ratings.csv")
	b, err := os.ReadFile(mine)
	if err != nil {
		t.Fatal(err)
	}
	var rated []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n")[1:] {
		rated = append(rated, strings.Split(line, ",")[1])
	}
	for _, c := range []struct {
		name, want string
		args       []string
		notRated   []string
	}{
		{"ials above the ease limit", "training ials", []string{"--user", "1"}, nil},
		{"dp-ease with --eps", "training dp-ease", []string{"--ratings", mine, "--eps", "10"}, rated},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, err := run(t, append([]string{"recommend", "--data", "ml-latest-small", "-n", "10", "--json"}, c.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(errOut, c.want) {
				t.Errorf("stderr %q, want %q", errOut, c.want)
			}
			recs := recsOf(t, out)
			if len(recs) != 10 {
				t.Fatalf("%d recommendations, want 10", len(recs))
			}
			for _, r := range recs {
				if slices.Contains(c.notRated, r.Item) {
					t.Errorf("recommended %s (%s), which the --ratings file rated", r.Item, r.Title)
				}
			}
		})
	}
}

// TestRecommendRankingNote: a rating-prediction --model gets the one-line
// note that it ranks by raw predicted rating, a ranking model does not,
// and the flags of the model-less path are refused with --model.
func TestRecommendRankingNote(t *testing.T) {
	data := twoTastes(t)
	dir := t.TempDir()
	for _, c := range []struct {
		method string
		note   bool
	}{
		{"mf", true},
		{"pop", false},
	} {
		path := filepath.Join(dir, c.method+".prm")
		if _, _, err := run(t, "train", "--data", data, "--method", c.method, "--out", path); err != nil {
			t.Fatal(err)
		}
		_, errOut, err := run(t, "recommend", "--model", path, "--data", data, "--user", "1", "-n", "2")
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(errOut, "ranks by its raw predicted rating"); got != c.note {
			t.Errorf("%s: stderr %q, want the note %v", c.method, errOut, c.note)
		}
		if c.note && strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%s: the note is not one line: %q", c.method, errOut)
		}
	}
	// The note is about a list: a run that ends in an error prints none.
	bad := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(bad, []byte("movieId,rating\n1,seven\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--user", "no-such-user"},
		{"--ratings", bad},
		{"--ratings", filepath.Join(dir, "missing.csv")},
	} {
		_, errOut, err := run(t, append([]string{"recommend", "--model", filepath.Join(dir, "mf.prm"), "--data", data, "-n", "2"}, args...)...)
		if err == nil {
			t.Errorf("%v: no error", args)
		}
		if strings.Contains(errOut, "ranks by its raw predicted rating") {
			t.Errorf("%v: the note before the error %v: %q", args, err, errOut)
		}
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"no model, no data", []string{"--user", "1"}, "--data"},
		{"eps with a model", []string{"--model", filepath.Join(dir, "mf.prm"), "--user", "1", "--eps", "1"}, "--eps"},
		{"negative eps", []string{"--data", data, "--user", "1", "--eps", "-1"}, "--eps -1"},
		{"unknown user", []string{"--data", data, "--user", "99"}, `"99"`},
		{"undeclared scale", []string{"--data", data, "--user", "1", "--eps", "1"}, "declared public scale"},
	} {
		_, _, err := run(t, append([]string{"recommend"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %q", c.name, err, c.want)
		}
	}
}
