#!/usr/bin/env bash
# Runs the README's deployment walkthrough as written: the sh block between
# the walkthrough markers, in a fresh directory, with privrec built from this
# checkout on PATH. It fails if any line fails or the device client printed
# no recommendations.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
go build -o "$dir/bin/privrec" ./cmd/privrec
mkdir -p "$dir/examples" && cp examples/*.csv "$dir/examples/"
sed -n '/<!-- walkthrough:start/,/<!-- walkthrough:end/p' README.md | sed -n '/^```sh$/,/^```$/p' | sed '1d;$d' > "$dir/walkthrough.sh"
test -s "$dir/walkthrough.sh"
cd "$dir"
PATH="$dir/bin:$PATH" bash -euo pipefail walkthrough.sh > out.txt 2> err.txt || { cat err.txt out.txt; exit 1; }
cp err.txt "${WALKTHROUGH_LOG:-/tmp/privrec-walkthrough.log}"
cat out.txt
grep -q "Lord of the Rings\|Star Wars\|^ *1\b\|^1 " out.txt || grep -qi "recommend" out.txt || { echo "no recommendations printed"; cat err.txt; exit 1; }
test -s run1/model.prm
echo "walkthrough passed"
