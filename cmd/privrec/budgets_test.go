package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/ratings"
)

// TestDefaultBudgetsMatchResults checks the default ε of privrec methods
// --json against the privacy the defaults experiment recorded for each
// cell, and that every private method has one.
func TestDefaultBudgetsMatchResults(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "..", "docs", "results", "defaults", "cells.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type span struct{ r, t [2]float64 }
	seen := map[string]*span{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var c struct {
			Kind, Method string
			Privacy      struct {
				Unit     string
				EpsRound float64 `json:"eps_round"`
				EpsTotal float64 `json:"eps_total"`
			}
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		if c.Kind != "test" || c.Privacy.Unit == "none" {
			continue
		}
		s := seen[c.Method]
		if s == nil {
			s = &span{[2]float64{math.Inf(1), math.Inf(-1)}, [2]float64{math.Inf(1), math.Inf(-1)}}
			seen[c.Method] = s
		}
		s.r = [2]float64{math.Min(s.r[0], c.Privacy.EpsRound), math.Max(s.r[1], c.Privacy.EpsRound)}
		s.t = [2]float64{math.Min(s.t[0], c.Privacy.EpsTotal), math.Max(s.t[1], c.Privacy.EpsTotal)}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-5*math.Max(1, math.Abs(b)) }
	for name, s := range seen {
		b, ok := defaultBudgets[name]
		if !ok {
			t.Errorf("%s: measured but not in defaultBudgets", name)
			continue
		}
		round, total := b.Round, b.Total
		if b.Paper != nil { // the cells predate issue 32: they hold the paper's figures
			round, total = b.Paper[0], b.Paper[1]
		}
		for k := range 2 {
			if !near(round[k], s.r[k]) || !near(total[k], s.t[k]) {
				t.Errorf("%s: table round %v total %v, results round %v total %v", name, b.Round, b.Total, s.r, s.t)
				break
			}
		}
	}
	for _, s := range method.All() {
		if _, ok := defaultBudgets[s.Name]; (s.Claim.Unit != "none") != ok {
			t.Errorf("%s: claim unit %q, in defaultBudgets %v", s.Name, s.Claim.Unit, ok)
		}
	}
}

// TestDefaultBudgetsLive trains the cheap data-independent methods at
// their defaults and checks what they spend is what methods --json says.
func TestDefaultBudgetsLive(t *testing.T) {
	for _, name := range []string{"dp-globalavg", "dp-itemavg", "dp-biases", "sd-bprmf"} {
		out, _, err := run(t, "evaluate", "--data", "ml-latest-small", "--min-user-ratings", "1000", "--method", name, "--json")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var rep struct {
			Privacy struct {
				EpsRound float64 `json:"eps_round"`
				EpsTotal float64 `json:"eps_total"`
				Delta    float64
			}
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		s, _ := method.Lookup(name)
		b := budgetOf(s)
		p := rep.Privacy
		if math.Abs(p.EpsRound-float64(b.EpsRound)) > 1e-6 || math.Abs(p.EpsTotal-float64(b.EpsTotal)) > 1e-6 || p.Delta != b.Delta {
			t.Errorf("%s: spent round %g total %g δ %g; methods --json says %g, %g, %g", name, p.EpsRound, p.EpsTotal, p.Delta, b.EpsRound, b.EpsTotal, b.Delta)
		}
	}
}

// TestDefaultBudgetsAgreeWithRuns trains every private method at its
// defaults (on a small synthetic set, in process) and checks the default
// ε of privrec methods --json against what the run reports: both +Inf or
// both finite, and equal where the table says the spend does not depend
// on the data.
func TestDefaultBudgetsAgreeWithRuns(t *testing.T) {
	train := budgetData()
	for _, s := range method.All() {
		b := budgetOf(s)
		if b == nil {
			continue
		}
		t.Run(s.Name, func(t *testing.T) {
			_, res, err := s.Fit(method.WithTestMode(context.Background()), train, s.New(), 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, want := res.Privacy.EpsTotal, float64(b.EpsTotal)
			if math.IsInf(got, 1) != math.IsInf(want, 1) {
				t.Fatalf("a run at the defaults reports ε total %g, methods --json says %g", got, want)
			}
			if !b.DependsOnData && !math.IsInf(want, 1) && math.Abs(got-want) > 1e-6*math.Max(1, want) {
				t.Errorf("a run at the defaults reports ε total %g, methods --json says %g", got, want)
			}
		})
	}
}

// budgetData returns a small synthetic dataset: 300 users, each rating
// 20 of 200 items on a 1..5 scale, with the items as a declared public
// catalog.
func budgetData() *ratings.Dataset {
	d := &ratings.Dataset{Name: "tiny", Scale: ratings.Scale{Min: 1, Max: 5, Step: 1}, Catalog: "tiny items"}
	for i := range 200 {
		d.ItemIDs = append(d.ItemIDs, fmt.Sprint("i", i))
	}
	for u := range 300 {
		d.UserIDs = append(d.UserIDs, fmt.Sprint("u", u))
		for k := range 20 {
			d.Users = append(d.Users, int32(u))
			d.Items = append(d.Items, int32((u*7+k*10)%200))
			d.Values = append(d.Values, float32(1+(u*u+3*k)%5))
		}
	}
	return d
}

// TestMethodsJSONClaimHasNoSpend checks that the privacy block of
// privrec methods --json holds the claim only: no ε or δ field, which a
// reader would take for "costs nothing"; and that every private method's
// claim names its neighbouring relation.
func TestMethodsJSONClaimHasNoSpend(t *testing.T) {
	out, _, err := run(t, "methods", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var ms []struct {
		Name    string
		Privacy map[string]any
	}
	if err := json.Unmarshal([]byte(out), &ms); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		for _, k := range []string{"eps_round", "eps_total", "delta", "eps_replace_one", "releases"} {
			if v, ok := m.Privacy[k]; ok {
				t.Errorf("%s: privacy block has %s = %v", m.Name, k, v)
			}
		}
		if n, _ := m.Privacy["neighbouring"].(string); m.Privacy["unit"] != "none" && n == "" {
			t.Errorf("%s: a private method's claim names no neighbouring relation", m.Name)
		}
	}
}
