//go:build !purego

package vec

import "golang.org/x/sys/cpu"

// best is the fastest level this CPU supports.
var best = func() Level {
	x := cpu.X86
	switch {
	case x.HasAVX512F && x.HasAVX512DQ && x.HasAVX2 && x.HasFMA:
		return AVX512
	case x.HasAVX2 && x.HasFMA:
		return AVX2
	}
	return Generic
}()
