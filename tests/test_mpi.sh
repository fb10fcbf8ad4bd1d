#!/bin/sh
# test_mpi.sh - the MPI build (make MPI=1) across processes: 2 ranks on
# localhost must end with the parameters of one process that sees the same
# global batches. Needs mpicc and mpirun (Debian: libopenmpi-dev
# openmpi-bin); skipped without them; skipped in the sanitizer pass (the
# plain pass runs it).
top=$(cd "$(dirname "$0")/.." && pwd)
if [ "${NNCL_SANITIZE:-0}" = 1 ]; then
    echo "SKIP mpi: not in the sanitizer pass (the plain pass runs it)"
    exit 0
fi
if ! command -v mpicc >/dev/null 2>&1 || ! command -v mpirun >/dev/null 2>&1; then
    echo "SKIP mpi: mpicc/mpirun not installed (apt-get install libopenmpi-dev openmpi-bin)"
    exit 0
fi
b=$top/build-mpi
mkdir -p "$b"
${MAKE:-make} -s -C "$top" MPI=1 B="$b" lib >"$b/build.log" 2>&1 || { echo "FAIL mpi: MPI=1 build failed"; tail "$b/build.log"; exit 1; }
mpicc -std=c99 -I"$top/include" -o "$b/mpi_train" "$top/tests/mpi/mpi_train.c" "$b/libnncl.a" \
    -fopenmp -lclblast -lOpenCL -lm -lpthread $(pkg-config --libs zlib 2>/dev/null || echo -lz) ||
    { echo "FAIL mpi: building mpi_train failed"; exit 1; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/nncl-mpi.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
run="mpirun --oversubscribe --bind-to none"
[ -n "$POCL_DEVICES" ] && run="$run -x POCL_DEVICES"
[ -n "$POCL_CACHE_DIR" ] && run="$run -x POCL_CACHE_DIR"
$run -np 1 "$b/mpi_train" "$dir/ref.safetensors" || { echo "FAIL mpi: the one-process run failed"; exit 1; }
$run -np 2 "$b/mpi_train" --compare "$dir/ref.safetensors"
