#!/bin/bash
# Slurm's Prolog= (slurm.conf): a capture of this node into envsnap's history at each
# job's start, "slurm job <id> start". Always exits 0: see watch-job.sh beside it.
"$(dirname -- "${BASH_SOURCE[0]}")/watch-job.sh" start
exit 0
