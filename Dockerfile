# driftwatch as a sidecar image. Build: docker build -t driftwatch .
# Run:  docker run -v $PWD/openapi.yaml:/etc/driftwatch/openapi.yaml:ro \
#         -e DRIFTWATCH_PROXY_UPSTREAM=http://api:5000 -p 8080:8080 -p 9090:9090 driftwatch
# Config: DRIFTWATCH_* environment variables, and optionally a mounted file passed as
# `serve --config /etc/driftwatch/driftwatch.toml` (config/driftwatch.toml documents every key).
# Precedence: file < environment < flags, so `serve --listen 127.0.0.1:8080` beats the ENV below.

FROM rust:1.95-bookworm AS build
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
WORKDIR /src
# A locked release build of the binary alone (CI checks the lock file with `cargo clippy
# --locked`), without the line tables the profiling builds keep, and stripped: 95 MB with
# them, 15 MB without (docs/operations.md).
ENV CARGO_PROFILE_RELEASE_DEBUG=none CARGO_PROFILE_RELEASE_STRIP=symbols
# The source revision for driftwatch_build_info (the context holds no .git):
# docker build --build-arg BUILD_REVISION=$(git rev-parse --short=12 HEAD) .
ARG BUILD_REVISION=unknown
# Dependencies first, in a layer of their own: a change to driftwatch's sources rebuilds only
# driftwatch. Cargo needs every target the manifest names, so each gets an empty stand-in.
COPY Cargo.toml Cargo.lock ./
RUN mkdir -p src benches \
 && echo 'fn main() {}' > src/main.rs && touch src/lib.rs \
 && sed -n '/^\[\[bench\]\]/{n;s/^name = "\(.*\)"$/\1/p}' Cargo.toml \
    | while read -r bench; do echo 'fn main() {}' > "benches/$bench.rs"; done \
 && cargo build --release --locked --bin driftwatch \
 && rm -rf src benches
COPY src src
COPY benches benches
COPY examples examples
RUN touch src/main.rs src/lib.rs && cargo build --release --locked --bin driftwatch

FROM debian:bookworm-slim
# ca-certificates unpinned on purpose: the newest roots are the point of installing it.
# hadolint ignore=DL3008
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
# Healthy while /readyz answers 200 (the image has no curl: the binary asks).
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s CMD ["/usr/local/bin/driftwatch", "health"]
ENTRYPOINT ["/usr/local/bin/driftwatch"]
CMD ["serve"]
