"""A measurement's labels as the run page shows them."""

from runners.presentation import labels_text


def test_labels_read_sorted_and_a_label_without_a_value_is_left_out():
    # G1's drive count of an array with no drive model: "expected 24 · model · scope array"
    # showed the bare key "model"
    assert labels_text({"scope": "array", "model": "", "expected": "24"}) == (
        "expected 24 · scope array")
    assert labels_text({"round": "2", "arm": "array"}) == "arm array · round 2"
