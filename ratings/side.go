package ratings

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// SideSource locates a dataset's side features: the public attributes of
// its items (genres, release year) and the attributes of its users
// (gender, age, occupation), in the files beside the rating file (see
// SideFiles). Load attaches one to a dataset whose folder holds such files
// without reading them; Features reads and checks them on first use, so a
// malformed side file fails only the methods that use side features, with
// a *ParseError naming its file, line and field. Every split and filter of
// the dataset shares the source, and the features are keyed by item and
// user ID.
//
// User attributes are personal data: a method that keeps users' data on
// their devices must not send them (see package fm).
type SideSource struct {
	// ItemFile is the item file (u.item, movies.dat, movies.csv), ItemMap
	// the file mapping the ratings' item IDs to its IDs (item_map.tsv) and
	// UserFile the user file (u.user, users.dat); "" when absent.
	ItemFile, ItemMap, UserFile string
	// Want lists the side files looked for, for errors about a missing one.
	Want []string

	read func(path string) ([]byte, error)
	once sync.Once
	side *Side
	err  error
}

// Side is a dataset's side features, read by SideSource.Features.
type Side struct {
	// Genres is the genre vocabulary in the order the item file defines or
	// first uses it.
	Genres []string
	// Items holds each item's attributes by item ID; nil without an item
	// file. An item of the ratings that the file does not list is absent.
	Items map[string]ItemSide
	// Users holds each user's attributes by user ID; nil without a user
	// file.
	Users map[string]UserSide
}

// Features reads the side files once and returns their features; a
// malformed file is a *ParseError naming it, its line and field.
func (s *SideSource) Features() (*Side, error) {
	s.once.Do(func() { s.side, s.err = s.load() })
	return s.side, s.err
}

// ItemSide is one item's public attributes.
type ItemSide struct {
	// Genres indexes Side.Genres.
	Genres []int16
	// Year is the release year (from the title's "(1995)" or, in u.item,
	// the release date), 0 when unknown.
	Year int
}

// UserSide is one user's attributes.
type UserSide struct {
	// Gender is "M" or "F".
	Gender string
	// Age is the age in years (ML-100K) or the lower end of the ML-1M age
	// bracket (1 for "under 18", 18, 25, 35, 45, 50, 56).
	Age int
	// Occupation is the occupation's name (ML-100K) or code (ML-1M).
	Occupation string
}

// ml100kGenres are the 19 genre flags of u.item, in column order (u.genre).
var ml100kGenres = []string{"unknown", "Action", "Adventure", "Animation", "Children's", "Comedy", "Crime",
	"Documentary", "Drama", "Fantasy", "Film-Noir", "Horror", "Musical", "Mystery", "Romance", "Sci-Fi",
	"Thriller", "War", "Western"}

// SideFiles returns the side files Load reads for a rating file of format
// f: the item file (u.item, movies.dat, movies.csv), the item map that
// turns the rating file's item IDs into the item file's (item_map.tsv
// beside the shared ML-1M ratings_uir_dense.tsv, else "") and the user
// file (u.user, users.dat). want lists the names looked for, for an
// error about a missing file; a path is "" when the file is absent.
func SideFiles(ratingFile string, f Format) (items, itemMap, users string, want []string) {
	dir := filepath.Dir(ratingFile)
	switch f {
	case FormatML100K:
		return existing(dir, "u.item"), "", existing(dir, "u.user"), []string{"u.item", "u.user"}
	case FormatML1M:
		return existing(dir, "movies.dat"), "", existing(dir, "users.dat"), []string{"movies.dat", "users.dat"}
	case FormatMLCSV:
		return existing(dir, "movies.csv"), "", "", []string{"movies.csv"}
	case FormatDelimited:
		m, t := existing(dir, "item_map.tsv"), existing(dir, "movies.dat")
		if m == "" || t == "" {
			t = ""
		}
		return t, m, existing(dir, "users.dat"), []string{"item_map.tsv", "movies.dat", "users.dat"}
	}
	return "", "", "", nil
}

// sideSource returns the side source of a rating file, or nil when none
// of its side files exists.
func sideSource(ratingFile string, f Format) *SideSource {
	items, itemMap, users, want := SideFiles(ratingFile, f)
	if items == "" && users == "" {
		return nil
	}
	return &SideSource{ItemFile: items, ItemMap: itemMap, UserFile: users, Want: want, read: readAll}
}

// load reads the files of s.
func (s *SideSource) load() (*Side, error) {
	out := &Side{}
	onBad := func(pe *ParseError) error { return pe }
	if s.ItemFile != "" {
		data, err := s.read(s.ItemFile)
		if err != nil {
			return nil, err
		}
		if err := out.parseItems(decodeText(data), s.ItemFile, onBad); err != nil {
			return nil, err
		}
		if s.ItemMap != "" {
			mdata, err := s.read(s.ItemMap)
			if err != nil {
				return nil, err
			}
			m, err := parseItemMap(mdata, s.ItemMap, onBad)
			if err != nil {
				return nil, err
			}
			byDense := make(map[string]ItemSide, len(m))
			for dense, movie := range m {
				if it, ok := out.Items[movie]; ok {
					byDense[dense] = it
				}
			}
			out.Items = byDense
		}
	}
	if s.UserFile != "" {
		data, err := s.read(s.UserFile)
		if err != nil {
			return nil, err
		}
		sep := "::"
		if strings.HasPrefix(filepath.Base(s.UserFile), "u.user") {
			sep = "|"
		}
		if err := out.parseUsers(decodeText(data), s.UserFile, sep, onBad); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// StaticSide returns a side source that yields s, for datasets built in
// memory.
func StaticSide(s *Side) *SideSource {
	src := &SideSource{side: s}
	src.once.Do(func() {})
	return src
}

// ItemSideSource returns a side source of item attributes read from a
// movies.csv (movieId,title,genres) by read; name names it in errors. It
// is for datasets read from a stream, such as the embedded
// ml-latest-small.
func ItemSideSource(name string, read func() ([]byte, error)) *SideSource {
	return &SideSource{ItemFile: name, Want: []string{"movies.csv"}, read: func(string) ([]byte, error) { return read() }}
}

// genre returns the index of genre name, adding it to the vocabulary.
func (s *Side) genre(name string) int16 {
	for k, g := range s.Genres {
		if g == name {
			return int16(k)
		}
	}
	s.Genres = append(s.Genres, name)
	return int16(len(s.Genres) - 1)
}

// parseItems parses u.item, movies.dat or movies.csv by the file's base
// name into s.Items.
func (s *Side) parseItems(text, file string, onBad func(*ParseError) error) error {
	s.Items = make(map[string]ItemSide)
	base := filepath.Base(strings.TrimSuffix(file, ".gz"))
	if strings.HasSuffix(base, ".csv") {
		base = "movies.csv"
	}
	bad := func(n int, field, format string, args ...any) error {
		return onBad(&ParseError{File: file, Line: n, Field: field, Err: fmt.Errorf(format+": %w", append(args, ErrSyntax)...)})
	}
	switch {
	case strings.HasPrefix(base, "u.item"):
		s.Genres = append([]string(nil), ml100kGenres...)
		return eachLine(text, func(n int, line string) error {
			fs := strings.Split(line, "|")
			if len(fs) != 5+len(ml100kGenres) || strings.TrimSpace(fs[0]) == "" {
				return bad(n, "", "%d fields, want 24: id|title|release date|video date|url|19 genre flags", len(fs))
			}
			it := ItemSide{Year: titleYear(fs[1])}
			if y, ok := dateYear(fs[2]); ok {
				it.Year = y
			} else if strings.TrimSpace(fs[2]) != "" {
				return bad(n, "release date", "%q is not dd-Mon-yyyy", fs[2])
			}
			for g, flag := range fs[5:] {
				switch strings.TrimSpace(flag) {
				case "1":
					it.Genres = append(it.Genres, int16(g))
				case "0":
				default:
					return bad(n, "genre", "flag %d (%s) is %q, want 0 or 1", g+1, ml100kGenres[g], flag)
				}
			}
			s.Items[strings.TrimSpace(fs[0])] = it
			return nil
		})
	case strings.HasPrefix(base, "movies.dat"):
		return eachLine(text, func(n int, line string) error {
			fs := strings.Split(line, "::")
			if len(fs) != 3 || strings.TrimSpace(fs[0]) == "" {
				return bad(n, "", "%d fields, want MovieID::Title::Genres", len(fs))
			}
			s.Items[strings.TrimSpace(fs[0])] = ItemSide{Year: titleYear(fs[1]), Genres: s.genres(fs[2])}
			return nil
		})
	default: // movies.csv
		return eachLine(text, func(n int, line string) error {
			if n == 1 && strings.HasPrefix(strings.ToLower(line), "movieid,") {
				return nil
			}
			id, rest, ok := strings.Cut(line, ",")
			k := strings.LastIndexByte(rest, ',')
			if !ok || k < 0 || strings.TrimSpace(id) == "" {
				return bad(n, "title", "want movieId,title,genres")
			}
			title, genres := strings.Trim(rest[:k], `"`), rest[k+1:]
			s.Items[strings.TrimSpace(id)] = ItemSide{Year: titleYear(title), Genres: s.genres(genres)}
			return nil
		})
	}
}

// genres parses a "|"-separated genre list; "(no genres listed)" is none.
func (s *Side) genres(list string) []int16 {
	var out []int16
	for _, g := range strings.Split(strings.TrimSpace(list), "|") {
		if g = strings.TrimSpace(g); g != "" && g != "(no genres listed)" {
			out = append(out, s.genre(g))
		}
	}
	return out
}

// parseUsers parses users.dat (UserID::Gender::Age::Occupation::Zip) or
// u.user (id|age|gender|occupation|zip) into s.Users.
func (s *Side) parseUsers(text, file, sep string, onBad func(*ParseError) error) error {
	s.Users = make(map[string]UserSide)
	bad := func(n int, field, format string, args ...any) error {
		return onBad(&ParseError{File: file, Line: n, Field: field, Err: fmt.Errorf(format+": %w", append(args, ErrSyntax)...)})
	}
	return eachLine(text, func(n int, line string) error {
		fs := strings.Split(line, sep)
		if len(fs) != 5 || strings.TrimSpace(fs[0]) == "" {
			if sep == "|" {
				return bad(n, "", "%d fields, want id|age|gender|occupation|zip", len(fs))
			}
			return bad(n, "", "%d fields, want UserID::Gender::Age::Occupation::Zip", len(fs))
		}
		gender, age := fs[1], fs[2]
		if sep == "|" {
			gender, age = fs[2], fs[1]
		}
		gender = strings.TrimSpace(gender)
		if gender != "M" && gender != "F" {
			return bad(n, "gender", "%q, want M or F", gender)
		}
		a, err := strconv.Atoi(strings.TrimSpace(age))
		if err != nil || a < 0 || a > 150 {
			return bad(n, "age", "%q is not an age", age)
		}
		occ := strings.TrimSpace(fs[3])
		if occ == "" {
			return bad(n, "occupation", "empty")
		}
		s.Users[strings.TrimSpace(fs[0])] = UserSide{Gender: gender, Age: a, Occupation: occ}
		return nil
	})
}

// titleYear returns the year of a title ending in "(1995)" (possibly
// followed by spaces), or 0.
func titleYear(title string) int {
	t := strings.TrimSpace(title)
	if len(t) < 6 || t[len(t)-1] != ')' || t[len(t)-6] != '(' {
		return 0
	}
	y, err := strconv.Atoi(t[len(t)-5 : len(t)-1])
	if err != nil || y < 1800 || y > 2100 {
		return 0
	}
	return y
}

// dateYear returns the year of a u.item date "01-Jan-1995".
func dateYear(date string) (int, bool) {
	d := strings.TrimSpace(date)
	k := strings.LastIndexByte(d, '-')
	if k < 0 {
		return 0, false
	}
	y, err := strconv.Atoi(d[k+1:])
	if err != nil || y < 1800 || y > 2100 {
		return 0, false
	}
	return y, true
}
