// Package progress shows progress bars for long work: a bar with rate and
// ETA when the output is a terminal, nothing otherwise, so logs and pipes
// stay clean.
package progress

import (
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// Bar counts units of work. A nil *Bar is valid and does nothing.
type Bar struct {
	pb *progressbar.ProgressBar
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// New returns a bar for total units (−1 if unknown) described by desc,
// drawn on w if w is a terminal; otherwise it returns nil, a silent bar.
func New(w io.Writer, total int64, desc, unit string) *Bar {
	if !IsTerminal(w) {
		return nil
	}
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString(unit),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(100 * time.Millisecond),
		progressbar.OptionFullWidth(),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionOnCompletion(func() { io.WriteString(w, "\n") }),
	}
	if unit == "B" {
		opts = append(opts, progressbar.OptionShowBytes(true))
	}
	return &Bar{pb: progressbar.NewOptions64(total, opts...)}
}

// Add advances the bar by n units.
func (b *Bar) Add(n int64) {
	if b != nil {
		b.pb.Add64(n)
	}
}

// Set moves the bar to n units done.
func (b *Bar) Set(n int64) {
	if b != nil {
		b.pb.Set64(n)
	}
}

// Describe changes the bar's description, e.g. to show the current loss.
func (b *Bar) Describe(desc string) {
	if b != nil {
		b.pb.Describe(desc)
	}
}

// Finish completes and clears the bar.
func (b *Bar) Finish() {
	if b != nil {
		b.pb.Finish()
	}
}
