#!/usr/bin/env bash
# Installs LatentLab's Debian 12 build and test dependencies (run as root or
# with sudo). LibTorch itself comes from the torch wheel: see setup-venv.sh.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  clang-format          # the format check (tools/check_format.sh)
  python3 python3-venv python3-pip
  qt6-base-dev qt6-charts-dev qt6-svg-dev libqt6opengl6-dev libgl-dev
  libsqlite3-dev nlohmann-json3-dev googletest libgtest-dev
  libgloo-dev           # headers of the Gloo library inside LibTorch (c10d CPU data parallelism)
  xvfb xauth
  python3.11-doc        # the demo corpus: the Python documentation's reST sources
  slurmctld slurmd slurm-client munge sqlite3  # the real Slurm the cluster test starts (tests/slurm)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps-debian: all ${#packages[@]} packages present"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "deps-debian: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
