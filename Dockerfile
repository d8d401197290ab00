# Build a static binary with the official Go image, run it on distroless.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/lab ./cmd/lab

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/lab /lab
EXPOSE 8080
USER nonroot:nonroot
ENTRYPOINT ["/lab"]
