// Package mongotest is an in-process MongoDB for tests: a TCP server on
// 127.0.0.1 that speaks enough of the wire protocol for the official Go
// driver (v2) to connect, read and page through cursors, and that records
// every command it receives and can be told to fail.
//
// What it speaks:
//
//   - the handshake: legacy OP_QUERY isMaster (the driver's first
//     message on a connection) and OP_MSG hello/isMaster, as a standalone
//     server with maxWireVersion 21 (MongoDB 7.0), helloOk and sessions;
//     no topologyVersion, so the driver polls instead of streaming;
//   - ping, buildInfo (SetVersion), endSessions;
//   - listIndexes: _id_ on every collection that exists, and the indexes
//     AddIndex declares (indexes.go);
//   - find (filter, sort, skip, limit, batchSize, singleBatch, projection),
//     getMore, killCursors;
//   - aggregate with $match, $sort, $skip, $limit, $project of plain
//     inclusions, $count and $group on a constant _id with {$sum: <n>}
//     accumulators: the pipeline countDocuments sends;
//   - count (query, skip, limit);
//   - anything else is CommandNotFound (59), as a server answers.
//
// Collections hold raw BSON. Filters are evaluated by converting documents
// and the filter to *sources.Doc and calling sandbox.MatchLiteral, sorts
// by bsonorder.SortDocs. So the fake matches as the sandbox's MongoDB
// semantics do, strings literally, as a server does: a 24-hex or
// date-formatted string in a filter matches only strings (the adapter
// writes out the ObjectId or date a client's string stands for). An
// error from MatchLiteral is a BadValue (2) command error.
//
// Faults (see Fault) make chosen commands fail with a command error, hang
// until released, drop the connection or cut a reply in half. Stop and
// Restart make the address refuse connections and accept them again.
package mongotest

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/mongo/internal/bsondoc"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// Database is the database name URI puts in its path.
const Database = "superdesk"

// MaxWireVersion is what the fake reports: MongoDB 7.0.
const MaxWireVersion = 21

// A Server is the fake. Its methods are safe for concurrent use.
type Server struct {
	addr string

	mu        sync.Mutex
	ln        net.Listener // nil while stopped
	conns     map[net.Conn]bool
	colls     map[string][]record
	cursors   map[int64]*cursor
	nextID    int64
	faults    []*Fault
	commands  []Command
	received  chan struct{} // closed and replaced at each command
	log       changeLog     // change streams (changestream.go)
	connCount int32
	replyID   int32

	wg   sync.WaitGroup // connection and accept goroutines
	done chan struct{}  // closed by Close

	// indexes, version and maxWire: listIndexes, buildInfo and the
	// handshake (indexes.go).
	indexes map[string][]Index
	version string
	maxWire int32
}

// A record is one stored document: its BSON and, for matching, its
// conversion.
type record struct {
	raw bsoncore.Document
	doc *sources.Doc
}

// A Command is one command the fake received.
type Command struct {
	Name string       // "find", "getMore", "hello", ...
	DB   string       // $db ("admin" for the legacy handshake)
	Body *sources.Doc // the command as sent, document sequences folded in
	Raw  []byte       // the same, as BSON
}

// Start starts a server seeded with colls (collection name to documents;
// names such as "fs.files" are collections like any other) and stops it
// when the test ends.
func Start(tb testing.TB, colls map[string][]*sources.Doc) *Server {
	tb.Helper()
	s, err := New(colls)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s
}

// New starts a server on 127.0.0.1 and a free port.
func New(colls map[string][]*sources.Doc) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("mongotest: %w", err)
	}
	s := &Server{
		addr:     ln.Addr().String(),
		conns:    map[net.Conn]bool{},
		colls:    map[string][]record{},
		cursors:  map[int64]*cursor{},
		received: make(chan struct{}),
		done:     make(chan struct{}),
		indexes:  map[string][]Index{},
		version:  "7.0.0",
		maxWire:  MaxWireVersion,
	}
	for name, docs := range colls {
		if err := s.Insert(name, docs...); err != nil {
			ln.Close()
			return nil, err
		}
	}
	s.serve(ln)
	return s, nil
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.addr }

// URI is a connection string for the server and Database.
func (s *Server) URI() string { return "mongodb://" + s.addr + "/" + Database }

// Insert appends documents to a collection.
func (s *Server) Insert(coll string, docs ...*sources.Doc) error {
	recs := make([]record, len(docs))
	for i, d := range docs {
		raw, err := bsondoc.FromDoc(d)
		if err != nil {
			return fmt.Errorf("mongotest: insert into %s: %w", coll, err)
		}
		recs[i] = record{raw: raw, doc: d.Clone()}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.colls[coll] = append(s.colls[coll], recs...)
	return nil
}

// InsertRaw appends BSON documents to a collection, for values a
// *sources.Doc cannot hold (binary data).
func (s *Server) InsertRaw(coll string, docs ...[]byte) error {
	recs := make([]record, len(docs))
	for i, raw := range docs {
		d, err := bsondoc.ToDoc(raw)
		if err != nil {
			return fmt.Errorf("mongotest: insert into %s: %w", coll, err)
		}
		recs[i] = record{raw: slices.Clone(raw), doc: d}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.colls[coll] = append(s.colls[coll], recs...)
	return nil
}

// Commands returns the commands received so far, in order, omitting the
// ones named in except (say "hello", "isMaster", "ping", "endSessions" to
// leave out the driver's own traffic).
func (s *Server) Commands(except ...string) []Command {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Command
	for _, c := range s.commands {
		if !slices.Contains(except, c.Name) {
			out = append(out, c)
		}
	}
	return out
}

// Named returns the commands received so far with one of the names.
func (s *Server) Named(names ...string) []Command {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Command
	for _, c := range s.commands {
		if slices.Contains(names, c.Name) {
			out = append(out, c)
		}
	}
	return out
}

// Reset forgets the commands received so far.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commands = nil
}

// OpenCursors reports how many cursors are open, to check that readers
// close theirs.
func (s *Server) OpenCursors() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.cursors)
}

// A Fault makes matching commands misbehave. Set exactly one of the
// behaviours: Code (a command error), Hang, CloseConnection or Truncate.
type Fault struct {
	// Commands names the commands it applies to. Empty means every
	// command except the handshake and monitoring (hello, isMaster,
	// ismaster), which a fault must name to affect.
	Commands []string
	// Times is how often it fires before it is spent; 0 means until
	// ClearFaults.
	Times int

	// Code, CodeName, Message and Labels make the reply
	// {ok: 0, code, codeName, errmsg, errorLabels}.
	Code     int32
	CodeName string
	Message  string
	Labels   []string

	// Hang holds the reply until the channel is closed (then it is sent)
	// or the server closes (then the connection drops).
	Hang <-chan struct{}
	// CloseConnection drops the connection instead of replying.
	CloseConnection bool
	// Truncate sends the first half of the reply, then drops the
	// connection.
	Truncate bool

	fired int
}

// Fail adds a fault. Faults are tried in the order added; the first that
// applies to a command and is not spent decides.
func (s *Server) Fail(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &f)
}

// ClearFaults removes every fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

var handshake = []string{"hello", "isMaster", "ismaster"}

// fault returns the fault to apply to a command, and counts it.
func (s *Server) fault(name string) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.faults {
		applies := slices.Contains(f.Commands, name) ||
			(len(f.Commands) == 0 && !slices.Contains(handshake, name))
		if !applies || (f.Times > 0 && f.fired >= f.Times) {
			continue
		}
		f.fired++
		return f
	}
	return nil
}

// Stop closes the listener and every connection: the address refuses
// connections until Restart.
func (s *Server) Stop() {
	s.mu.Lock()
	ln := s.ln
	s.ln = nil
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
}

// Restart listens again on the same address after Stop.
func (s *Server) Restart() error {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("mongotest: restart: %w", err)
	}
	s.serve(ln)
	return nil
}

// Close stops the server and waits for its goroutines.
func (s *Server) Close() {
	s.mu.Lock()
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	s.mu.Unlock()
	s.Stop()
	s.wg.Wait()
}

func (s *Server) serve(ln net.Listener) {
	s.mu.Lock()
	s.ln = ln
	s.mu.Unlock()
	s.wg.Add(1)
	// Ends when the listener is closed (Stop, Close).
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			if s.ln != ln {
				s.mu.Unlock()
				c.Close()
				return
			}
			s.conns[c] = true
			s.connCount++
			connID := s.connCount
			s.wg.Add(1)
			s.mu.Unlock()
			// Ends when the client hangs up or Stop closes the connection.
			go func() {
				defer s.wg.Done()
				s.handleConn(c, connID)
			}()
		}
	}()
}

func (s *Server) handleConn(c net.Conn, connID int32) {
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	for {
		req, err := readRequest(c)
		if err != nil {
			return
		}
		name := s.record(req)
		var reply bsoncore.Document
		if f := s.fault(name); f != nil {
			switch {
			case f.Hang != nil:
				select {
				case <-f.Hang:
				case <-s.done:
					return
				}
				reply = s.dispatch(name, req, connID)
			case f.CloseConnection:
				return
			case f.Truncate:
				msg := replyMessage(req, s.newReplyID(), s.dispatch(name, req, connID))
				c.Write(msg[:len(msg)/2])
				return
			default:
				reply = commandError(f.Code, f.CodeName, f.Message, f.Labels...)
			}
		} else {
			reply = s.dispatch(name, req, connID)
		}
		if req.noReply {
			continue
		}
		if _, err := c.Write(replyMessage(req, s.newReplyID(), reply)); err != nil {
			return
		}
	}
}

func (s *Server) newReplyID() int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replyID++
	return s.replyID
}

// record notes a command and returns its name.
func (s *Server) record(req *request) string {
	name := ""
	if elems, err := req.cmd.Elements(); err == nil && len(elems) > 0 {
		name = elems[0].Key()
	}
	body, _ := bsondoc.ToDoc(req.cmd)
	db, _ := req.cmd.Lookup("$db").StringValueOK()
	if req.legacyNS != "" {
		db, _, _ = cutDot(req.legacyNS)
	}
	s.mu.Lock()
	s.commands = append(s.commands, Command{Name: name, DB: db, Body: body, Raw: slices.Clone(req.cmd)})
	close(s.received)
	s.received = make(chan struct{})
	s.mu.Unlock()
	return name
}

func cutDot(ns string) (string, string, bool) {
	for i := 0; i < len(ns); i++ {
		if ns[i] == '.' {
			return ns[:i], ns[i+1:], true
		}
	}
	return ns, "", false
}

// WaitCommand blocks until a command named name has been received or ctx
// ends, for tests that must know a request reached the server.
func (s *Server) WaitCommand(ctx context.Context, name string) error {
	for {
		s.mu.Lock()
		seen := slices.ContainsFunc(s.commands, func(c Command) bool { return c.Name == name })
		ch := s.received
		s.mu.Unlock()
		if seen {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}
