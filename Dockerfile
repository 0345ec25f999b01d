# Multi-stage build: a release binary on a small, non-root runtime image.
FROM rust:1-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
# .cargo/config.toml and scripts/protoc give etcd-client's build the vendored protoc.
COPY .cargo ./.cargo
COPY scripts/protoc ./scripts/protoc
COPY src ./src
COPY aggregated-apiserver ./aggregated-apiserver
RUN cargo build --release --locked --bin farm-apiserver

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/farm-apiserver /usr/local/bin/farm-apiserver
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["/usr/local/bin/farm-apiserver"]
CMD ["serve"]
