#!/bin/sh
# setup-debian.sh - checks that the Debian/Ubuntu packages nncl builds and
# tests with are installed. As root it installs the missing ones (apt-get);
# otherwise it prints the exact command to run and exits non-zero.
# usage: sh tools/setup-debian.sh [--ci]   (--ci adds the CI-only packages)
# Open MPI is in the default set: the MPI test (tests/test_mpi.sh) is part of
# the plain pass of `make check`; so are the Python package's tests
# (tests/test_python.sh: pytest, NumPy, and venv, pip and setuptools for
# its install test).
pkgs="build-essential pkg-config ocl-icd-opencl-dev opencl-headers libclblast-dev
pocl-opencl-icd clinfo zlib1g-dev dataset-fashion-mnist libopenmpi-dev openmpi-bin
python3-numpy python3-pytest python3-venv python3-pip python3-setuptools"
[ "$1" = "--ci" ] && pkgs="$pkgs clang mesa-opencl-icd valgrind libclang-rt-14-dev"

if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "setup-debian.sh: not a Debian/Ubuntu system; install a C compiler, OpenCL headers" \
         "and ICD loader, an OpenCL driver (e.g. PoCL), CLBlast and zlib yourself." >&2
    exit 0
fi
missing=
for p in $pkgs; do
    s=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)
    [ "$s" = installed ] || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -eq 0 ]; then
    echo "setup-debian.sh: installing$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q && apt-get install -y -q --no-install-recommends $missing
    exit $?
fi
echo "setup-debian.sh: missing packages:$missing" >&2
echo "install them with:" >&2
echo "    sudo apt-get update && sudo apt-get install -y$missing" >&2
exit 1
