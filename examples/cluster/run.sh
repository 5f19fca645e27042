#!/usr/bin/env bash
# A sharded privrec run on a three-node NATS JetStream cluster, all on
# loopback: three nats-server nodes (configs, users and TLS from privrec
# nats-config --nodes 3), the coordinator (privrec serve --nats), two
# front-ends (privrec front) that carry the clients' masked vectors, two
# aggregators (privrec aggregate), and 200 simulated clients calling the
# front-ends. Halfway through, the node leading the control stream and
# front-end 0 are killed with SIGKILL; the run goes on on the other two
# nodes and the other front-end, and the model is published. See
# examples/cluster/README.md.
#
#   examples/cluster/run.sh              # in a temporary directory
#   PRIVREC_CLUSTER_DIR=/tmp/c examples/cluster/run.sh
#   PRIVREC_CLUSTER_KILL=0 ...           # no kill
#   PRIVREC_CLUSTER_PORT=24222 ...       # client ports 24222-24224, routes +2000, serve +4000, front-ends +4001, +4002
set -euo pipefail
cd "$(dirname "$0")/../.."
W=${PRIVREC_CLUSTER_DIR:-$(mktemp -d)}
P=${PRIVREC_CLUSTER_PORT:-14222}
KILL=${PRIVREC_CLUSTER_KILL:-1}
USERS=200
mkdir -p "$W/bin"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT
say() { echo "--- $*"; }

say "build privrec and nats-server (the version in go.mod) into $W/bin"
go build -o "$W/bin/privrec" ./cmd/privrec
go build -o "$W/bin/nats-server" github.com/nats-io/nats-server/v2
privrec() { "$W/bin/privrec" "$@"; }

say "users, permissions, node configs and TLS of run demo: privrec nats-config --nodes 3 --front-ends 2"
privrec nats-config --run demo --shards 2 --front-ends 2 --nodes 3 --port "$P" --cluster-port $((P + 2000)) --out "$W/nats"
URLS=$(cat "$W/nats/nats-urls")
CA="$W/nats/tls/ca.pem"

say "three NATS nodes"
for i in 0 1 2; do
  "$W/bin/nats-server" -c "$W/nats/n$i.conf" >"$W/n$i.log" 2>&1 &
  pids+=($!)
  eval "node$i=$!"
done
for i in 0 1 2; do # a node is up once it listens
  for _ in $(seq 100); do
    grep -q "Server is ready" "$W/n$i.log" && break
    sleep 0.1
  done
  grep -q "Server is ready" "$W/n$i.log" || { cat "$W/n$i.log"; exit 1; }
done

say "a synthetic data set: $USERS users, 20 ratings each of 100 items"
awk -v users=$USERS 'BEGIN { srand(7); for (u = 1; u <= users; u++) for (k = 0; k < 20; k++) {
  i = (u * 7 + k * 13) % 100 + 1; printf "%d\t%d\t%d\n", u, i, 1 + int(rand() * 5) } }' >"$W/ratings.tsv"

say "two aggregators, each with its signing key (privrec aggregate keygen) and its NATS seed"
for s in 0 1; do
  privrec aggregate keygen --out "$W/agg$s"
  privrec aggregate --nats "$URLS" --nats-ca "$CA" --nats-nkey "$W/nats/aggregator-$s.nk" \
    --run demo --shard $s --rounds 3 --wait 200ms --sign-key "$W/agg$s/aggregator.key" >"$W/agg$s.out" 2>"$W/agg$s.log" &
  pids+=($!)
  eval "agg$s=$!"
done

say "the coordinator: privrec serve --nats (hdpmf, 2 epochs: 3 masked rounds)"
ADDR=127.0.0.1:$((P + 4000))
privrec serve --method hdpmf --epochs 2 --secagg masked --secagg-active=false --insecure --seed 7 --scale 1,5,1 \
  --dev-tls --state "$W/state" --listen "$ADDR" --items "$W/ratings.tsv" --min-clients $USERS \
  --enroll-quiet 500ms --round-timeout 1m --linger 2s --out "$W/model.prm" \
  --nats "$URLS" --nats-ca "$CA" --nats-nkey "$W/nats/coordinator.nk" --nats-run demo --shards 2 \
  --aggregator-keys "$W/agg0/aggregator.pub,$W/agg1/aggregator.pub" >"$W/serve.out" 2>"$W/serve.log" &
serve=$!
pids+=($serve)
for _ in $(seq 300); do [ -s "$W/state/tls/cert.pem" ] && break; sleep 0.1; done
sleep 0.2 # the key is written with the certificate

say "two front-ends: privrec front, each with its NATS seed (serving with the coordinator's dev TLS pair)"
FRONTS=""
for i in 0 1; do
  FADDR=127.0.0.1:$((P + 4001 + i))
  "$W/bin/privrec" front --coordinator "https://$ADDR" --coordinator-ca "$W/state/tls/cert.pem" --listen "$FADDR" \
    --tls-cert "$W/state/tls/cert.pem" --tls-key "$W/state/tls/key.pem" \
    --nats "$URLS" --nats-ca "$CA" --nats-nkey "$W/nats/front-$i.nk" --nats-run demo \
    --front-token-file "$W/state/front-token" >"$W/front$i.log" 2>&1 &
  pids+=($!)
  eval "front$i=$!"
  FRONTS="$FRONTS${FRONTS:+,}https://$FADDR"
done
# The clients start once both front-ends listen: a front-end that is not
# up yet is tried last by every client for 10 s (deploy's failover), which
# is longer than this small run's masked rounds.
for i in 0 1; do
  for _ in $(seq 300); do grep -q '"front-end serving"' "$W/front$i.log" 2>/dev/null && break; sleep 0.1; done
  grep -q '"front-end serving"' "$W/front$i.log" || { echo "front-end $i did not start:"; cat "$W/front$i.log"; exit 1; }
done

if [ "$KILL" = 1 ]; then
  ( # once the first round is aggregated, SIGKILL the node leading the control stream
    for _ in $(seq 1200); do grep -q "^round 1 " "$W/agg0.out" 2>/dev/null && break; sleep 0.1; done
    leader=0 # the node that logged its election as the control stream's leader
    for i in 0 1 2; do
      grep -q "new stream leader for '\$G > PRIVREC_demo_CTL'" "$W/n$i.log" && leader=$i
    done
    eval "pid=\$node$leader"
    echo "--- SIGKILL node n$leader (pid $pid), the control stream's leader, and front-end 0 (pid $front0)" >&2
    kill -9 "$pid" "$front0"
  ) &
  pids+=($!)
fi

say "$USERS simulated clients, calling the front-ends"
privrec client --insecure --server "$FRONTS" --ca "$W/state/tls/cert.pem" --token-file "$W/state/enroll-token" \
  --simulate $USERS --data "$W/ratings.tsv" --split random:0.9 --seed 7 --scale 1,5,1 >"$W/client.out" 2>"$W/client.log"
wait "$serve"
wait "$agg0" "$agg1"
say "aggregators"
cat "$W/agg0.out" "$W/agg1.out"
for s in 0 1; do
  [ "$(grep -c "^round [123] shard $s: folded $USERS " "$W/agg$s.out")" = 3 ] || { echo "aggregator $s did not fold 3 rounds of $USERS"; exit 1; }
done
test -s "$W/model.prm"
kill "$front1" && wait "$front1" || true
say "front-end 1: $(grep -o '"published":[0-9]*' "$W/front1.log")"
grep -q '"published":[1-9]' "$W/front1.log" || { echo "front-end 1 published no masked vector"; exit 1; }
say "published $W/model.prm ($(wc -c <"$W/model.prm") bytes)"
