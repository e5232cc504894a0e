package sandbox

// A block is memory that holds documents' text: a few large blocks rather
// than one allocation a document. On Linux (newBlock) the memory comes
// from the operating system, outside the Go heap: the
// garbage collector neither scans it nor counts it when it decides how
// far the heap may grow before the next collection, so a newsroom of
// 1.6 GB of JSON costs 1.6 GB and not twice that. The memory goes back
// to the system when the block is no longer reachable.
type block struct {
	mem  []byte
	used int
}

// blockSize is the size of a block, unless a document needs more.
const blockSize = 64 << 20

// A blockWriter copies documents' text into blocks, one after another.
// Blocks are never written again once a text is in them, but their
// memory is only read through a text, which keeps its block reachable.
type blockWriter struct {
	cur *block
	// hint is how much more text is expected (what is left of the file),
	// so that a block is no larger than it needs to be; 0: unknown.
	hint int64
	// fill is set when all of the hint is expected, as in a first load: a
	// reload's changed documents are fewer.
	fill bool
}

// put copies b into a block and returns where it is.
func (w *blockWriter) put(b []byte) text {
	if w.cur == nil || len(w.cur.mem)-w.cur.used < len(b) {
		size, fill := blockSize, false
		if w.hint > 0 {
			size, fill = int(min(w.hint, blockSize)), w.fill
		}
		w.cur = newBlock(max(size, len(b)), fill)
	}
	off := w.cur.used
	w.cur.used += copy(w.cur.mem[off:], b)
	return text{blk: w.cur, off: uint32(off), n: uint32(len(b))}
}
