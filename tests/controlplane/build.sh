#!/usr/bin/env bash
# Builds the in-process control plane (etcd + kube-apiserver +
# kube-controller-manager) to <repo>/target/controlplane/controlplane.
#
# Skips the build when the binary exists and none of *.go, go.mod, go.sum and
# this script changed since it was built (a sha256 of them is kept next to the
# binary). Set CONTROLPLANE_FORCE_BUILD=1 to build anyway.
set -euo pipefail

start=$(date +%s)
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out_dir="$root/target/controlplane"
bin="$out_dir/controlplane"
stamp="$out_dir/controlplane.sha256"

cd "$here"
export GOTOOLCHAIN=local
# Use exactly the committed go.mod/go.sum: never update them while building.
export GOFLAGS=-mod=readonly

elapsed() { echo "$(( $(date +%s) - start ))s"; }

hash="$(find . -maxdepth 1 -type f \( -name '*.go' -o -name go.mod -o -name go.sum -o -name build.sh \) -print0 \
  | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)"

if [[ -z "${CONTROLPLANE_FORCE_BUILD:-}" && -x "$bin" && -f "$stamp" && "$(cat "$stamp")" == "$hash" ]]; then
  echo "controlplane: $bin is up to date ($(elapsed))" >&2
  exit 0
fi

# Version strings, so that `kubectl version` shows the real server version.
k8s_version="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"   # e.g. v1.34.4
k8s_time="$(go list -m -f '{{if .Time}}{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}{{end}}' k8s.io/kubernetes)"
if [[ ! "$k8s_version" =~ ^v([0-9]+)\.([0-9]+)\.[0-9]+$ ]]; then
  echo "controlplane: unexpected k8s.io/kubernetes version $k8s_version" >&2
  exit 1
fi
major="${BASH_REMATCH[1]}"
minor="${BASH_REMATCH[2]}"
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$k8s_version"
  ldflags+=" -X $pkg.gitMajor=$major"
  ldflags+=" -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitCommit="
  ldflags+=" -X $pkg.gitTreeState=clean"
  ldflags+=" -X $pkg.buildDate=${k8s_time:-1970-01-01T00:00:00Z}"
done

echo "controlplane: building $bin (k8s.io/kubernetes $k8s_version; a cold build takes many minutes)" >&2
mkdir -p "$out_dir"
rm -f "$stamp"
nice -n 10 go build -trimpath -ldflags "$ldflags" -o "$bin.tmp" .
mv -f "$bin.tmp" "$bin"
echo "$hash" > "$stamp"
echo "controlplane: built $bin in $(elapsed)" >&2
