//go:build !unix

package deploy

// processUsage is not measured on this system: it returns zeros.
func processUsage() (cpu float64, rss, peak int64) { return 0, 0, 0 }
