#!/usr/bin/env bash
# Offline (registry-free) build of the image docker-compose.yml runs for the API, the workers and Redis, the same
# way as the sandbox image (sandboxes/image/build.sh): Debian bookworm's python3 and redis-server by mmdebstrap,
# rewardbox's Python dependencies as wheels from PyPI, then `docker import`. ./Dockerfile builds the same image
# where a registry is reachable.
#
# The rewardbox code itself is not baked in: compose mounts the checkout at its host path, because the workers'
# sandboxes bind the runner code by host path (the engine resolves it on the host), and API and workers must run
# the same code (they derive the result-cache and replay versions from it).
#
#   rewardbox-service:$TAG (+ :latest)   TAG = first 12 hex of sha256(this script + the dependency list)
#
# Usage: service_image.sh          build if needed; progress on stderr, the image name alone on stdout
#        service_image.sh --tag    print the tag only
#        service_image.sh --force  rebuild even if the image exists
# Env: REWARDBOX_DEBIAN_MIRROR, REWARDBOX_DEBIAN_SECURITY_MIRROR (default deb.debian.org), REWARDBOX_CACHE.
set -euo pipefail
export PIP_ROOT_USER_ACTION=ignore

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SELF="$ROOT/scripts/service_image.sh"
REPO=rewardbox-service
SITE=usr/local/lib/python3.11/dist-packages
CACHE="${REWARDBOX_CACHE:-$HOME/.cache/rewardbox}"
MAIN="${REWARDBOX_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SECURITY="${REWARDBOX_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"

log() { printf '[service-image] %s\n' "$*" >&2; }
die() { printf '[service-image] ERROR: %s\n' "$*" >&2; exit 1; }

# The [project] dependencies of pyproject.toml, one per line (what the service needs to run), less the client
# distribution `rewardbox`: its code comes with the checkout like the server's.
requirements() {
    /usr/bin/python3 - "$ROOT/pyproject.toml" <<'PY'
import sys, tomllib
with open(sys.argv[1], "rb") as f:
    project = tomllib.load(f)["project"]
print("\n".join(d for d in project["dependencies"] if not d.startswith("rewardbox")))
PY
}

tag() { { cat "$SELF"; requirements; } | sha256sum | cut -c1-12; }

# mmdebstrap customize hook: the wheels into the image's site-packages (the host's Debian python3 is the image's
# python3, so its pip picks the right wheels), a user for the API, Redis's data directory.
customize() {
    local root="$1"
    : "${RB_WHEELS:?}" "${RB_REQUIREMENTS:?}"
    /usr/bin/python3 -m pip install -q --disable-pip-version-check --no-compile --no-index --no-warn-script-location \
        --find-links "$RB_WHEELS" --target "$root/$SITE" -r "$RB_REQUIREMENTS"
    rm -rf "${root:?}/$SITE/bin"
    chroot "$root" /usr/bin/python3 -m compileall -q "/$SITE" >/dev/null
    grep -q '^rewardbox:' "$root/etc/passwd" || {
        echo 'rewardbox:x:900:900:rewardbox API:/nonexistent:/usr/sbin/nologin' >>"$root/etc/passwd"
        echo 'rewardbox:x:900:' >>"$root/etc/group"
    }
    mkdir -p "$root/data"
    chroot "$root" chown redis:redis /data
    rm -rf "$root"/usr/share/man/* "$root"/usr/share/locale/* "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*
}

build() {
    local image="$1" work
    command -v mmdebstrap >/dev/null || die "mmdebstrap not found (apt-get install mmdebstrap)"
    docker info >/dev/null 2>&1 || die "no Docker engine answers"
    mkdir -p "$CACHE/service-wheels"
    work="$(mktemp -d "$CACHE/.service-image.XXXXXX")"
    # shellcheck disable=SC2064
    trap "rm -rf --one-file-system '$work'" EXIT
    requirements >"$work/requirements.txt"
    log "fetching wheels for $(paste -sd' ' "$work/requirements.txt") into $CACHE/service-wheels"
    /usr/bin/python3 -m pip download -q --disable-pip-version-check --only-binary=:all: \
        -d "$CACHE/service-wheels" -r "$work/requirements.txt" >&2
    log "mmdebstrap bookworm minbase + python3, redis-server from $MAIN"
    local t0=$SECONDS
    # shellcheck disable=SC2016
    RB_WHEELS="$CACHE/service-wheels" RB_REQUIREMENTS="$work/requirements.txt" RB_SELF="$SELF" TMPDIR="$work" \
        mmdebstrap --variant=minbase --include=python3,redis-server,ca-certificates \
        --aptopt='Apt::Install-Recommends "false"' \
        --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
        --dpkgopt='path-include=/usr/share/doc/*/copyright' \
        --customize-hook='bash "$RB_SELF" --customize "$1"' \
        bookworm "$work/rootfs.tar" \
        "deb $MAIN bookworm main" "deb $MAIN bookworm-updates main" "deb $SECURITY bookworm-security main" >&2
    log "mmdebstrap done in $((SECONDS - t0)) s; docker import -> $image"
    docker import --change 'ENV PYTHONDONTWRITEBYTECODE=1' --change 'ENV LANG=C.UTF-8' \
        --change 'CMD ["/usr/bin/python3"]' \
        --message "rewardbox service runtime $image (scripts/service_image.sh)" "$work/rootfs.tar" "$image" >/dev/null
    rm -rf --one-file-system "$work"
    trap - EXIT
}

main() {
    case "${1:-}" in
        --tag) tag; return ;;
        --customize) customize "${2:?usage: service_image.sh --customize ROOT}"; return ;;
        --force | "") ;;
        *) die "unknown argument: $1" ;;
    esac
    local image
    image="$REPO:$(tag)"
    mkdir -p "$CACHE"
    exec 9>"$CACHE/.service-image.lock"
    flock 9
    if [ "${1:-}" = --force ] || ! docker image inspect "$image" >/dev/null 2>&1; then
        build "$image"
    else
        log "up to date: $image"
    fi
    docker tag "$image" "$REPO:latest"
    echo "$image"
}

main "$@"
