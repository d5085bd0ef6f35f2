# foldstream processor image.
#   docker build -t foldstream/processor .
# Not exercised in CI (no Docker on the build machines).

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
ENTRYPOINT ["/processor"]
