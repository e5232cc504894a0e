//lint:file-ignore SA1019 driver v2 still opens every connection with a legacy OP_QUERY isMaster; a faithful fake must read it and answer with OP_REPLY.

package mongotest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/wiremessage"
)

// maxMessage bounds what the fake reads (MongoDB's own limit is 48 MB).
const maxMessage = 48_000_000

// A request is one decoded client message.
type request struct {
	id       int32
	opCode   wiremessage.OpCode
	cmd      bsoncore.Document // the command, document sequences folded in
	noReply  bool              // OP_MSG moreToCome: the client wants no answer
	legacyNS string            // OP_QUERY's namespace ("admin.$cmd")
}

var errProtocol = errors.New("mongotest: protocol error")

// readRequest reads one message from r.
func readRequest(r io.Reader) (*request, error) {
	var hdr [16]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	length, id, _, op, _, ok := wiremessage.ReadHeader(hdr[:])
	if !ok || length < 16 || length > maxMessage {
		return nil, fmt.Errorf("%w: message length %d", errProtocol, length)
	}
	body := make([]byte, length-16)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	req := &request{id: id, opCode: op}
	switch op {
	case wiremessage.OpMsg:
		return req, req.parseMsg(body)
	case wiremessage.OpQuery:
		return req, req.parseQuery(body)
	}
	return nil, fmt.Errorf("%w: unsupported opcode %v", errProtocol, op)
}

func (req *request) parseMsg(b []byte) error {
	flags, b, ok := wiremessage.ReadMsgFlags(b)
	if !ok {
		return errProtocol
	}
	if flags&wiremessage.ChecksumPresent != 0 {
		if len(b) < 4 {
			return errProtocol
		}
		b = b[:len(b)-4]
	}
	req.noReply = flags&wiremessage.MoreToCome != 0
	var (
		body bsoncore.Document
		seqs []sequence
	)
	for len(b) > 0 {
		stype, rest, ok := wiremessage.ReadMsgSectionType(b)
		if !ok {
			return errProtocol
		}
		switch stype {
		case wiremessage.SingleDocument:
			body, rest, ok = wiremessage.ReadMsgSectionSingleDocument(rest)
		case wiremessage.DocumentSequence:
			var s sequence
			s.id, s.docs, rest, ok = wiremessage.ReadMsgSectionDocumentSequence(rest)
			seqs = append(seqs, s)
		default:
			ok = false
		}
		if !ok {
			return errProtocol
		}
		b = rest
	}
	if body == nil {
		return fmt.Errorf("%w: OP_MSG without a body", errProtocol)
	}
	req.cmd = foldSequences(body, seqs)
	return nil
}

type sequence struct {
	id   string
	docs []bsoncore.Document
}

// foldSequences adds each document sequence to the body as an array, as
// the server does before it dispatches a command.
func foldSequences(body bsoncore.Document, seqs []sequence) bsoncore.Document {
	if len(seqs) == 0 {
		return body
	}
	idx, out := bsoncore.AppendDocumentStart(nil)
	elems, _ := body.Elements()
	for _, e := range elems {
		out = append(out, e...)
	}
	for _, s := range seqs {
		aidx, o := bsoncore.AppendArrayElementStart(out, s.id)
		for i, d := range s.docs {
			o = bsoncore.AppendDocumentElement(o, fmt.Sprint(i), d)
		}
		out, _ = bsoncore.AppendArrayEnd(o, aidx)
	}
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return out
}

func (req *request) parseQuery(b []byte) error {
	_, b, ok := wiremessage.ReadQueryFlags(b)
	if !ok {
		return errProtocol
	}
	if req.legacyNS, b, ok = wiremessage.ReadQueryFullCollectionName(b); !ok {
		return errProtocol
	}
	if _, b, ok = wiremessage.ReadQueryNumberToSkip(b); !ok {
		return errProtocol
	}
	if _, b, ok = wiremessage.ReadQueryNumberToReturn(b); !ok {
		return errProtocol
	}
	q, _, ok := wiremessage.ReadQueryQuery(b)
	if !ok {
		return errProtocol
	}
	// A command with a read preference comes wrapped: {$query: cmd, ...}.
	if inner, ok := q.Lookup("$query").DocumentOK(); ok {
		q = inner
	}
	req.cmd = q
	return nil
}

// replyMessage encodes doc as the answer to req: OP_REPLY for OP_QUERY,
// OP_MSG otherwise.
func replyMessage(req *request, id int32, doc bsoncore.Document) []byte {
	if req.opCode == wiremessage.OpQuery {
		idx, b := wiremessage.AppendHeaderStart(nil, id, req.id, wiremessage.OpReply)
		b = wiremessage.AppendReplyFlags(b, 0)
		b = wiremessage.AppendReplyCursorID(b, 0)
		b = wiremessage.AppendReplyStartingFrom(b, 0)
		b = wiremessage.AppendReplyNumberReturned(b, 1)
		b = append(b, doc...)
		return bsoncore.UpdateLength(b, idx, int32(len(b[idx:])))
	}
	idx, b := wiremessage.AppendHeaderStart(nil, id, req.id, wiremessage.OpMsg)
	b = wiremessage.AppendMsgFlags(b, 0)
	b = wiremessage.AppendMsgSectionType(b, wiremessage.SingleDocument)
	b = append(b, doc...)
	binary.LittleEndian.PutUint32(b[idx:], uint32(len(b[idx:])))
	return b
}
