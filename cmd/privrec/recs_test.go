package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/privrec/privrec/model"
)

// TestPrintRecommendations checks the one format of recommend and client
// --ratings: raw score and clamped rating side by side, "-" for a ranking
// model, and the same fields in JSON.
func TestPrintRecommendations(t *testing.T) {
	five := float32(5)
	recs := []model.Recommendation{
		{Rank: 1, Item: "318", Title: "Shawshank", Score: 5.4123, Rating: &five},
		{Rank: 2, Item: "750", Score: 2.5},
	}
	var b bytes.Buffer
	if err := printRecommendations(&b, recs, false); err != nil {
		t.Fatal(err)
	}
	want := "rank  item  score  rating  title\n" +
		"1     318   5.412  5.000   Shawshank\n" +
		"2     750   2.500  -       \n"
	if b.String() != want {
		t.Errorf("text:\n%q\nwant\n%q", b.String(), want)
	}
	b.Reset()
	if err := printRecommendations(&b, recs, true); err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got[0]["rating"] != 5.0 || got[0]["score"].(float64) < 5.41 || got[1]["rating"] != nil {
		t.Errorf("JSON %s", b.String())
	}
	b.Reset()
	if err := printRecommendations(&b, nil, true); err != nil || strings.TrimSpace(b.String()) != "[]" {
		t.Errorf("no recommendations: %q, %v", b.String(), err)
	}
}
