// Package datasets finds rating datasets by name and opens them.
//
// A dataset is named three ways. ml-latest-small (MovieLens, GroupLens;
// its license allows redistribution) is embedded in the binary with its
// README and movie file, so every command and test has data on a fresh
// machine (EmbeddedFile, Open("ml-latest-small")). The other MovieLens
// sets (ml-100k, ml-1m, ml-10m, ...) may not be copied into the project:
// Open looks for them under $PRIVREC_DATA and the download cache (Dir,
// Found), and Fetch downloads one from GroupLens into the cache, checking
// the archive's SHA-256 against the registry (Names lists the sets it
// knows, with their sizes and published rating scales, DeclaredScale). A
// path to a file or folder is read as it is (ratings.Load detects the
// format).
//
// A dataset's rating scale is public: the registry's published scale, or
// one declared by the caller; a private method refuses a scale read off
// the ratings themselves (ratings.Scale.Inferred), since a privacy
// parameter must not come from the private data.
package datasets
