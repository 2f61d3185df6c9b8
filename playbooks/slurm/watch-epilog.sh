#!/bin/bash
# Slurm's Epilog= (slurm.conf): a capture of this node into envsnap's history at each
# job's end, "slurm job <id> end". Always exits 0: see watch-job.sh beside it.
"$(dirname -- "${BASH_SOURCE[0]}")/watch-job.sh" end
exit 0
