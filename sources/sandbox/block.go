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

// blockSize is the size of a block, unless a document needs more;
// firstBlock is a reload's first.
const (
	blockSize  = 64 << 20
	firstBlock = 1 << 20
)

// A blockWriter copies documents' text into blocks, one after another. A
// text, once written, is never written again, and the memory of a block
// is only read through a text, which keeps its block reachable.
type blockWriter struct {
	cur *block
	// hint is how much text is left to come when all of a file's will be
	// written, as in a first load: blocks are sized to it and populated
	// at once. 0: unknown, as in a reload, which writes the documents that
	// changed: blocks start small and double.
	hint int64
}

// put copies b into a block and returns where it is.
func (w *blockWriter) put(b []byte) text {
	if w.cur == nil || len(w.cur.mem)-w.cur.used < len(b) {
		var size int
		switch {
		case w.hint > 0:
			size = int(min(w.hint, blockSize))
		case w.cur == nil:
			size = firstBlock
		default:
			size = min(2*len(w.cur.mem), blockSize)
		}
		w.cur = newBlock(max(size, len(b)), w.hint > 0)
	}
	off := w.cur.used
	w.cur.used += copy(w.cur.mem[off:], b)
	if w.hint > int64(len(b)) {
		w.hint -= int64(len(b))
	}
	return text{blk: w.cur, off: uint32(off), n: uint32(len(b))}
}
