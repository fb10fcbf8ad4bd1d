# devices.sh - sourced by tests/run.sh and the test scripts that choose the
# devices a run goes to: what clinfo lists, so that a run asks for devices
# only where the drivers give them.

# cl_count REGEX [VAR=VALUE ...]: the devices clinfo lists on platforms whose
# name matches REGEX, with those variables set (0 without clinfo)
cl_count() {
    c_re=$1
    shift
    command -v clinfo >/dev/null 2>&1 || { echo 0; return; }
    env "$@" clinfo -l 2>/dev/null | awk -v re="$c_re" '/^Platform/ { p = $0 ~ re } p && /Device/ { n++ } END { print n + 0 }'
}

# pocl_twins: PoCL gives two CPU devices with POCL_DEVICES="pthread pthread"
pocl_twins() { [ "$(cl_count 'Portable Computing Language' POCL_DEVICES="pthread pthread" RUSTICL_ENABLE=)" -ge 2 ]; }

# rusticl_here [VAR=VALUE ...]: a rusticl device is listed (in the
# environment as it is, or with those variables set)
rusticl_here() { [ "$(cl_count rusticl "$@")" -ge 1 ]; }
