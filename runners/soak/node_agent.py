"""The soak agent that runs ON THE NODE, detached from the service (stdlib only, Python ≥ 3.8).

The service sends this file's text as ``python3 -c SOURCE ARGS`` under ``nohup setsid`` (see
``runners.soak.commands``), so the load and the sampling go on when the worker, the web process
or the SSH connection restarts. It never talks to the service: it writes JSON lines that the
service collects by byte offset.

In ``--dir``:

* ``windows.jsonl`` — one line per load window (RUNBOOK §5.1): the saved result of
  ``VLLM bench serve --request-rate R --num-prompts R×W --max-concurrency C --save-result
  --save-detailed`` with the per-request arrays removed, plus ``soak_window`` (1-based),
  ``soak_started`` / ``soak_ended`` (node epoch s), ``soak_first_completion`` /
  ``soak_last_completion`` (epoch s of the first/last successful completion, null if none),
  ``soak_completion_gap_max_s`` (longest time between successive successful completions
  inside the window, and from the last to the window end; the client's ``start_times`` are
  ``time.perf_counter()`` readings, mapped to epoch by this agent), ``soak_exit`` (the
  client's exit status) and ``soak_error`` (why the client gave no result, else null).
* ``probes.jsonl`` — one line per correctness round (RUNBOOK §5.2): ``{"soak_round", "t",
  "answers": [{"id", "text", "error", "elapsed_s"}]}`` from ``POST /v1/completions`` at
  temperature 0 (run in a thread beside the load, every ``--probe-every`` s).
* ``agent.pid`` (written by the start command), ``done`` (``{"reason", "windows", "at"}`` when
  the loop ends), ``agent.log`` (its stderr).
* ``pause`` / ``stop`` — written by the service: while ``pause`` exists no window starts and no
  probe runs; ``stop`` ends the loop after the current window.

``--golden`` runs one correctness round, prints it as JSON on stdout and exits (the known-good
answers, recorded by the service before the soak). Windows follow each other until their
summed length reaches ``--duration-s`` (a window is its length plus the client's start-up, so
counting windows would fall short of the duration); the loop is bounded: at most
``--windows`` windows and never past ``--deadline`` (epoch s).
"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

ARRAYS = ("ttfts", "itls", "start_times", "errors", "output_lens", "input_lens",
          "generated_texts")


def append(path, record, lock):
    line = json.dumps(record, separators=(",", ":")) + "\n"
    with lock:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())


def probe_round(args, prompts):
    answers = []
    for prompt in prompts:
        body = json.dumps({"model": args.model, "prompt": prompt["text"],
                           "max_tokens": args.probe_max_tokens, "temperature": 0,
                           "seed": 0}).encode()
        request = urllib.request.Request(  # noqa: S310 (the plan's validated http URL)
            args.base_url.rstrip("/") + "/v1/completions", data=body,
            headers={"Content-Type": "application/json"})
        started = time.time()
        text, error = None, None
        try:
            with urllib.request.urlopen(  # noqa: S310  # nosec B310 # http(s) only: main()
                    request, timeout=args.probe_timeout) as response:
                text = json.loads(response.read())["choices"][0]["text"]
        except (OSError, ValueError, KeyError, IndexError) as failure:
            error = f"{type(failure).__name__}: {failure}"[:300]
        answers.append({"id": prompt["id"], "text": text, "error": error,
                        "elapsed_s": round(time.time() - started, 4)})
    return answers


def completion_gaps(result, started, ended, clock=None):
    """(first, last, longest gap) of the successful completions of one window, in node epoch s.

    vLLM's ``start_times`` are ``time.perf_counter()`` readings of the benchmark client
    (``vllm/benchmarks/lib/endpoint_request_func.py``: ``st = time.perf_counter()``), not
    epoch times: ``clock`` = (epoch, perf_counter) read together by this agent just before it
    started the client maps them (on Linux both processes read the same CLOCK_MONOTONIC). A
    completion is start + TTFT + the sum of its ITLs. The gap is the longest time between two
    consecutive completions, or from the last one to the window end; the time before the
    first completion is the first request's own latency (a long-context request takes about
    76 s), not an interruption. No completion at all: the whole window is the gap."""
    times = []
    starts, ttfts = result.get("start_times") or [], result.get("ttfts") or []
    itls, errors = result.get("itls") or [], result.get("errors") or []
    for i, start in enumerate(starts):
        if i < len(errors) and errors[i]:
            continue
        first = ttfts[i] if i < len(ttfts) and ttfts[i] else 0.0
        times.append(start + first + sum(itls[i] if i < len(itls) else []))
    if not times:
        return None, None, ended - started
    epoch0, counter0 = clock if clock else (started, min(starts))
    times = sorted(epoch0 + (t - counter0) for t in times)
    edges = [*times, max(ended, times[-1])]
    gap = max(b - a for a, b in zip(edges, edges[1:]))  # noqa: B905 (py3.8 on nodes)
    return times[0], times[-1], gap


def run_window(args, index):
    result_dir = os.path.join(args.dir, "windows")
    name = f"window-{index}.json"
    path = os.path.join(result_dir, name)
    prompts = max(1, int(round(args.rate * args.window_s)))
    argv = [*args.vllm.split(), "bench", "serve", "--backend", "openai", "--base-url",
            args.base_url, "--model", args.model, "--tokenizer", args.tokenizer,
            "--dataset-name", "prefix_repetition",
            "--prefix-repetition-prefix-len", str(args.prefix_len),
            "--prefix-repetition-suffix-len", str(args.suffix_len),
            "--prefix-repetition-num-prefixes", str(args.num_prefixes),
            "--prefix-repetition-output-len", str(args.output_len), "--ignore-eos",
            "--num-prompts", str(prompts), "--max-concurrency", str(args.concurrency),
            "--request-rate", str(args.rate), "--temperature", "0",
            "--seed", str(args.seed + index),
            "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99",
            "--save-result", "--save-detailed", "--result-dir", result_dir,
            "--result-filename", name, "--metadata", f"soak_window={index}", "--disable-tqdm"]
    started, counter = time.time(), time.perf_counter()
    error, code = None, None
    try:
        done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              timeout=max(60.0, args.window_s * 4 + 60), check=False)
        code = done.returncode
        if code != 0:
            error = f"exit {code}: {done.stderr.decode(errors='replace')[-300:]}"
    except (OSError, subprocess.SubprocessError) as failure:
        error = f"{type(failure).__name__}: {failure}"[:300]
    ended = time.time()
    result = {}
    if error is None:
        try:
            with open(path, encoding="utf-8") as handle:
                result = json.load(handle)
        except (OSError, ValueError) as failure:
            error = f"no result file: {failure}"[:300]
    first, last, gap = completion_gaps(result, started, ended, (started, counter))
    for key in ARRAYS:
        result.pop(key, None)
    try:
        os.unlink(path)
    except OSError:
        pass
    result.update({"soak_window": index, "soak_started": started, "soak_ended": ended,
                   "soak_first_completion": first, "soak_last_completion": last,
                   "soak_completion_gap_max_s": gap, "soak_exit": code, "soak_error": error})
    return result


def main(argv):
    parser = argparse.ArgumentParser(prog="acctest-soak-agent")
    parser.add_argument("--dir", required=True)
    parser.add_argument("--vllm", default="vllm")
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--rate", type=float, required=True)
    parser.add_argument("--concurrency", type=int, required=True)
    parser.add_argument("--window-s", type=float, required=True)
    parser.add_argument("--windows", type=int, required=True)
    parser.add_argument("--duration-s", type=float, required=True)
    parser.add_argument("--deadline", type=float, required=True)
    parser.add_argument("--prefix-len", type=int, default=30000)
    parser.add_argument("--suffix-len", type=int, default=512)
    parser.add_argument("--num-prefixes", type=int, default=64)
    parser.add_argument("--output-len", type=int, default=256)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--probe-every", type=float, required=True)
    parser.add_argument("--probe-max-tokens", type=int, default=64)
    parser.add_argument("--probe-timeout", type=float, default=600)
    parser.add_argument("--prompts-json", required=True)
    parser.add_argument("--golden", action="store_true")
    args = parser.parse_args(argv)
    # urlopen also opens file: and ftp: URLs; the plan allows http(s) only (runners.soak.plan),
    # and the agent holds to it on its own.
    if not args.base_url.startswith(("http://", "https://")):
        parser.error(f"--base-url must be an http(s) URL, not {args.base_url!r}")
    prompts = json.loads(args.prompts_json)
    if args.golden:
        print(json.dumps({"soak_round": 0, "t": time.time(),
                          "answers": probe_round(args, prompts)}))
        return 0
    os.makedirs(os.path.join(args.dir, "windows"), exist_ok=True)
    lock = threading.Lock()
    windows_path = os.path.join(args.dir, "windows.jsonl")
    probes_path = os.path.join(args.dir, "probes.jsonl")
    pause, stop = os.path.join(args.dir, "pause"), os.path.join(args.dir, "stop")
    state = {"round": 0, "last_probe": 0.0, "thread": None}

    def probe_due():
        thread = state["thread"]
        if thread is not None and thread.is_alive():
            return
        if time.time() - state["last_probe"] < args.probe_every:
            return
        state["last_probe"] = time.time()
        state["round"] += 1
        number = state["round"]

        def go():
            answers = probe_round(args, prompts)
            append(probes_path, {"soak_round": number, "t": time.time(), "answers": answers},
                   lock)

        state["thread"] = threading.Thread(target=go, daemon=True)
        state["thread"].start()

    reason, index, loaded = "duration reached", 0, 0.0
    while loaded < args.duration_s:
        if index >= args.windows:
            reason = f"window bound {args.windows} reached"
            break
        if os.path.exists(stop):
            reason = "stopped by the service"
            break
        if time.time() > args.deadline:
            reason = "deadline reached"
            break
        if os.path.exists(pause):
            time.sleep(0.1)
            continue
        index += 1
        probe_due()
        record = run_window(args, index)
        loaded += record["soak_ended"] - record["soak_started"]
        append(windows_path, record, lock)
    if state["thread"] is not None:
        state["thread"].join(timeout=args.probe_timeout)
    with open(os.path.join(args.dir, "done"), "w", encoding="utf-8") as handle:
        json.dump({"reason": reason, "windows": index, "at": time.time()}, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
