//go:build !amd64 || purego

package secagg

// addWords adds (or subtracts) w into d modulo 2^32; len(w) >= len(d).
func addWords(d, w []uint32, sub bool) { addWordsGo(d, w, sub) }
