#!/usr/bin/env bash
# CI's check of examples/cluster: run.sh twice on loopback, without and
# with a NATS node and a front-end SIGKILLed mid-run; both must publish
# the model, and the same model byte for byte.
set -euo pipefail
cd "$(dirname "$0")/../.."
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
PRIVREC_CLUSTER_DIR="$W/calm" PRIVREC_CLUSTER_KILL=0 PRIVREC_CLUSTER_PORT=${PRIVREC_CLUSTER_PORT:-14222} examples/cluster/run.sh
PRIVREC_CLUSTER_DIR="$W/kill" PRIVREC_CLUSTER_KILL=1 PRIVREC_CLUSTER_PORT=$((${PRIVREC_CLUSTER_PORT:-14222} + 10)) examples/cluster/run.sh
cmp "$W/calm/model.prm" "$W/kill/model.prm"
echo "--- the run with a NATS node and a front-end SIGKILLed published the same model, byte for byte"
