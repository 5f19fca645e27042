// Command population writes a population of simulated devices for the
// load test of issue 45 (scripts/population.sh): the users of a dataset
// repeated, under new user IDs, until there are -users of them, as a CSV
// file with a header (userId,movieId,rating,timestamp) that privrec
// reads with --data. Copy c of user u is "c-u" and rates what u rated.
//
//	go run ./scripts/population -data ml-1m -users 100000 -out /tmp/pop.csv
package main

import (
	"bufio"
	"flag"
	"fmt"
	"log"
	"os"
	"strconv"

	"github.com/privrec/privrec/datasets"
	"github.com/privrec/privrec/ratings"
)

func main() {
	data := flag.String("data", "ml-1m", "dataset whose users are repeated (a name under $PRIVREC_DATA, or ml-latest-small)")
	users := flag.Int("users", 100000, "number of users to write")
	out := flag.String("out", "", "CSV file to write")
	flag.Parse()
	if *out == "" || *users < 1 {
		log.Fatal("population: -out and a positive -users are required")
	}
	d, _, err := datasets.Open(*data, ratings.LoadOptions{})
	if err != nil {
		log.Fatal(err)
	}
	byUser := make([][]int, d.NumUsers())
	for k := range d.Values {
		byUser[d.Users[k]] = append(byUser[d.Users[k]], k)
	}
	tmp := *out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		log.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	fmt.Fprintln(w, "userId,movieId,rating,timestamp")
	n := 0
	for c := 0; n < *users; c++ {
		for u := 0; u < len(byUser) && n < *users; u++ {
			if len(byUser[u]) == 0 {
				continue
			}
			id := strconv.Itoa(c) + "-" + d.UserIDs[u]
			for _, k := range byUser[u] {
				fmt.Fprintf(w, "%s,%s,%g,0\n", id, d.ItemIDs[d.Items[k]], d.Values[k])
			}
			n++
		}
	}
	if err := w.Flush(); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
	if err := os.Rename(tmp, *out); err != nil {
		log.Fatal(err)
	}
	log.Printf("population: %d users of %s written to %s", n, *data, *out)
}
