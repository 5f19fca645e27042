#!/usr/bin/env bash
# Throughput of masked aggregation with every party in its own process,
# pinned to a core (issue 46): in one invocation, REPS times each,
#
#   single  one privrec serve aggregating in its own process (no NATS);
#   nats1   privrec serve --nats (the coordinator), one nats-server with
#           JetStream and SHARDS privrec aggregate processes;
#   nats1tls  nats1 with the users, permissions and TLS of privrec
#           nats-config --nodes 1 (nkey authentication, TLS to the node);
#   nats3   the same on three clustered nats-server nodes (streams of 3
#           replicas, users, permissions and TLS from privrec nats-config).
#
# The simulated clients (privrec client --simulate) are one more process.
# Every party runs under /usr/bin/time -v (its CPU seconds and peak RSS
# over its whole life) and taskset -c CORE, and its CPU (utime + stime
# from /proc/PID/stat, sampled every 0.1 s) is read over the measured
# rounds: the training rounds after the first, back to back, from the
# first one's broadcast to the last one's commit (the server's ledger).
# Reported for each run: masked vectors a second and MB/s of masked input
# over those rounds, and for each party its CPU seconds in them, CPU ms a
# MB of masked input (an aggregator's and a front-end's also a MB of the
# share it handled: its shard, the vectors it published), and peak RSS;
# then the median and range over the runs. The machine's load averages (uptime) are recorded beside each run.
#
# The workload: hdpmf at --dim DIM over ml-latest-small's 9,724 items (the
# embedded data set: no PRIVREC_DATA needed), the first USERS users of its
# training split; a training round's masked vector is 9,724 × (DIM + 1)
# words of 4 bytes (DIM = 20: 817 KB), EPOCHS training rounds.
#
#   scripts/shard-throughput.sh                      # single and nats1, 3 runs each
#   CONFIGS="single nats1 nats3" REPS=5 scripts/shard-throughput.sh
#   OUT=/tmp/tp USERS=200 DIM=10 scripts/shard-throughput.sh
#   PROFILE=1 REPS=1 scripts/shard-throughput.sh     # and the server's CPU profiles
#
# FRONTS=N puts N front-ends (privrec front) between the clients and the
# coordinator of the sharded configurations (the marked place below).
# Cores (only two on the machine this was written on): SERVER_CPU (the
# single server and the coordinator), AGG_CPU (the aggregators), NATS_CPU
# (the nats-server nodes), CLIENT_CPU (the simulated clients) and
# FRONT_CPU (the front-ends), each a taskset list.
# Ports: 127.0.0.1:PORT.. (default 15222; a 3-node cluster's routes at
# PORT + 2000, the server at PORT + 4000), clear of examples/cluster's
# 14222+. Every process is killed on exit, and everything after TIMEOUT
# seconds a run.
set -euo pipefail
cd "$(dirname "$0")/.."
W=${OUT:-$(mktemp -d /tmp/privrec-shard-throughput.XXXXXX)}
P=${PORT:-15222}
USERS=${USERS:-300}
DIM=${DIM:-20}
EPOCHS=${EPOCHS:-4}
SHARDS=${SHARDS:-2}
REPS=${REPS:-3}
CONFIGS=${CONFIGS:-single nats1}
TIMEOUT=${TIMEOUT:-240}
SERVER_CPU=${SERVER_CPU:-0}
AGG_CPU=${AGG_CPU:-1}
NATS_CPU=${NATS_CPU:-1}
CLIENT_CPU=${CLIENT_CPU:-1}
FRONT_CPU=${FRONT_CPU:-0}
FRONTS=${FRONTS:-0}
PROFILE=${PROFILE:-0} # 1: the server's CPU profile in each run's server.prof (go tool pprof)
ITEMS=9724 # ml-latest-small's catalog
WORDS=$((ITEMS * (DIM + 1)))
mkdir -p "$W/bin"
rm -f "$W/results.tsv"
say() { echo "--- $*" >&2; }

pids=() # every process this script started (time's and its child's)
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

say "build privrec and nats-server (the version in go.mod) into $W/bin"
go build -o "$W/bin/privrec" ./cmd/privrec
go build -o "$W/bin/nats-server" github.com/nats-io/nats-server/v2
bin=$W/bin/privrec

# start NAME CPU CMD...: runs CMD pinned to CPU under /usr/bin/time -v
# (report in $d/NAME.time, stdout $d/NAME.out, stderr $d/NAME.log) in the
# background; sets party_pid to the command's own pid (time's child).
start() {
  local name=$1 cpu=$2
  shift 2
  /usr/bin/time -v -o "$d/$name.time" taskset -c "$cpu" "$@" >"$d/$name.out" 2>"$d/$name.log" &
  local tp=$!
  pids+=("$tp")
  party_pid=
  for _ in $(seq 100); do
    party_pid=$(pgrep -P "$tp" || true)
    [ -n "$party_pid" ] && break
    sleep 0.02
  done
  [ -n "$party_pid" ] || { echo "$name did not start" >&2; exit 1; }
  pids+=("$party_pid")
  parties+=("$name:$party_pid")
}

# sample NAME:PID...: every 0.1 s, "time name utime stime" (clock ticks)
# of each live process, until all have exited.
sample() {
  local live np f l
  while :; do
    live=0
    for np in "$@"; do
      if read -r l 2>/dev/null <"/proc/${np#*:}/stat"; then
        read -ra f <<<"${l##*) }"
        echo "$EPOCHREALTIME ${np%%:*} ${f[11]} ${f[12]}"
        live=1
      fi
    done
    [ $live = 1 ] || break
    sleep 0.1
  done
}

wait_ready() { # wait_ready LOG: a nats-server is up once it logs so
  for _ in $(seq 100); do grep -q "Server is ready" "$1" && return 0; sleep 0.1; done
  cat "$1" >&2
  exit 1
}

# run CONFIG REP: one run, in $W/CONFIG.REP; appends its figures to
# $W/results.tsv.
run() {
  local config=$1 rep=$2
  d=$W/$config.$rep
  rm -rf "$d" && mkdir -p "$d"
  parties=()
  pids=() # the previous run's processes have all exited
  local run=tp$rep nats=() aggkeys=() natsopts=() aggopts=()
  uptime >"$d/load.before"

  case $config in
    single) ;;
    nats1)
      start nats0 "$NATS_CPU" "$W/bin/nats-server" -js -a 127.0.0.1 -p "$P" -sd "$d/js"
      wait_ready "$d/nats0.log"
      nats=(--nats "nats://127.0.0.1:$P")
      ;;
    nats1tls | nats3)
      local nodes=${config#nats}
      nodes=${nodes%tls}
      local fronts=()
      [ "$FRONTS" != 0 ] && fronts=(--front-ends "$FRONTS")
      "$bin" nats-config --run "$run" --shards "$SHARDS" --nodes "$nodes" --port "$P" --cluster-port $((P + 2000)) \
        "${fronts[@]}" --out "$d/nats" >/dev/null
      for i in $(seq 0 $((nodes - 1))); do start "nats$i" "$NATS_CPU" "$W/bin/nats-server" -c "$d/nats/n$i.conf"; done
      for i in $(seq 0 $((nodes - 1))); do wait_ready "$d/nats$i.log"; done
      nats=(--nats "$(cat "$d/nats/nats-urls")" --nats-ca "$d/nats/tls/ca.pem")
      natsopts=(--nats-nkey "$d/nats/coordinator.nk")
      ;;
    *)
      echo "unknown configuration $config (single, nats1, nats1tls, nats3)" >&2
      exit 1
      ;;
  esac

  if [ ${#nats[@]} -gt 0 ]; then
    for s in $(seq 0 $((SHARDS - 1))); do
      "$bin" aggregate keygen --out "$d/key$s" >/dev/null
      aggkeys+=("$d/key$s/aggregator.pub")
      aggopts=()
      [ "$config" != nats1 ] && aggopts=(--nats-nkey "$d/nats/aggregator-$s.nk")
      start "agg$s" "$AGG_CPU" "$bin" aggregate "${nats[@]}" "${aggopts[@]}" --run "$run" --shard "$s" \
        --rounds $((EPOCHS + 1)) --wait 200ms --sign-key "$d/key$s/aggregator.key"
    done
    natsopts+=("${nats[@]}" --nats-run "$run" --shards "$SHARDS" --aggregator-keys "$(
      IFS=,
      echo "${aggkeys[*]}"
    )")
  fi

  local addr=127.0.0.1:$((P + 4000)) prof=()
  [ "$PROFILE" = 1 ] && prof=(--cpuprofile "$d/server.prof")
  start server "$SERVER_CPU" "$bin" serve --method hdpmf --dim "$DIM" --epochs "$EPOCHS" --secagg masked \
    --secagg-active=false --insecure --seed 7 --dev-tls --state "$d/state" --listen "$addr" \
    --min-clients "$USERS" --enroll-quiet 1s --enroll-rate 10000 --enroll-burst 10000 \
    --round-timeout 2m --linger 1s --out "$d/model.prm" "${prof[@]}" "${natsopts[@]}"
  for _ in $(seq 300); do [ -s "$d/state/tls/cert.pem" ] && break; sleep 0.1; done

  local url=https://$addr
  # ---- FRONT-ENDS (issue 46) -------------------------------------------
  # With FRONTS=N, a sharded run's clients go through N front-end
  # processes (privrec front), pinned to FRONT_CPU, which publish the
  # masked vectors to JetStream instead of the server; the clients spread
  # over them (--server with their URLs). The single server has none.
  if [ "$FRONTS" != 0 ] && [ ${#nats[@]} -gt 0 ]; then
    "$bin" front --help >/dev/null 2>&1 || {
      echo "FRONTS=$FRONTS: this privrec has no front command" >&2
      exit 1
    }
    local urls=() fopts f
    for f in $(seq 0 $((FRONTS - 1))); do
      fopts=()
      [ "$config" != nats1 ] && fopts=(--nats-nkey "$d/nats/front-$f.nk")
      start "front$f" "$FRONT_CPU" "$bin" front --coordinator "$url" --coordinator-ca "$d/state/tls/cert.pem" \
        --listen "127.0.0.1:$((P + 4001 + f))" --tls-cert "$d/state/tls/cert.pem" --tls-key "$d/state/tls/key.pem" \
        "${nats[@]}" "${fopts[@]}" --nats-run "$run" --front-token-file "$d/state/front-token"
      urls+=("https://127.0.0.1:$((P + 4001 + f))")
    done
    for f in $(seq 0 $((FRONTS - 1))); do
      for _ in $(seq 100); do grep -q "front-end serving" "$d/front$f.log" && break; sleep 0.1; done
    done
    url=$(
      IFS=,
      echo "${urls[*]}"
    )
  fi
  # ----------------------------------------------------------------------

  start client "$CLIENT_CPU" "$bin" client --insecure --server "$url" --ca "$d/state/tls/cert.pem" \
    --token-file "$d/state/enroll-token" --simulate "$USERS" --seed 7
  sample "${parties[@]}" >"$d/samples" &
  local sampler=$!
  ( # the run's watchdog
    for _ in $(seq $((TIMEOUT * 10))); do sleep 0.1; done
    echo "$config run $rep: timed out after $TIMEOUT s" >&2
    for np in "${parties[@]}"; do kill -9 "${np#*:}" 2>/dev/null || true; done
  ) &
  local dog=$!
  pids+=("$dog")
  # The server and aggregators end on their own, then the nodes.
  local np
  for np in "${parties[@]}"; do
    case ${np%%:*} in server | client | agg*) while kill -0 "${np#*:}" 2>/dev/null; do sleep 0.1; done ;; esac
  done
  for np in "${parties[@]}"; do
    case ${np%%:*} in nats* | front*) kill "${np#*:}" 2>/dev/null || true ;; esac
  done
  kill "$dog" 2>/dev/null || true
  wait "$sampler" 2>/dev/null || true
  for np in "${parties[@]}"; do while [ ! -s "$d/${np%%:*}.time" ]; do sleep 0.1; done; done
  uptime >"$d/load.after"
  "$bin" ledger --state "$d/state" --json >"$d/ledger.json"
  if [ "$(jq '[.[] | select(.phase == "train" and .participants == '"$USERS"')] | length' "$d/ledger.json")" != "$EPOCHS" ]; then
    echo "$config run $rep: not every training round released all $USERS vectors:" >&2
    "$bin" ledger --state "$d/state" >&2
    exit 1
  fi

  # The measured window: from the second training round's broadcast to
  # the last one's commit.
  local t0 t1 vectors
  read -r t0 t1 vectors < <(jq -r '
    def epoch: capture("^(?<s>[^.]+)(\\.(?<f>[0-9]+))?Z$") | (.s + "Z" | fromdate) + ("0." + (.f // "0") | tonumber);
    [.[] | select(.phase == "train")][1:] as $r
    | "\(($r[0].time | epoch) - $r[0].seconds) \($r[-1].time | epoch) \([$r[].participants] | add)"' "$d/ledger.json")
  local load
  load="$(sed 's/.*load average: //' "$d/load.before") / $(sed 's/.*load average: //' "$d/load.after")"
  # The share of the round's bytes a party handles: an aggregator its
  # shard's, a front-end the vectors it published (its log's last line).
  local published=0 f
  for f in "$d"/front*.log; do
    [ -e "$f" ] && published=$((published + $(tail -n 1 "$f" | jq '.published // 0')))
  done
  for np in "${parties[@]}"; do
    local name=${np%%:*} rss total share=1
    case $name in
      agg*) share=$(awk -v s="$SHARDS" 'BEGIN { print 1 / s }') ;;
      front*) share=$(awk -v p="$(tail -n 1 "$d/$name.log" | jq '.published // 0')" -v t="$published" 'BEGIN { print p / t }') ;;
    esac
    rss=$(awk -F': ' '/Maximum resident/ { print $2 }' "$d/$name.time")
    total=$(awk -F': ' '/User time|System time/ { s += $2 } END { print s }' "$d/$name.time")
    # CPU in the window, each end interpolated between two samples.
    awk -v t0="$t0" -v t1="$t1" -v name="$name" -v tck="$(getconf CLK_TCK)" '
      $2 == name { t[n] = $1; c[n] = ($3 + $4) / tck; n++ }
      function at(x,   i) {
        if (x <= t[0]) return c[0]
        for (i = 1; i < n; i++) if (t[i] >= x) return c[i-1] + (c[i] - c[i-1]) * (x - t[i-1]) / (t[i] - t[i-1])
        return c[n-1]
      }
      END { printf "%.3f\n", at(t1) - at(t0) }' "$d/samples" >"$d/$name.window"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$config" "$rep" "$name" "$(cat "$d/$name.window")" "$total" \
      "$rss" "$vectors" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')" "$load" "$share" >>"$W/results.tsv"
  done
}

for rep in $(seq 1 "$REPS"); do
  for config in $CONFIGS; do
    say "$config, run $rep: $USERS clients, hdpmf --dim $DIM, $EPOCHS training rounds of $((WORDS * 4 / 1000)) KB vectors ($(uptime | sed 's/.*load/load/'))"
    run "$config" "$rep"
  done
done

# results.tsv: config rep party window-cpu-s total-cpu-s rss-kB vectors window-s load share
echo
echo "== $USERS clients, hdpmf --dim $DIM on ml-latest-small: $((WORDS * 4)) B a masked vector; the $((EPOCHS - 1)) training rounds after the first measured"
echo "== cores: server/coordinator $SERVER_CPU, aggregators $AGG_CPU, nats-server $NATS_CPU, clients $CLIENT_CPU; $SHARDS shards"
echo
echo "-- each run (ms/MB: CPU a MB of the round's masked input; an aggregator's or front-end's per MB of its own share in brackets)"
awk -F'\t' -v words="$WORDS" '
  { mb = $7 * words * 4 / 1e6
    if (!(($1, $2) in seen)) { seen[$1, $2] = 1
      printf "%-7s run %s: %d vectors in %.2f s: %.1f vectors/s, %.1f MB/s (load averages before / after: %s)\n", $1, $2, $7, $8, $7 / $8, mb / $8, $9 }
    own = $10 < 1 ? sprintf(" (%.2f)", 1000 * $4 / $10 / mb) : ""
    printf "    %-7s CPU %6.2f s in the rounds (%5.1f%% of a core), %6.2f ms/MB%s; %6.2f s in all; peak RSS %4d MB\n", $3, $4, 100 * $4 / $8, 1000 * $4 / mb, own, $5, $6 / 1024 }' "$W/results.tsv"
echo
echo "-- median (min-max) over the runs"
awk -F'\t' -v words="$WORDS" '
  function med(a, k,   i, j, x, m) { # sorts a[1..k]; returns "median (min-max)"
    for (i = 2; i <= k; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j+1] = a[j]; a[j+1] = x }
    m = k % 2 ? a[(k+1)/2] : (a[k/2] + a[k/2+1]) / 2
    return sprintf(fmt, m) " (" sprintf(fmt, a[1]) "-" sprintf(fmt, a[k]) ")"
  }
  { mb = $7 * words * 4 / 1e6
    if (!(($1, $2) in seen)) { seen[$1, $2] = 1; nr[$1]++; vs[$1, nr[$1]] = $7 / $8; ms[$1, nr[$1]] = mb / $8 }
    key = $1 SUBSEP $3; if (!(key in np)) { order[++no] = key }
    np[key]++; cpu[key, np[key]] = 1000 * $4 / mb; rss[key, np[key]] = $6 / 1024; core[key, np[key]] = 100 * $4 / $8
    own[key, np[key]] = 1000 * $4 / $10 / mb; if ($10 < 1) part[key] = 1 }
  END {
    for (i = 1; i <= no; i++) {
      split(order[i], kk, SUBSEP); c = kk[1]
      if (!(c in done)) { done[c] = 1
        k = nr[c]; for (j = 1; j <= k; j++) { a[j] = vs[c, j]; b[j] = ms[c, j] }
        fmt = "%.1f"; x = med(a, k); y = med(b, k)
        printf "%-7s %s vectors/s, %s MB/s\n", c, x, y }
      k = np[order[i]]
      for (j = 1; j <= k; j++) { a[j] = cpu[order[i], j]; b[j] = rss[order[i], j]; e[j] = core[order[i], j] }
      fmt = "%.2f"; x = med(a, k); fmt = "%.0f"; y = med(b, k); z = med(e, k)
      w = ""
      if (order[i] in part) { for (j = 1; j <= k; j++) a[j] = own[order[i], j]; fmt = "%.2f"; w = ", " med(a, k) " a MB of its own share" }
      printf "    %-7s %s CPU ms/MB%s, %s%% of a core, peak RSS %s MB\n", kk[2], x, w, z, y
    }
  }' "$W/results.tsv"
echo
echo "(every run's files, and results.tsv, in $W)"
