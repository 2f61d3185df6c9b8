#!/bin/bash
# Record one capture of this node into envsnap's watched history at a Slurm job's start or
# end, its reason naming the job: "slurm job 4242 start", "slurm job 4242 end". Run by
# watch-prolog.sh and watch-epilog.sh (Slurm's Prolog= and Epilog=, docs/guide/fleets.md):
#
#   watch-job.sh start|end
#
# Why Prolog/Epilog: slurmd runs them on each node of the job, once per job, as root, at
# its start and its end (Prolog at the job's first step on the node, or at allocation with
# PrologFlags=Alloc). TaskProlog would run once per task, as the job's user, and reads
# what it prints as the task's environment: the wrong place for a node's capture.
#
# It never fails the job: a Prolog that exits non-zero drains the node and requeues the
# job, so this exits 0 whatever happens and says a failure in one line on stderr and in
# syslog (tag envsnap-slurm). It bounds its own time: after ENVSNAP_JOB_CAPTURE_SECONDS the
# job goes on and the capture is left to finish on its own (it is never signalled; its
# record is made when it ends). It writes nothing itself: envsnap writes the store, and
# never through a link.
#
# Slurm gives a prolog no PATH and no arguments of yours: set these here, or point Prolog=
# at a wrapper that exports them and runs watch-prolog.sh.
ENVSNAP_PROGRAM=${ENVSNAP_PROGRAM:-/usr/local/bin/envsnap}   # the installed envsnap
ENVSNAP_STORE=${ENVSNAP_STORE:-/var/lib/envsnap}              # history: STORE/history
ENVSNAP_JOB_CAPTURE_SECONDS=${ENVSNAP_JOB_CAPTURE_SECONDS:-60}
export PATH=${PATH:-/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin}

phase=${1:-}
job=${SLURM_JOB_ID:-}

say() {   # one line to stderr (slurmd's log) and to syslog where there is one
    printf 'envsnap-slurm: %s\n' "$1" >&2
    command -v logger >/dev/null 2>&1 && logger -t envsnap-slurm -- "$1" 2>/dev/null
    return 0
}

record() {
    case "$phase" in
        start|end) ;;
        *) say "usage: watch-job.sh start|end (got '${phase}'); nothing recorded"; return ;;
    esac
    if [[ ! "$job" =~ ^[0-9_]+$ ]]; then
        say "no SLURM_JOB_ID in the environment ('${job}'): nothing recorded"; return
    fi
    if [[ ! "$ENVSNAP_JOB_CAPTURE_SECONDS" =~ ^[0-9]+$ ]] \
            || (( ENVSNAP_JOB_CAPTURE_SECONDS < 1 )); then
        say "ENVSNAP_JOB_CAPTURE_SECONDS is not a whole number of seconds above 0: "\
"'${ENVSNAP_JOB_CAPTURE_SECONDS}'; nothing recorded"; return
    fi
    if [[ ! -x "$ENVSNAP_PROGRAM" ]] && ! command -v -- "$ENVSNAP_PROGRAM" >/dev/null 2>&1; then
        say "job ${job} ${phase}: envsnap not found at ${ENVSNAP_PROGRAM}; nothing recorded"
        return
    fi
    local errors
    errors=$(mktemp "${TMPDIR:-/tmp}/envsnap-slurm.XXXXXX") || {
        say "job ${job} ${phase}: cannot make a temporary file; nothing recorded"; return; }
    # its own session, stdin closed: the capture never holds the job's terminal or group
    setsid "$ENVSNAP_PROGRAM" watch local --once --reason "slurm job ${job} ${phase}" \
        --store "$ENVSNAP_STORE" </dev/null >/dev/null 2>"$errors" &
    local capture=$! deadline=$(( SECONDS + ENVSNAP_JOB_CAPTURE_SECONDS ))
    while [[ -n "$(jobs -rp)" ]] && (( SECONDS < deadline )); do
        sleep 0.1
    done
    if [[ -n "$(jobs -rp)" ]]; then
        say "job ${job} ${phase}: the capture took over ${ENVSNAP_JOB_CAPTURE_SECONDS}s;"\
" the job goes on, the capture (pid ${capture}) finishes on its own"
        rm -f -- "$errors"
        return
    fi
    local code=0
    wait "$capture" || code=$?
    if (( code != 0 )); then
        say "job ${job} ${phase}: envsnap exited ${code}: $(tail -n 1 -- "$errors" | cut -c1-300)"
    fi
    rm -f -- "$errors"
}

record
exit 0
