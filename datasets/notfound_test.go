package datasets

import (
	"errors"
	"strings"
	"testing"

	"github.com/privrec/privrec/ratings"
)

// TestNotFoundSaysTheCommand: a known dataset that is not on this
// machine is refused with the command that downloads it (before: "download
// it with Fetch", a Go function a user of the command cannot call).
func TestNotFoundSaysTheCommand(t *testing.T) {
	t.Setenv("PRIVREC_DATA", t.TempDir())
	t.Setenv("PRIVREC_CACHE", t.TempDir())
	t.Chdir(t.TempDir())
	_, _, err := Open("ml-10m", ratings.LoadOptions{})
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("Open: %v, want ErrNotFound", err)
	}
	for _, want := range []string{"ml-10m is not available locally", "`privrec data fetch ml-10m`", "PRIVREC_DATA"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q lacks %q", err, want)
		}
	}
}
