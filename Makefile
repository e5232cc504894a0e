# prodapi: the two commands of the quick start are `make run` and `make test`.
GO ?= go
# The sandbox's development secret. Real deployments set AUTH_SERVER_SHARED_SECRET
# to the secret Superdesk's auth server signs tokens with.
DEV_SECRET ?= sandbox-only-secret-never-use-in-production
FUZZTIME ?= 60s

.PHONY: run test lint integration bench fuzz build

## run: serve the bundled sample newsroom on :5500 (no servers needed); prints a token and a curl line
run:
	PRODAPI_SANDBOX=$${PRODAPI_SANDBOX:-sample} \
	AUTH_SERVER_SHARED_SECRET=$${AUTH_SERVER_SHARED_SECRET:-$(DEV_SECRET)} \
	$(GO) run ./cmd/prodapi

## test: every unit and end-to-end test, with the race detector (needs redis-server on PATH)
test:
	$(GO) test -race -count=1 ./...

## lint: vet, formatting, staticcheck
lint:
	$(GO) vet ./...
	@test -z "$$(gofmt -l .)" || { echo "gofmt would change:"; gofmt -l .; exit 1; }
	$(GO) tool staticcheck ./...

## build: a static binary in ./bin
build:
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/prodapi ./cmd/prodapi

## integration: the contract and end-to-end suites against the real stack of compose.yaml
integration:
	docker compose up -d --build --wait
	PRODAPI_INTEGRATION=1 $(GO) test -race -count=1 ./... ; status=$$?; docker compose down; exit $$status

## bench: the load harness against a fresh build (about 80s on 2 cores; redis-server on PATH for the
## Redis scenarios); BENCHFLAGS passes flags, e.g. BENCHFLAGS='-scenarios hit-local -rounds 10'. See BENCHMARKS.md
bench: build
	$(GO) run ./cmd/prodapi-bench -prodapi bin/prodapi $(BENCHFLAGS)

## fuzz: each fuzz target for FUZZTIME (default 60s)
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list 'Fuzz.*' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run XXX -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done
