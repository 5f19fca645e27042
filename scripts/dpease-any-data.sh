#!/bin/sh
# dpease-any-data.sh: dp-pop, dp-ease before and dp-ease after issue 41's
# rule on every dataset, at ε = 1 and 10, δ = 1e-6: Recall@20, NDCG@20,
# coverage@20 and rare@20, mean of 5 seeds of a random 90/10 split
# (privrec evaluate --split random:0.9 --seed 1 --repeats 5 --rank 20),
# noise in the seeded test mode so every cell can be regenerated.
#
# Usage (from the repository root):
#   export PRIVREC_DATA=/work/shared/datasets     # the shipped datasets
#   export PRIVREC_EXTRA=/work/extra-datasets     # filmtrust/, ciaodvd/ (see docs/results/dpease-any-data.md)
#   PRIVREC_BEFORE=/path/to/privrec-before scripts/dpease-any-data.sh > cells.jsonl
#
# PRIVREC_BEFORE is a privrec binary built from main before the rule
# (9c1c803) with evaluate's coverage and rare@K (commit a693f94); without
# it the "before" cells are left out. One JSON line per cell; the table in
# docs/results/dpease-any-data.md is made from it with the jq command at
# the end of that page. Cells run one after another under nice.
set -eu
AFTER=${PRIVREC_AFTER:-./privrec}
[ -x "$AFTER" ] || go build -o "$AFTER" ./cmd/privrec
EXTRA=${PRIVREC_EXTRA:-/work/extra-datasets}
EPS=${EPS:-"1 10"}
SEEDS=${SEEDS:-5}

# name|evaluate flags
DATASETS="ml-latest-small|--data ml-latest-small
ml-100k|--data ml-100k
ml-1m|--data ml-1m
douban-monti|--data $PRIVREC_DATA/douban-monti/ratings_all.tsv --scale 1,5
yelp-hin|--data yelp-hin
filmtrust|--data $EXTRA/filmtrust/ratings.tsv --scale 0.5,4,0.5
ciaodvd|--data $EXTRA/ciaodvd/ratings.tsv --scale 1,5"
[ -n "${ONLY:-}" ] && DATASETS=$(echo "$DATASETS" | grep -E "^($ONLY)\|")

cell() { # name label binary eps flags...
	name=$1 label=$2 bin=$3 eps=$4
	shift 4
	# shellcheck disable=SC2086
	nice -n 10 "$bin" evaluate "$@" --eps "$eps" --delta 1e-6 --split random:0.9 --seed 1 \
		--repeats "$SEEDS" --rank 20 --json |
		jq -c --arg d "$name" --arg m "$label" --argjson e "$eps" '{dataset: $d, method: $m, eps: $e,
			users: .users, items: .items, ratings: .ratings,
			recall: .summary["recall@20"].mean, recall_sd: .summary["recall@20"].std,
			ndcg: .summary["ndcg@20"].mean, ndcg_sd: .summary["ndcg@20"].std,
			coverage: .summary["coverage@20"].mean, rare: .summary["rare@20"].mean,
			n: .summary["recall@20"].n, stats: .stats}'
}

echo "$DATASETS" | while IFS='|' read -r name flags; do
	for eps in $EPS; do
		# shellcheck disable=SC2086
		cell "$name" dp-pop "$AFTER" "$eps" $flags --method dp-pop --reproducible
		if [ -n "${PRIVREC_BEFORE:-}" ]; then
			# shellcheck disable=SC2086
			cell "$name" dp-ease-before "$PRIVREC_BEFORE" "$eps" $flags --method dp-ease --seeded
		fi
		# shellcheck disable=SC2086
		cell "$name" dp-ease "$AFTER" "$eps" $flags --method dp-ease --seeded
	done
done
