"""The two G3 parsers: the engine's /metrics window and the RDMA counter samples.

The exposition below is vLLM's Prometheus text as prometheus_client writes it (HELP/TYPE per
family, ``_total`` and ``_created`` samples per counter), with LMCache's in-process counters;
expected values are worked out by hand.
"""

import pytest

from runners.parsers import PARSERS, parse_output
from runners.parsers.base import ParseError

T0 = """# acceptance-scrape: name=t0 time=1764500000.100000000 url=http://127.0.0.1:8000/metrics
# HELP vllm:prefix_cache_queries Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{engine="0",model_name="qwen3-coder-480b-fp8"} 1000.0
vllm:prefix_cache_queries_created{engine="0",model_name="qwen3-coder-480b-fp8"} 1764499990.0
# HELP vllm:prefix_cache_hits Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{engine="0",model_name="qwen3-coder-480b-fp8"} 100.0
# HELP vllm:external_prefix_cache_hits External prefix cache hits from KV connector.
# TYPE vllm:external_prefix_cache_hits counter
vllm:external_prefix_cache_hits_total{engine="0",model_name="qwen3-coder-480b-fp8"} 0.0
# HELP lmcache:num_remote_read_bytes Total number of bytes read from remote backends
# TYPE lmcache:num_remote_read_bytes counter
lmcache:num_remote_read_bytes_total{model_name="qwen3-coder-480b-fp8",worker_id="0"} 0.0
lmcache:num_remote_read_bytes_total{model_name="qwen3-coder-480b-fp8",worker_id="1"} 0.0
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="qwen3-coder-480b-fp8"} 0.0
"""
T1 = T0.replace("name=t0 time=1764500000.100000000", "name=t1 time=1764500600.100000000") \
    .replace("} 1000.0", "} 7869000.0").replace("} 100.0", "} 3936100.0") \
    .replace('external_prefix_cache_hits_total{engine="0",model_name="qwen3-coder-480b-fp8"} 0.0',
             'external_prefix_cache_hits_total{engine="0",model_name="qwen3-coder-480b-fp8"} '
             '1920000.0') \
    .replace('worker_id="0"} 0.0', 'worker_id="0"} 243793920000.0') \
    .replace('worker_id="1"} 0.0', 'worker_id="1"} 243793920000.0')


def measured(raw: str) -> dict[str, tuple[float, str]]:
    return {m.metric: (m.value, m.unit) for m in parse_output("vllm_metrics", raw.encode())}


def test_it_registers_both_parsers():
    assert PARSERS["vllm_metrics"].TOOL == "vllm_metrics"
    assert PARSERS["nic_counters"].TOOL == "nic_counters"


def test_it_reads_the_window_as_the_difference_of_the_first_and_last_scrape():
    assert measured(T0 + T1) == {
        "prefix_cache_hit_tokens": (3936000.0, "1"),
        "external_prefix_cache_hit_tokens": (1920000.0, "1"),
        # summed over both workers: 2 × 243793920000 (= 960000 tokens × 253952 B each)
        "external_tier_read_bytes": (487587840000.0, "B"),
    }


def test_a_single_scrape_is_the_start_of_a_window_and_yields_nothing():
    assert parse_output("vllm_metrics", T0.encode()) == []


def test_it_refuses_a_counter_that_went_down():
    with pytest.raises(ParseError) as error:
        parse_output("vllm_metrics", (T1 + T0).encode())
    assert "restarted" in str(error.value)


def test_it_falls_back_to_the_tokens_by_source_counter_of_other_vllm_versions():
    before = ('# acceptance-scrape: name=t0 time=1 url=u\n'
              'vllm:prompt_tokens_by_source_total{source="external_kv_transfer"} 10\n'
              'vllm:prompt_tokens_by_source_total{source="local_compute"} 500\n')
    after = before.replace("name=t0 time=1", "name=t1 time=2").replace("} 10", "} 4010") \
        .replace("} 500", "} 9000")
    assert measured(before + after) == {"external_prefix_cache_hit_tokens": (4000.0, "1")}


def test_a_counter_absent_at_t0_counts_from_zero():
    before = "\n".join(line for line in T0.splitlines()
                       if "external_prefix_cache_hits_total" not in line) + "\n"
    assert measured(before + T1)["external_prefix_cache_hit_tokens"] == (1920000.0, "1")


def test_it_reads_the_tier_sizing_gauges():
    raw = ("# acceptance-sizing: max_local_cpu_size: 64 (64 GB x 1024^3 B) in /etc/lmc.yaml\n"
           "# TYPE acceptance_host_tier_bytes gauge\nacceptance_host_tier_bytes 68719476736\n"
           "# TYPE acceptance_working_set_bytes gauge\n"
           "acceptance_working_set_bytes 487587840000\n")
    assert measured(raw) == {"working_set_bytes": (487587840000.0, "B"),
                             "host_tier_bytes": (68719476736.0, "B")}


@pytest.mark.parametrize(("raw", "expected"), [
    ("", "output from the tool"),
    ("<html>502 Bad Gateway</html>\n", "Prometheus sample"),
    ("node_load1 0.5\n", "vLLM / LMCache /metrics"),
    ("vllm:prefix_cache_hits_total{engine=\"0\"} many\n", "a number"),
])
def test_it_names_what_it_expected_in_text_that_is_no_engine_metrics(raw, expected):
    with pytest.raises(ParseError) as error:
        parse_output("vllm_metrics", raw.encode())
    assert expected in str(error.value)


COUNTERS = (
    "sample=t0 time=1764500000.000000000 device=mlx5_0 port=1 counter=port_rcv_data "
    "value=1000000000\n"
    "sample=t1 time=1764500010.000000000 device=mlx5_0 port=1 counter=port_rcv_data "
    "value=4437500000\n"
)


def test_it_turns_two_port_rcv_data_samples_into_bytes_per_second():
    [m] = parse_output("nic_counters", COUNTERS.encode())
    # (4437500000 − 1000000000) words × 4 B ÷ 10 s = 1.375e9 B/s
    assert (m.metric, m.value, m.unit) == ("rx_bandwidth", 1.375e9, "B/s")
    assert m.labels == {"device": "mlx5_0", "port": "1", "counter": "port_rcv_data"}


def test_a_single_counter_sample_yields_nothing():
    assert parse_output("nic_counters", COUNTERS.splitlines()[0].encode()) == []


def test_byte_counters_are_not_multiplied():
    raw = COUNTERS.replace("port_rcv_data", "rx_vport_rdma_unicast_bytes")
    [m] = parse_output("nic_counters", raw.encode())
    assert m.value == pytest.approx(3437500000 / 10)


@pytest.mark.parametrize(("raw", "expected"), [
    (COUNTERS.replace("value=4437500000", "value=10"), "reset or wrapped"),
    (COUNTERS.replace("value=4437500000", "value=4294967295"), "saturated 32-bit"),
    (COUNTERS.replace("time=1764500010", "time=1764499990"), "later time"),
    (COUNTERS.replace("port_rcv_data", "rx_bytes_something"), "known RDMA counter"),
    ("t0 12345\n", "sample="),
])
def test_it_refuses_counter_samples_that_cannot_give_a_rate(raw, expected):
    with pytest.raises(ParseError) as error:
        parse_output("nic_counters", raw.encode())
    assert expected in str(error.value)


# --- issue 16: the tier evidence window -------------------------------------------------------

def window_block(name, hits, words=None, l2=None, reset=None):
    """One scrape block as the window probe prints it: vLLM's counter, LMCache's MP endpoint
    (``lmcache_mp_lookup_hit_l2_tokens_total``), the RDMA counter line, the flush's reset mark."""
    lines = [f"# acceptance-scrape: name={name} time=1764500000.1 url=http://127.0.0.1:8000/metrics",
             "# TYPE vllm:external_prefix_cache_hits counter",
             f'vllm:external_prefix_cache_hits_total{{engine="0",model_name="m"}} {hits}']
    if l2 is not None:
        lines += ["# HELP lmcache_mp_lookup_hit_l2_tokens_total Tokens hit in L2",
                  "# TYPE lmcache_mp_lookup_hit_l2_tokens_total counter",
                  f"lmcache_mp_lookup_hit_l2_tokens_total {l2}"]
    if words is not None:
        lines += ["# TYPE acceptance_rdma_port_rcv_data counter",
                  f'acceptance_rdma_port_rcv_data{{device="mlx5_0",port="1"}} {words}']
    if reset is not None:
        lines += ["# TYPE acceptance_prefix_cache_reset gauge",
                  f"acceptance_prefix_cache_reset {reset}"]
    return "\n".join(lines) + "\n"


def test_the_window_is_labelled_with_its_scrapes_and_reads_rdma_words_and_l2_hits():
    raw = (window_block("evicted", 100, words=1_000, l2=10, reset=1)
           + window_block("t1", 2_100, words=501_000, l2=1_810)).encode()
    figures = {m.metric: m for m in parse_output("vllm_metrics", raw)}
    assert figures["external_prefix_cache_hit_tokens"].value == 2_000
    assert figures["external_prefix_cache_hit_tokens"].labels == {"window": "evicted→t1"}
    assert (figures["rdma_read_bytes"].value, figures["rdma_read_bytes"].unit) == (2_000_000, "B")
    assert figures["storage_tier_hit_tokens"].value == 1_800
    assert figures["prefix_cache_reset"].value == 1  # from the first scrape, where the flush put it


def test_an_rdma_counter_missing_from_the_window_s_start_is_refused():
    raw = (window_block("t0", 0) + window_block("t1", 2_100, words=501_000)).encode()
    with pytest.raises(ParseError, match=r"acceptance_rdma_port_rcv_data in the first scrape "
                                         r"\(t0\) as in the last"):
        parse_output("vllm_metrics", raw)


def test_the_sizing_gauges_are_read_from_the_last_scrape():
    raw = (b"# acceptance-sizing: GPU KV cache size: 600,000 tokens (engine log x)\n"
           b"acceptance_gpu_kv_tokens 600000\nacceptance_kv_bytes_per_token 253952\n"
           b"acceptance_working_set_bytes 487587840000\n"
           b"acceptance_host_tier_bytes 68719476736\n")
    figures = {m.metric: (m.value, m.unit) for m in parse_output("vllm_metrics", raw)}
    assert figures == {"gpu_kv_tokens": (600_000, "1"), "kv_bytes_per_token": (253952, "B"),
                       "working_set_bytes": (487587840000, "B"),
                       "host_tier_bytes": (68719476736, "B")}
