package ratings

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// titleFile returns the path of the title file for a rating file of format
// f, and whether it goes through an item map. "" if there is none.
func titleFile(ratingFile string, f Format) (path, itemMap string) {
	dir := filepath.Dir(ratingFile)
	switch f {
	case FormatML100K:
		return existing(dir, "u.item"), ""
	case FormatML1M:
		return existing(dir, "movies.dat"), ""
	case FormatMLCSV:
		return existing(dir, "movies.csv"), ""
	case FormatNetflix:
		for _, d := range []string{dir, filepath.Dir(dir)} {
			if p := existing(d, "movie_titles.txt"); p != "" {
				return p, ""
			}
		}
	case FormatDelimited:
		m, t := existing(dir, "item_map.tsv"), existing(dir, "movies.dat")
		if m != "" && t != "" {
			return t, m
		}
	}
	return "", ""
}

// loadTitles returns the item titles by item ID for a rating file, or nil.
// With catalog, the titles of an item map's movies that the map does not
// name are added under the ID "movie:MovieID".
func loadTitles(ratingFile string, f Format, skipBad bool, l *loader, catalog bool) (map[string]string, error) {
	path, mapPath := titleFile(ratingFile, f)
	if path == "" {
		return nil, nil
	}
	data, err := readAll(path)
	if err != nil {
		return nil, err
	}
	var onBad func(*ParseError) error
	onBad = func(pe *ParseError) error {
		if !skipBad {
			return pe
		}
		l.rep.Lines++
		l.rep.Skipped++
		if len(l.rep.Examples) < maxExamples {
			l.rep.Examples = append(l.rep.Examples, pe)
		}
		return nil
	}
	var titles map[string]string
	switch filepath.Base(strings.TrimSuffix(path, ".gz")) {
	case "u.item":
		titles, err = parseTitles(data, path, "|", onBad)
	case "movies.dat":
		titles, err = parseTitles(data, path, "::", onBad)
	case "movies.csv":
		titles, err = parseMoviesCSV(data, path, onBad)
	case "movie_titles.txt":
		titles, err = parseNetflixTitles(data, path, onBad)
	}
	if err != nil || mapPath == "" {
		return titles, err
	}
	mdata, err := readAll(mapPath)
	if err != nil {
		return nil, err
	}
	m, err := parseItemMap(mdata, mapPath, onBad)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(m))
	mapped := make(map[string]bool, len(m))
	for dense, movie := range m {
		out[dense] = titles[movie]
		mapped[movie] = true
	}
	if catalog {
		for movie, t := range titles {
			if !mapped[movie] {
				out["movie:"+movie] = t
			}
		}
	}
	return out, nil
}

// readAll reads a whole file, undoing gzip.
func readAll(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("ratings: %w", err)
	}
	if len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b {
		gz, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, &ParseError{File: path, Err: fmt.Errorf("gzip: %v: %w", err, ErrFormat)}
		}
		data, err = io.ReadAll(gz)
		if err != nil {
			return nil, &ParseError{File: path, Err: fmt.Errorf("gzip: %v: %w", err, ErrFormat)}
		}
	}
	return data, nil
}

// decodeText returns data as a string: as is if it is valid UTF-8, else
// decoded from ISO-8859-1 (each byte is the rune of the same value), the
// encoding of u.item and the ML-1M movies.dat.
func decodeText(data []byte) string {
	ascii := true
	for _, c := range data {
		if c >= 0x80 {
			ascii = false
			break
		}
	}
	if ascii || utf8.Valid(data) {
		return string(data)
	}
	r := make([]rune, len(data))
	for i, c := range data {
		r[i] = rune(c)
	}
	return string(r)
}

// eachLine calls fn with each non-blank line of s and its 1-based number.
func eachLine(s string, fn func(n int, line string) error) error {
	n := 0
	for len(s) > 0 {
		n++
		i := strings.IndexByte(s, '\n')
		var line string
		if i < 0 {
			line, s = s, ""
		} else {
			line, s = s[:i], s[i+1:]
		}
		line = strings.TrimSuffix(line, "\r")
		if n == 1 {
			line = strings.TrimPrefix(line, "\ufeff")
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		if err := fn(n, line); err != nil {
			return err
		}
	}
	return nil
}

// parseTitles parses "ID<sep>Title<sep>..." lines (u.item, movies.dat). The
// first title of an ID wins.
func parseTitles(data []byte, file, sep string, onBad func(*ParseError) error) (map[string]string, error) {
	titles := make(map[string]string)
	err := eachLine(decodeText(data), func(n int, line string) error {
		id, rest, ok := strings.Cut(line, sep)
		id = strings.TrimSpace(id)
		if !ok || id == "" {
			return onBad(&ParseError{File: file, Line: n, Field: "title", Err: fmt.Errorf("want ID%sTitle: %w", sep, ErrSyntax)})
		}
		title, _, _ := strings.Cut(rest, sep)
		if _, seen := titles[id]; !seen {
			titles[id] = title
		}
		return nil
	})
	return titles, err
}

// parseNetflixTitles parses movie_titles.txt: "MovieID,Year,Title", where
// the title may contain commas.
func parseNetflixTitles(data []byte, file string, onBad func(*ParseError) error) (map[string]string, error) {
	titles := make(map[string]string)
	err := eachLine(decodeText(data), func(n int, line string) error {
		id, rest, ok1 := strings.Cut(line, ",")
		_, title, ok2 := strings.Cut(rest, ",")
		id = strings.TrimSpace(id)
		if !ok1 || !ok2 || id == "" {
			return onBad(&ParseError{File: file, Line: n, Field: "title", Err: fmt.Errorf("want MovieID,Year,Title: %w", ErrSyntax)})
		}
		if _, seen := titles[id]; !seen {
			titles[id] = title
		}
		return nil
	})
	return titles, err
}

// parseMoviesCSV parses movies.csv: header "movieId,title,genres", fields
// quoted as in RFC 4180 when they hold commas.
func parseMoviesCSV(data []byte, file string, onBad func(*ParseError) error) (map[string]string, error) {
	titles := make(map[string]string)
	err := eachLine(decodeText(data), func(n int, line string) error {
		if n == 1 && strings.HasPrefix(strings.ToLower(line), "movieid,") {
			return nil
		}
		id, rest, ok := strings.Cut(line, ",")
		id = strings.TrimSpace(id)
		if !ok || id == "" {
			return onBad(&ParseError{File: file, Line: n, Field: "title", Err: fmt.Errorf("want movieId,title,genres: %w", ErrSyntax)})
		}
		var title string
		if strings.HasPrefix(rest, `"`) {
			// Quoted: runs to the first quote not doubled.
			var sb strings.Builder
			i := 1
			closed := false
			for i < len(rest) {
				if rest[i] == '"' {
					if i+1 < len(rest) && rest[i+1] == '"' {
						sb.WriteByte('"')
						i += 2
						continue
					}
					closed = true
					break
				}
				sb.WriteByte(rest[i])
				i++
			}
			if !closed {
				return onBad(&ParseError{File: file, Line: n, Field: "title", Err: fmt.Errorf("unterminated quote: %w", ErrSyntax)})
			}
			title = sb.String()
		} else {
			title, _, _ = strings.Cut(rest, ",")
		}
		if _, seen := titles[id]; !seen {
			titles[id] = title
		}
		return nil
	})
	return titles, err
}

// parseItemMap parses item_map.tsv (header "item_idx movie_id note"): dense
// item ID to original MovieID. Rows with an empty movie_id (ambiguous
// items) map to "", which has no title.
func parseItemMap(data []byte, file string, onBad func(*ParseError) error) (map[string]string, error) {
	m := make(map[string]string)
	err := eachLine(decodeText(data), func(n int, line string) error {
		fs := strings.Split(line, "\t")
		if n == 1 && !isDigits([]byte(strings.TrimSpace(fs[0]))) {
			return nil // header
		}
		if len(fs) < 2 || strings.TrimSpace(fs[0]) == "" {
			return onBad(&ParseError{File: file, Line: n, Err: fmt.Errorf("want item TAB movie_id: %w", ErrSyntax)})
		}
		m[strings.TrimSpace(fs[0])] = strings.TrimSpace(fs[1])
		return nil
	})
	return m, err
}
