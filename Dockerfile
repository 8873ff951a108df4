# Build the manager as a static binary.
FROM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH

WORKDIR /workspace
# Dependencies first, so that a source change does not re-download them.
COPY go.mod go.sum ./
RUN go mod download

COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/

RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags="-s -w" -o manager ./cmd

# No shell, no package manager, not root.
FROM gcr.io/distroless/static:nonroot
ARG VERSION=unknown
ARG REVISION=unknown
# The labels `make image` sets too (the Makefile's IMAGE_LABELS).
LABEL org.opencontainers.image.title=placement-guard \
      org.opencontainers.image.source=https://github.com/placement-guard/placement-guard \
      org.opencontainers.image.licenses=Apache-2.0 \
      org.opencontainers.image.version=${VERSION} \
      org.opencontainers.image.revision=${REVISION}
WORKDIR /
COPY --from=builder /workspace/manager .
USER 65532:65532

ENTRYPOINT ["/manager"]
