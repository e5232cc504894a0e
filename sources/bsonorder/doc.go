// Package bsonorder is MongoDB's order of document values, which the
// sandbox's MongoDB semantics and the Mongo adapter's cursor walks both
// follow: neither adapter imports the other, and this package imports
// nothing of ours but the vocabulary (package sources).
//
// Values of different types compare by their type's rank (TypeRank), in
// BSON's fixed order:
//
//	[] (in sort keys) < null and missing < numbers < strings < documents
//	< arrays < binary data < ObjectId < booleans < dates < timestamps
//	< regular expressions
//
// and values of one type by Compare: numbers exactly across int64 and
// float64 (NaN first), strings by bytes, documents field by field (type,
// name, value), arrays element by element.
//
// A dotted path reaches values through sub-documents and arrays of
// documents (Reach). A document sorts on a path by its sort key
// (SortKey): the smallest value reached ascending, the largest
// descending, arrays expanded one level; null for a missing field; an
// empty array, when that is all the path reaches, before null. SortDocs
// sorts by the keys then _id (WalkKeys), as MongoDB does with the _id
// tie-break every list sends. A cursor walk stands at the sort keys of
// the last document served (Position), and ComparePosition tells on
// which side of it a document falls.
package bsonorder
