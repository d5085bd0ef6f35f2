# foldstream processor image.
#   docker build -t foldstream/processor .
# Not exercised in CI (no Docker on the build machines); its Go version is
# checked against go.mod by cmd/processor/compose_test.go. .dockerignore
# keeps data/, bin/, node_modules and .git out of the build context.

FROM golang:1.26 AS build
WORKDIR /src
# Dependencies first, so that a source change does not re-download them.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Static binary: distroless/static has no libc.
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/processor ./cmd/processor

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/processor /processor
USER nonroot:nonroot
# /metrics and /healthz on every interface of the container (the flag's
# default, 127.0.0.1, is unreachable from outside it); --metrics-addr wins.
ENV FOLDSTREAM_METRICS_ADDR=0.0.0.0:9464
EXPOSE 9464
# No shell or curl in the image: the binary checks its own /healthz.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 CMD ["/processor", "healthcheck", "--url", "http://127.0.0.1:9464/healthz"]
ENTRYPOINT ["/processor"]
