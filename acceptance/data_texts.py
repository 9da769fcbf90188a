"""Texts that arrive as data — the default gates' and criteria's descriptions (``gates.defaults``),
the lab scenarios' descriptions (``runners.lab.scenarios``) and the lab's bill of materials —
marked here so ``makemessages`` puts them in the catalogue; pages show them through
``data_text``, which translates a text it knows and leaves any other (an edited criterion, a
customer's own bill of materials) as it was written. ``tests/web/test_translations.py`` fails
when a default text changes and this list was not kept in step."""

# ruff: noqa: E501 (each text on one line, as written in its source)
import re

from django.utils.translation import gettext, gettext_noop
from django.utils.translation import gettext_noop as _

GATE_DESCRIPTIONS = (
    _('Every BOM item delivered and checked; every array passes its self-test; all 24 drives of each array recognised; SMART critical warnings = 0.'),
    # xgettext:no-python-format
    _('The single-node 8-accelerator inference baseline reproduced within ±10 % of the reference figures; a single array under local load reaches ≥ 83 % line efficiency.'),
    # xgettext:no-python-format
    _('Array as KV tier vs local NVMe: TTFT p50 reduction ≥ 25 % and output throughput gain +29 % … +40 %; 8 nodes sharing one array approach the NIC limit.'),
    _('72 h continuous load without interruption; single-drive and single-link faults cause no service impact; a signed acceptance report is issued.'),
)
CRITERION_DESCRIPTIONS = (
    _('Every bill-of-materials item delivered and ticked'),
    _('All drives of each array recognised'),
    _('Every drive of each array completed and passed the self-test this run started'),
    _('No SMART critical warning on any drive'),
    # xgettext:no-python-format
    _("Sequential read reaches {threshold} of the array port's line rate"),
    _('No fio job reported an error'),
    # xgettext:no-python-format
    _("TTFT p50 within ±{tolerance} of the reference profile's local-NVMe figure"),
    # xgettext:no-python-format
    _("Output throughput within ±{tolerance} of the reference profile's local-NVMe figure"),
    _('No benchmark request failed'),
    # xgettext:no-python-format
    _('TTFT p50 reduced by at least {threshold} vs local NVMe (mean of the rounds)'),
    # xgettext:no-python-format
    _('Output throughput gain inside +{threshold} … +{threshold_high} (mean of the rounds)'),
    # xgettext:no-python-format
    _('Two rounds agree within {threshold} for every figure and arm'),
    # xgettext:no-python-format
    _('8 nodes sharing one array: aggregate read-back ≥ {threshold} of line rate'),
    _('No request failed in any arm of the comparison'),
    _('Continuous load held for {threshold}'),
    _('No failed request during any fault window'),
    _('Correctness probes match the known-good answers'),
    _('No failed request, in steady state and before, during and after every fault'),
    _('No gap between successful completions longer than {threshold}'),
    # xgettext:no-python-format
    _('TTFT p99 at most {threshold} above the pre-fault baseline'),
    # xgettext:no-python-format
    _('Output throughput at most {-threshold} below the pre-fault baseline'),
    _('Every planned fault was injected and healed'),
)
# The default descriptions as they read before they named their bounds ({threshold}): the
# verdicts of earlier decisions keep them in their snapshots.
FORMER_CRITERION_DESCRIPTIONS = (
    # xgettext:no-python-format
    _('TTFT p50 at concurrency 16 within ±{tolerance} of R2'),
    # xgettext:no-python-format
    _('Output throughput at concurrency 16 within ±{tolerance} of R2'),
    _("No drive's newest self-test failed"),
    # xgettext:no-python-format
    _("Sequential read reaches {threshold} of the link's line rate"),
    # xgettext:no-python-format
    _("Sequential read reaches 83 % of the link's line rate"),
    # xgettext:no-python-format
    _('TTFT p50 at concurrency 16 within ±10 % of R2'),
    # xgettext:no-python-format
    _('Output throughput at concurrency 16 within ±10 % of R2'),
    # xgettext:no-python-format
    _('TTFT p50 reduced by at least 25 % vs local NVMe (mean of the rounds)'),
    # xgettext:no-python-format
    _('Output throughput gain inside +29 % … +40 % (mean of the rounds)'),
    # xgettext:no-python-format
    _('Two rounds agree within 5 % for every figure and arm'),
    # xgettext:no-python-format
    _('8 nodes sharing one array: aggregate read-back ≥ 83 % of line rate'),
    _('Continuous load held for 72 h'),
    _('No gap between successful completions longer than 60 s'),
    # xgettext:no-python-format
    _('TTFT p99 at most 25 % above the pre-fault baseline'),
    # xgettext:no-python-format
    _('Output throughput at most 10 % below the pre-fault baseline'),
)
SCENARIO_DESCRIPTIONS = (
    _("The array arm's engine hits its external tier in the warm-up pass only; the measured pass hits nothing. From engine start its counters would show hits; from the eviction (the tier evidence window) they show none. G3 is an error (invalid arms), not a pass."),
    # xgettext:no-python-format
    _("The array arm hits as in kv-gain, but only half of its hits come from the array: the other half from LMCache's CPU tier. The RDMA bytes read in the window are 0.5 × hits × KV bytes per token, outside ±15 %: G3 is an error, the array tier's use not shown."),
    _("The array arm's round-2 measured pass has 3 failed requests of 256 (vLLM's completed 253, failed 3); the local arm has none. vLLM's TTFT and throughput count successful requests only, so that comparison is void (G3 is an error, not a pass) and the failed_requests criterion fails."),
    _("The GPU KV cache holds 1,000,000 tokens (254.0 GB): the 487.6 GB working set exceeds GPU KV + DRAM tier (322.7 GB) but not twice it (645.3 GB, RUNBOOK §4.2), so hits may come from HBM or DRAM. G3 is an error (invalid arms), not a pass."),
    _("The kv-gain figures, but the nodes start reading apart: node i's first counter read comes (i − 1) × 8 s late, longer than each 3 s read-back pass, so even with nodes started together the window where all of them read is empty or shorter than the plan's 2 s. The aggregate cannot count: G3 is an error naming the overlap's length."),
    _("The kv-gain figures, but the plan's read-back wants 8 nodes sharing the array and the lab has fewer: G3 is an error naming the counts, never a pass on fewer nodes."),
    # xgettext:no-python-format
    _('Everything passes: 24 drives present, every self-test passes, no SMART warning, 100 GbE link, fio reads 11.0e9 B/s (88 % of 12.5e9), and the c16 baseline is within ±10 % of R2 (TTFT p50 17.5 s vs 17.31 s, 54.1 vs 53.6 tok/s).'),
    _('One drive is not recognised: nvme list shows 23 drives (FX1A0000 … FX1A0022); everything else is healthy. G1 fails on drive_count 23 < 24.'),
    _('Drive index 5 (nvme5, FX1A0005) reports its newest short self-test as result 7 (failed segment 2); all other drives pass. G1 fails on self_test_failures 1.'),
    # xgettext:no-python-format
    _('fio reads only 9.5e9 B/s over the 100 GbE link: 76 % line efficiency, below the 83 % G2 threshold; everything else healthy.'),
    # xgettext:no-python-format
    _('The c16 baseline replay is 15 % off R2: 45.56 tok/s (53.6 × 0.85) and TTFT p50 19906 ms (17310 × 1.15); G2 fails on baseline_deviation beyond ±10 %.'),
    # xgettext:no-python-format
    _("G3 passes (R2-like): at c16 the array tier gives TTFT p50 11.85 s vs 17.31 s on local NVMe (ttft_reduction 0.315) and 74.9 vs 53.6 tok/s (throughput_gain 0.397); round 2 within 1.5 % of round 1; both tiers hit; 8 nodes read back 11.0e9 B/s together (88 % of the array's 100 GbE port). G1 and G2 pass as in healthy."),
    _('The array tier is no faster than local NVMe: TTFT p50 17.1 s vs 17.31 s (reduction 0.012), 54.2 vs 53.6 tok/s (gain 0.011); both tiers hit. G3 stops on ttft_reduction and throughput_gain.'),
    _("The array arm's figures look like R2 (they would pass) but its engine reports no external-tier hit tokens: the array tier was not used, so the arm cannot count. G3 is an error (insufficient evidence), not a pass."),
    # xgettext:no-python-format
    _('Round 2 of the array arm differs from round 1 by more than 5 % (TTFT p50 12.80 s vs 11.85 s: +8 %; 69.66 vs 74.9 tok/s: −7 %): the measurement is unstable and G3 is an error asking for a re-run, although the means would pass.'),
    _("23 array drives and the controller's own boot SSD (another model, PCIe): nvme list shows 24 PCIe drives, but only 23 are of the array's drive model. G1 stops on drive_count 23 < 24 and names the boot SSD as not counted."),
    _('nvme-cli 2.10 prints the flat list (no transport field): the 24 array drives and an NVMe-oF controller of the array itself (model FX100). Only the 24 drives of the drive model count, so G1 passes on its drive count and names the fabrics controller.'),
    _('Drive index 9 (nvme9, FX1A0009) logs its newest self-test as result 2 (aborted by a controller reset): not a failure, not a pass. G1 is an error naming FX1A0009 (re-run its self-test).'),
    # xgettext:no-python-format
    _("Drive index 4 (nvme4, FX1A0004) never finishes the self-test this run starts (operation 1, 40 %): its probe polls until max_polls (10 min with the plan's defaults) and fails naming /dev/nvme4; G1 is an error, never a pass."),
    _("The R2-like figures of kv-gain, but LMCache's max_local_cpu_size is 64 GB per TP rank: with TP = 8 the host-memory tier is 549.8 GB and holds R2's 487.6 GB working set, so hits may come from DRAM. G3 is an error (invalid arms), not a pass."),
)
CRITERION_SOURCES = (
    _('G1 gate text: BOM checklist ticked by the PM'),
    _('G1 gate text: all 24 drives of each array (FX100: 24 × 7.68 TB)'),
    _('G1 gate text: every array passes its self-test'),
    _('G1 gate text: SMART critical warnings = 0'),
    # xgettext:no-python-format
    _("G2 gate text: ≥ 83 % line efficiency, against the array's port (100 GbE = 12.5 GB/s)"),
    _('fio: a job that reports an error cannot count'),
    _('vllm bench serve: failed requests void a baseline'),
    # xgettext:no-python-format
    _('G3 gate text; R2: −26 % … −32 %'),
    # xgettext:no-python-format
    _('Repeatability; R3: two rounds within 5 %'),
    _("vLLM's TTFT and throughput count successful requests only; failed requests in any arm void the comparison"),
    _('G3 gate text; R1: one array serves 8 inference nodes'),
    _('G4 gate text: 72 h continuous load'),
    _('G4 gate text: injected faults cause no service impact; error rate = failed ÷ (completed + failed)'),
    _('G4 gate text: continuous load with no interruption'),
    _('Acceptance plan: TTFT p99 within set bounds of the pre-fault baseline (vllm bench serve p99_ttft_ms per window)'),
    _('Acceptance plan: throughput within set bounds of the pre-fault baseline (vllm bench serve output_throughput per window)'),
    _('Fixed prompts at temperature 0 against the outputs recorded before the soak'),
    _('G4 gate text: single-drive and single-link faults injected'),
    # Sources an engagement stored before they named the vendor's gate text and reports:
    _('DOMAIN.md G1: BOM checklist ticked by the PM'),
    _('DOMAIN.md G1: all 24 drives of each array (FX100: 24 × 7.68 TB)'),
    _('DOMAIN.md G1: every array passes its self-test'),
    _('DOMAIN.md G1: SMART critical warnings = 0'),
    # xgettext:no-python-format
    _('DOMAIN.md G2: ≥ 83 % line efficiency (100 GbE = 12.5 GB/s)'),
    # xgettext:no-python-format
    _("DOMAIN.md G2: ≥ 83 % line efficiency, against the array's port (100 GbE = 12.5 GB/s)"),
    _('RUNBOOK §3.2: a failed fio job cannot count'),
    _("issue 16: vLLM's TTFT and throughput count successful requests only; failed requests in any arm void the comparison"),
    _('R2 local NVMe, concurrency 16: TTFT p50 17.31 s'),
    _('R2 local NVMe, concurrency 16: 53.6 output tok/s'),
    _('RUNBOOK §3.4: failed requests void a baseline'),
    # xgettext:no-python-format
    _('DOMAIN.md G3; R2: −26 % … −32 %'),
    # xgettext:no-python-format
    _('R2: +29 % (c8) … +40 % (c16)'),
    # xgettext:no-python-format
    _('DOMAIN.md repeatability; R3: two rounds within 5 %'),
    _('DOMAIN.md G3; R1: one array serves 8 inference nodes'),
    _('DOMAIN.md G4: 72 h continuous load'),
    _('DOMAIN.md G4: injected faults cause no service impact'),
    _('RUNBOOK §5.2'),
)
SERVICE_TEXTS = (_('acceptance service (automatic evaluation)'),)
LAB_TEXTS = (
    _('FX100 all-flash NVMe-oF array, 24 × 7.68 TB U.2 NVMe'),
    _('100 GbE RoCEv2 NIC for the array port'),
    _('QSFP28 direct-attach copper cable, 3 m'),
    _('Rack rail kit'),
    _('Redundant power supply unit'),
    _('lab set-up (automatic)'),
)


def data_text(text: str) -> str:
    """``text`` in the active language when the catalogue has it, else unchanged ("" stays "")."""
    return gettext(text) if text else text


# Sentences the service stored in English when it decided (``gates.services``: a decision's
# sentence, an engagement's stopped reason), put into the page's language when they have the
# service's own shape; any other text (edited, imported, older wording) is shown as stored.
_TITLE = r"(?P<code>G\d+) (?P<name>[^:]+?)"
_PASSED = re.compile(_TITLE + r" passed: all (?P<count>\d+) criteria met\.")
_REVIEW = re.compile(_TITLE + r" needs review: (?P<parts>.+) is outside the reference range; a "
                     r"person must accept it with a reason or re-run\.")
_STOPPED = re.compile(_TITLE + r" stopped: (?P<parts>.+)\. The engagement stops here until a "
                      r"person re-opens it with a recorded reason\.")
_STOPPED_ON = re.compile(r"(?P<code>G\d+) stopped on (?P<date>\d{4}-\d\d-\d\d): (?P<parts>.+)")
_PART = re.compile(r"(?P<metric>\S+) (?P<requirement>.+?) measured (?P<measured>.+?)"
                   r"(?: on (?P<node>\S+))?")


def _parts(text: str) -> str | None:
    out = []
    for part in text.split("; "):
        found = _PART.fullmatch(part)
        if found is None:
            return None
        values = found.groupdict()
        if values["node"]:
            out.append(gettext("%(metric)s %(requirement)s measured %(measured)s on %(node)s")
                       % values)
        else:
            out.append(gettext("%(metric)s %(requirement)s measured %(measured)s") % values)
    return gettext("; ").join(out)


def _gate_title(code: str, name: str) -> str:
    return f"{code} {gettext(name[:1].upper() + name[1:]).lower()}"


def decision_sentence_text(text: str) -> str:
    """A decision's stored sentence in the active language (unchanged if not the service's)."""
    if found := _PASSED.fullmatch(text):
        return gettext("%(gate)s passed: all %(count)s criteria met.") % {
            "gate": _gate_title(found["code"], found["name"]), "count": found["count"]}
    for pattern, message in (
            (_REVIEW, gettext_noop("%(gate)s needs review: %(parts)s is outside the reference "
                                   "range; a person must accept it with a reason or re-run.")),
            (_STOPPED, gettext_noop("%(gate)s stopped: %(parts)s. The engagement stops here "
                                    "until a person re-opens it with a recorded reason."))):
        if (found := pattern.fullmatch(text)) and (parts := _parts(found["parts"])):
            return gettext(message) % {"gate": _gate_title(found["code"], found["name"]),
                                       "parts": parts}
    return text


def stopped_reason_text(text: str) -> str:
    """An engagement's stored stop reason in the active language (unchanged if not the
    service's shape)."""
    if (found := _STOPPED_ON.fullmatch(text)) and (parts := _parts(found["parts"])):
        return gettext("%(gate)s stopped on %(date)s: %(parts)s") % {
            "gate": found["code"], "date": found["date"], "parts": parts}
    return text


_SCOPE = r"(?P<scope>measured|worst of (?P<worst>\d+)|(?P<agg>min|max|sum|mean) of (?P<n>\d+))"
_EXPLANATION = re.compile(_SCOPE + r"(?: on (?P<node>[^:(]+?))?(?P<labels> \([^)]*\))?: "
                          r"(?P<value>[^;]+); required (?P<required>[^;]+)"
                          r"(?:; deviation (?P<deviation>[+-]\d+(?:\.\d+)?) %)?")
_AGGREGATES = {"min": gettext_noop("lowest of %(n)s"), "max": gettext_noop("highest of %(n)s"),
               "sum": gettext_noop("sum of %(n)s"), "mean": gettext_noop("mean of %(n)s")}


def explanation_text(text: str) -> str:
    """A verdict's stored one-line explanation (``gates.evaluation``) in the active language
    when it has the common shape ("measured on NODE: 23; required >= 24"); else as stored."""
    found = _EXPLANATION.fullmatch(text)
    if found is None:
        return text
    if found["worst"]:
        scope = gettext("worst of %(n)s") % {"n": found["worst"]}
    elif found["agg"]:
        scope = gettext(_AGGREGATES[found["agg"]]) % {"n": found["n"]}
    else:
        scope = gettext("measured")
    values = {"scope": scope, "node": found["node"], "labels": found["labels"] or "",
              "value": found["value"], "required": found["required"]}
    line = (gettext("%(scope)s on %(node)s%(labels)s: %(value)s; required %(required)s")
            if found["node"] else
            gettext("%(scope)s%(labels)s: %(value)s; required %(required)s")) % values
    if found["deviation"]:
        line += gettext("; deviation %(deviation)s %%") % {"deviation": found["deviation"]}
    return line
