package sandbox

import (
	"runtime"
	"syscall"
)

// newBlock maps n bytes of anonymous memory, unmapped when the block is
// unreachable. Pages never written cost nothing; fill, when the block
// will be filled, has the system provide them all at once, cheaper than
// one fault a page.
func newBlock(n int, fill bool) *block {
	flags := syscall.MAP_ANON | syscall.MAP_PRIVATE
	if fill {
		flags |= syscall.MAP_POPULATE
	}
	mem, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, flags)
	if err != nil {
		return &block{mem: make([]byte, n)} // in the heap, then
	}
	b := &block{mem: mem}
	runtime.AddCleanup(b, func(mem []byte) { _ = syscall.Munmap(mem) }, mem)
	return b
}
