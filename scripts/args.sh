# shellcheck shell=bash
# Sourced first thing by the scripts that take no arguments (scripts/test,
# scripts/check-features, fio/fetch-fio-source.sh), then `no_arguments "$0" "$@"`
# (the guest stages of tests/vm: `stage_arguments`, below):
# --help or -h prints the script's header (script_header) and exits 0; any other
# argument is refused by name, with exit 2. (Before, these scripts ran as if it were not
# there: `./scripts/test --help` ran the whole suite.) Bash builtins only: it runs before
# anything else in the script, with whatever PATH.

# script_header SCRIPT: SCRIPT's first comment block after its #! line, without the '#'
# (fio/bench-vs-xnvme's --help prints it too).
script_header() {
    local line started=0
    while IFS= read -r line; do
        case $line in
        '#!'*) ;;
        '#'*)
            started=1
            line=${line#\#}
            echo "${line# }"
            ;;
        *) [ $started = 1 ] && break ;;
        esac
    done <"$1"
}

no_arguments() {
    local script=$1
    shift
    [ $# -eq 0 ] && return 0
    if [ $# -eq 1 ] && { [ "$1" = --help ] || [ "$1" = -h ]; }; then
        script_header "$script"
        exit 0
    fi
    echo "$script: takes no arguments (got: $*); $script --help says what it does" >&2
    exit 2
}

# stage_arguments SCRIPT PASS ARGS...: for the guest stages of tests/vm, which boot a
# guest and run themselves in it with a first argument of their own (--guest...), which
# passes. --help or -h prints the header, exit 0. With PASS=1 the stage takes
# `-- ARGS FOR ITS TEST BINARY` (or nothing), with PASS=0 nothing. Anything else is refused
# by name, exit 2. (Before, a stage booted its guest whatever it was given:
# `tests/vm/nvme-tests.sh --help` ran the whole NVMe stage.)
stage_arguments() {
    local script=$1 pass=$2
    shift 2
    case ${1:-} in
    --guest*) return 0 ;;
    --) [ "$pass" = 1 ] && return 0 ;;
    esac
    if [ "$pass" = 1 ] && [ $# -gt 0 ] && ! { [ $# -eq 1 ] && { [ "$1" = --help ] || [ "$1" = -h ]; }; }; then
        echo "$script: takes only -- ARGS FOR ITS TEST BINARY (got: $*); $script --help says what it does" >&2
        exit 2
    fi
    no_arguments "$script" "$@"
}
