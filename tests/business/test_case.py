"""The pure business-case model against figures worked by hand (business/case.py)."""

import pytest

from business.case import (
    ARRAY_PRICE_DEFAULT,
    ArmRound,
    Evidence,
    Parameters,
    business_case,
    utilisation,
    weighted_throughput,
)

R2_C16 = ArmRound("1", local_tok_s=53.6, array_tok_s=74.9, ids=(11, 12))
PARAMS = Parameters(currency="CNY", nodes=22, gpus_per_node=8, gpu_cost_per_hour=15.0,
                    tokens_per_day=100e6, resume_share=1.0, arrays=2, horizon_years=3)


def test_array_price_default_is_the_fx100_vendor_figure():
    assert ARRAY_PRICE_DEFAULT == 371_200.0


def test_r2_concurrency_16_worked_by_hand():
    case = business_case(PARAMS, Evidence(True, rounds=(R2_C16,)))
    s = case.scenario("expected")
    # 100e6 tok/day ÷ (53.6 tok/s × 86 400 s) = 21.59 → 22 nodes; ÷ (74.9 × 86 400) = 15.45 → 16
    assert (s.nodes_local, s.nodes_array, s.gpus_local, s.gpus_array) == (22, 16, 176, 128)
    # node: 8 GPUs × ¥15/h = ¥120/h; 120 ÷ (53.6 × 3600) × 1e6 = ¥621.89 per million tokens
    assert s.cost_per_mtok_local == pytest.approx(621.89, abs=0.01)
    # 120 ÷ (74.9 × 3600) × 1e6 = 445.04, + array ¥742,400 ÷ 3 y ÷ 36 500 Mtok/y = 6.78
    assert s.cost_per_mtok_array == pytest.approx(451.82, abs=0.01)
    # 6 nodes × ¥1,051,200/y = ¥6,307,200 gross; − ¥247,466.67 array per year
    assert s.saving_per_year == pytest.approx(6_059_733.33, abs=0.01)
    assert s.payback_months == pytest.approx(742_400 / 6_307_200 * 12)  # 1.41 months
    assert s.storage_share == pytest.approx(742_400 / (128 * 131_400 * 3))  # 1.47 %
    assert s.cumulative_saving[0] == pytest.approx(6_307_200 - 742_400)
    assert case.measurement_ids == (11, 12)
    assert case.parameters_used["array_price"] == 371_200.0
    assert s.gain == pytest.approx(74.9 / 53.6 - 1)  # +39.7 %


def test_two_rounds_give_the_band_with_half_the_tokens_resuming():
    rounds = (R2_C16, ArmRound("2", 54.0, 72.0, (13, 14)))
    case = business_case(Parameters(**{**vars(PARAMS), "resume_share": 0.5}),
                         Evidence(True, rounds=rounds))
    low, exp, high = (case.scenario(n) for n in ("low", "expected", "high"))
    assert (low.gain, high.gain) == (pytest.approx(72 / 54 - 1), pytest.approx(74.9 / 53.6 - 1))
    # mean local 53.8; expected array 73.45; 1 / (0.5/73.45 + 0.5/53.8) = 62.11 tok/s
    assert exp.array_tok_s == pytest.approx(62.11, abs=0.01)
    assert low.array_tok_s == pytest.approx(61.49, abs=0.01)  # 53.8 × 1.3333 = 71.73 weighted
    assert high.array_tok_s == pytest.approx(62.72, abs=0.01)  # 53.8 × 1.3974 = 75.18 weighted
    assert low.saving_per_year <= exp.saving_per_year <= high.saving_per_year
    assert case.measurement_ids == (11, 12, 13, 14)


def test_a_small_fleet_does_not_pay_back():
    p = Parameters(**{**vars(PARAMS), "tokens_per_day": 1e6, "arrays": 1})
    s = business_case(p, Evidence(True, rounds=(ArmRound("1", 53.6, 56.0, (1, 2)),))).scenario(
        "expected")
    assert (s.nodes_local, s.nodes_array) == (1, 1)
    assert s.payback_months is None
    assert s.saving_per_year == pytest.approx(-371_200 / 3)


def test_switching_only_where_load_times_were_measured():
    # R1: 46.7 % → 62.8 % at 20 switches per hour: load 95.9 s → 66.96 s
    assert utilisation(20, 95.94) == pytest.approx(0.467, abs=0.001)
    assert utilisation(20, 66.96) == pytest.approx(0.628, abs=0.001)
    p = Parameters(**{**vars(PARAMS), "switches_per_hour": 20.0})
    left_out = business_case(p, Evidence(True, rounds=(R2_C16,)))
    assert "left out" in left_out.switching
    applied = business_case(p, Evidence(True, rounds=(R2_C16,), load_s_local=95.94,
                                        load_s_array=66.96, load_ids=(99,)))
    assert applied.scenario("expected").array_tok_s == pytest.approx(74.9 * 0.628, abs=0.05)
    assert 99 in applied.measurement_ids


def test_g3_not_passed_is_not_established_with_the_reason():
    case = business_case(PARAMS, Evidence(False, "G3 stopped: throughput gain +12 % below +29 %"))
    assert not case.established and case.scenarios == ()
    assert "below +29 %" in case.reason


def test_missing_parameters_are_named_never_guessed():
    case = business_case(Parameters(currency="CNY", nodes=8), Evidence(True, rounds=(R2_C16,)))
    assert not case.established
    assert "tokens_per_day" in case.missing and "horizon_years" in case.missing
    assert any(m.startswith("gpu_cost_per_hour") for m in case.missing)


def test_weighted_throughput_of_no_resumes_is_local():
    assert weighted_throughput(53.6, 74.9, 0.0) == pytest.approx(53.6)
