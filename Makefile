# prodapi: the two commands of the quick start are `make run` and `make test`.
GO ?= go
# The sandbox's development secret. Real deployments set AUTH_SERVER_SHARED_SECRET
# to the secret Superdesk's auth server signs tokens with.
DEV_SECRET ?= sandbox-only-secret-never-use-in-production
FUZZTIME ?= 60s
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
HELM = $(GO) run helm.sh/helm/v3/cmd/helm@v3.22.0

.PHONY: run test test-real chart-test monitoring-test lint integration stack seed bench seed-bench fuzz build docs-ui docs-test clients-test

## run: serve the bundled sample newsroom on :5500, probes and /metrics on :5502 (no servers needed); prints a token and a curl line
run:
	PRODAPI_SANDBOX=$${PRODAPI_SANDBOX:-sample} \
	AUTH_SERVER_SHARED_SECRET=$${AUTH_SERVER_SHARED_SECRET:-$(DEV_SECRET)} \
	$(GO) run ./cmd/prodapi

## test: every unit, end-to-end and real-server test, with the race detector, then the nested
## test-only module test/ferretdb. The tests start their own real servers on loopback where the tools
## exist: Elasticsearch 7.10.2 (java 17 and mvn), FerretDB (go), redis-server, a Redis Cluster and a
## Sentinel set (redis-server, redis-cli). Whatever could not run is listed at the end;
## PRODAPI_REQUIRE_REAL=1 (as CI sets) makes any such skip a failure.
test:
	@skips=$$(mktemp); status=0; \
	PRODAPI_TEST_SKIPS=$$skips $(GO) test -race -count=1 ./... || status=$$?; \
	(cd test/ferretdb && $(GO) vet ./... && $(GO) test -count=1 ./...) || status=$$?; \
	if [ -s $$skips ]; then \
	  printf '\n*** make test: these tests were SKIPPED, a server or tool is missing (PRODAPI_REQUIRE_REAL=1 fails instead):\n'; \
	  sed 's/^/***   /' $$skips; \
	fi; \
	rm -f $$skips; exit $$status

# The suites that run against real servers, and their packages (the MongoDB and stack
# TestIntegration* suites need the Docker stack of make integration, so they are left out here).
REAL_RUN = Real|^TestElastic$$|^TestIntegration|^TestRedis|^TestFerretDB
REAL_SKIP = ^TestIntegration(Contract|Sample|Stack|ReadyzFlips)$$
REAL_PKGS = ./test/realserver ./sources/mongo ./sources/elastic ./cmd/prodapi ./cmd/prodapi-seed ./cache

## test-real: only the suites against real servers (Elasticsearch 7.10.2, FerretDB, redis-server alone,
## as a Cluster and as a Sentinel set), verbose, any skip a failure; ends with the versions they ran against
test-real:
	@log=$$(mktemp); \
	PRODAPI_REQUIRE_REAL=1 $(GO) test -race -count=1 -v -run '$(REAL_RUN)' -skip '$(REAL_SKIP)' $(REAL_PKGS) >$$log 2>&1; status=$$?; \
	cat $$log; echo; echo "test-real: real servers used:"; \
	grep -ho 'realserver: [A-Za-z-]* v\?[0-9][^ ]* ready' $$log | sed 's/^realserver: /  /; s/ ready$$//' | sort -u; \
	grep -ho 'against redis-server [0-9.]*' $$log | sed 's/^against /  /' | sort -u; \
	rm -f $$log; exit $$status

## chart-test: render deploy/helm/prodapi (Helm's engine: the defaults without Redis, replicas with and without
## it, envFrom, the rollout, every refusal...; then the helm CLI, every optional manifest on) and validate every
## manifest against the Kubernetes, prometheus-operator and Gateway API types
chart-test:
	cd deploy/helm/test && $(GO) vet ./... && $(GO) test -count=1 ./...
	@mkdir -p bin
	$(HELM) template prodapi deploy/helm/prodapi --kube-version 1.30.0 --set publicURL=https://prodapi.example \
	  --set auth.sharedSecret=chart-test --set mongo.uri=mongodb://mongo:27017/superdesk \
	  --set elasticsearch.url=http://elasticsearch:9200 --set redis.existingSecret=prodapi-redis \
	  --set serviceMonitor.enabled=true --set prometheusRule.enabled=true \
	  --set grafanaDashboard.enabled=true --set admin.enabled=true --set admin.secret=chart-test-admin-secret-of-32-bytes \
	  --set ingress.enabled=true --set 'ingress.hosts={prodapi.example}' --set httpRoute.enabled=true \
	  --set 'httpRoute.parentRefs[0].name=public' --set networkPolicy.egress.enabled=true > bin/chart.yaml
	cd deploy/helm/test && CHART_MANIFESTS=$(CURDIR)/bin/chart.yaml $(GO) test -count=1 -run '^TestManifestsFile$$' ./...

## monitoring-test: promtool (built from deploy/monitoring's go.mod) checks and unit-tests the alerting rules,
## then deploy/monitoring's tests: runbooks, the dashboard's PromQL, and every series it names exposed by prodapi
monitoring-test:
	cd deploy/monitoring && $(GO) vet ./... && \
	  $(GO) tool promtool check rules prometheus/rules.yaml && \
	  $(GO) tool promtool test rules prometheus/rules_test.yaml && \
	  $(GO) test -count=1 ./...

# The Swagger UI release of the API reference page: server/docsui/package-lock.json pins it.
DOCS_UI = server/docsui
# The stylesheet names its source map, which the copy does not carry: the comment goes, so that no
# browser asks for it.
DOCS_UI_CSS_MAP = /*\# sourceMappingURL=swagger-ui.css.map*/

## docs-ui: fetch the pinned Swagger UI with npm ci (no install scripts) and copy its bundle, stylesheet,
## licences and version into server/docsui/swagger-ui (committed: building prodapi needs no npm); then
## run make docs-test
docs-ui:
	@work=$$(mktemp -d); trap 'rm -rf "$$work"' EXIT; \
	cp $(DOCS_UI)/package.json $(DOCS_UI)/package-lock.json "$$work"/ && \
	(cd "$$work" && npm ci --ignore-scripts --no-audit --no-fund) && \
	pkg="$$work/node_modules/swagger-ui-dist" && \
	n=$$(grep -cF '$(DOCS_UI_CSS_MAP)' "$$pkg/swagger-ui.css") && \
	{ [ "$$n" -eq 1 ] || { echo "docs-ui: the stylesheet names its source map $$n times, not once: check the patch"; exit 1; }; } && \
	rm -rf $(DOCS_UI)/swagger-ui && mkdir -p $(DOCS_UI)/swagger-ui && \
	cp "$$pkg/swagger-ui-bundle.js" "$$pkg/swagger-ui-bundle.js.LICENSE.txt" "$$pkg/LICENSE" "$$pkg/NOTICE" $(DOCS_UI)/swagger-ui/ && \
	grep -vF '$(DOCS_UI_CSS_MAP)' "$$pkg/swagger-ui.css" > $(DOCS_UI)/swagger-ui/swagger-ui.css && \
	node -p 'require(process.argv[1]).version' "$$pkg/package.json" > $(DOCS_UI)/swagger-ui/VERSION && \
	echo "docs-ui: Swagger UI $$(cat $(DOCS_UI)/swagger-ui/VERSION) in $(DOCS_UI)/swagger-ui"

## docs-test: the API reference page in Debian's headless Chromium (apt-get install chromium): it loads with
## no failed request and no Content-Security-Policy violation and renders every operation; screenshots in bin/
docs-test:
	cd test/browser && $(GO) vet ./... && $(GO) test -count=1 -v ./...

## clients-test: generate clients from the document the sample newsroom serves, with openapi-python-client,
## openapi-typescript + openapi-fetch and openapi-generator (Go), and walk the API with each (needs python3,
## node and npm, java and mvn; see examples/clients)
clients-test:
	examples/clients/run.sh

## lint: vet, formatting, staticcheck
lint:
	$(GO) vet ./...
	@test -z "$$(gofmt -l .)" || { echo "gofmt would change:"; gofmt -l .; exit 1; }
	$(GO) tool staticcheck ./...

## build: a static binary in ./bin, stamped with the version and revision (prodapi --version)
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-X main.version=$(VERSION) -X main.revision=$(REVISION)" -o bin/prodapi ./cmd/prodapi

# The stack of compose.yaml, with prodapi-s3 (profile s3), under the secret `make run` uses.
STACK_SECRET = AUTH_SERVER_SHARED_SECRET=$${AUTH_SERVER_SHARED_SECRET:-$(DEV_SECRET)}
STACK = $(STACK_SECRET) docker compose --profile s3
ALL_SCOPES = ARCHIVE_READ,DESKS_READ,PLANNING_READ,CONTACTS_READ,USERS_READ,ASSIGNMENTS_READ,EVENTS_READ

## integration: every test, the gated ones too, against the stack of compose.yaml (needs Docker): up the
## stack, run them, then /readyz's flips as backends stop and start, then down -v; exits with the tests' status
integration:
	@$(STACK) up -d --build --wait || { $(STACK) logs --no-color --tail=100; $(STACK) down -v; exit 1; }
	@status=0; \
	$(STACK_SECRET) PRODAPI_INTEGRATION=1 $(GO) test -race -count=1 ./... || status=$$?; \
	$(STACK_SECRET) PRODAPI_INTEGRATION=flips $(GO) test -count=1 -run '^TestIntegrationReadyzFlips$$' -v ./cmd/prodapi || { s=$$?; [ $$status -ne 0 ] || status=$$s; }; \
	$(STACK) down -v; exit $$status

## stack: the stack of compose.yaml (MongoDB, Elasticsearch, Redis, MinIO, seeded) with prodapi on
## http://localhost:5500; prints a token and a curl line. Stop it with docker compose --profile s3 down -v
stack:
	$(STACK) up -d --build --wait
	@tok=$$($(STACK) exec -T prodapi /prodapi token -ttl 24h -scope $(ALL_SCOPES)) && \
	printf '\nprodapi is serving the seeded stack at http://localhost:5500/prodapi/v1 (media in MinIO: http://localhost:5501/prodapi/v1)\nA token with every scope, valid for 24 hours:\n\n  export TOKEN=%s\n\nTry:\n\n  curl -H "Authorization: Bearer $$TOKEN" http://localhost:5500/prodapi/v1/items\n\n' "$$tok"

## seed: load the sample newsroom into the running stack again (idempotent)
seed:
	$(STACK) run --rm seed

## bench: the load harness against a fresh build (about 80s on 2 cores; redis-server on PATH for the
## Redis scenarios); BENCHFLAGS passes flags, e.g. BENCHFLAGS='-scenarios hit-local -rounds 10'. See BENCHMARKS.md
bench: build
	$(GO) run ./cmd/prodapi-bench -prodapi bin/prodapi $(BENCHFLAGS)

# The items of make seed-bench's newsroom, and the benchmarks it runs (a -bench pattern).
SEED_BENCH_ITEMS ?= 300000
SEED_BENCH ?= BenchmarkSeedScale
## seed-bench: prodapi-seed -scale SEED_BENCH_ITEMS (default 300000) into a real Elasticsearch 7.10.2 node and a real
## FerretDB, written as a sandbox directory (25,000 items and that many), and prodapi started on it: time, docs/s and
## peak RSS of each. A benchmark (about two hours on two busy cores), never run by make test or CI. See BENCHMARKS.md
seed-bench:
	PRODAPI_SEED_BENCH_ITEMS=$(SEED_BENCH_ITEMS) $(GO) test -run '^$$' -bench '$(SEED_BENCH)' -benchtime 1x -timeout 6h ./cmd/prodapi-seed

## fuzz: each fuzz target for FUZZTIME (default 60s)
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list 'Fuzz.*' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run XXX -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done
