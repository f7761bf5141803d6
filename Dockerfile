# openwop-mcp-sidecar container image.
#
#   docker build -t openwop-mcp-sidecar .
#   docker run --rm -p 8080:8080 openwop-mcp-sidecar \
#     serve --config /etc/openwop-mcp-sidecar/sidecar.yaml --listen 0.0.0.0:8080 \
#           --upstream http://wop-host:8787
#
# The binary is linked statically (glibc with +crt-static: no libc, libgcc or loader needed at
# run time; DNS through /etc/hosts and /etc/resolv.conf works without NSS modules), so the
# runtime stage is `scratch`: the binary and the example configuration, nothing else (no shell,
# no package manager). TLS roots are compiled in (webpki-roots). It runs as the non-root user
# 65532 and writes nothing to the root filesystem, so it runs with readOnlyRootFilesystem.
# scripts/check-chart checks that the build command, the binary path and the copied
# configuration below still match Cargo.toml, that scripts/bench (run by CI) makes the same
# release build, and measures the image's size from that build (docs/packaging.md).

ARG RUST_IMAGE=rust:1-slim-bookworm
ARG RUNTIME_IMAGE=scratch

FROM ${RUST_IMAGE} AS build
WORKDIR /src
# Static glibc build. RUSTFLAGS with an explicit --target applies to the binary only, not to
# build scripts and proc macros (which must stay dynamic).
ENV RUSTFLAGS="-C target-feature=+crt-static"

# Dependencies first, against stub crate roots, so that a source-only change reuses this layer
# instead of recompiling ~250 crates. Every workspace member's manifest is needed for cargo to
# resolve the workspace, but only the sidecar is built: --no-default-features leaves out the
# `demo` feature, so the image carries no demo host (devhost/) nor its development keys, and
# the devhost's sources are not even in the build context (.dockerignore); the bench member
# (openwop-bench) is not built either.
COPY Cargo.toml Cargo.lock ./
COPY devhost/Cargo.toml devhost/Cargo.toml
COPY bench/Cargo.toml bench/Cargo.toml
RUN mkdir -p src bench/src \
 && echo 'fn main() {}' > src/main.rs && touch src/lib.rs \
 && echo 'fn main() {}' > bench/src/main.rs \
 && cargo build --release --locked --no-default-features --target x86_64-unknown-linux-gnu --bin openwop-mcp-sidecar \
 && rm -rf src bench/src

COPY src src
COPY bench/src bench/src
# The built-in host.profile mappings, compiled into the binary (src/config/profile.rs).
COPY config/profiles config/profiles
# COPY keeps the files' own mtimes, which can be older than the stub build's outputs; touching
# the crate roots makes cargo rebuild the sidecar for certain.
RUN touch src/main.rs src/lib.rs \
 && cargo build --release --locked --no-default-features --target x86_64-unknown-linux-gnu --bin openwop-mcp-sidecar

FROM ${RUNTIME_IMAGE}
LABEL org.opencontainers.image.title="openwop-mcp-sidecar" \
      org.opencontainers.image.description="MCP 2026-07-28 server mount with the Tasks extension in front of an OpenWOP v2 REST host" \
      org.opencontainers.image.licenses="Apache-2.0"

COPY --from=build /src/target/x86_64-unknown-linux-gnu/release/openwop-mcp-sidecar /usr/local/bin/openwop-mcp-sidecar
# The documented example (every default, OpenWOP v2 routes). It listens on 127.0.0.1, which is
# why CMD passes --listen 0.0.0.0:8080; the Helm chart mounts its own file over this directory.
COPY config/sidecar.example.yaml /etc/openwop-mcp-sidecar/sidecar.yaml

# Numeric, so that Kubernetes' runAsNonRoot can verify it without reading /etc/passwd.
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/openwop-mcp-sidecar"]
CMD ["serve", "--config", "/etc/openwop-mcp-sidecar/sidecar.yaml", "--listen", "0.0.0.0:8080"]
