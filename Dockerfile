# The one recipe for farm-apiserver's image. The image users run holds a
# statically linked binary and the CA certificates on `scratch`: nothing else,
# no shell, no libc to patch, no base image to pull at run time.
#
# Two ways to the same final image:
# - `docker build .` (or `buildah bud .`) on a machine that can pull a Rust
#   image builds the binary in the `build` stage;
# - `scripts/image` builds the binary on the host and selects the
#   `from-host` stage (`--target from-host`), which needs no image at all:
#   stages a target does not use are skipped.
#
# VERSION and REVISION become OCI labels and what `farm-apiserver --version` prints.
ARG VERSION=0.0.0-dev
ARG REVISION=unknown

# What every final image carries, whichever way its binary was built.
FROM scratch AS runtime
ARG VERSION
ARG REVISION
LABEL org.opencontainers.image.title="farm-apiserver" \
      org.opencontainers.image.description="A Kubernetes aggregated API server for farm.example.com/v1alpha (Llamas and FarmPods)" \
      org.opencontainers.image.source="https://github.com/example/farm-apiserver" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
# The distroless "nonroot" user: no /etc/passwd entry is needed for a numeric one.
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["/farm-apiserver"]
CMD ["serve"]

# Builds the static binary (the gnu target with +crt-static keeps glibc's
# malloc and the tuning in src/process/allocator.rs).
FROM docker.io/library/rust:1-bookworm AS build
ARG REVISION
WORKDIR /src
COPY Cargo.toml Cargo.lock build.rs ./
# .cargo/config.toml and scripts/protoc give etcd-client's build the vendored protoc.
COPY .cargo ./.cargo
COPY scripts/protoc ./scripts/protoc
COPY src ./src
COPY aggregated-apiserver ./aggregated-apiserver
# Cargo.toml declares the benchmarks: cargo wants their files to exist.
COPY benches ./benches
# No .git in the context: the revision comes from the build argument.
ENV FARM_SOURCE_REVISION=${REVISION}
RUN triple="$(uname -m)-unknown-linux-gnu" \
 && RUSTFLAGS="-C target-feature=+crt-static" cargo build --release --locked --target "$triple" --bin farm-apiserver \
 && mkdir -p /out/etc/ssl/certs \
 && cp "target/$triple/release/farm-apiserver" /out/farm-apiserver \
 && cp /etc/ssl/certs/ca-certificates.crt /out/etc/ssl/certs/

# The final stage scripts/image builds here: scripts/image has put the
# host-built binary and the host's CA certificates under target/image/rootfs.
FROM runtime AS from-host
COPY target/image/rootfs/ /

# The default final stage.
FROM runtime
COPY --from=build /out/ /
