package datasets

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/privrec/privrec/ratings"
)

// Default is the name of the dataset embedded in the binary, used when Open
// is given an empty spec.
const Default = "ml-latest-small"

// DefaultBaseURL is the GroupLens folder the official archives are
// downloaded from.
const DefaultBaseURL = "https://files.grouplens.org/datasets/movielens/"

// Sentinel errors, wrapped with details by the functions of this package.
var (
	// ErrUnknown is returned for a dataset name that is not in the registry
	// (Fetch) or matches nothing (Open, Dir).
	ErrUnknown = errors.New("unknown dataset")
	// ErrNotFound is returned when a known dataset is not available locally.
	ErrNotFound = errors.New("dataset not available locally")
	// ErrChecksum is returned when a downloaded archive does not have the
	// expected SHA-256.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrUnsafeArchive is returned for an archive with a path escaping the
	// target folder, a link, too many entries or too many bytes.
	ErrUnsafeArchive = errors.New("unsafe archive")
)

// Info describes a known dataset.
type Info struct {
	Name        string // "ml-1m"
	Description string // contents in one line
	License     string // a summary of the terms; the archive's README is authoritative
	URL         string // official archive
	Size        int64  // archive size in bytes, 0 if unknown
	SHA256      string // expected archive SHA-256, "" if not pinned (trust on first use)
	Embedded    bool   // compiled into the binary
	Available   bool   // embedded, or found in $PRIVREC_DATA or the fetch cache
	Path        string // local folder when found on disk, else ""
}

// entry is one row of the registry.
type entry struct {
	name    string
	archive string
	desc    string
	license string
	size    int64
	sha256  string
	scale   ratings.Scale
}

const (
	licNoRedist = "GroupLens terms: research use only, no commercial use, no redistribution without permission, cite Harper & Konstan (2015); see the archive's README"
	licRedist   = "GroupLens terms: research use only, no commercial use, redistribution only under the same terms, cite Harper & Konstan (2015); see the archive's README"
	licResearch = "GroupLens terms: research use only, no commercial use, cite Harper & Konstan (2015); see the archive's README for redistribution"
)

// registry lists the official MovieLens archives. The SHA-256 sums and sizes
// are those of the archives as published by GroupLens; they were not
// computed here (no network) but taken from independent public records that
// agree with each other and, where given, with GroupLens's own .md5 files.
// ml-latest changes over time, so it is not pinned: Fetch trusts and records
// the hash it sees first.
var registry = []entry{
	{"ml-100k", "ml-100k.zip", "MovieLens 100K (1998): 100,000 ratings, 943 users, 1,682 movies, 1..5 stars, with the official u1..u5 and ua/ub splits", licNoRedist,
		4924029, "50d2a982c66986937beb9ffb3aa76efe955bf3d5c6b761f4e3a7cd717c6a3229", ratings.Stars5},
	{"ml-1m", "ml-1m.zip", "MovieLens 1M (2003): 1,000,209 ratings, 6,040 users, 3,706 rated movies, 1..5 stars", licNoRedist,
		5917549, "a6898adb50b9ca05aa231689da44c217cb524e7ebd39d264c56e2832f2c54e20", ratings.Stars5},
	{"ml-10m", "ml-10m.zip", "MovieLens 10M (2009): 10,000,054 ratings, 69,878 users, 10,677 rated movies, 0.5..5 half stars", licResearch,
		65566137, "813c411ccb6122564edfe752e7f80c4dcc5aa25fa94c93622f6877a7ba252862", ratings.HalfStars5},
	{"ml-20m", "ml-20m.zip", "MovieLens 20M (2015): 20,000,263 ratings, 138,493 users, 26,744 rated movies, 0.5..5 half stars", licRedist,
		198702078, "96f243c338a8665f6bcc89c53edf6ee39162a846940de6b7c8c48aeada765ff3", ratings.HalfStars5},
	{"ml-25m", "ml-25m.zip", "MovieLens 25M (2019): 25,000,095 ratings, 162,541 users, 0.5..5 half stars", licRedist,
		261978986, "8b21cfb7eb1706b4ec0aac894368d90acf26ebdfb6aced3ebd4ad5bd1eb9c6aa", ratings.HalfStars5},
	{"ml-latest", "ml-latest.zip", "MovieLens latest, full: a development dataset that changes over time (not for shared research results), 0.5..5 half stars", licRedist,
		0, "", ratings.HalfStars5},
	{"ml-latest-small", "ml-latest-small.zip", "MovieLens latest-small (2018): 100,836 ratings, 610 users, 9,724 rated movies, 0.5..5 half stars; embedded in the binary", licRedist,
		978202, "696d65a3dfceac7c45750ad32df2c259311949efec81f0f144fdfb91ebc9e436", ratings.HalfStars5},
}

// published are datasets that privrec cannot download but whose rating
// scale is published with them, found by name under $PRIVREC_DATA: the
// Douban subset of Monti et al. (2017) and the Yelp subset of the HIN
// datasets, both on their sites' 1..5 stars.
var published = map[string]ratings.Scale{
	"douban-monti": ratings.Stars5,
	"yelp-hin":     ratings.Stars5,
}

// DeclaredScale returns the published rating scale of the dataset called
// name, or of a file under it ("douban-monti/ratings_all.tsv",
// "ml-1m/ratings.dat"): a registry dataset's official scale, or a
// published one. It is public knowledge about the dataset, never read
// from its ratings.
func DeclaredScale(name string) (ratings.Scale, bool) {
	first, _, _ := strings.Cut(filepath.ToSlash(name), "/")
	if e, ok := lookup(first); ok {
		return e.scale, true
	}
	s, ok := published[first]
	return s, ok
}

// lookup returns the registry entry of name.
func lookup(name string) (entry, bool) {
	for _, e := range registry {
		if e.name == name {
			return e, true
		}
	}
	return entry{}, false
}

// knownNames returns the registry names, comma-separated.
func knownNames() string {
	s := make([]string, len(registry))
	for i, e := range registry {
		s[i] = e.name
	}
	return strings.Join(s, ", ")
}

// Names lists the known datasets, in registry order, with whether and where
// each is available locally.
func Names() []Info {
	out := make([]Info, 0, len(registry))
	for _, e := range registry {
		inf := Info{
			Name:        e.name,
			Description: e.desc,
			License:     e.license,
			URL:         DefaultBaseURL + e.archive,
			Size:        e.size,
			SHA256:      e.sha256,
			Embedded:    e.name == Default,
		}
		if dir, _ := findDir(e.name); dir != "" {
			inf.Path = dir
		}
		inf.Available = inf.Embedded || inf.Path != ""
		out = append(out, inf)
	}
	return out
}

// Found lists the datasets that Open resolves by a plain name but the
// registry does not know: every folder of $PRIVREC_DATA and every
// completely extracted folder of the fetch cache (the first wins for a
// name in both), by name, each with its Path and, for the datasets whose
// scale is published (DeclaredScale), a Description saying it. Hidden
// folders are left out.
func Found() []Info {
	seen := map[string]bool{}
	for _, e := range registry {
		seen[e.name] = true
	}
	var out []Info
	add := func(root, where string, ok func(string) bool) {
		ents, err := os.ReadDir(root)
		if err != nil {
			return
		}
		for _, ent := range ents {
			name, p := ent.Name(), filepath.Join(root, ent.Name())
			if seen[name] || strings.HasPrefix(name, ".") || !isDir(p) || !ok(p) {
				continue
			}
			seen[name] = true
			desc := "a folder in " + where
			if sc, known := published[name]; known {
				desc += fmt.Sprintf("; published scale %v", sc)
			}
			out = append(out, Info{Name: name, Description: desc, Available: true, Path: p})
		}
	}
	if root := os.Getenv("PRIVREC_DATA"); root != "" {
		add(root, "$PRIVREC_DATA", func(string) bool { return true })
	}
	if cache, err := CacheDir(""); err == nil {
		add(cache, "the fetch cache", complete)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Dir returns the local folder of a named dataset: $PRIVREC_DATA/NAME if it
// exists, else the completely extracted fetch-cache folder NAME. The
// embedded dataset has no folder; Dir reports ErrNotFound for it unless it is
// also on disk. The error lists the places tried.
func Dir(name string) (string, error) {
	if !isPlainName(name) {
		return "", fmt.Errorf("datasets: %q is not a dataset name: %w", name, ErrUnknown)
	}
	dir, tried := findDir(name)
	if dir != "" {
		return dir, nil
	}
	sentinel := ErrNotFound
	if _, ok := lookup(name); !ok {
		sentinel = ErrUnknown
	}
	return "", fmt.Errorf("datasets: no folder for %q (tried %s): %w", name, strings.Join(tried, "; "), sentinel)
}

// findDir looks for the folder of name in $PRIVREC_DATA and the fetch
// cache. It returns "" and a description of each place tried when none
// holds it.
func findDir(name string) (string, []string) {
	var tried []string
	if root := os.Getenv("PRIVREC_DATA"); root != "" {
		p := filepath.Join(root, name)
		if isDir(p) {
			return p, nil
		}
		tried = append(tried, p+" ($PRIVREC_DATA): not found")
	} else {
		tried = append(tried, "$PRIVREC_DATA: not set")
	}
	cache, err := CacheDir("")
	if err != nil {
		tried = append(tried, "fetch cache: "+err.Error())
		return "", tried
	}
	p := filepath.Join(cache, name)
	switch {
	case complete(p):
		return p, nil
	case isDir(p):
		tried = append(tried, p+" (fetch cache): incomplete extraction, fetch it again")
	default:
		tried = append(tried, p+" (fetch cache): not found")
	}
	return "", tried
}

// isPlainName reports whether s can be a dataset name: one path element,
// not "." or "..".
func isPlainName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, `/\`) && filepath.Base(s) == s
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}
