//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package sandbox

import (
	"runtime"
	"syscall"
)

// newBlock maps n bytes of anonymous memory, unmapped when the block is
// unreachable. Pages never written cost nothing.
func newBlock(n int) *block {
	mem, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return &block{mem: make([]byte, n)} // in the heap, then
	}
	b := &block{mem: mem}
	runtime.AddCleanup(b, func(mem []byte) { _ = syscall.Munmap(mem) }, mem)
	return b
}
