#!/usr/bin/env bash
# Build and smoke-test the metastore container image without a container runtime.
#
#   scripts/image.sh base  [IMAGE]   local Debian bookworm base (python3, python3-venv) via mmdebstrap
#   scripts/image.sh build IMAGE     build the Containerfile with buildah (or podman), chroot isolation
#   scripts/image.sh smoke IMAGE     check the image config, then chroot into its root filesystem
#                                    (mounted read-only, tmpfs on /tmp, as the image's user) and run
#                                    `metastore --help`; against a throwaway PostgreSQL on loopback
#                                    check that `metastore api` refuses the empty schema, run
#                                    `metastore migrate`, then `metastore api` (curl /healthz, /readyz)
#                                    and `metastore projector` (curl /healthz on its port)
#
# Needs root (chroot, mounts). `podman run` is not needed (and does not work in every CI sandbox).
# Env: BUILDER (buildah|podman), ISOLATION (chroot), BASE_IMAGE, VERSION, REVISION,
#      PIP_INDEX_URL, BUILD_CA_BUNDLE (or PIP_CERT: a CA bundle mounted into the build for pip),
#      SMOKE_PG_PORT (55432), SMOKE_API_PORT (58080), PG_BIN (dir with initdb/pg_ctl).
set -euo pipefail

cmd="${1:?usage: scripts/image.sh base|build|smoke IMAGE}"
image="${2:-}"
here="$(cd "$(dirname "$0")/.." && pwd)"

log() { printf '\033[1m[image] %s\033[0m\n' "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }

# The image's version by default: the chart's appVersion, the release's own tag.
# serve COMMAND PORT PIDVAR: `metastore COMMAND` in the image (in_image) in the background,
# its pid in PIDVAR at once (the cleanup stops it), until /healthz on PORT answers.
serve() {
    local command="$1" port="$2" ok=""
    "${in_image[@]}" metastore "${command}" >"${workdir}/${command}.log" 2>&1 &
    printf -v "$3" '%s' "$!"
    for _ in $(seq 1 60); do
        if curl -fsS "http://127.0.0.1:${port}/healthz" >"${workdir}/${command}-healthz" 2>/dev/null; then ok=1; break; fi
        kill -0 "${!3}" 2>/dev/null || break
        sleep 0.5
    done
    [[ -n "${ok}" ]] || { cat "${workdir}/${command}.log" >&2; die "${command} /healthz did not answer"; }
    log "${command} /healthz: $(cat "${workdir}/${command}-healthz")"
}

chart_app_version() {
    sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "${here}/deploy/helm/metastore/Chart.yaml"
}

case "${cmd}" in
base)
    image="${image:-localhost/metastore-base:bookworm}"
    command -v mmdebstrap >/dev/null || die "mmdebstrap missing (apt-get install mmdebstrap)"
    command -v podman >/dev/null || die "podman missing (apt-get install podman), needed for 'podman import'"
    tar="$(mktemp --suffix=.tar)"
    trap 'rm -f "${tar}"' EXIT
    log "mmdebstrap bookworm (python3, python3-venv) -> ${image}"
    mmdebstrap --variant=apt --include=python3,python3-venv,passwd,ca-certificates \
        --dpkgopt='path-exclude=/usr/share/man/*' \
        --dpkgopt='path-exclude=/usr/share/doc/*' \
        --dpkgopt='path-exclude=/usr/share/locale/*' \
        --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*' \
        bookworm "${tar}"
    podman import --change 'CMD ["/bin/bash"]' "${tar}" "${image}" >/dev/null
    log "base image ${image} ready"
    ;;

build)
    [[ -n "${image}" ]] || die "image name missing"
    builder="${BUILDER:-buildah}"
    args=(--isolation="${ISOLATION:-chroot}" -f Containerfile -t "${image}"
          --build-arg "VERSION=${VERSION:-$(chart_app_version)}"
          --build-arg "REVISION=${REVISION:-unknown}"
          --build-arg "CREATED=$(date -u +%Y-%m-%dT%H:%M:%SZ)")
    [[ -n "${BASE_IMAGE:-}" ]] && args+=(--build-arg "BASE_IMAGE=${BASE_IMAGE}" --pull=never)
    [[ -n "${PIP_INDEX_URL:-}" ]] && args+=(--build-arg "PIP_INDEX_URL=${PIP_INDEX_URL}")
    # Behind a TLS-inspecting proxy pip in the build needs the host's CA bundle.
    ca="${BUILD_CA_BUNDLE:-${PIP_CERT:-}}"
    if [[ -n "${ca}" && -f "${ca}" ]]; then
        args+=(--volume "$(readlink -f "${ca}"):/run/build-ca.pem:ro" --build-arg PIP_CERT=/run/build-ca.pem)
    fi
    log "${builder} build ${args[*]} ."
    cd "${here}"
    if [[ "${builder}" == buildah ]]; then
        buildah build --layers "${args[@]}" .
    else
        podman build "${args[@]}" .
    fi
    log "built ${image}"
    ;;

smoke)
    [[ -n "${image}" ]] || die "image name missing"
    [[ "$(id -u)" == 0 ]] || die "smoke test needs root (chroot and mounts)"
    pg_port="${SMOKE_PG_PORT:-55432}"
    api_port="${SMOKE_API_PORT:-58080}"
    pg_bin="${PG_BIN:-$(dirname "$(command -v pg_ctl || echo /usr/lib/postgresql/15/bin/pg_ctl)")}"

    # 1. The image configuration.
    buildah inspect --type image "${image}" >"${TMPDIR:-/tmp}/metastore-image-config.json"
    user="$(python3 - "${TMPDIR:-/tmp}/metastore-image-config.json" <<'PY'
import json, sys
config = json.load(open(sys.argv[1]))["OCIv1"]["config"]
labels = config.get("Labels") or {}
print("image config:", json.dumps({k: config.get(k) for k in ("User", "Entrypoint", "Cmd", "ExposedPorts", "WorkingDir")}), file=sys.stderr)
problems = []
user = config.get("User", "")
uid = user.split(":")[0]
if not uid.isdigit() or int(uid) == 0:
    problems.append(f"user {user!r} is not a numeric non-root UID")
if config.get("Entrypoint") != ["metastore"]:
    problems.append(f"entrypoint {config.get('Entrypoint')!r} is not ['metastore']")
for port in ("8080/tcp", "9090/tcp"):
    if port not in (config.get("ExposedPorts") or {}):
        problems.append(f"{port} not exposed")
for key in ("title", "description", "version", "revision", "created", "source", "vendor", "licenses"):
    if key != "source" and not labels.get(f"org.opencontainers.image.{key}"):
        problems.append(f"label org.opencontainers.image.{key} missing")
if problems:
    sys.exit("; ".join(problems))
print(user)
PY
)" || die "image configuration"
    rm -f "${TMPDIR:-/tmp}/metastore-image-config.json"
    uid="${user%%:*}"; gid="${user#*:}"; [[ "${gid}" == "${user}" ]] && gid="${uid}"

    workdir="$(mktemp -d /tmp/metastore-smoke.XXXXXX)"
    ctr="" ; api_pid="" ; projector_pid="" ; ro="${workdir}/rootfs"
    cleanup() {
        set +e
        for pid in ${api_pid} ${projector_pid}; do kill "${pid}" 2>/dev/null && wait "${pid}" 2>/dev/null; done
        for m in "${ro}/tmp" "${ro}/dev" "${ro}/proc" "${ro}"; do mountpoint -q "${m}" && umount -l "${m}"; done
        [[ -n "${ctr}" ]] && { buildah umount "${ctr}" >/dev/null; buildah rm "${ctr}" >/dev/null; }
        [[ -f "${workdir}/pg/postmaster.pid" ]] && runuser -u postgres -- "${pg_bin}/pg_ctl" -D "${workdir}/pg" -m immediate stop >/dev/null
        rm -rf "${workdir}"
    }
    trap cleanup EXIT

    # 2. The image's root filesystem, read-only like readOnlyRootFilesystem, tmpfs on /tmp.
    ctr="$(buildah from --pull=never "${image}")"
    mnt="$(buildah mount "${ctr}")"
    mkdir -p "${ro}"
    mount --bind "${mnt}" "${ro}"
    mount -o remount,bind,ro "${ro}"
    mount -t tmpfs -o size=64m,mode=1777 tmpfs "${ro}/tmp"
    mount -t proc proc "${ro}/proc"
    mount --rbind /dev "${ro}/dev"
    touch "${ro}/.ro-probe" 2>/dev/null && die "root filesystem is writable" || log "root filesystem is read-only"

    # Run a command in the image as its user, with only the image's environment.
    mapfile -t image_env < <(buildah inspect --type image --format '{{range .OCIv1.Config.Env}}{{println .}}{{end}}' "${image}" | sed '/^$/d')
    in_image=(chroot --userspec="${uid}:${gid}" "${ro}" /usr/bin/env -i "${image_env[@]}"
        METASTORE_DATABASE_URL="postgresql://metastore@127.0.0.1:${pg_port}/metastore?sslmode=disable"
        PGPASSWORD=smoke METASTORE_PORT="${api_port}" METASTORE_PROJECTOR_PORT="$((api_port + 1))"
        METASTORE_AUTH=disabled)

    log "metastore --help"
    "${in_image[@]}" metastore --help >"${workdir}/help.txt" || die "metastore --help failed"
    head -n 5 "${workdir}/help.txt" >&2
    for sub in migrate api projector; do
        grep -q "${sub}" "${workdir}/help.txt" || die "metastore --help does not list '${sub}'"
    done

    # 3. A throwaway PostgreSQL on loopback.
    log "PostgreSQL on 127.0.0.1:${pg_port}"
    mkdir -p "${workdir}/pg" && chown postgres "${workdir}" "${workdir}/pg"
    echo postgres >"${workdir}/pwfile" && chown postgres "${workdir}/pwfile"
    runuser -u postgres -- "${pg_bin}/initdb" -D "${workdir}/pg" -U postgres -A scram-sha-256 \
        --pwfile="${workdir}/pwfile" >/dev/null
    runuser -u postgres -- "${pg_bin}/pg_ctl" -D "${workdir}/pg" -w -l "${workdir}/pg.log" \
        -o "-c listen_addresses=127.0.0.1 -c port=${pg_port} -c unix_socket_directories=${workdir}" start >/dev/null
    PGPASSWORD=postgres psql -q -h 127.0.0.1 -p "${pg_port}" -U postgres -d postgres \
        -c "CREATE ROLE metastore LOGIN PASSWORD 'smoke'" -c "CREATE DATABASE metastore OWNER metastore"

    # 4. The api refuses an un-migrated schema; migrate; then it serves.
    log "metastore api before migrate (must refuse to start)"
    rc=0
    timeout 30 "${in_image[@]}" metastore api >"${workdir}/api-unmigrated.log" 2>&1 || rc=$?
    head -c 3000 "${workdir}/api-unmigrated.log" >&2 || true
    [[ "${rc}" != 0 && "${rc}" != 124 ]] || die "metastore api did not refuse an un-migrated schema (rc=${rc})"
    log "refused with rc=${rc}"

    log "metastore migrate"
    "${in_image[@]}" metastore migrate >&2 || die "metastore migrate failed"

    log "metastore api on 127.0.0.1:${api_port}"
    serve api "${api_port}" api_pid
    code="$(curl -s -o "${workdir}/readyz" -w '%{http_code}' "http://127.0.0.1:${api_port}/readyz")"
    log "/readyz: ${code} $(cat "${workdir}/readyz")"
    [[ "${code}" == 200 ]] || { cat "${workdir}/api.log" >&2; die "/readyz returned ${code}"; }

    proj_port="$((api_port + 1))"
    log "metastore projector, health on 127.0.0.1:${proj_port}"
    serve projector "${proj_port}" projector_pid
    log "smoke test of ${image} passed"
    ;;

*)
    die "unknown command ${cmd}"
    ;;
esac
