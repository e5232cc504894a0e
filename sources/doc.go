// Package sources defines what the server, the cache, the renderer, the
// enricher and the backends agree on: the Resource table, the Query a
// request becomes, the Doc a backend returns, the Representation the
// renderer makes of it (which the cache stores and the server writes), the
// small interfaces backends satisfy, and the errors callers may test for,
// with the one table of what each means (Classify, in errors.go: its kind,
// the HTTP status it is answered with, its label in the backend error
// counter).
// How a Doc is written as JSON is sources/codec's.
//
// It imports nothing from this module and no drivers. The adapters live
// below it (sources/sandbox, sources/mongo, sources/elastic,
// sources/objstore), beside what two of them share (sources/codec,
// sources/grammar, sources/bsonorder).
package sources
