// Command topntune chooses a top-N method's hyperparameters inside the
// training part only: it applies evaluate's split (random:0.8 at -seed),
// splits that training part again (random:0.8 at -seed+1000) into a
// fitting and a validation part, and prints Recall@20 and NDCG@20 on the
// validation part for each setting. The test part is never read.
//
//	go run ./scripts/topntune -data ml-1m -method ease -grid lambda=100,250,500,1000
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/privrec/privrec/datasets"
	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/ratings"
)

func main() {
	data := flag.String("data", "ml-1m", "dataset")
	name := flag.String("method", "ease", "method")
	fixed := flag.String("set", "", "fixed parameters k=v,k=v")
	grid := flag.String("grid", "", "one or more k=v1,v2,... separated by ';' (the product is tried)")
	seed := flag.Uint64("seed", 1, "seed of the outer split")
	flag.Parse()
	d, _, err := datasets.Open(*data, ratings.LoadOptions{})
	if err != nil {
		log.Fatal(err)
	}
	sp, _ := ratings.ParseSplit("random:0.8")
	outer, err := sp.Apply(d, *seed)
	if err != nil {
		log.Fatal(err)
	}
	inner, err := sp.Apply(outer[0].Train, *seed+1000)
	if err != nil {
		log.Fatal(err)
	}
	fitPart, val := inner[0].Train, inner[0].Test
	spec, err := method.Lookup(*name)
	if err != nil {
		log.Fatal(err)
	}
	base := map[string]string{}
	for _, kv := range strings.Split(*fixed, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			base[k] = v
		}
	}
	settings := []map[string]string{base}
	for _, g := range strings.Split(*grid, ";") {
		k, vs, ok := strings.Cut(g, "=")
		if !ok {
			continue
		}
		var next []map[string]string
		for _, s := range settings {
			for _, v := range strings.Split(vs, ",") {
				c := map[string]string{k: v}
				for a, b := range s {
					c[a] = b
				}
				next = append(next, c)
			}
		}
		settings = next
	}
	for _, s := range settings {
		cfg, err := spec.Configure(s)
		if err != nil {
			log.Fatal(err)
		}
		start := time.Now()
		m, _, err := spec.Fit(context.Background(), fitPart, cfg, *seed, nil)
		if err != nil {
			log.Fatal(err)
		}
		rel := d.Scale.Min + 0.75*(d.Scale.Max-d.Scale.Min) // evaluate's default
		r := eval.RankAt(m, fitPart, val, []int{20}, rel, 0)[0]
		fmt.Fprintf(os.Stdout, "%s %v validation Recall@20 %.4f NDCG@20 %.4f (%.1fs)\n", *name, s, r.Recall, r.NDCG, time.Since(start).Seconds())
	}
}
