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
KV_CACHE_DTYPE = Param(r"auto|fp8|fp8_e4m3|fp8_e5m2|bfloat16|float16", "auto",
                       rule="a vLLM --kv-cache-dtype: auto, fp8, fp8_e4m3, fp8_e5m2, bfloat16 "
                            "or float16")

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

# ``window_scrape NAME`` (evict and window scripts; $port, $lmc, $rdma, $rport set): one scrape
# block holding the engine's /metrics, LMCache's own endpoint in MP mode ($lmc: its port, 0
# none; its storage-tier counter lmcache_mp_lookup_hit_l2_tokens_total is not on vLLM's
# /metrics) and the RDMA port counter ($rdma: device, "" none; 4-byte words) as one more
# counter sample, so that every counter of the tier evidence is read at the same instants.
_WINDOW_HELPERS = r"""
window_scrape() {
  scrape "$1" "http://127.0.0.1:$port/metrics" || return 1
  if [ "$lmc" != 0 ]; then
    lbody=$(curl -sf --max-time 30 "http://127.0.0.1:$lmc/metrics") \
      || { echo "cannot scrape LMCache's endpoint http://127.0.0.1:$lmc/metrics" >&2; return 1; }
    printf '%s\n' "$lbody"
  fi
  if [ -n "$rdma" ]; then
    counter="/sys/class/infiniband/$rdma/ports/$rport/counters/port_rcv_data"
    words=$(cat -- "$counter") || { echo "cannot read $counter" >&2; return 1; }
    printf '# TYPE acceptance_rdma_port_rcv_data counter\n'
    printf 'acceptance_rdma_port_rcv_data{device="%s",port="%s"} %s\n' "$rdma" "$rport" "$words"
  fi
}
"""

# $1 result dir, $2 arm, $3 port, $4 LMCache config, $5 tag, $6 poll interval, $7 max polls,
# $8 --kv-transfer-config JSON, $9 dev mode (0|1); the rest: vllm serve arguments. The engine
# runs in its own session (it outlives this command); its pid is kept in DIR/engine-PORT.pid.
# Dev mode (VLLM_SERVER_DEV_MODE=1) is what registers vLLM's POST /reset_prefix_cache
# (vllm/entrypoints/serve/cache/api_router.py); it also opens other dev endpoints, so the
# engine listens on 127.0.0.1 only (every probe talks to it there).
ENGINE_START_SCRIPT = _ENGINE_HELPERS + r"""
dir=$1 arm=$2 port=$3 config=$4 tag=$5 interval=$6 polls=$7 kv=$8 devmode=$9; shift 9
url="http://127.0.0.1:$port"
if [ "$devmode" = 1 ]; then export VLLM_SERVER_DEV_MODE=1; set -- "$@" --host 127.0.0.1; fi
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

# The working set vs the GPU KV cache and the host-memory tier (RUNBOOK §4.2), as a Prometheus
# text the vllm_metrics parser reads. $1 LMCache config, $2 prefixes, $3 prefix length (tokens),
# $4 model directory, $5 --kv-cache-dtype, $6 tensor-parallel ranks, $7 result dir, $8 tag.
# The model's config.json is printed whole as comment lines (# acceptance-config-json: …) and
# the parser computes the KV bytes per token from it and the dtype (runners.parsers.kv_bytes),
# so the raw output holds every figure the check used. LMCache reads max_local_cpu_size in GB
# (default 5) and allocates it per TP rank (each rank's worker has its own CPU backend), so the
# host tier is that × the ranks; counted as GiB, the larger reading, so the check "working set
# ≥ 2 × (GPU KV + host tier)" errs on the safe side. The GPU KV capacity is the engine's own
# startup line "GPU KV cache size: N tokens" (vLLM's kv_cache_utils logs it with thousands
# separators, f"{num_tokens:,}"), read from the log of the arm's engine: the sizing runs after
# the engine is ready.
TIER_SIZING_SCRIPT = r"""
config=$1 prefixes=$2 prefix_len=$3 model=$4 kvdtype=$5 tp=${6:-1} dir=$7 tag=$8
[ -r "$config" ] || { echo "cannot read the LMCache config $config" >&2; exit 2; }
modelconf="$model/config.json"
[ -r "$modelconf" ] || { echo "cannot read the model's $modelconf" >&2; exit 2; }
log="$dir/engine-$tag.log"
[ -r "$log" ] || { echo "no engine log $log: the arm's engine was not started by this run" >&2
                   exit 1; }
line=$(grep -o 'GPU KV cache size: [0-9,]* tokens' -- "$log" | tail -n 1)
[ -n "$line" ] || { echo "no 'GPU KV cache size: N tokens' line in $log" >&2; exit 1; }
gpu=$(printf '%s\n' "$line" | tr -cd '0-9')
gb=$(sed -n 's/^[[:space:]]*max_local_cpu_size:[[:space:]]*\([0-9][0-9.]*\).*/\1/p' "$config" \
  | head -n 1)
origin="max_local_cpu_size: $gb"
[ -n "$gb" ] || { gb=5; origin="LMCache default 5"; }
host=$(awk -v g="$gb" -v t="$tp" 'BEGIN { printf "%.0f", g * 1073741824 * t }')
printf '# acceptance-sizing: %s (%s GB x 1024^3 B) per TP rank x %s ranks in %s\n' \
  "$origin" "$gb" "$tp" "$config"
printf '# TYPE acceptance_host_tier_bytes gauge\nacceptance_host_tier_bytes %s\n' "$host"
printf '# acceptance-sizing: working set = %s prefixes x %s tokens x KV bytes per token\n' \
  "$prefixes" "$prefix_len"
printf '# TYPE acceptance_workload_tokens gauge\nacceptance_workload_tokens %s\n' \
  "$((prefixes * prefix_len))"
printf '# acceptance-sizing: %s (engine log %s)\n' "$line" "$log"
printf '# TYPE acceptance_gpu_kv_tokens gauge\nacceptance_gpu_kv_tokens %s\n' "$gpu"
printf '# acceptance-kv-cache-dtype: %s\n' "$kvdtype"
printf '# acceptance-sizing: KV bytes per token from %s\n' "$modelconf"
sed 's/^/# acceptance-config-json: /' -- "$modelconf" || exit $?
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
# reset the engine's GPU prefix cache (vLLM's POST /reset_prefix_cache, dev mode; without
# reset_external, so LMCache's tiers are kept), sync and drop the page cache
# (sysctl -w vm.drop_caches=3 is echo 3 > /proc/sys/vm/drop_caches). Needs root on the node.
# Last, the scrape "evicted" (engine, LMCache endpoint, RDMA counter; the gauge
# acceptance_prefix_cache_reset says whether the reset was done) is printed and kept on the
# node: the tier evidence window starts there, not at engine start (hits of the warm-up must
# not count for the measured pass).
# $1 dir, $2 port, $3 tag, $4 cache dir, $5 mount point, $6 device, $7 reset (0|1),
# $8 LMCache metrics port (0 none), $9 RDMA device ("" none), $10 RDMA port.
CACHE_EVICT_SCRIPT = _ENGINE_HELPERS + _WINDOW_HELPERS + r"""
dir=$1 port=$2 tag=$3 cache=$4 mnt=$5 dev=$6 reset=$7 lmc=$8 rdma=$9 rport=${10}
refuse() { echo "refused: $*; nothing was flushed" >&2; exit 3; }
case "$cache/" in "$mnt"/*) ;; *) refuse "the cache directory $cache is not under $mnt";; esac
found=$(findmnt -n -o SOURCE,TARGET --target "$cache") || refuse "findmnt cannot place $cache"
set -- $found
[ "$2" = "$mnt" ] || refuse "$cache is on the mount $2, not on $mnt"
[ "$1" = "$dev" ] || refuse "$mnt is mounted from $1, not from $dev"
echo "guard: $cache is on $mnt, mounted from $dev" >&2
if [ "$reset" = 1 ]; then
  code=$(curl -s -o /dev/null -w '%{http_code}' -X POST --max-time 60 \
    "http://127.0.0.1:$port/reset_prefix_cache") || code=000
  [ "$code" = 200 ] || refuse "POST /reset_prefix_cache answered HTTP $code (the engine needs \
VLLM_SERVER_DEV_MODE=1)"
  echo "POST /reset_prefix_cache: HTTP 200 (GPU prefix cache reset)" >&2
fi
sync || exit $?
sysctl -w vm.drop_caches=3 >&2 || exit $?
engine_note
keep="$dir/metrics-$tag.evicted.prom"
{ window_scrape evicted || exit 1
  printf '# TYPE acceptance_prefix_cache_reset gauge\nacceptance_prefix_cache_reset %s\n' "$reset"
} > "$keep" || { rm -f -- "$keep"; exit 1; }
cat -- "$keep"
"""

# The arm's tier evidence window: from the scrape "evicted" kept by the flush (engine start's t0
# only for an arm without a flush), to a fresh t1 scrape of the same sources.
# $1 dir, $2 port, $3 tag, $4 LMCache metrics port (0 none), $5 RDMA device ("" none),
# $6 RDMA port.
METRICS_WINDOW_SCRIPT = _ENGINE_HELPERS + _WINDOW_HELPERS + r"""
dir=$1 port=$2 tag=$3 lmc=$4 rdma=$5 rport=$6
keep="$dir/metrics-$tag.evicted.prom"
[ -r "$keep" ] || keep="$dir/metrics-$tag.t0.prom"
[ -r "$keep" ] || { echo "no evicted or t0 scrape kept for $tag on the node" >&2; exit 1; }
engine_note
cat -- "$keep" || exit $?
window_scrape t1
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
            "--gpu-memory-utilization", p["gpu_memory_utilization"],
            "--kv-cache-dtype", p["kv_cache_dtype"]]


def _kv_config(p: dict[str, Any]) -> str:
    return json.dumps({"kv_connector": p["kv_connector"], "kv_role": "kv_both"},
                      separators=(",", ":"))


def _engine_start_argv(p: dict[str, Any]) -> list[str]:
    return ["sh", "-c", ENGINE_START_SCRIPT, "kv-engine-start", p["result_dir"], p["arm"],
            str(p["port"]), p["lmcache_config"], p["tag"], p["poll_interval"],
            str(p["ready_polls"]), _kv_config(p), "1" if p["reset_prefix_cache"] else "0",
            *_serve_args(p)]


def _engine_start_summary(p: dict[str, Any]) -> str:
    if p["arm"] == "recompute":
        env, kv = "PYTHONHASHSEED=0", []
    else:
        env = f"PYTHONHASHSEED=0 LMCACHE_CONFIG_FILE={p['lmcache_config']}"
        kv = ["--kv-transfer-config", _kv_config(p)]
    if p["reset_prefix_cache"]:
        env += " VLLM_SERVER_DEV_MODE=1"
    host = ["--host", "127.0.0.1"] if p["reset_prefix_cache"] else []
    serve = shlex.join(["vllm", "serve", *_serve_args(p), *host, "--port", str(p["port"]), *kv])
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


def _window_sources(p: dict[str, Any]) -> list[str]:
    """The evidence window's other sources: LMCache's metrics port, the RDMA device and port."""
    return [str(p["lmcache_metrics_port"]), p["rdma_device"], str(p["rdma_port"])]


def _window_summary(p: dict[str, Any]) -> str:
    more = []
    if p["lmcache_metrics_port"]:
        more.append(f"curl -s http://127.0.0.1:{p['lmcache_metrics_port']}/metrics (LMCache)")
    if p["rdma_device"]:
        more.append(f"cat /sys/class/infiniband/{p['rdma_device']}/ports/{p['rdma_port']}/"
                    f"counters/port_rcv_data")
    return f"curl -s http://127.0.0.1:{p['port']}/metrics" + "".join("; " + m for m in more)


# Where the tier evidence window reads besides the engine (RUNBOOK §4.4): LMCache's own metrics
# port in MP mode (0: in-process mode, its counters are on vLLM's /metrics) and the RDMA port
# counter of the array's traffic ("" : none, then the array tier cannot be cross-checked).
_WINDOW_PARAMS = {
    "lmcache_metrics_port": Param(int, 0, 0, 65535),
    "rdma_device": Param(r"([A-Za-z0-9_]{1,32})?", "", rule="empty or an RDMA device name"),
    "rdma_port": Param(int, 1, 1, 16),
}


COLD_RESUME_PROBES: tuple[Probe, ...] = (
    Probe(
        "kv_engine_start", "inference", "vllm_metrics", ("vllm", "--version"), 3600,
        {**_ENGINE_REF, "arm": ARM, "model_path": PATH, "served_model_name": NAME,
         "tensor_parallel_size": Param(int, 8, 1, 64),
         "max_model_len": Param(int, 65536, 1, 10_000_000),
         "gpu_memory_utilization": FRACTION, "kv_connector": KV_CONNECTOR,
         "kv_cache_dtype": KV_CACHE_DTYPE,
         "lmcache_config": OPTIONAL_PATH, "poll_interval": SECONDS,
         "ready_polls": Param(int, 720, 1, 100_000), "reset_prefix_cache": Param(bool, True)},
        _engine_start_argv,
        "serving engine for a G3 arm, started and polled until ready (RUNBOOK §4.1, §4.3)",
        summary=_engine_start_summary, cleanup="kv_engine_stop",
    ),
    Probe(
        "kv_tier_sizing", "inference", "vllm_metrics", ("vllm", "--version"), 30,
        {**_ENGINE_REF, "lmcache_config": PATH, "num_prefixes": Param(int, 64, 1, 100_000),
         "prefix_len": Param(int, 30000, 1, 1_000_000), "model_path": PATH,
         "kv_cache_dtype": KV_CACHE_DTYPE, "tensor_parallel_size": Param(int, 1, 1, 64)},
        lambda p: ["sh", "-c", TIER_SIZING_SCRIPT, "kv-tier-sizing", p["lmcache_config"],
                   str(p["num_prefixes"]), str(p["prefix_len"]), p["model_path"],
                   p["kv_cache_dtype"], str(p["tensor_parallel_size"]), p["result_dir"],
                   p["tag"]],
        "working set vs the GPU KV cache and the host-memory tier (RUNBOOK §4.2)",
        summary=lambda p: (
            f"'GPU KV cache size: N tokens' from the engine's log; max_local_cpu_size from "
            f"{p['lmcache_config']} × {p['tensor_parallel_size']} TP ranks; working set "
            f"{p['num_prefixes']} prefixes × {p['prefix_len']} tokens × the KV bytes per "
            f"token from {p['model_path']}/config.json and --kv-cache-dtype "
            f"{p['kv_cache_dtype']}"
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
         "cache_device": BLOCK_DEVICE, "reset_prefix_cache": Param(bool, True),
         **_WINDOW_PARAMS},
        lambda p: ["sh", "-c", CACHE_EVICT_SCRIPT, "kv-cache-evict", p["result_dir"],
                   str(p["port"]), p["tag"], p["cache_dir"], p["cache_mount"],
                   p["cache_device"], "1" if p["reset_prefix_cache"] else "0",
                   *_window_sources(p)],
        "guarded flush of the upper tiers and the page cache (RUNBOOK §4.3 step 3)",
        summary=lambda p: (
            f"only if {p['cache_dir']} is on {p['cache_mount']} mounted from "
            f"{p['cache_device']} (findmnt): "
            + ("POST /reset_prefix_cache; " if p["reset_prefix_cache"] else "")
            + "sync; sysctl -w vm.drop_caches=3; then the scrape 'evicted' (kept on the "
            f"node, the start of the tier evidence window): {_window_summary(p)}"
        ),
    ),
    Probe(
        "kv_metrics_window", "inference", "vllm_metrics", ("vllm", "--version"), 120,
        {**_ENGINE_REF, **_WINDOW_PARAMS},
        lambda p: [*_engine_script(METRICS_WINDOW_SCRIPT, "kv-metrics-window")(p),
                   *_window_sources(p)],
        "the arm's tier evidence window, eviction → end of the measured pass (RUNBOOK §4.4)",
        summary=lambda p: (
            f"the scrape 'evicted' kept by the flush (t0 of engine start for an arm without "
            f"one), then (t1) {_window_summary(p)}"
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
