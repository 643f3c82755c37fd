#!/usr/bin/env bash
# Installs what building and testing frost needs, when it is missing: a C compiler, CMake
# (>= 3.20), Ninja and pkg-config.  Debian/Ubuntu (apt-get) only; elsewhere it says what
# to install.  The CUDA toolkit is NOT needed to build: frost loads the driver and NVRTC
# at run time.
set -euo pipefail
missing=()
command -v cc >/dev/null 2>&1 || missing+=(gcc)
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v ninja >/dev/null 2>&1 || missing+=(ninja-build)
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
if [ ${#missing[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    echo "setup: installing ${missing[*]}"
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "setup: please install: ${missing[*]}" >&2
    exit 1
  fi
fi
