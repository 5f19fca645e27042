package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/privrec/privrec/model"
)

// TestEvaluatePublicFeatures checks that evaluate --public-features
// reports the re-ranked list beside the method's own (base_ keys), and
// that weight 0 reproduces the method's own list.
func TestEvaluatePublicFeatures(t *testing.T) {
	if testing.Short() {
		t.Skip("ranks ml-latest-small")
	}
	summary := func(weight string) map[string]struct{ Mean float64 } {
		t.Helper()
		out, _, err := run(t, "evaluate", "--data", "ml-latest-small", "--method", "dp-pop", "--eps", "1", "--reproducible",
			"--split", "random:0.9", "--seed", "1", "--rank", "20", "--public-features", "items", "--public-weight", weight, "--json")
		if err != nil {
			t.Fatal(err)
		}
		var rep struct {
			Summary map[string]struct{ Mean float64 } `json:"summary"`
			Public  string                            `json:"public_features"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(rep.Public, "no privacy cost") {
			t.Errorf("public_features note %q does not state the privacy cost", rep.Public)
		}
		for _, k := range []string{"recall@20", "ndcg@20", "base_recall@20", "base_ndcg@20"} {
			if _, ok := rep.Summary[k]; !ok {
				t.Fatalf("summary has no %s: %v", k, rep.Summary)
			}
		}
		return rep.Summary
	}
	zero := summary("0")
	for _, k := range []string{"recall@20", "ndcg@20"} {
		if zero[k].Mean != zero["base_"+k].Mean {
			t.Errorf("weight 0: %s %v, base %v; want equal", k, zero[k].Mean, zero["base_"+k].Mean)
		}
	}
	auto := summary("auto")
	if auto["recall@20"].Mean == auto["base_recall@20"].Mean {
		t.Errorf("weight auto: recall@20 %v equals the base's: the features changed nothing", auto["recall@20"].Mean)
	}
}

func TestPublicFeaturesBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "features.tsv")
	if err := os.WriteFile(bad, []byte("10\tgenre:Drama\n11\tgenre:Drama||era:old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	small := filepath.Join("testdata", "small.tsv")
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"bad line", []string{"evaluate", "--data", small, "--method", "pop", "--public-features", bad}, []string{"features.tsv:2", "features"}},
		{"missing file", []string{"evaluate", "--data", small, "--method", "pop", "--public-features", filepath.Join(dir, "none.tsv")}, []string{"--public-features", "none.tsv"}},
		{"no item file", []string{"evaluate", "--data", small, "--method", "pop", "--public-features", "items"}, []string{"--public-features items", "no item file"}},
		{"bad weight", []string{"evaluate", "--data", small, "--method", "pop", "--public-features", "items", "--public-weight", "-1"}, []string{"--public-weight -1"}},
		{"strong protocol", []string{"evaluate", "--data", small, "--method", "pop", "--protocol", "strong", "--public-features", "items"}, []string{"--public-features", "strong"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := run(t, tc.args...)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

// TestRecommendPublicFeatures checks recommend --public-features with a
// features file: the rated items stay out, and weight 0 gives the model's
// own list.
func TestRecommendPublicFeatures(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join("testdata", "small.tsv")
	modelPath := filepath.Join(dir, "m.prm")
	if _, _, err := run(t, "train", "--data", small, "--method", "pop", "--out", modelPath); err != nil {
		t.Fatal(err)
	}
	feats := filepath.Join(dir, "features.tsv")
	if err := os.WriteFile(feats, []byte("10\tgenre:Drama\n11\tgenre:Drama\n12\tgenre:Comedy\n13\tgenre:Drama\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	recs := func(args ...string) ([]model.Recommendation, string) {
		t.Helper()
		out, stderr, err := run(t, append([]string{"recommend", "--model", modelPath, "--data", small, "--user", "2", "-n", "5", "--json"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		var r []model.Recommendation
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		return r, stderr
	}
	plain, _ := recs()
	zero, _ := recs("--public-features", feats, "--public-weight", "0")
	if len(plain) != len(zero) {
		t.Fatalf("weight 0: %d items, without features %d", len(zero), len(plain))
	}
	for k := range plain {
		if plain[k].Item != zero[k].Item {
			t.Errorf("weight 0: item %d is %s, without features %s", k+1, zero[k].Item, plain[k].Item)
		}
	}
	auto, note := recs("--public-features", feats)
	if len(auto) != len(plain) || !strings.Contains(note, "no privacy cost") {
		t.Errorf("auto: %d items (want %d), note %q", len(auto), len(plain), note)
	}
}

// TestPopularityFallback checks issue 41's fallback: where dp-ease's
// release carries no personalisation (ml-latest-small at ε = 1: popularity
// mode by its roster rule) the list is DP popularity re-ranked by the
// dataset's public features, without --public-features, and the output
// says so; where it does carry some (ε = 10) nothing is added.
func TestPopularityFallback(t *testing.T) {
	if testing.Short() {
		t.Skip("trains dp-ease on ml-latest-small")
	}
	report := func(eps string) (source string, summary map[string]struct{ Mean float64 }) {
		t.Helper()
		out, _, err := run(t, "evaluate", "--data", "ml-latest-small", "--method", "dp-ease", "--eps", eps, "--seeded",
			"--split", "random:0.9", "--seed", "1", "--rank", "20", "--json")
		if err != nil {
			t.Fatal(err)
		}
		var rep struct {
			Summary map[string]struct{ Mean float64 } `json:"summary"`
			Source  string                            `json:"list_source"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		return rep.Source, rep.Summary
	}
	source, sum := report("1")
	if !strings.Contains(source, "DP popularity re-ranked") || !strings.Contains(source, "no personalisation") {
		t.Errorf("ε = 1: list_source %q; want DP popularity re-ranked by public features, and why", source)
	}
	if _, ok := sum["base_recall@20"]; !ok {
		t.Errorf("ε = 1: no base_recall@20 (the unre-ranked DP popularity list) in %v", sum)
	}
	if source, _ := report("10"); source != "" {
		t.Errorf("ε = 10: list_source %q; want none (the release is personalised)", source)
	}
	_, stderr, err := run(t, "recommend", "--data", "ml-latest-small", "--eps", "1", "--user", "1", "-n", "5")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, "the list is DP popularity re-ranked") {
		t.Errorf("recommend at ε = 1 does not say where its list came from:\n%s", stderr)
	}
}
