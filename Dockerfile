# driftwatch as a sidecar image. Build: docker build -t driftwatch .
# Run:  docker run -v $PWD/openapi.yaml:/etc/driftwatch/openapi.yaml:ro \
#         -e DRIFTWATCH_PROXY_UPSTREAM=http://api:5000 -p 8080:8080 -p 9090:9090 driftwatch
# Config: DRIFTWATCH_* environment variables, and optionally a mounted file passed as
# `serve --config /etc/driftwatch/driftwatch.toml` (config/driftwatch.toml documents every key).
# Precedence: file < environment < flags, so `serve --listen 127.0.0.1:8080` beats the ENV below.

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src src
COPY benches benches
COPY examples examples
# A locked, release build of the binary alone (CI checks the lock file with `cargo clippy --locked`).
RUN cargo build --release --locked --bin driftwatch

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --no-create-home driftwatch \
 && mkdir -p /etc/driftwatch
COPY --from=build /src/target/release/driftwatch /usr/local/bin/driftwatch
COPY config/driftwatch.toml /etc/driftwatch/driftwatch.example.toml
USER 10001
# The proxy listener (agents) and the admin listener (metrics, probes).
EXPOSE 8080 9090
ENV DRIFTWATCH_PROXY_LISTEN=0.0.0.0:8080 \
    DRIFTWATCH_ADMIN_LISTEN=0.0.0.0:9090 \
    DRIFTWATCH_SPEC_PATH=/etc/driftwatch/openapi.yaml
ENTRYPOINT ["/usr/local/bin/driftwatch"]
CMD ["serve"]
