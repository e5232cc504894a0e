#!/usr/bin/env bash
# make clients-test: generate prodapi's clients with three mainstream generators,
# from the document a running sandbox serves, and walk the sandbox with each.
#
#   python      openapi-python-client (PyPI), in a venv        walks the API
#   typescript  openapi-typescript + openapi-fetch (npm)        type-checks strictly, walks the API
#   go          openapi-generator's CLI (Maven Central), on java builds, walks the API
#
# Each generator must take the document whole: a warning of openapi-python-client,
# an error of openapi-generator, or a Record<string, never> in the TypeScript types
# fails the run. Tools and the Python and TypeScript clients go to bin/clients
# (CLIENTS_WORK); the Go client to a temporary module, removed at the end.
# Needs go, python3 (with venv), node and npm, java 17 and mvn.
set -euo pipefail
cd "$(dirname "$0")/../.."
here=examples/clients
work=${CLIENTS_WORK:-$PWD/bin/clients}
OPENAPI_GENERATOR=7.25.0
# Every scope, so that the walk may read every resource.
SCOPES=ARCHIVE_READ,DESKS_READ,PLANNING_READ,CONTACTS_READ,USERS_READ,ASSIGNMENTS_READ,EVENTS_READ

for tool in go python3 node npm java mvn; do
	command -v "$tool" >/dev/null || { echo "clients-test: $tool is not on PATH"; exit 1; }
done
mkdir -p "$work"
tmp=$(mktemp -d)
pid=
cleanup() {
	if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	rm -rf "$tmp"
}
trap cleanup EXIT

# timed NAME CMD...: runs CMD and says how long it took.
timed() {
	local name=$1 start=$SECONDS
	shift
	"$@"
	echo "clients-test: $name took $((SECONDS - start)) s"
}

# The sandbox: prodapi built from this tree, serving the sample newsroom on a
# free loopback port (its operator listener too, never the :5502 another
# prodapi may hold), with nothing of the caller's environment but PATH.
sandbox() {
	go build -o "$work/prodapi" ./cmd/prodapi
	local secret=clients-test-secret-of-at-least-32-bytes
	# Emptied first: the background job's own redirection may come after the
	# first look for the address, which would read a previous run's.
	: >"$work/prodapi.out"
	# PRODAPI_TOKEN_URL names an auth server (never asked here), so that the
	# document the generators take offers OAuth 2 beside the bearer token,
	# as a deployment that sets it serves it. The rate limit is off: the walks
	# fetch every document, most of them misses, far faster than a client's
	# default share allows, and what is tested here is the clients, not the
	# limiter (its own tests and the README's "Limits and fair share" are).
	env -i PATH="$PATH" PRODAPI_SANDBOX=sample AUTH_SERVER_SHARED_SECRET=$secret PRODAPI_OPS_ADDR=127.0.0.1:0 PRODAPI_RATE_LIMIT=off \
		PRODAPI_TOKEN_URL=https://superdesk.example/api/auth_server/token \
		"$work/prodapi" -addr 127.0.0.1:0 >"$work/prodapi.out" 2>"$work/prodapi.log" &
	pid=$!
	local addr= deadline=$((SECONDS + 120))
	until addr=$(sed -n 's/.*(listening on \([^)]*\)).*/\1/p' "$work/prodapi.out") && [ -n "$addr" ]; do
		if ! kill -0 "$pid" 2>/dev/null || [ $SECONDS -ge $deadline ]; then
			echo "clients-test: prodapi did not start"; cat "$work/prodapi.log"; exit 1
		fi
		sleep 0.2
	done
	export PRODAPI_URL=http://$addr/prodapi/v1
	PRODAPI_TOKEN=$(env -i PATH="$PATH" AUTH_SERVER_SHARED_SECRET=$secret "$work/prodapi" token -scope $SCOPES -ttl 1h)
	export PRODAPI_TOKEN
	echo "clients-test: the sample newsroom at $PRODAPI_URL"
}

python_client() {
	[ -x "$work/venv/bin/python" ] || python3 -m venv "$work/venv"
	"$work/venv/bin/pip" install -q --disable-pip-version-check -r $here/python/requirements.txt
	rm -rf "$work/python" && mkdir -p "$work/python"
	# (the generator formats its output with the venv's ruff)
	PATH="$work/venv/bin:$PATH" openapi-python-client generate --url "$PRODAPI_URL/openapi.json" --meta none \
		--config $here/python/config.yaml --output-path "$work/python/prodapi_client" >"$work/python-generate.log" 2>&1 ||
		{ cat "$work/python-generate.log"; exit 1; }
	if grep -qi 'warning\|error' "$work/python-generate.log"; then
		cat "$work/python-generate.log"; echo "clients-test: openapi-python-client did not take the document whole"; exit 1
	fi
	PYTHONPATH="$work/python" "$work/venv/bin/python" $here/python/walk.py
}

typescript_client() {
	local ts=$work/typescript
	rm -rf "$ts/out" && mkdir -p "$ts"
	cp $here/typescript/package.json $here/typescript/package-lock.json $here/typescript/tsconfig.json $here/typescript/walk.ts "$ts"/
	(
		cd "$ts"
		npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
		npx openapi-typescript "$PRODAPI_URL/openapi.json" -o schema.d.ts
		# openapi-typescript writes the document's absent webhooks and $defs
		# as empty records; any other is an object the document left empty.
		if grep -v '^export type \(webhooks\|\$defs\) = Record<string, never>;$' schema.d.ts | grep 'Record<string, never>'; then
			echo "clients-test: openapi-typescript made the types above empty records"; exit 1
		fi
		npx tsc --noEmit -p .  # the strict type check
		npx tsc --noCheck -p . # then the JavaScript, checked already
	)
	node "$ts/out/walk.js"
}

go_client() {
	local jar=$work/openapi-generator-cli-$OPENAPI_GENERATOR.jar
	if [ ! -f "$jar" ]; then
		mvn -B -q dependency:copy -Dartifact=org.openapitools:openapi-generator-cli:$OPENAPI_GENERATOR \
			-DoutputDirectory="$work" >"$work/mvn.log" 2>&1 || { cat "$work/mvn.log"; exit 1; }
	fi
	# Event has both links and _links: Go would name both Links. And
	# openapi-generator, unless told, takes an object's absent
	# additionalProperties for false (JSON Schema says true), so a newsroom's
	# own fields would fail the decoding.
	java -jar "$jar" generate -g go -i "$PRODAPI_URL/openapi.json" -o "$tmp/client" \
		--package-name prodapi --git-host example.com --git-user-id prodapi --git-repo-id client \
		--name-mappings links=ExternalLinks \
		--additional-properties=disallowAdditionalPropertiesIfNotPresent=false >"$work/go-generate.log" 2>&1 ||
		{ cat "$work/go-generate.log"; exit 1; }
	if grep -q 'ERROR\|Exception' "$work/go-generate.log"; then
		cat "$work/go-generate.log"; echo "clients-test: openapi-generator did not take the document whole"; exit 1
	fi
	mkdir "$tmp/walk"
	cp $here/go/walk.go "$tmp/walk/"
	printf 'module walk\n\ngo 1.23\n\nrequire example.com/prodapi/client v0.0.0\n\nreplace example.com/prodapi/client => ../client\n' >"$tmp/walk/go.mod"
	# The generated go.mod lists its requirements (golang.org/x/oauth2 with
	# the document's OAuth 2 scheme) without their sums: go mod tidy; the
	# walk, which builds on the client, takes the same sums and adds the
	# client's requirements to its go.mod (-mod=mod).
	(cd "$tmp/client" && go mod tidy && go build ./...)
	cp "$tmp/client/go.sum" "$tmp/walk/go.sum"
	(cd "$tmp/walk" && go build -mod=mod -o walk walk.go) # named, it builds despite its ignore tag
	"$tmp/walk/walk"
}

timed sandbox sandbox
timed python python_client
timed typescript typescript_client
timed go go_client
echo "clients-test: ok"
