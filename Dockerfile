# syntax=docker/dockerfile:1
# Build a static binary with the official Go image; run it on distroless as
# a non-root user, with the ReScript compiler (npm's rescript, whose bsc.exe
# is static) and its runtime beside it. cmd/lab/image_test.go runs this
# file's go build line.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.version=${VERSION}" -o /out/lab ./cmd/lab
# The data volume must belong to the nonroot user (uid 65532).
RUN mkdir -p /out/data && chown 65532:65532 /out/data

# The lesson's compiler: students' ToolCall.res is compiled with it
# (docs/code.md, "Where the compiler comes from"). Only the static compiler
# and the runtime's compiled interfaces (lib/ocaml) and ES modules (lib/es6)
# go into the image; no Node runs there.
FROM node:22-bookworm-slim AS rescript
WORKDIR /opt/rescript
RUN npm install --no-audit --no-fund rescript@12.2.0 \
 && node_modules/@rescript/linux-x64/bin/bsc.exe -version \
 && test -x node_modules/@rescript/linux-x64/bin/rescript-editor-analysis.exe

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/lab /lab
COPY --from=build --chown=65532:65532 /out/data /data
COPY --from=rescript /opt/rescript/node_modules/@rescript/linux-x64/bin/bsc.exe /rescript/node_modules/@rescript/linux-x64/bin/bsc.exe
# The type under the pointer (issue 52): the analysis binary beside bsc.exe.
COPY --from=rescript /opt/rescript/node_modules/@rescript/linux-x64/bin/rescript-editor-analysis.exe /rescript/node_modules/@rescript/linux-x64/bin/rescript-editor-analysis.exe
COPY --from=rescript /opt/rescript/node_modules/@rescript/runtime/package.json /rescript/node_modules/@rescript/runtime/package.json
COPY --from=rescript /opt/rescript/node_modules/@rescript/runtime/lib/ocaml /rescript/node_modules/@rescript/runtime/lib/ocaml
COPY --from=rescript /opt/rescript/node_modules/@rescript/runtime/lib/es6 /rescript/node_modules/@rescript/runtime/lib/es6
USER nonroot:nonroot
# The root file system may be read-only: a compile's temporary directory
# is made under the data volume.
ENV LAB_ADDR=:8080 LAB_DATA=/data/lab.db LAB_RESCRIPT=/rescript/node_modules/@rescript/linux-x64/bin/bsc.exe TMPDIR=/data/tmp
EXPOSE 8080
VOLUME ["/data"]
HEALTHCHECK --interval=30s --timeout=5s --start-period=5s --retries=3 CMD ["/lab", "healthcheck"]
ENTRYPOINT ["/lab"]
