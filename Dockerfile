# The agentd server image. Build: docker build -t agentd .
# agentd listens on all interfaces here, so it refuses to start without API
# keys: run it with AGENTD_API_KEYS=<key>:<tenant> (or a keys file), and
# AGENTD_DATABASE_URL for Postgres (else SQLite in /var/lib/agentd, one node).
# Code execution needs a sandbox: mount a Docker-API socket and set
# DOCKER_HOST (the sandbox image is deploy/sandbox), or none is used.
# The base images are build arguments, so that the image builds from a
# mirror or from local images too (--build-arg GO_IMAGE=… BASE_IMAGE=…);
# deploy/image/build.sh builds an equivalent image with no registry.
ARG GO_IMAGE=golang:1.26-bookworm
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${GO_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/agentd ./cmd/agentd

FROM ${BASE_IMAGE}
ARG VERSION=dev
LABEL org.opencontainers.image.title=agentd \
      org.opencontainers.image.description="Multi-agent group chats as an HTTP service" \
      org.opencontainers.image.source=https://github.com/agentd/agentd \
      org.opencontainers.image.version=${VERSION}
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/agentd --create-home agentd
COPY --from=build /out/agentd /usr/local/bin/agentd
# Numeric, so that runtimes can check runAsNonRoot without reading /etc/passwd.
USER 10001:10001
ENV AGENTD_ADDR=0.0.0.0:8080 AGENTD_DATA_DIR=/var/lib/agentd
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=5s CMD ["agentd", "health", "-addr", "127.0.0.1:8080"]
ENTRYPOINT ["agentd"]
