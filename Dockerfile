# syntax=docker/dockerfile:1
#
# prodapi and its seed job in one small static image, running as non-root.
#
#   docker build -t prodapi .
#   docker run --rm -p 127.0.0.1:5500:5500 -e PRODAPI_SANDBOX=sample \
#     -e AUTH_SERVER_SHARED_SECRET=sandbox-only-secret-never-use-in-production prodapi
#
# compose.yaml builds it for the prodapi and seed services.

FROM golang:1.26 AS build
WORKDIR /src
ENV CGO_ENABLED=0
# Modules first, in their own layer: it is rebuilt only when go.mod or
# go.sum change, not on every source edit.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The build context has no .git, so Go cannot stamp the revision: pass it,
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) \
#     --build-arg REVISION=$(git rev-parse HEAD) -t prodapi .
# and `prodapi --version` prints them.
ARG VERSION=""
ARG REVISION=""
RUN --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION} -X main.revision=${REVISION}" -o /out/prodapi ./cmd/prodapi && \
    go build -trimpath -ldflags "-s -w" -o /out/prodapi-seed ./cmd/prodapi-seed

# Distroless static: CA certificates, tzdata and a nonroot user (65532),
# no shell, no package manager.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/prodapi /out/prodapi-seed /
USER nonroot:nonroot
# 5500: the API (PORT); 5502: the operator listener (PRODAPI_OPS_ADDR):
# /healthz, /readyz and /metrics, without authentication, for the
# platform's probes and Prometheus, never for the public.
EXPOSE 5500 5502
# /readyz answers 200 while this replica serves, whatever the backends
# (PRODAPI_READY_REQUIRES_BACKENDS=true ties it to them); `prodapi
# healthcheck` probes it on the operator listener, where
# PRODAPI_OPS_ADDR puts it (127.0.0.1:5502 by default).
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 CMD ["/prodapi", "healthcheck"]
ENTRYPOINT ["/prodapi"]
