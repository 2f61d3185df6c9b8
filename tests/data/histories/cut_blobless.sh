#!/bin/sh
# Cut a shallow, blobless bundle of one branch of a large repository: every commit from EDGE
# (logged without its parents) to TIP and every tree of them, unchanged, and the blobs only of
# the files at the repository's root (what a sparse clone checks out). `git bundle create`
# cannot leave blobs out before git 2.41, so the bundle is written as its format says: the
# "# v2 git bundle" line, the branch's ref line, a blank line, then the pack.
#
#   cut_blobless.sh SOURCE_GIT_DIR BRANCH EDGE TIP OUT.bundle
set -eu
source=$(cd "$1" && pwd) branch=$2 edge=$3 tip=$4 out=$5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git init -q --bare "$work/cut.git"
export GIT_DIR="$work/cut.git"
echo "$source/objects" > "$GIT_DIR/objects/info/alternates"
git update-ref "refs/heads/$branch" "$tip"
echo "$edge" > "$GIT_DIR/shallow"
{
    git rev-list --objects --filter=blob:none "$branch" | cut -d' ' -f1
    for commit in $(git rev-list "$branch"); do
        git ls-tree "$commit" | awk '$2 == "blob" { print $3 }'
    done
} | sort -u > "$work/objects"
{
    printf '# v2 git bundle\n%s refs/heads/%s\n\n' "$tip" "$branch"
    git pack-objects --stdout -q < "$work/objects"
} > "$out"
echo "$(wc -l < "$work/objects") objects, $(wc -c < "$out") bytes"
