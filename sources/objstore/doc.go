// Package objstore serves media from S3-compatible object storage (AWS
// S3, MinIO, Ceph, R2) for GET /prodapi/v1/assets/<media_id>: a Store
// finds the object and answers with a presigned GET URL the server
// redirects to (302), so media bytes never pass through prodapi. The
// original read the whole object into memory and served it itself; a
// redirect keeps large files off our heap and lets S3 handle ranges and
// conditional requests.
//
// # Keys
//
// The media id becomes a key as the original's Amazon storage made it
// (superdesk-core's get_by_filename, get and get_key):
//
//   - an id matching ^([a-f0-9]{24})\.[a-z]{3,4} (lower case, anchored at
//     the start only) names the bare 24-hex key: "5d553c333031e2855a2e5662.jpg"
//     is key "5d553c333031e2855a2e5662", the extension ignored;
//   - any other id is the key itself, less the 15 characters the original
//     strips (backslash, { ^ } % ` ] > [ ~ < # | ' "): the S3-style id
//     "20240115120112/photo.jpg" is key "20240115120112/photo.jpg";
//   - with OBJSTORE_S3_SUBFOLDER set, the key is "<subfolder>/<key>".
//
// Ids no object can have are not found without asking S3: empty after
// stripping, not printable ASCII (the original transliterated with
// unidecode; the router refuses such ids before us), a "." or ".." path
// segment, or a key longer than S3's 1024 bytes.
//
// # Requests
//
// Asset makes one HeadObject (for the size, type, ETag, date and the
// "filename" user metadata Superdesk writes) and presigns a GetObject
// locally; it counts one query,
// prodapi_source_queries_total{backend="s3",resource="assets",op="asset"},
// and a failure one in prodapi_source_errors_total{backend="s3",
// resource="assets",kind} (see sources.FailureKind).
// HeadObject answers a missing bucket with the same bodiless 404 as a
// missing object, so a 404 is followed by a HeadBucket, remembered for a
// minute when the bucket exists: a flood of unknown ids costs one request
// each. Everything, retries included (one, after at most 200 ms), runs
// within Options.Timeout. Ping (a HeadBucket, not counted) is for
// `prodapi check`.
//
// Errors, all wrapping a sources sentinel and carrying S3's detail only
// as text, for the logs:
//
//	object missing (404, bucket present)              sources.ErrNotFound
//	Options.Timeout passed, network timeout           sources.ErrTimeout
//	403 (denied, bad keys), bucket missing, 301
//	(wrong region), 5xx, refused connection, no
//	credentials in the default chain                   sources.ErrUnavailable
//	the caller's ctx done                              ctx.Err()
//
// # The URL
//
// SigV4 query-signed, path-style when OBJSTORE_ENDPOINT_URL is set
// (http://minio:9000/<bucket>/<key>?X-Amz-...), signed at Options.Now and
// valid for Options.URLLifetime (default 15 minutes, at most 7 days), or
// until the signing credentials expire when they are temporary (a role,
// web identity), whichever comes first. Asset.Expires is when it stops
// working, and a cache must keep the redirect for less than that (config refuses PRODAPI_CACHE_TTL_ASSETS ≥
// PRODAPI_ASSET_URL_LIFETIME). Only the host header is signed, so any
// client can follow it. Objects whose type is not image/* (SVG excepted),
// audio/* or video/* are presigned with response-content-disposition
// "attachment; filename=<base name>", so HTML, SVG or script uploaded to
// the newsroom is downloaded, never rendered on the storage origin;
// images, audio and video keep S3's own headers and display inline. ETag values are passed on as Asset.MD5
// without their quotes, as the original did (multipart uploads have
// ETags that are not an MD5).
//
// # Deployment
//
//   - Clients follow the URL, so OBJSTORE_ENDPOINT_URL must be an address
//     both prodapi and API clients can reach (not a compose-internal host
//     name); the signature covers the host, so it cannot be rewritten.
//   - The credentials need s3:GetObject and s3:ListBucket on the bucket.
//     Without ListBucket, S3 answers a missing key with 403, which is
//     reported as unavailable (503) rather than not found.
//   - NewClient is the only code that reads AWS configuration: static keys
//     when OBJSTORE_ACCESS_KEY_ID is set, otherwise the SDK's default chain
//     (environment, shared files, web identity, container and instance
//     roles).
package objstore
