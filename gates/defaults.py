"""The default gates G1–G4 with the thresholds of DOMAIN.md, as data.

Every new engagement gets a copy (``gates.services.gates_seed``) with the sha256 of the definition
it was copied from; changing these defaults later never changes a running engagement.

Reference figures are data of their own (``acceptance_core.profiles``): a criterion that compares
with one names it in ``reference_figure`` and holds the value of the engagement's reference
profile (``reference_profile``). The defaults hold the default profile's (R2 at concurrency 16:
local-NVMe TTFT p50 17.31 s and 53.6 output tok/s; G3's gain range +29 % … +40 %);
``gates.services.gates_seed`` puts the engagement's own profile in, ``engagement_profile_set``
changes it. Sources name the vendor's gate text and reports (R1, R2, R3), never internal files.

G3's plan is two compact steps that ``runners.plans`` expands into the probes of RUNBOOK §4.3:
the shared read-back of the array arm on every inference node at once (RDMA counter sampled
around the measured pass), then, on the first inference node alone, the cold-resume comparison
(arms local and array interleaved, two rounds). Its criteria judge the mean of the rounds, the
agreement of the rounds (``round_deviation`` above 5 % is "unstable": a re-run, no decision) and
the aggregate read-back against the array's port.
"""

import hashlib
import json

from acceptance_core.profiles import DEFAULT_PROFILE, criterion_values, profile_get

LINE_EFFICIENCY_MIN = 0.83  # DOMAIN.md G2/G3: "≥ 83 % line efficiency"
BASELINE_TOLERANCE = 0.10  # DOMAIN.md G2: "within ±10 % of the reference figures"
SOAK_SECONDS = 72 * 3600  # DOMAIN.md G4: "72 h continuous load"

# The G2 serving benchmark: the long-context workload of RUNBOOK §3.4 at concurrency 16.
G2_BENCH_PARAMS = {
    "base_url": "http://127.0.0.1:8000",
    "model": "qwen3-coder-480b-fp8",
    "tokenizer": "/models/Qwen3-Coder-480B-A35B-Instruct-FP8",
    "prefix_len": 30000,
    "suffix_len": 512,
    "num_prefixes": 64,
    "output_len": 256,
    "num_prompts": 256,
    "concurrency": 16,
    "seed": 1,
}
G2_FIO_PARAMS = {"runtime": 60, "ramp_time": 10, "numjobs": 8, "iodepth": 32, "ioengine": "libaio",
                 "direct": True}
ROUND_DEVIATION_MAX = 0.05  # DOMAIN.md / R3: two independent rounds agree within 5 %

# G3 (RUNBOOK §4): one pool of parameters for the cold-resume procedure; each probe of an arm pass
# takes the ones it declares (runners.plans). The workload is G2's, so the local-NVMe arm
# reproduces the G2 baseline; only the KV tier changes between arms.
G3_PARAMS = {
    # the serving engine (RUNBOOK §4.1)
    "model_path": "/models/Qwen3-Coder-480B-A35B-Instruct-FP8",
    "served_model_name": G2_BENCH_PARAMS["model"],
    "tensor_parallel_size": 8,
    "max_model_len": 65536,
    "gpu_memory_utilization": "0.90",
    "kv_connector": "LMCacheConnectorV1",
    "port": 8000,
    "poll_interval": "5",
    "ready_polls": 720,  # 1 h of model load at most
    # the workload (RUNBOOK §3.4; warm-up and measured pass alike, §4.3 step 2)
    **{k: v for k, v in G2_BENCH_PARAMS.items() if k not in ("base_url", "model")},
    # RUNBOOK §4.2: KV bytes per token = 2 × layers × KV heads × head dim × dtype bytes, read
    # by the tier sizing from model_path's config.json and this dtype (vllm serve
    # --kv-cache-dtype; auto = the model's dtype, fp8 halves it): for Qwen3-Coder-480B-A35B
    # (62 layers, 8 KV heads, head dim 128, bfloat16) 2 × 62 × 8 × 128 × 2 = 253952 B.
    "kv_cache_dtype": "auto",
    # RUNBOOK §4.3 step 3: reset vLLM's GPU prefix cache after the warm-up (POST
    # /reset_prefix_cache; the engine starts with VLLM_SERVER_DEV_MODE=1 on 127.0.0.1 for it)
    "reset_prefix_cache": True,
    # LMCache MP mode: the LMCache server's metrics port (its L2 = storage-tier hits,
    # lmcache_mp_lookup_hit_l2_tokens_total); 0 = in-process mode, the array tier's use is then
    # cross-checked against the RDMA bytes read in the same window (RUNBOOK §4.4)
    "lmcache_metrics_port": 0,
    # drain: until lmcache:num_stored_tokens is steady (RUNBOOK §4.3 step 3)
    "drain_interval": "5",
    "drain_polls": 360,
    # the 8-node read-back: the RDMA port counter (RUNBOOK §3.3)
    "rdma_device": "mlx5_0",
    "rdma_port": 1,
    "counter": "port_rcv_data",
}
# Per arm: its LMCache config and where its disk tier lives (RUNBOOK §4.1 (a)/(b)); the flush
# guard refuses unless cache_dir is on cache_mount mounted from cache_device. The recompute
# arm (c) has no KV connector, hence no config and no cache.
G3_ARMS = {
    "local": {"lmcache_config": "/etc/acctest/lmc-local.yaml",
              "cache_dir": "/mnt/local-nvme/lmcache", "cache_mount": "/mnt/local-nvme",
              "cache_device": "/dev/nvme0n1"},
    "array": {"lmcache_config": "/etc/acctest/lmc-array.yaml", "cache_dir": "/mnt/fx/lmcache",
              "cache_mount": "/mnt/fx", "cache_device": "/dev/nvme1n1"},
    "recompute": {},
}

# G4 (RUNBOOK §5): the soak plan, as data (runners.soak.plan documents and validates it).
SOAK_TTFT_P99_RISE_MAX = 0.25  # issue 7 §2: "within set bounds" (a default, editable)
SOAK_THROUGHPUT_DROP_MAX = 0.10
# Fixed prompts of the correctness probe (RUNBOOK §5.2): replayed at temperature 0 and compared
# with the answers recorded before the soak. On site, use long prompts whose KV cache is served
# from the array so that the probe exercises the tier's data integrity.
SOAK_PROMPTS = [
    {"id": "sum-contract", "text": "Summarise the obligations of the supplier in the contract "
     "below in five bullet points.\n" + "Clause: the supplier delivers, installs and supports "
     "the array for the term agreed. " * 40},
    {"id": "code-review", "text": "Review the following function and list every defect you find."
     "\n" + "def f(x):\n    return [i * i for i in range(x) if i % 3 == 0]\n" * 40},
    {"id": "translate", "text": "Translate into German, keeping the technical terms:\n"
     + "The KV cache is read back from the third tier when a session resumes. " * 40},
]
G4_SOAK_PLAN = {
    "duration_s": SOAK_SECONDS,
    "time_compression": 1,
    "sampling_s": 60,
    # RUNBOOK §5.1: vllm bench serve in fixed 15-min windows at a fixed rate and concurrency,
    # the G2 workload's shape.
    "load": {"vllm": "vllm", "base_url": G2_BENCH_PARAMS["base_url"],
             "model": G2_BENCH_PARAMS["model"], "tokenizer": G2_BENCH_PARAMS["tokenizer"],
             # null: derived at the start from G2's measured output throughput ÷ its
             # request size (runners.soak.rate); a number is used as entered.
             "request_rate": None, "concurrency": 16, "window_s": 900,
             "prefix_len": G2_BENCH_PARAMS["prefix_len"],
             "suffix_len": G2_BENCH_PARAMS["suffix_len"],
             "num_prefixes": G2_BENCH_PARAMS["num_prefixes"],
             "output_len": G2_BENCH_PARAMS["output_len"], "seed": 1},
    "correctness": {"every_s": 900, "max_tokens": 64, "timeout_s": 600,
                    "prompts": SOAK_PROMPTS},
    "steady_state": {"baseline_windows": 4, "before_s": 1800, "after_s": 1800},
    # DOMAIN.md G4: one drive out, one link down; RUNBOOK §5.3: heal well inside ctrl_loss_tmo
    # (600 s). The drive fault needs the array vendor's command (RUNBOOK §8: unverified):
    # operations allow it in settings SOAK_VENDOR_COMMANDS and the plan names it by key in
    # "command"; null until then, and a soak refuses to start without it.
    "faults": [
        {"name": "drive-out", "kind": "drive_out", "node": "array", "start_s": 24 * 3600,
         "duration_s": 300, "target": {"drive": 7}, "command": None},
        {"name": "link-down", "kind": "link_down", "node": "inference", "start_s": 48 * 3600,
         "duration_s": 300, "target": {}},
    ],
}


def _criterion(key, description, metric, operator, unit, source, *, aggregation="each",
               threshold=None, threshold_high=None, reference_value=None, tolerance=None,
               label_filter=None, above_range_verdict="fail", blocking=True,
               reference_figure=""):
    criterion = {
        "key": key, "description": description, "metric": metric, "operator": operator,
        "unit": unit, "source": source, "aggregation": aggregation, "threshold": threshold,
        "threshold_high": threshold_high, "reference_value": reference_value,
        "tolerance": tolerance, "label_filter": label_filter or {},
        "above_range_verdict": above_range_verdict, "blocking": blocking,
        "reference_figure": reference_figure, "reference_profile": "",
    }
    if reference_figure:
        criterion.update(profile_fields(criterion, DEFAULT_PROFILE))
    return criterion


def profile_fields(criterion: dict, profile_key: str) -> dict:
    """The fields of ``criterion`` (its ``reference_figure`` named) that come from the reference
    profile ``profile_key``: its bounds, source, benchmark concurrency label and the profile's
    key. ProfileError / ProfileLacksFigure (naming profile and figure) when it cannot."""
    values = criterion_values(profile_get(profile_key), criterion["reference_figure"],
                              needed_by=f"criterion {criterion['key']}")
    if "label_filter" in values:
        values["label_filter"] = {**criterion["label_filter"], **values["label_filter"]}
    return {**values, "reference_profile": profile_key}


DEFAULT_GATES = [
    {
        "code": "G1",
        "name": "Arrival acceptance",
        "due_week": 2,
        "description": "Every BOM item delivered and checked; every array passes its self-test; "
        "all 24 drives of each array recognised; SMART critical warnings = 0.",
        "probe_plan": [
            {"probe": "bom_checklist", "role": "service"},
            {"probe": "nvme_inventory", "role": "array"},
            {"probe": "nvme_self_test", "role": "array",
             "for_each": {"metric": "drive_present", "label": "controller", "param": "device"}},
            {"probe": "nvme_smart_log", "role": "array",
             "for_each": {"metric": "drive_present", "label": "controller", "param": "device"}},
        ],
        "criteria": [
            _criterion("bom-complete", "Every bill-of-materials item delivered and ticked",
                       "bom_open_items", "<=", "1", "G1 gate text: BOM checklist ticked by the PM",
                       aggregation="max", threshold=0),
            # Per array (label scope=array): the drives of the array's drive model
            # (Array.drive_model) on its controller; more than Array.expected_drive_count
            # cannot count (gates.derivations.derive_array_drives).
            _criterion("drive-count", "All drives of each array recognised", "drive_count", ">=",
                       "1", "G1 gate text: all 24 drives of each array (FX100: 24 × 7.68 TB)",
                       threshold=24, label_filter={"scope": "array"}),
            _criterion("self-test", "Every drive of each array completed and passed the "
                       "self-test this run started", "self_test_failures",
                       "<=", "1", "G1 gate text: every array passes its self-test",
                       aggregation="sum", threshold=0, label_filter={"scope": "array"}),
            _criterion("critical-warning", "No SMART critical warning on any drive",
                       "critical_warning", "<=", "1", "G1 gate text: SMART critical warnings = 0",
                       aggregation="max", threshold=0),
        ],
    },
    {
        "code": "G2",
        "name": "Single-node baseline",
        "due_week": 4,
        "description": "The single-node 8-accelerator inference baseline reproduced within ±10 % "
        "of the reference figures; a single array under local load reaches ≥ 83 % line "
        "efficiency.",
        "probe_plan": [
            # A single array under local load: one inference node per array reads it (N nodes
            # at once would share the array's port); line efficiency is against that port.
            {"probe": "link_speed", "role": "inference", "nodes": "first_per_array"},
            {"probe": "fio_seqread", "role": "inference", "params": G2_FIO_PARAMS,
             "nodes": "first_per_array"},
            {"probe": "vllm_bench_serve", "role": "inference", "params": G2_BENCH_PARAMS},
        ],
        "criteria": [
            _criterion("line-efficiency",
                       "Sequential read reaches {threshold} of the array port's line rate",
                       "line_efficiency", ">=", "ratio",
                       "G2 gate text: ≥ 83 % line efficiency, against the array's port "
                       "(100 GbE = 12.5 GB/s)",
                       threshold=LINE_EFFICIENCY_MIN),
            _criterion("fio-job-errors", "No fio job reported an error", "job_errors", "<=", "1",
                       "fio: a job that reports an error cannot count", aggregation="sum",
                       threshold=0),
            # The reference figure, its source text and the benchmark's concurrency label come
            # from the engagement's reference profile (acceptance_core.profiles).
            _criterion("baseline-ttft", "TTFT p50 within ±{tolerance} of the reference "
                       "profile's local-NVMe figure", "ttft_p50", "within", "s", "",
                       tolerance=BASELINE_TOLERANCE, reference_figure="local_nvme_ttft_p50"),
            _criterion("baseline-throughput", "Output throughput within ±{tolerance} of the "
                       "reference profile's local-NVMe figure", "output_throughput", "within",
                       "tok/s", "", tolerance=BASELINE_TOLERANCE,
                       reference_figure="local_nvme_output_throughput"),
            _criterion("bench-failed-requests", "No benchmark request failed", "failed_requests",
                       "<=", "1", "vllm bench serve: failed requests void a baseline",
                       aggregation="sum", threshold=0),
        ],
    },
    {
        "code": "G3",
        "name": "Main joint test",
        "due_week": 7,
        "description": "Array as KV tier vs local NVMe: TTFT p50 reduction ≥ 25 % and output "
        "throughput gain +29 % … +40 %; 8 nodes sharing one array approach the NIC limit.",
        # The shared read-back first: every inference node starts it at once (aligned), then
        # the first node alone runs the interleaved comparison on an unshared array, as R2
        # was measured (one host).
        "probe_plan": [
            {"expand": "shared_readback", "role": "inference", "arm": "array",
             "params": G3_PARAMS, "arm_params": G3_ARMS},
            {"expand": "cold_resume_arms", "role": "inference", "nodes": "first",
             "arms": ["local", "array"], "rounds": 2, "params": G3_PARAMS,
             "arm_params": G3_ARMS},
        ],
        "criteria": [
            _criterion("ttft-reduction", "TTFT p50 reduced by at least {threshold} vs local "
                       "NVMe (mean of the rounds)", "ttft_reduction", ">=", "ratio",
                       "G3 gate text; R2: −26 % … −32 %", threshold=0.25,
                       label_filter={"arm": "array", "round": "mean"}),
            _criterion("throughput-gain", "Output throughput gain inside +{threshold} … "
                       "+{threshold_high} (mean of the rounds)", "throughput_gain", "between",
                       "ratio", "", above_range_verdict="review",
                       reference_figure="throughput_gain_range",
                       label_filter={"arm": "array", "round": "mean"}),
            _criterion("round-deviation",
                       "Two rounds agree within {threshold} for every figure and arm",
                       "round_deviation", "<=", "ratio", "Repeatability; R3: two rounds "
                       "within 5 %", threshold=ROUND_DEVIATION_MAX,
                       above_range_verdict="unstable"),
            _criterion("compare-failed-requests", "No request failed in any arm of the "
                       "comparison", "failed_requests", "<=", "1",
                       "vLLM's TTFT and throughput count successful requests only; "
                       "failed requests in any arm void the comparison", aggregation="sum",
                       threshold=0, label_filter={"phase": "compare"}),
            _criterion("readback-efficiency",
                       "8 nodes sharing one array: aggregate read-back ≥ {threshold} of line rate",
                       "line_efficiency", ">=", "ratio", "G3 gate text; R1: one array serves 8 "
                       "inference nodes", threshold=LINE_EFFICIENCY_MIN,
                       label_filter={"scope": "aggregate"}),
        ],
    },
    {
        "code": "G4",
        "name": "Stability and acceptance",
        "due_week": 10,
        "description": "72 h continuous load without interruption; single-drive and single-link "
        "faults cause no service impact; a signed acceptance report is issued.",
        # One compact step: the soak (runners.soak) runs the load on every inference node
        # and the faults of the plan; it is not a list of node probes.
        "probe_plan": [{"expand": "soak", "role": "inference", "soak": G4_SOAK_PLAN}],
        # Steady-state checks, each judged on the soak as a whole ("steady") and before,
        # during and after every fault window (labels scope, fault, phase): the bounds of
        # issue 7 §2 as data.
        "criteria": [
            _criterion("soak-duration", "Continuous load held for {threshold}", "soak_duration",
                       ">=", "s", "G4 gate text: 72 h continuous load", aggregation="min",
                       threshold=SOAK_SECONDS),
            _criterion("error-rate", "No failed request, in steady state and before, during "
                       "and after every fault", "request_error_rate", "<=", "ratio",
                       "G4 gate text: injected faults cause no service impact; error rate = "
                       "failed ÷ (completed + failed)", threshold=0),
            _criterion("no-interruption", "No gap between successful completions longer than "
                       "{threshold}", "completion_gap_max", "<=", "s",
                       "G4 gate text: continuous load with no interruption", threshold=60),
            _criterion("ttft-p99", "TTFT p99 at most {threshold} above the pre-fault baseline",
                       "baseline_deviation", "<=", "ratio",
                       "Acceptance plan: TTFT p99 within set bounds of the pre-fault baseline "
                       "(vllm bench serve p99_ttft_ms per window)",
                       threshold=SOAK_TTFT_P99_RISE_MAX,
                       label_filter={"figure": "ttft_p99"}),
            _criterion("throughput", "Output throughput at most {-threshold} below the "
                       "pre-fault baseline", "baseline_deviation", ">=", "ratio",
                       "Acceptance plan: throughput within set bounds of the pre-fault baseline "
                       "(vllm bench serve output_throughput per window)",
                       threshold=-SOAK_THROUGHPUT_DROP_MAX,
                       label_filter={"figure": "output_throughput"}),
            _criterion("correctness", "Correctness probes match the known-good answers",
                       "probe_mismatches", "<=", "1", "Fixed prompts at temperature 0 "
                       "against the outputs recorded before the soak",
                       threshold=0),
            _criterion("faults-injected", "Every planned fault was injected and healed",
                       "fault_windows_missed", "<=", "1", "G4 gate text: single-drive and "
                       "single-link faults injected", aggregation="sum", threshold=0),
        ],
    },
]


def definition_sha256(definition: dict) -> str:
    """sha256 of a gate definition in canonical JSON (sorted keys, no whitespace)."""
    canonical = json.dumps(definition, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()
