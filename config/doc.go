// Package config loads the service's configuration from environment
// variables, in one place, with the original's defaults where it had the
// setting, and reports every problem at once. Secrets never print.
//
// Variables (the README has the same table with explanations):
//
//	PORT                        5500        listen port
//	PRODAPI_URL                 http://localhost:$PORT   public base URL (builds MEDIA_PREFIX)
//	PRODAPI_URL_PREFIX          prodapi     the API is served at /<prefix>/v1
//	MEDIA_PREFIX                $PRODAPI_URL/<prefix>/v1/assets   base of rendition hrefs
//	AUTH_SERVER_SHARED_SECRET   (none)      HS256 key of Superdesk's auth server; required with auth on
//	PRODAPI_AUTH_ENABLED        true        strtobool spellings; anything else is an error
//	AUTH_LEEWAY                 0s          clock skew allowed on exp/nbf (at most 1m)
//	PRODAPI_AUDIENCE            (none)      tokens carrying aud must name it
//	DEBUG                       false       debug-level logs
//	SUPERDESK_TESTING           false       accepted for compatibility; no effect
//	PRODAPI_SANDBOX             (none)      "sample" or a directory of <collection>.json: no servers needed
//	PRODAPI_SANDBOX_LATENCY     0s          delay every sandbox query (to model a real backend)
//	MONGO_URI                   mongodb://localhost/superdesk
//	PRODAPI_MONGO_MAX_POOL      100
//	ELASTICSEARCH_URL           http://localhost:9200
//	ELASTICSEARCH_INDEX         superdesk   index prefix: superdesk_archive, ...
//	PRODAPI_BACKEND_TIMEOUT     5s          per backend operation
//	OBJSTORE_ACCESS_KEY_ID, OBJSTORE_SECRET_ACCESS_KEY, OBJSTORE_REGION (us-east-1),
//	OBJSTORE_CONTAINER_NAME (enables object storage), OBJSTORE_S3_SUBFOLDER,
//	OBJSTORE_OBJECT_ACL (writes only: unused), OBJSTORE_ENDPOINT_URL (MinIO and other S3-compatibles)
//	PRODAPI_ASSET_URL_LIFETIME  15m         presigned URL lifetime
//	REDIS_URL                   (none)      shared cache; unset: in-process tier only
//	PRODAPI_CACHE_TTL           10s lists, 60s details (5m desks, users)   freshness of every entry
//	PRODAPI_CACHE_TTL_<RESOURCE>            freshness of one resource, e.g. PRODAPI_CACHE_TTL_ITEMS=10s
//	PRODAPI_CACHE_STALE         15m         serve-stale window (while refreshing, while a backend fails)
//	PRODAPI_CACHE_NOTFOUND_TTL  5s          404s
//	PRODAPI_CACHE_TTL_ASSETS    10m         asset redirects; must be below the URL lifetime
//	PRODAPI_CACHE_LOCAL_BYTES   67108864    in-process tier size (negative: off)
//	PRODAPI_CACHE_LOCAL_TTL     2s          in-process entry lifetime
//	PRODAPI_SHUTDOWN_GRACE      10s         drain time on SIGTERM
//	PRODAPI_READ_HEADER_TIMEOUT 5s, PRODAPI_READ_TIMEOUT 10s, PRODAPI_WRITE_TIMEOUT 30s, PRODAPI_IDLE_TIMEOUT 2m
//	PRODAPI_MAX_CONNS           4096        client connections held open; at the cap a new one closes the longest idle one
//
// Durations take Go syntax (10s, 5m) or a number of seconds.
package config
