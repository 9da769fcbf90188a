"""The timeline SVG: gates on their weeks, the today line inside the ten weeks, data escaped."""

from datetime import date

from acceptance.charts import WIDE, TimelineMark, timeline_svg

START = date(2026, 11, 2)


def marks(**states):
    return [TimelineMark(code=code, due_week=week, state=states.get(code, "pending"),
                         title=f"{code}: {states.get(code, 'pending')}")
            for code, week in (("G1", 2), ("G2", 4), ("G3", 7), ("G4", 10))]


def test_each_state_has_its_own_shape_and_title():
    svg = timeline_svg(start=START, today=date(2026, 12, 1),
                       marks=marks(G1="passed", G2="stopped", G3="review"))
    wide = svg.split('<svg class="timeline compact"')[0]
    assert wide.count("<circle") == 2  # passed (filled) and pending (ring)
    assert "<rect" in wide and "l9 9 l-9 9" in wide
    assert "<title>G2: stopped</title>" in svg


def test_today_is_clamped_to_the_ten_weeks_and_says_so():
    before = timeline_svg(start=START, today=date(2026, 10, 1), marks=marks())
    after = timeline_svg(start=START, today=date(2027, 3, 1), marks=marks())
    assert f'x1="{float(WIDE.left)}" y1="6"' in before and "today: before the start" in before
    assert f'x1="{float(WIDE.right)}" y1="6"' in after and "today: after week 10" in after


def test_it_draws_a_wide_and_a_compact_timeline():
    svg = timeline_svg(start=START, today=START, marks=marks())
    assert svg.count('<svg class="timeline wide"') == 1
    assert svg.count('<svg class="timeline compact"') == 1


def test_text_from_data_is_escaped():
    svg = timeline_svg(start=START, today=START, label='<script>"x"</script>',
                       marks=[TimelineMark("G<1>", 2, "pending", "<b>")])
    assert "<script>" not in svg and "G<1>" not in svg and "<b>" not in svg
    assert "G&lt;1&gt;" in svg
