# syntax=docker/dockerfile:1
# Build a static binary with the official Go image; run it on distroless as
# a non-root user. cmd/lab/image_test.go runs this file's go build line.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.version=${VERSION}" -o /out/lab ./cmd/lab
# The data volume must belong to the nonroot user (uid 65532).
RUN mkdir -p /out/data && chown 65532:65532 /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/lab /lab
COPY --from=build --chown=65532:65532 /out/data /data
USER nonroot:nonroot
ENV LAB_ADDR=:8080 LAB_DATA=/data/lab.db
EXPOSE 8080
VOLUME ["/data"]
HEALTHCHECK --interval=30s --timeout=5s --start-period=5s --retries=3 CMD ["/lab", "healthcheck"]
ENTRYPOINT ["/lab"]
