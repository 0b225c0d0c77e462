#!/usr/bin/env bash
# Host set-up for `make run` / `make test`: install missing system packages, make sure a Docker engine
# answers, then build (or confirm cached) the sandbox image. Idempotent; fast when everything is present.
#
# Env: REWARDBOX_BACKEND=bubblewrap  Docker is not required.
#      REWARDBOX_NEED_REDIS=1        redis-server, iproute2 and docker-compose are required too (the test
#                                    suite sets this: distributed-mode tests).
#      REWARDBOX_NEED_BROWSER=1      chromium, curl and jq are required too (the test suite sets this:
#                                    the dashboard's browser test, the docs' shell examples).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BACKEND="${REWARDBOX_BACKEND:-}"
DOCKERD_LOG=/var/log/rewardbox-dockerd.log

say() { printf '[host] %s\n' "$*" >&2; }
have() { command -v "$1" >/dev/null 2>&1; }
is_root() { [ "$(id -u)" = 0 ]; }
is_debian_like() {
    have apt-get && have dpkg-query || return 1
    [ -f /etc/debian_version ] && return 0
    grep -qsE '^(ID|ID_LIKE)=.*\b(debian|ubuntu)\b' /etc/os-release
}
pkg_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q ' installed$'; }
need_docker() { [ "$BACKEND" != bubblewrap ]; }
dockerd_bin() { command -v dockerd 2>/dev/null || { [ -x /usr/sbin/dockerd ] && echo /usr/sbin/dockerd; }; }
dockerd_running() {
    if have pgrep; then pgrep -x dockerd; elif have pidof; then pidof dockerd; else false; fi >/dev/null 2>&1
}

# --- what is missing (Debian package names) ----------------------------------------------------------
missing=()
have bwrap || missing+=(bubblewrap)
have mmdebstrap || missing+=(mmdebstrap)
if have dpkg-query; then
    pkg_installed libseccomp2 || missing+=(libseccomp2)
    # mmdebstrap verifies Debian archive signatures with this keyring (absent by default on Ubuntu).
    [ -e /usr/share/keyrings/debian-archive-keyring.gpg ] || missing+=(debian-archive-keyring)
    # `python3 -m venv` (make venv; build.sh's fallback pip) needs python3-venv with the system python.
    if [ "$(command -v python3 || true)" = /usr/bin/python3 ] && ! pkg_installed python3-venv; then
        missing+=(python3-venv)
    fi
else
    { /sbin/ldconfig -p 2>/dev/null || ldconfig -p 2>/dev/null; } | grep -q 'libseccomp\.so\.2' \
        || missing+=(libseccomp2)
fi
have python3 || missing+=(python3)
# SWE-bench test patches are applied to snapshots on the host by service/compat/swebench.py (trusted dataset content).
have patch || missing+=(patch)
if need_docker; then
    # The client is enough when an engine already answers (e.g. a non-root user in the docker group).
    if ! have docker || { [ -z "$(dockerd_bin)" ] && ! docker info >/dev/null 2>&1; }; then
        missing+=(docker.io)
    fi
fi
if [ "${REWARDBOX_NEED_REDIS:-0}" = 1 ] && ! have redis-server; then missing+=(redis-server); fi
# The distributed-mode tests put API and workers on separate network namespaces (`ip netns`).
if [ "${REWARDBOX_NEED_REDIS:-0}" = 1 ] && ! have ip; then missing+=(iproute2); fi
# ... and check docker-compose.yml with the compose tool (not run: no registry).
if [ "${REWARDBOX_NEED_REDIS:-0}" = 1 ] && ! have docker-compose && ! docker compose version >/dev/null 2>&1; then
    missing+=(docker-compose)
fi
# The dashboard's test drives a real headless browser (Debian's chromium).
if [ "${REWARDBOX_NEED_BROWSER:-0}" = 1 ] && ! have chromium; then missing+=(chromium); fi
# The docs' shell examples, run by the suite as a user copies them, call curl and jq.
if [ "${REWARDBOX_NEED_BROWSER:-0}" = 1 ] && ! have curl; then missing+=(curl); fi
if [ "${REWARDBOX_NEED_BROWSER:-0}" = 1 ] && ! have jq; then missing+=(jq); fi

if [ ${#missing[@]} -gt 0 ]; then
    if is_root && is_debian_like; then
        export DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1
        say "installing: ${missing[*]}"
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    else
        say "missing: ${missing[*]}"
        if is_debian_like; then
            say "run:  sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}"
        else
            say "install the equivalents of these Debian packages with your package manager"
        fi
        need_docker && say "(or set REWARDBOX_BACKEND=bubblewrap to run without Docker)"
        exit 1
    fi
fi

# --- Docker engine ---------------------------------------------------------------------------------
if need_docker && ! docker info >/dev/null 2>&1; then
    if ! is_root; then
        say "the Docker engine does not answer (docker info failed)."
        say "run:  sudo systemctl start docker   (and: sudo usermod -aG docker $USER; then log in again)"
        say "(or set REWARDBOX_BACKEND=bubblewrap to run without Docker)"
        exit 1
    fi
    if [ -d /run/systemd/system ] && have systemctl; then
        say "starting docker (systemctl start docker)"
        systemctl start docker || true
    fi
    if ! docker info >/dev/null 2>&1 && ! dockerd_running; then
        say "starting dockerd in the background (log: $DOCKERD_LOG)"
        nohup "$(dockerd_bin)" >>"$DOCKERD_LOG" 2>&1 </dev/null &
    fi
    for _ in $(seq 60); do
        docker info >/dev/null 2>&1 && break
        sleep 0.5
    done
    if ! docker info >/dev/null 2>&1; then
        say "dockerd did not come up within 30 s; last lines of $DOCKERD_LOG:"
        tail -n 20 "$DOCKERD_LOG" >&2 2>/dev/null || true
        exit 1
    fi
    say "docker engine is up"
fi

# --- bubblewrap sanity (user namespaces may be disabled, e.g. by AppArmor on Ubuntu 24.04) ---------------
if ! bwrap --ro-bind / / --unshare-all --die-with-parent true >/dev/null 2>&1; then
    if [ "$BACKEND" = bubblewrap ]; then
        say "bubblewrap cannot create a sandbox here (user namespaces disabled?)"
        exit 1
    fi
    say "warning: bubblewrap cannot create a sandbox here; only the docker backend will work"
fi

# --- sandbox image (cached by content hash) ------------------------------------------------------------
tag="$(bash "$ROOT/sandboxes/image/build.sh")"
say "sandbox image: $tag"
