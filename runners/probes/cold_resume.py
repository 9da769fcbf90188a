"""G3 probes: the cold-resume comparison on the serving engine (RUNBOOK §4: engine, tier
sizing, passes, drain, guarded flush, /metrics window) and the RDMA counter samples of the
shared read-back (§3.3, §4.5)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from typing import Any

from runners.probes.base import NAME, PATH, Param, Probe
from runners.probes.throughput import BENCH_SCRIPT

# One arm pass is a sequence of probes (runners.plans expands it): start the engine for the arm
# and wait until it is ready (first /metrics scrape kept on the node as t0), the tier sizing, a
# warm-up pass, drain, the guarded cache flush, the measured pass, the /metrics window (t0 and t1
# printed together), stop. Engine probes find each other through files in the run's result
# directory named by ``tag`` (unique per node, phase, arm and round) and ``port``. Every engine
# probe prints a /metrics scrape, read by the vllm_metrics parser: a single scrape yields no
# measurement (it is kept raw), two yield their difference.

ARM = Param(r"local|array|recompute", rule="a G3 arm: local, array or recompute")
TAG = Param(r"[A-Za-z0-9][A-Za-z0-9._-]{0,119}", rule="a run tag of letters, digits, . _ -")
SECONDS = Param(r"\d{1,4}(\.\d{1,3})?", "5", rule="seconds such as 5 or 0.05")
FRACTION = Param(r"0\.\d{1,3}|1(\.0{1,3})?", "0.90", rule="a fraction such as 0.90")
OPTIONAL_PATH = Param(r"(/[A-Za-z0-9._/-]{1,200})?", "",
                      rule="empty or an absolute path of letters, digits, . _ - /")
# No "." or ".." component: the cache-flush guard compares these paths as strings.
GUARDED_PATH = Param(r"(/[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}){1,16}",
                     rule="an absolute path without . or .. components")
BLOCK_DEVICE = Param(r"/dev/[A-Za-z0-9_-][A-Za-z0-9._/-]{0,100}",
                     rule="a block device such as /dev/nvme1n1")
KV_CONNECTOR = Param(r"LMCacheConnectorV1|LMCacheMPConnector", "LMCacheConnectorV1",
                     rule="LMCacheConnectorV1 or LMCacheMPConnector")
PORT = Param(int, 8000, 1024, 65535)

# Shell helpers shared by the engine scripts. ``scrape NAME URL`` prints one marked /metrics
# scrape (the node's time with it, RUNBOOK §0); ``engine_note`` puts the first line of the
# engine's log on stderr, so every run names the engine it talked to.
_ENGINE_HELPERS = r"""
scrape() {
  body=$(curl -sf --max-time 30 "$2") || { echo "cannot scrape $2" >&2; return 1; }
  printf '# acceptance-scrape: name=%s time=%s url=%s\n%s\n' "$1" "$(date +%s.%N)" "$2" "$body"
}
engine_note() {
  [ -r "$dir/engine-$tag.log" ] && head -n 1 -- "$dir/engine-$tag.log" >&2
  return 0
}
"""

# $1 result dir, $2 arm, $3 port, $4 LMCache config, $5 tag, $6 poll interval, $7 max polls,
# $8 --kv-transfer-config JSON; the rest: vllm serve arguments. The engine runs in its own
# session (it outlives this command); its pid is kept in DIR/engine-PORT.pid.
ENGINE_START_SCRIPT = _ENGINE_HELPERS + r"""
dir=$1 arm=$2 port=$3 config=$4 tag=$5 interval=$6 polls=$7 kv=$8; shift 8
url="http://127.0.0.1:$port"
mkdir -p -- "$dir" || exit $?
if curl -s -o /dev/null --max-time 5 "$url/health"; then
  echo "refused: something already answers on $url (an engine left running?); stop it first" >&2
  exit 3
fi
log="$dir/engine-$tag.log"
if [ "$arm" = recompute ]; then
  PYTHONHASHSEED=0 setsid vllm serve "$@" --port "$port" >"$log" 2>&1 </dev/null &
else
  [ -r "$config" ] || { echo "cannot read the LMCache config $config" >&2; exit 2; }
  prom="$dir/prometheus-$tag"
  mkdir -p -- "$prom" || exit $?
  PYTHONHASHSEED=0 LMCACHE_CONFIG_FILE="$config" PROMETHEUS_MULTIPROC_DIR="$prom" \
    setsid vllm serve "$@" --port "$port" --kv-transfer-config "$kv" >"$log" 2>&1 </dev/null &
fi
pid=$!
echo "$pid" > "$dir/engine-$port.pid"
i=0
until curl -sf -o /dev/null --max-time 10 "$url/health"; do
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "the engine (pid $pid) exited before it was ready; the end of $log:" >&2
    tail -n 20 -- "$log" >&2
    rm -f -- "$dir/engine-$port.pid"
    exit 1
  fi
  i=$((i + 1))
  if [ "$i" -ge "$polls" ]; then
    echo "the engine was not ready after $polls polls of $url/health; stopping it" >&2
    kill "$pid" 2>/dev/null
    exit 124
  fi
  sleep "$interval"
done
models=$(curl -sf --max-time 30 "$url/v1/models") \
  || { echo "GET $url/v1/models failed" >&2; exit 1; }
engine_note
echo "engine pid $pid ready on $url after $i polls: $models" >&2
scrape t0 "$url/metrics" > "$dir/metrics-$tag.t0.prom" || exit 1
cat -- "$dir/metrics-$tag.t0.prom"
"""

# The host-memory tier of the arm's LMCache config vs the workload's working set (RUNBOOK §4.2),
# as a Prometheus text the vllm_metrics parser reads. $1 config, $2 prefixes, $3 prefix length
# (tokens), $4 KV bytes per token, $5 tensor-parallel ranks. LMCache reads max_local_cpu_size in
# GB (default 5) and allocates it per TP rank (each rank's worker has its own CPU backend), so
# the host tier is that × the ranks; counted here as GiB, the larger reading, so the check
# "working set > host tier" errs on the safe side.
TIER_SIZING_SCRIPT = r"""
config=$1 prefixes=$2 prefix_len=$3 bpt=$4 tp=${5:-1}
[ -r "$config" ] || { echo "cannot read the LMCache config $config" >&2; exit 2; }
gb=$(sed -n 's/^[[:space:]]*max_local_cpu_size:[[:space:]]*\([0-9][0-9.]*\).*/\1/p' "$config" \
  | head -n 1)
origin="max_local_cpu_size: $gb"
[ -n "$gb" ] || { gb=5; origin="LMCache default 5"; }
host=$(awk -v g="$gb" -v t="$tp" 'BEGIN { printf "%.0f", g * 1073741824 * t }')
ws=$(awk -v p="$prefixes" -v l="$prefix_len" -v b="$bpt" 'BEGIN { printf "%.0f", p * l * b }')
printf '# acceptance-sizing: %s (%s GB x 1024^3 B) per TP rank x %s ranks in %s\n' \
  "$origin" "$gb" "$tp" "$config"
printf '# acceptance-sizing: working set = %s prefixes x %s tokens x %s B/token\n' \
  "$prefixes" "$prefix_len" "$bpt"
printf '# TYPE acceptance_host_tier_bytes gauge\nacceptance_host_tier_bytes %s\n' "$host"
printf '# TYPE acceptance_working_set_bytes gauge\nacceptance_working_set_bytes %s\n' "$ws"
"""

# Wait until the tier's asynchronous writes are done (RUNBOOK §4.3 step 3):
# lmcache:num_stored_tokens steady between two polls and lmcache:remote_put_task_num 0.
# $1 dir, $2 port, $3 tag, $4 poll interval, $5 max polls.
ENGINE_DRAIN_SCRIPT = _ENGINE_HELPERS + r"""
dir=$1 port=$2 tag=$3 interval=$4 polls=$5
url="http://127.0.0.1:$port/metrics"
value() {
  printf '%s\n' "$2" | awk -v n="$1" '
    { name = $1; sub(/\{.*/, "", name) }
    name == n || name == n "_total" {
      line = $0; sub(/^[^ {]+(\{[^}]*\})?[ \t]+/, "", line); split(line, v, /[ \t]+/); s += v[1]
    }
    END { printf "%.0f", s }'
}
engine_note
prev=; i=0
while :; do
  body=$(curl -sf --max-time 30 "$url") || { echo "cannot scrape $url" >&2; exit 1; }
  stored=$(value lmcache:num_stored_tokens "$body")
  puts=$(value lmcache:remote_put_task_num "$body")
  if [ "$stored" = "$prev" ] && [ "$puts" = 0 ]; then break; fi
  prev=$stored
  i=$((i + 1))
  if [ "$i" -ge "$polls" ]; then
    echo "writes still in flight after $polls polls (stored $stored, put tasks $puts)" >&2
    exit 124
  fi
  sleep "$interval"
done
echo "drained: lmcache:num_stored_tokens steady at $stored, no remote put task" >&2
printf '# acceptance-scrape: name=drained time=%s url=%s\n%s\n' "$(date +%s.%N)" "$url" "$body"
"""

# The guarded flush before a measured pass (RUNBOOK §4.3 step 3): refuse unless the arm's cache
# directory lies under the mount point and that mount comes from the expected device; then
# (optionally) reset the engine's prefix cache, sync and drop the page cache
# (sysctl -w vm.drop_caches=3 is echo 3 > /proc/sys/vm/drop_caches). Needs root on the node.
# $1 dir, $2 port, $3 tag, $4 cache dir, $5 mount point, $6 device, $7 reset (0|1).
CACHE_EVICT_SCRIPT = _ENGINE_HELPERS + r"""
dir=$1 port=$2 tag=$3 cache=$4 mnt=$5 dev=$6 reset=$7
refuse() { echo "refused: $*; nothing was flushed" >&2; exit 3; }
case "$cache/" in "$mnt"/*) ;; *) refuse "the cache directory $cache is not under $mnt";; esac
found=$(findmnt -n -o SOURCE,TARGET --target "$cache") || refuse "findmnt cannot place $cache"
set -- $found
[ "$2" = "$mnt" ] || refuse "$cache is on the mount $2, not on $mnt"
[ "$1" = "$dev" ] || refuse "$mnt is mounted from $1, not from $dev"
echo "guard: $cache is on $mnt, mounted from $dev" >&2
if [ "$reset" = 1 ]; then
  curl -sf -X POST --max-time 60 "http://127.0.0.1:$port/reset_prefix_cache" >&2 \
    || refuse "POST /reset_prefix_cache failed"
fi
sync || exit $?
sysctl -w vm.drop_caches=3 >&2 || exit $?
engine_note
scrape evicted "http://127.0.0.1:$port/metrics"
"""

# The arm's /metrics window: the t0 scrape kept at engine start, then a fresh t1 scrape.
# $1 dir, $2 port, $3 tag.
METRICS_WINDOW_SCRIPT = _ENGINE_HELPERS + r"""
dir=$1 port=$2 tag=$3
keep="$dir/metrics-$tag.t0.prom"
[ -r "$keep" ] || { echo "no t0 scrape $keep (kept when the arm's engine started)" >&2; exit 1; }
engine_note
cat -- "$keep" || exit $?
scrape t1 "http://127.0.0.1:$port/metrics"
"""

# Stop the arm's engine: only the pid this run recorded, and only if it still is vllm serve;
# a last scrape first (kept raw), then TERM, KILL after 30 s. $1 dir, $2 port, $3 tag.
ENGINE_STOP_SCRIPT = _ENGINE_HELPERS + r"""
dir=$1 port=$2 tag=$3
pidfile="$dir/engine-$port.pid"
[ -r "$pidfile" ] || { echo "no engine pid file $pidfile: no engine of this run" >&2; exit 1; }
read -r pid < "$pidfile"
case "$pid" in ''|*[!0-9]*) echo "bad pid file $pidfile" >&2; exit 1;; esac
cmd=$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null)
case "$cmd" in
  *vllm*serve*) ;;
  *) echo "pid $pid is no vllm serve process any more; nothing killed" >&2
     rm -f -- "$pidfile"; exit 1;;
esac
engine_note
rc=0
scrape final "http://127.0.0.1:$port/metrics" || rc=1
kill -TERM "$pid" 2>/dev/null
i=0
while kill -0 "$pid" 2>/dev/null; do
  state=$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)
  [ "$state" = Z ] && break
  i=$((i + 1))
  [ "$i" -eq 300 ] && kill -KILL "$pid" 2>/dev/null
  [ "$i" -ge 400 ] && { echo "engine $pid survived SIGKILL" >&2; exit 1; }
  sleep 0.1
done
rm -f -- "$pidfile"
echo "engine $pid stopped" >&2
exit "$rc"
"""

# One sample of an RDMA port counter with the node's time (RUNBOOK §3.3: port_rcv_data counts
# 4-byte words; plain rx_bytes misses RoCE traffic). t0 keeps its line in the result directory;
# t1 prints the kept t0 line and its own, for the nic_counters parser.
# $1 t0|t1, $2 dir, $3 tag, $4 RDMA device, $5 port, $6 counter.
COUNTER_SAMPLE_SCRIPT = r"""
sample=$1 dir=$2 tag=$3 dev=$4 port=$5 counter=$6
file="/sys/class/infiniband/$dev/ports/$port/counters/$counter"
keep="$dir/counter-$tag.t0"
mkdir -p -- "$dir" || exit $?
value=$(cat -- "$file") || { echo "cannot read $file" >&2; exit 2; }
line="sample=$sample time=$(date +%s.%N) device=$dev port=$port counter=$counter value=$value"
if [ "$sample" = t0 ]; then
  printf '%s\n' "$line" > "$keep" || exit $?
else
  [ -r "$keep" ] || { echo "no t0 sample $keep" >&2; exit 1; }
  cat -- "$keep" || exit $?
fi
printf '%s\n' "$line"
"""


# The shared read-back's counter, sampled every second in the background from the barrier to
# the end of the measured pass (RUNBOOK §4.4, §4.5). ``start`` checks the sysfs counter can be
# read, starts the sampler (bounded: at most ``max_samples`` samples), and prints the node's
# clock (the service stamps its own around this SSH round trip: the node's clock skew);
# ``stop`` takes a last sample, stops the sampler and prints every sample.
COUNTER_SERIES_SCRIPT = r"""
action=$1 dir=$2 tag=$3 dev=$4 port=$5 counter=$6 most=$7
file="/sys/class/infiniband/$dev/ports/$port/counters/$counter"
series="$dir/series-$tag"
sample() {
  v=$(cat -- "$file") || return 1
  printf 'time=%s device=%s port=%s counter=%s value=%s\n' "$(date +%s.%N)" "$dev" "$port" \
    "$counter" "$v" >> "$series"
}
if [ "$action" = start ]; then
  mkdir -p -- "$dir" || exit $?
  cat -- "$file" >/dev/null || { echo "cannot read $file" >&2; exit 2; }
  : > "$series" || exit $?
  printf 'clock time=%s\n' "$(date +%s.%N)"
  ( n=0; while [ "$n" -lt "$most" ]; do sample || exit 1; n=$((n + 1)); sleep 1; done ) \
    </dev/null >/dev/null 2>&1 &
  echo $! > "$series.pid"
else
  [ -r "$series.pid" ] || { echo "no sampler started ($series.pid)" >&2; exit 1; }
  kill "$(cat -- "$series.pid")" 2>/dev/null
  rm -f -- "$series.pid"
  sample || { echo "cannot read $file" >&2; exit 2; }
  cat -- "$series"
fi
"""

def _serve_args(p: dict[str, Any]) -> list[str]:
    return [p["model_path"], "--served-model-name", p["served_model_name"],
            "--tensor-parallel-size", str(p["tensor_parallel_size"]),
            "--max-model-len", str(p["max_model_len"]),
            "--gpu-memory-utilization", p["gpu_memory_utilization"]]


def _kv_config(p: dict[str, Any]) -> str:
    return json.dumps({"kv_connector": p["kv_connector"], "kv_role": "kv_both"},
                      separators=(",", ":"))


def _engine_start_argv(p: dict[str, Any]) -> list[str]:
    return ["sh", "-c", ENGINE_START_SCRIPT, "kv-engine-start", p["result_dir"], p["arm"],
            str(p["port"]), p["lmcache_config"], p["tag"], p["poll_interval"],
            str(p["ready_polls"]), _kv_config(p), *_serve_args(p)]


def _engine_start_summary(p: dict[str, Any]) -> str:
    if p["arm"] == "recompute":
        env, kv = "PYTHONHASHSEED=0", []
    else:
        env = f"PYTHONHASHSEED=0 LMCACHE_CONFIG_FILE={p['lmcache_config']}"
        kv = ["--kv-transfer-config", _kv_config(p)]
    serve = shlex.join(["vllm", "serve", *_serve_args(p), "--port", str(p["port"]), *kv])
    return (f"{env} {serve} (in the background, arm {p['arm']}); then GET /health every "
            f"{p['poll_interval']} s until ready (at most {p['ready_polls']} polls), GET "
            f"/v1/models, and the /metrics scrape t0 kept on the node")


def _kv_bench_argv(p: dict[str, Any]) -> list[str]:
    concurrency = p["concurrency"]
    return [
        "sh", "-c", BENCH_SCRIPT, "vllm-bench", p["result_dir"],
        f"g3-{p['tag']}-{p['stage']}.json",
        "--backend", "openai", "--base-url", f"http://127.0.0.1:{p['port']}",
        "--model", p["served_model_name"], "--tokenizer", p["tokenizer"],
        "--dataset-name", "prefix_repetition",
        "--prefix-repetition-prefix-len", str(p["prefix_len"]),
        "--prefix-repetition-suffix-len", str(p["suffix_len"]),
        "--prefix-repetition-num-prefixes", str(p["num_prefixes"]),
        "--prefix-repetition-output-len", str(p["output_len"]), "--ignore-eos",
        "--num-prompts", str(p["num_prompts"]), "--max-concurrency", str(concurrency),
        "--request-rate", "inf", "--temperature", "0", "--seed", str(p["seed"]),
        "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99",
        "--metadata", f"concurrency={concurrency}", f"phase={p['phase']}", f"arm={p['arm']}",
        f"round={p['round']}", f"pass={p['stage']}", "--disable-tqdm",
    ]


def _kv_bench_summary(p: dict[str, Any]) -> str:
    argv = _kv_bench_argv(p)
    return shlex.join(["vllm", "bench", "serve", *argv[6:], "--save-result", "--result-dir",
                       p["result_dir"], "--result-filename", argv[5]]) + \
        "; then the result file is printed"


_BENCH_WORKLOAD = {
    "tokenizer": PATH, "prefix_len": Param(int, 30000, 1, 1_000_000),
    "suffix_len": Param(int, 512, 0, 1_000_000), "num_prefixes": Param(int, 64, 1, 100_000),
    "output_len": Param(int, 256, 1, 100_000), "num_prompts": Param(int, 256, 1, 1_000_000),
    "concurrency": Param(int, 16, 1, 4096), "seed": Param(int, 1, 0, 2**31),
}
_ENGINE_REF = {"result_dir": PATH, "port": PORT, "tag": TAG}


def _engine_script(script: str, name: str) -> Callable[[dict[str, Any]], list[str]]:
    """argv of a fixed engine script taking the arm's result dir, engine port and tag."""
    return lambda p: ["sh", "-c", script, name, p["result_dir"], str(p["port"]), p["tag"]]


COLD_RESUME_PROBES: tuple[Probe, ...] = (
    Probe(
        "kv_engine_start", "inference", "vllm_metrics", ("vllm", "--version"), 3600,
        {**_ENGINE_REF, "arm": ARM, "model_path": PATH, "served_model_name": NAME,
         "tensor_parallel_size": Param(int, 8, 1, 64),
         "max_model_len": Param(int, 65536, 1, 10_000_000),
         "gpu_memory_utilization": FRACTION, "kv_connector": KV_CONNECTOR,
         "lmcache_config": OPTIONAL_PATH, "poll_interval": SECONDS,
         "ready_polls": Param(int, 720, 1, 100_000)},
        _engine_start_argv,
        "serving engine for a G3 arm, started and polled until ready (RUNBOOK §4.1, §4.3)",
        summary=_engine_start_summary, cleanup="kv_engine_stop",
    ),
    Probe(
        "kv_tier_sizing", "inference", "vllm_metrics", ("vllm", "--version"), 30,
        {"lmcache_config": PATH, "num_prefixes": Param(int, 64, 1, 100_000),
         "prefix_len": Param(int, 30000, 1, 1_000_000),
         "kv_bytes_per_token": Param(int, None, 1, 100_000_000),
         "tensor_parallel_size": Param(int, 1, 1, 64)},
        lambda p: ["sh", "-c", TIER_SIZING_SCRIPT, "kv-tier-sizing", p["lmcache_config"],
                   str(p["num_prefixes"]), str(p["prefix_len"]),
                   str(p["kv_bytes_per_token"]), str(p["tensor_parallel_size"])],
        "working set vs the host-memory tier of the arm's LMCache config (RUNBOOK §4.2)",
        summary=lambda p: (
            f"max_local_cpu_size from {p['lmcache_config']} × {p['tensor_parallel_size']} TP "
            f"ranks vs working set "
            f"{p['num_prefixes']} prefixes × {p['prefix_len']} tokens × "
            f"{p['kv_bytes_per_token']} B/token"
        ),
    ),
    Probe(
        "kv_bench_pass", "inference", "vllm_bench", ("vllm", "--version"), 4 * 3600,
        {**_ENGINE_REF, **_BENCH_WORKLOAD, "served_model_name": NAME, "arm": ARM,
         "phase": Param(r"compare|readback", rule="compare or readback"),
         "round": Param(int, 1, 1, 100),
         "stage": Param(r"warmup|measured", rule="warmup or measured")},
        _kv_bench_argv,
        "warm-up or measured cold-resume pass against the arm's engine (RUNBOOK §4.3)",
        summary=_kv_bench_summary,
    ),
    Probe(
        "kv_engine_drain", "inference", "vllm_metrics", ("vllm", "--version"), 3600,
        {**_ENGINE_REF, "drain_interval": SECONDS,
         "drain_polls": Param(int, 360, 2, 100_000)},
        lambda p: ["sh", "-c", ENGINE_DRAIN_SCRIPT, "kv-engine-drain", p["result_dir"],
                   str(p["port"]), p["tag"], p["drain_interval"], str(p["drain_polls"])],
        "wait until the KV tier's writes are done (RUNBOOK §4.3 step 3)",
        summary=lambda p: (
            f"GET http://127.0.0.1:{p['port']}/metrics every {p['drain_interval']} s until "
            f"lmcache:num_stored_tokens is steady and remote_put_task_num is 0 (at most "
            f"{p['drain_polls']} polls)"
        ),
    ),
    Probe(
        "kv_cache_evict", "inference", "vllm_metrics", ("uname", "-r"), 600,
        {**_ENGINE_REF, "cache_dir": GUARDED_PATH, "cache_mount": GUARDED_PATH,
         "cache_device": BLOCK_DEVICE, "reset_prefix_cache": Param(bool, False)},
        lambda p: ["sh", "-c", CACHE_EVICT_SCRIPT, "kv-cache-evict", p["result_dir"],
                   str(p["port"]), p["tag"], p["cache_dir"], p["cache_mount"],
                   p["cache_device"], "1" if p["reset_prefix_cache"] else "0"],
        "guarded flush of the upper tiers and the page cache (RUNBOOK §4.3 step 3)",
        summary=lambda p: (
            f"only if {p['cache_dir']} is on {p['cache_mount']} mounted from "
            f"{p['cache_device']} (findmnt): "
            + ("POST /reset_prefix_cache; " if p["reset_prefix_cache"] else "")
            + "sync; sysctl -w vm.drop_caches=3; then a /metrics scrape"
        ),
    ),
    Probe(
        "kv_metrics_window", "inference", "vllm_metrics", ("vllm", "--version"), 120,
        dict(_ENGINE_REF),
        _engine_script(METRICS_WINDOW_SCRIPT, "kv-metrics-window"),
        "the arm's /metrics window t0 → t1: evidence the tier was used (RUNBOOK §4.4)",
        summary=lambda p: (
            f"the /metrics scrape t0 kept at engine start, then curl -s "
            f"http://127.0.0.1:{p['port']}/metrics (t1)"
        ),
    ),
    Probe(
        "kv_engine_stop", "inference", "vllm_metrics", ("vllm", "--version"), 300,
        dict(_ENGINE_REF),
        _engine_script(ENGINE_STOP_SCRIPT, "kv-engine-stop"),
        "stop the arm's engine, the pid this run recorded only (RUNBOOK §4.3 step 5)",
        summary=lambda p: (
            f"a last /metrics scrape, then kill -TERM the vllm serve pid recorded for port "
            f"{p['port']} (KILL after 30 s)"
        ),
    ),
    Probe(
        "rdma_counter_sample", "inference", "nic_counters", ("uname", "-r"), 30,
        {"result_dir": PATH, "tag": TAG,
         "sample": Param(r"t0|t1", rule="t0 or t1"),
         "rdma_device": Param(r"[A-Za-z0-9_]{1,32}", "mlx5_0", rule="an RDMA device name"),
         "rdma_port": Param(int, 1, 1, 16),
         "counter": Param(r"port_rcv_data|port_xmit_data", "port_rcv_data",
                          rule="port_rcv_data or port_xmit_data")},
        lambda p: ["sh", "-c", COUNTER_SAMPLE_SCRIPT, "rdma-counter", p["sample"],
                   p["result_dir"], p["tag"], p["rdma_device"], str(p["rdma_port"]),
                   p["counter"]],
        "RDMA port counter sample with the node's time (RUNBOOK §3.3, §4.5)",
        summary=lambda p: (
            f"cat /sys/class/infiniband/{p['rdma_device']}/ports/{p['rdma_port']}/counters/"
            f"{p['counter']}; date +%s.%N (sample {p['sample']})"
        ),
    ),
    Probe(
        "rdma_counter_series", "inference", "rdma_series", ("uname", "-r"), 60,
        {"result_dir": PATH, "tag": TAG,
         "action": Param(r"start|stop", rule="start or stop"),
         "rdma_device": Param(r"[A-Za-z0-9_]{1,32}", "mlx5_0", rule="an RDMA device name"),
         "rdma_port": Param(int, 1, 1, 16),
         "counter": Param(r"port_rcv_data|port_xmit_data", "port_rcv_data",
                          rule="port_rcv_data or port_xmit_data"),
         "max_samples": Param(int, 4 * 3600, 2, 24 * 3600)},
        lambda p: ["sh", "-c", COUNTER_SERIES_SCRIPT, "rdma-counter-series", p["action"],
                   p["result_dir"], p["tag"], p["rdma_device"], str(p["rdma_port"]),
                   p["counter"], str(p["max_samples"])],
        "RDMA port counter every second through the read-back, with the node's clock "
        "(RUNBOOK §4.4, §4.5)",
        summary=lambda p: (
            f"cat /sys/class/infiniband/{p['rdma_device']}/ports/{p['rdma_port']}/counters/"
            f"{p['counter']} with date +%s.%N every second ({p['action']}; at most "
            f"{p['max_samples']} samples)"
        ),
        clock=True,
    ),
)
