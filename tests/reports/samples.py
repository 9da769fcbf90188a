"""Sample gate-report contexts, written by hand, for rendering and signing tests."""

from __future__ import annotations

import dataclasses
import hashlib
from datetime import UTC, date, datetime, timedelta

from gates.presentation import VerdictRow
from reports.context import BomRow, EvidenceRow, GateReportContext, NodeRow

DECIDED_AT = datetime(2026, 3, 13, 9, 40, tzinfo=UTC)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _run(node: str, probe: str, command: str, tool: str, minute: int, exit_code: int = 0):
    start = DECIDED_AT - timedelta(hours=6) + timedelta(minutes=minute)
    return EvidenceRow(
        node=node,
        probe=probe,
        command=command,
        tool_version=tool,
        started_at=start,
        finished_at=start + timedelta(seconds=41),
        exit_code=exit_code,
        sha256=_sha(f"{node} {command}"),
        simulated=True,
        state="succeeded" if exit_code == 0 else "failed",
        raw_output=f"{node} {command}".encode(),
    )


G1_DECISION = (
    "G1 arrival acceptance is not met: array fx-array-1 recognises 23 of 24 drives, "
    "so the engagement stops at G1."
)


def g1_stopped(**changes: object) -> GateReportContext:
    """G1 stopped on a missing drive; five criteria, lab (simulated) evidence."""
    ctx = GateReportContext(
        engagement_name="Shenzhen inference cluster acceptance",
        customer="Example Cloud Ltd.",
        gate_code="G1",
        gate_name="Arrival acceptance",
        due_date=date(2026, 3, 13),
        engagement_start=date(2026, 2, 27),
        decision_outcome="stopped",
        decision_sentence=G1_DECISION,
        decided_at=DECIDED_AT,
        decided_by="Li Wei (project manager)",
        criteria=[
            VerdictRow(
                metric="bom_items_checked",
                description="Bill-of-materials items delivered and checked",
                requirement="= 100 %",
                measured_text="12 of 12 (100 %)",
                unit="",
                reference_source="DOMAIN.md G1",
                verdict="pass",
                explanation="All 12 items ticked by the project manager.",
            ),
            VerdictRow(
                metric="nvme_drive_count",
                description="NVMe drives recognised per array (nvme list)",
                requirement=">= 24",
                measured_text="23 drives",
                unit="1",
                reference_source="DOMAIN.md G1",
                verdict="fail",
                explanation="fx-array-1 lists 23 drives (min over 2 arrays); fx-array-2 lists 24.",
            ),
            VerdictRow(
                metric="drive_self_test_failures",
                description="Drives whose short self-test did not pass",
                requirement="= 0",
                measured_text="0 drives",
                unit="1",
                reference_source="DOMAIN.md G1",
                verdict="pass",
                explanation="47 of 47 self-tests completed without error.",
            ),
            VerdictRow(
                metric="smart_critical_warning",
                description="SMART critical-warning flags across all drives",
                requirement="= 0",
                measured_text="0 flags",
                unit="1",
                reference_source="DOMAIN.md G1",
                verdict="pass",
                explanation="No drive reports a critical warning.",
            ),
            VerdictRow(
                metric="array_power_on_self_test",
                description="Array controller power-on self-test",
                requirement="passed on every array",
                measured_text="1 of 2 arrays",
                unit="",
                reference_source="DOMAIN.md G1",
                verdict="insufficient",
                explanation="No POST log was collected from fx-array-2 (needs 1 sample, has 0).",
            ),
        ],
        runs=[
            _run("fx-array-1", "nvme_list", "nvme list -o json", "nvme-cli 2.4", 0),
            _run("fx-array-2", "nvme_list", "nvme list -o json", "nvme-cli 2.4", 2),
            _run(
                "fx-array-1",
                "nvme_self_test",
                "nvme device-self-test /dev/nvme0 -s 1 && nvme self-test-log /dev/nvme0 -o json",
                "nvme-cli 2.4",
                5,
            ),
            _run("fx-array-1", "smart_health", "smartctl -j -a /dev/nvme0", "smartmontools 7.3", 9),
            _run(
                "fx-array-2", "smart_health", "smartctl -j -a /dev/nvme0", "smartmontools 7.3", 11
            ),
            _run("fx-array-2", "array_post", "fxcli system post --json", "fxcli 3.1", 14, 2),
        ],
        bom=[
            BomRow(
                "FX100 array, 24 × 7.68 TB U.2 NVMe (serial FX1-2301)",
                "Li Wei",
                DECIDED_AT - timedelta(days=3),
            ),
            BomRow(
                "FX100 array, 24 × 7.68 TB U.2 NVMe (serial FX1-2302)",
                "Li Wei",
                DECIDED_AT - timedelta(days=3),
            ),
            BomRow(
                "100 GbE RoCEv2 QSFP28 cables, 3 m (×8)", "Li Wei", DECIDED_AT - timedelta(days=2)
            ),
            BomRow("Rail kits and power cords (×2)", "Zhang Min", DECIDED_AT - timedelta(days=2)),
        ],
        nodes=[
            NodeRow(
                "fx-array-1",
                "10.20.0.11",
                "array",
                "SHA256:q9Vn3u0lYpR0Ck2kQ0H1y0Xx2mF6m3u3JqkZbC4b7Ws",
            ),
            NodeRow(
                "fx-array-2",
                "10.20.0.12",
                "array",
                "SHA256:Jc1eM7n2t0ZB8oVb9kz6bq0Gd0a1w8hQ4s2vYpXlR3E",
            ),
            NodeRow(
                "infer-01",
                "10.20.1.21",
                "inference",
                "SHA256:3aWm0c8Xo1f9QkL0yVt2d5Zr4n7Hs6Ju8Ee1Bp2Cq9A",
            ),
        ],
        simulated=True,
    )
    return dataclasses.replace(ctx, **changes)  # type: ignore[arg-type]


def g2_passed_zh(**changes: object) -> GateReportContext:
    """G2 passed, Chinese engagement name, rendered for zh-hans."""
    criteria = [
        VerdictRow(
            metric="ttft_p50",
            description="TTFT p50, local NVMe, concurrency 16",
            requirement="within ±10 % of 17.31 s",
            measured_text="17.92 s",
            unit="s",
            reference_source="R2 local NVMe c16",
            verdict="pass",
            explanation="+3.5 % from the reference.",
        ),
        VerdictRow(
            metric="output_throughput",
            description="Output throughput, concurrency 16",
            requirement="within ±10 % of 53.6 tok/s",
            measured_text="51.9 tok/s",
            unit="tok/s",
            reference_source="R2 local NVMe c16",
            verdict="pass",
            explanation="−3.2 % from the reference.",
        ),
        VerdictRow(
            metric="line_efficiency",
            description="fio sequential read ÷ 100 GbE line rate",
            requirement=">= 0.83",
            measured_text="0.88 (88 %) ratio",
            unit="ratio",
            reference_source="DOMAIN.md G2",
            verdict="pass",
            explanation="11.0 GB/s of 12.5 GB/s.",
        ),
        VerdictRow(
            metric="round_spread",
            description="Spread between two independent rounds",
            requirement="<= 5 %",
            measured_text="2.1 %",
            unit="",
            reference_source="R3",
            verdict="pass",
            explanation="Rounds agree.",
        ),
        VerdictRow(
            metric="ttft_p50_samples",
            description="Benchmark runs counted",
            requirement=">= 2",
            measured_text="2 runs",
            unit="1",
            reference_source="DOMAIN.md G2",
            verdict="pass",
            explanation="Two rounds.",
        ),
    ]
    base = g1_stopped(
        engagement_name="深圳测试",
        customer="深圳示例云计算有限公司",
        gate_code="G2",
        gate_name="Single-node baseline",
        due_date=date(2026, 3, 27),
        decision_outcome="passed",
        decision_sentence="G2 单节点基线已达成：TTFT 与吞吐均在参考值 ±10 % 以内。",
        criteria=criteria,
        bom=[],
        language="zh-hans",
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]
