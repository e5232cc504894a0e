// Command prodapi-seed loads a newsroom (by default the bundled sample,
// sources/sandbox/sample) into a real platform, so that prodapi over
// MongoDB, Elasticsearch and object storage answers as `make run` does
// over the sandbox. compose.yaml runs it once, before prodapi starts.
// It also makes a newsroom of any size out of that one (-scale), and
// writes a newsroom as a sandbox directory instead of loading it (-out).
//
// Usage:
//
//	prodapi-seed [-wait 120s] [-data sample|DIR] [-targets mongo,elastic,s3]
//	             [-scale N [-seed 1]] [-out DIR]
//	             [-batch-docs 1000] [-batch-bytes 8388608] [-parallel 4] [-compress]
//	             [-request-timeout 2m] [-progress 5s]
//
// It reads the variables prodapi reads, with the same defaults (config
// package): MONGO_URI, ELASTICSEARCH_URL, ELASTICSEARCH_INDEX and the
// OBJSTORE_* settings. It waits up to -wait for each server, then:
//
//   - MongoDB: every collection of sources.Collections is dropped and, when
//     the newsroom has it, inserted again in batches (unordered
//     insertMany requests, -parallel of them at once), each document as the sandbox
//     decodes it (ObjectIds, datetimes, integers as int32 when they fit);
//     every file of assets/ goes into the GridFS bucket "fs" as
//     Superdesk's GridFS storage wrote it: _id the ObjectId of the file
//     name's 24-hex stem (the stem string otherwise), filename,
//     top-level contentType and md5, uploadDate the time the sandbox
//     reports for the file.
//   - Elasticsearch: for each search collection (archive, contacts, events,
//     planning, assignments) the index <ELASTICSEARCH_INDEX>_<collection> is
//     deleted and created with the settings and mappings of
//     sources/elastic (IndexMappings), then its documents are bulk-indexed
//     in batches as Superdesk indexes them: _id the document's id as a string, _source
//     the document without _id (datetimes as 2006-01-02T15:04:05+0000,
//     ObjectIds as hex) plus _resource, the collection. The batches are
//     made in ascending _id order (a scaled newsroom's copy by copy) and
//     -parallel bulk requests are in flight at once, so documents reach
//     the index in roughly that order (exactly, for a newsroom of one
//     batch an index, as the sample is): Elasticsearch breaks sort ties by
//     it as the sandbox does by file order, where Lucene's merges leave it.
//     The index loads with refresh_interval -1 and number_of_replicas 0
//     and gets the mapping's values back (null, the default, where it
//     sets none) when the indexing ends, however it ends: a failure or
//     an interrupt (the request then has 30 s of its own). Then each index
//     is refreshed and its count checked. Bulk bodies go uncompressed
//     unless -compress: gzip would cost the seed as much CPU again as
//     making the documents, taken from a node on the same machine.
//   - Object storage, when OBJSTORE_CONTAINER_NAME is set: the bucket is
//     created if missing and every assets/ file is put under the key
//     prodapi reads it from (objstore: "<24 hex>.<ext>" is the key
//     "<24 hex>"; other names are themselves), below
//     OBJSTORE_S3_SUBFOLDER, with its content type and the "filename"
//     user metadata.
//
// Documents are read and sent as a stream, so that memory stays bounded
// whatever the newsroom's size: a request carries at most -batch-docs
// documents and -batch-bytes bytes (a larger document goes alone), at
// most -parallel requests are in flight at once (4 by default), and the
// next batch is encoded while they are sent. Each request has its own
// timeout, -request-timeout. A bulk request Elasticsearch finds too
// large is split in two until it passes: a 413 (over
// http.max_content_length, 100 MB by default: about 28,000 sample items)
// or a 429 for memory (a circuit breaker, or indexing pressure: a node
// holds at most 10% of its heap in bulk bodies, 51 MB on a 512 MB heap).
// One it refuses with another 429 (its queues are full), or the
// documents of one it refuses so, go again after a pause (half a second,
// doubling up to 30 s, ten tries in all). Every -progress, each stage
// logs how many documents it has sent and at what rate, and its last
// line gives its duration and rate.
//
// -scale N makes a newsroom of N items out of the one read: copy 0 is
// that newsroom, and each further copy of its items, planning, events,
// assignments and event history has ids of its own (a UUID's last twelve
// digits, or an ObjectId's middle bytes, number the copy), links within
// the copy, unique_ids of its own, and every datetime an hour or so
// earlier than the copy before (a jitter of whole seconds drawn from
// -seed and the copy's number). Desks, users, contacts, content types,
// event files and media are not copied: every copy links to them. The
// last copy holds only the items left to make N, chosen so that linked
// items (a package and its members, a rewrite pair, a story and its
// embedded pictures) come together. The same N and seed give the same
// newsroom, and a smaller N's copies are a larger one's first. Nothing
// is made before it is sent: documents are generated as each stage reads
// them.
//
// -out DIR writes the newsroom (scaled or not) to DIR, which must be
// empty or absent, as <collection>.json files (a JSON array in MongoDB
// Extended JSON, one document a line) and assets/ (each file with the
// time the sandbox reports for it), which PRODAPI_SANDBOX=DIR serves.
// Nothing is loaded then.
//
// Running it again gives the same state. It logs JSON lines to stderr and
// exits 1 on the first failure.
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Getenv, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return // -h: the usage was printed
	}
	if err != nil {
		slog.New(slog.NewJSONHandler(os.Stderr, nil)).Error("seeding failed", "error", err.Error())
		stop()
		os.Exit(1)
	}
}
