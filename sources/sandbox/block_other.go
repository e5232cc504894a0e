//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package sandbox

// newBlock allocates n bytes in the Go heap: the collector counts them.
func newBlock(n int) *block { return &block{mem: make([]byte, n)} }
