package experiment_test

import (
	"context"
	"fmt"
	"os"

	"github.com/privrec/privrec/experiment"
)

// Run a small spec on the embedded dataset; a second run reuses every
// stored cell.
func Example() {
	spec, err := experiment.Parse([]byte(`
name: example
datasets: [ml-latest-small]
split: random:0.9
seeds: 1
methods:
  - {name: itemavg}
  - {name: mf, params: {epochs: 2}}
`), "example.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	dir, _ := os.MkdirTemp("", "experiment")
	defer os.RemoveAll(dir)
	for range 2 {
		o, err := experiment.Run(context.Background(), spec, experiment.Options{Out: dir})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("computed", o.Computed, "reused", o.Reused)
	}
	// Output:
	// computed 3 reused 0
	// computed 0 reused 3
}
