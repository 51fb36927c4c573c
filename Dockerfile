# syntax=docker/dockerfile:1
#
# One image for every part of runhub: `hub serve` (the default command) and
# `hub runner`. A static binary (CGO_ENABLED=0, the web UI embedded with
# go:embed) on distroless: no shell, no package manager, user nonroot.
#
#   make docker                                   # runhub:$(git describe)
#   docker run -p 127.0.0.1:8080:8080 -e RUNHUB_JWT_SECRET=… runhub:dev
#   docker run … runhub:dev runner                # needs RUNHUB_REDIS_URL
#
# The hub listens on 0.0.0.0:8080 in the container, so it refuses to start
# without RUNHUB_JWT_SECRET / RUNHUB_JWT_PUBLIC_KEY, or an explicit
# RUNHUB_INSECURE_LISTEN=1 (deploy/compose.yaml publishes on loopback only).

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-buildvcs=false
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG TARGETOS=linux
ARG TARGETARCH
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/hub ./cmd/hub \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
LABEL org.opencontainers.image.title="runhub" \
      org.opencontainers.image.description="Real-time hub journaling AI-agent run events and streaming them to browser tabs" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/hub /hub
# The embedded journal's directory, owned by nonroot (65532) so a named
# volume mounted here starts writable.
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
ENV RUNHUB_ADDR=0.0.0.0:8080 \
    RUNHUB_DATA=/data \
    RUNHUB_LOG_FORMAT=json
EXPOSE 8080
VOLUME /data
# /healthz of RUNHUB_METRICS_ADDR when set (a runner's only HTTP), else of
# RUNHUB_ADDR (docs/configuration.md).
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 CMD ["/hub", "healthcheck"]
ENTRYPOINT ["/hub"]
CMD ["serve"]
