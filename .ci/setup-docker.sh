#!/usr/bin/env bash
# Provision a Docker engine and the potrun sandbox image on a Debian bookworm host (root) that can
# reach Debian's package mirror and PyPI but no image registry. Idempotent: re-running skips what
# is already there. Steps:
#   1. apt-get install docker.io debootstrap (when missing)
#   2. start dockerd in the background (when `docker info` fails); log in /tmp/dockerd.log
#   3. potrun-base:bookworm: debootstrap a minbase rootfs with python3 (tarball cached in .ci/cache/),
#      `docker import` it (when the image is missing)
#   4. potrun-sandbox:latest: python -m potrun.tools.image build --base potrun-base:bookworm
#   5. smoke test: import numpy, RestrictedPython, potrun.types in a --network none container
#
# Environment:
#   PYTHON                         Python with potrun installed (default: python, else python3)
#   POTRUN_BASE_IMAGE              base tag (default potrun-base:bookworm)
#   POTRUN_IMAGE                   sandbox image tag (default potrun-sandbox:latest)
#   POTRUN_REBUILD_IMAGE=1         rebuild the sandbox image even if it exists (default: 1, the
#                                  source tree may have changed; set 0 to keep an existing image)
#   POTRUN_DEBIAN_MIRROR           Debian mirror for debootstrap (default: read from apt's sources)
#   POTRUN_DOCKER_STORAGE_DRIVER   force a storage driver (default: overlay2 if it mounts here, else vfs)
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE="$REPO/.ci/cache"
SUITE=bookworm
BASE_TAG=${POTRUN_BASE_IMAGE:-potrun-base:bookworm}
IMAGE_TAG=${POTRUN_IMAGE:-potrun-sandbox:latest}
REBUILD=${POTRUN_REBUILD_IMAGE:-1}
DOCKERD_LOG=/tmp/dockerd.log
# python3 alone: numpy comes from the wheels (pinned to the host's version), so python3-numpy
# would only be a second, unused numpy with its BLAS/LAPACK/gfortran libraries in the image.
INCLUDE=python3
# Not needed at run time; dropped from the rootfs tarball to keep the base small.
EXCLUDES=(./var/cache/apt ./var/lib/apt/lists ./usr/share/doc ./usr/share/man ./usr/share/info
          ./usr/share/locale ./usr/share/lintian ./var/log ./tmp ./root/.cache)
PYTHON=${PYTHON:-$(command -v python || command -v python3)}

T_SCRIPT=$SECONDS
say() { printf '[setup-docker] %s\n' "$*"; }
die() { printf '[setup-docker] ERROR: %s\n' "$*" >&2; exit 1; }
declare -a TIMINGS=()
step_start() { STEP_NAME=$1; STEP_T0=$(date +%s.%N); say "== $1"; }
step_end() {
  local dt; dt=$(awk -v a="$STEP_T0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
  say "-- $STEP_NAME: ${dt} s${1:+ ($1)}"; TIMINGS+=("$(printf '%-34s %7s s %s' "$STEP_NAME" "$dt" "${1:-}")")
}

[ "$(id -u)" = 0 ] || die "run as root (apt-get, dockerd)"

# ------------------------------------------------------------------------------------------ 1
step_start "install docker.io, debootstrap"
missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
  say "installing: ${missing[*]}"
  # Keep the package scripts from starting the docker service themselves: we start dockerd below.
  policy_added=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    policy_added=1
  fi
  apt_install() { DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@"; }
  if ! apt_install "${missing[@]}"; then
    say "apt-get install failed; running apt-get update and retrying"
    apt-get update -q
    apt_install "${missing[@]}"
  fi
  [ "$policy_added" = 1 ] && rm -f /usr/sbin/policy-rc.d
  step_end "installed ${missing[*]}"
else
  step_end "already installed"
fi

# ------------------------------------------------------------------------------------------ 2
pick_storage_driver() {
  if [ -n "${POTRUN_DOCKER_STORAGE_DRIVER:-}" ]; then echo "$POTRUN_DOCKER_STORAGE_DRIVER"; return; fi
  # overlay2 needs an overlay mount on /var/lib/docker's filesystem (fails e.g. on overlayfs or some
  # container filesystems); try one where it will live.
  local probe ok=1
  mkdir -p /var/lib/docker
  probe=$(mktemp -d /var/lib/docker/.overlay-probe.XXXXXX)
  mkdir -p "$probe"/{l,u,w,m}
  touch "$probe/l/f"
  if mount -t overlay overlay -o "lowerdir=$probe/l,upperdir=$probe/u,workdir=$probe/w" "$probe/m" 2>/dev/null; then
    [ -e "$probe/m/f" ] && touch "$probe/m/g" 2>/dev/null && ok=0
    umount "$probe/m" || true
  fi
  rm -rf "$probe"
  if [ $ok = 0 ]; then echo overlay2; else echo vfs; fi
}

DOCKERD_PID=""
dockerd_alive() { [ -n "$DOCKERD_PID" ] && kill -0 "$DOCKERD_PID" 2>/dev/null; }
start_dockerd() {
  local driver=$1 i
  say "starting dockerd --storage-driver=$driver (log: $DOCKERD_LOG)"
  # setsid: dockerd outlives this script and is not killed with its process group.
  setsid nohup dockerd --storage-driver="$driver" >"$DOCKERD_LOG" 2>&1 < /dev/null &
  DOCKERD_PID=$!
  for i in $(seq 1 60); do
    if docker info >/dev/null 2>&1; then return 0; fi
    dockerd_alive || break  # it died: no point waiting
    sleep 1
  done
  return 1
}

step_start "docker engine"
if docker info >/dev/null 2>&1; then
  step_end "already running, storage driver $(docker info --format '{{.Driver}}')"
else
  if command -v pgrep >/dev/null && pgrep -x dockerd >/dev/null 2>&1; then
    die "a dockerd process is running but \`docker info\` fails; see $DOCKERD_LOG or stop it first"
  fi
  driver=$(pick_storage_driver)
  if ! start_dockerd "$driver"; then
    say "dockerd did not come up with $driver; last lines of $DOCKERD_LOG:"; tail -n 30 "$DOCKERD_LOG" || true
    if dockerd_alive; then kill "$DOCKERD_PID"; sleep 5; fi
    if [ "$driver" != vfs ] && start_dockerd vfs; then
      driver=vfs
    else
      say "dockerd failed to start; last lines of $DOCKERD_LOG:"; tail -n 50 "$DOCKERD_LOG" || true
      exit 1
    fi
  fi
  step_end "started, storage driver $(docker info --format '{{.Driver}}')"
fi

# ------------------------------------------------------------------------------------------ 3
debian_mirror() {
  if [ -n "${POTRUN_DEBIAN_MIRROR:-}" ]; then echo "$POTRUN_DEBIAN_MIRROR"; return; fi
  local f uri=""
  # deb822 sources: the first stanza of type deb whose Suites include "$SUITE" itself.
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -e "$f" ] || continue
    uri=$(awk -v suite="$SUITE" '
      BEGIN { RS = ""; FS = "\n" }
      {
        types = ""; uris = ""; suites = ""; enabled = "yes"
        for (i = 1; i <= NF; i++) {
          line = $i
          if (line ~ /^[ \t]*#/) continue
          key = tolower(line); sub(/:.*/, "", key)
          val = line; sub(/^[^:]*:[ \t]*/, "", val)
          if (key == "types") types = val
          else if (key == "uris") uris = val
          else if (key == "suites") suites = val
          else if (key == "enabled") enabled = tolower(val)
        }
        if (enabled != "no" && (" " types " ") ~ / deb / && (" " suites " ") ~ (" " suite " ")) {
          split(uris, u, /[ \t]+/); print u[1]; exit
        }
      }' "$f")
    [ -n "$uri" ] && { echo "$uri"; return; }
  done
  # one-line style: deb [options] URI SUITE COMPONENTS...
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -e "$f" ] || continue
    uri=$(sed -n -E "s/^[[:space:]]*deb[[:space:]]+(\[[^]]*\][[:space:]]+)?([^[:space:]]+)[[:space:]]+$SUITE([[:space:]].*)?\$/\2/p" "$f" | head -n 1)
    [ -n "$uri" ] && { echo "$uri"; return; }
  done
  return 1
}

step_start "base image $BASE_TAG"
if docker image inspect "$BASE_TAG" >/dev/null 2>&1; then
  step_end "present"
else
  mkdir -p "$CACHE"
  # Bump ROOTFS_REV when the way the tarball is made changes, so stale caches are not reused.
  ROOTFS_REV=2
  tarball="$CACHE/rootfs-$SUITE-minbase-${INCLUDE//,/-}-$(dpkg --print-architecture)-r$ROOTFS_REV.tar"
  if [ -s "$tarball" ]; then
    say "using cached rootfs $tarball"
  else
    mirror=$(debian_mirror) || die "no Debian $SUITE mirror in /etc/apt/sources.list{,.d}; set POTRUN_DEBIAN_MIRROR"
    rootfs=$(mktemp -d /tmp/potrun-rootfs.XXXXXX)
    trap 'rm -rf "$rootfs"' EXIT
    say "debootstrap --variant=minbase --include=$INCLUDE $SUITE $rootfs $mirror"
    debootstrap --variant=minbase --include="$INCLUDE" "$SUITE" "$rootfs" "$mirror" > /tmp/debootstrap.log 2>&1 \
      || { tail -n 30 /tmp/debootstrap.log; tail -n 30 "$rootfs/debootstrap/debootstrap.log" 2>/dev/null; die "debootstrap failed (log: /tmp/debootstrap.log)"; }
    "$rootfs/usr/bin/python3" --version >/dev/null 2>&1 || chroot "$rootfs" python3 --version >/dev/null \
      || die "debootstrap's rootfs has no working python3"
    chmod 0755 "$rootfs"  # mktemp made it 0700, and "." carries that mode onto the image's /
    tar_excludes=()
    for e in "${EXCLUDES[@]}"; do tar_excludes+=("--exclude=$e/*"); done
    tar -C "$rootfs" --numeric-owner "${tar_excludes[@]}" -cf "$tarball.tmp" .
    mv "$tarball.tmp" "$tarball"
    rm -rf "$rootfs"; trap - EXIT
    say "cached rootfs: $tarball ($(du -h "$tarball" | cut -f1))"
  fi
  docker import --change 'CMD ["python3"]' --message "debootstrap $SUITE minbase + $INCLUDE" \
    - "$BASE_TAG" < "$tarball" >/dev/null
  step_end "imported ($(docker image inspect --format '{{.Size}}' "$BASE_TAG" | awk '{printf "%.0f MB", $1/1e6}'))"
fi

# ------------------------------------------------------------------------------------------ 4
step_start "sandbox image $IMAGE_TAG"
if [ "$REBUILD" != 1 ] && docker image inspect "$IMAGE_TAG" >/dev/null 2>&1; then
  step_end "present (POTRUN_REBUILD_IMAGE=0)"
else
  "$PYTHON" -c 'import potrun.tools.image' 2>/dev/null \
    || die "$PYTHON cannot import potrun.tools.image: run pip install -e '.[test]' first (or set PYTHON)"
  "$PYTHON" -m potrun.tools.image build --base "$BASE_TAG" --tag "$IMAGE_TAG" --with sympy --with pandas  # parity with the test host
  step_end "built ($(docker image inspect --format '{{.Size}}' "$IMAGE_TAG" | awk '{printf "%.0f MB", $1/1e6}'))"
fi

# ------------------------------------------------------------------------------------------ 5
step_start "verify $IMAGE_TAG"
docker run --rm --network none "$IMAGE_TAG" \
  python3 -I -c "import numpy, RestrictedPython, potrun.types; print('ok')"
step_end

say "== timings"
for line in "${TIMINGS[@]}"; do say "   $line"; done
say "   total                              $((SECONDS - T_SCRIPT)) s"
