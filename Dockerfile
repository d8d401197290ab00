# Build a static binary with the official Go image, run it on distroless.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/lab ./cmd/lab && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/lab /lab
# The event log lives on a volume the nonroot user can write.
COPY --from=build --chown=nonroot:nonroot /out/data /data
ENV LAB_DATA=/data/lab.db
VOLUME /data
EXPOSE 8080
USER nonroot:nonroot
ENTRYPOINT ["/lab"]
