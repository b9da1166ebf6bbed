# The agentd server image. Build: docker build -t agentd .
# agentd listens on all interfaces here, so it refuses to start without API
# keys: run it with AGENTD_API_KEYS=<key>:<tenant> (or a keys file), and
# AGENTD_DATABASE_URL for Postgres (else SQLite in /var/lib/agentd, one node).
# Code execution needs a sandbox: mount a Docker-API socket and set
# DOCKER_HOST (the sandbox image is deploy/sandbox), or none is used.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/agentd ./cmd/agentd

FROM debian:bookworm-slim
RUN useradd --system --uid 10001 --home-dir /var/lib/agentd --create-home agentd
COPY --from=build /out/agentd /usr/local/bin/agentd
USER agentd
ENV AGENTD_ADDR=0.0.0.0:8080 AGENTD_DATA_DIR=/var/lib/agentd
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=5s CMD ["agentd", "health", "-addr", "127.0.0.1:8080"]
ENTRYPOINT ["agentd"]
