"""ethtool parser: the ``Speed:`` line of ``ethtool IF`` and the sysfs speed integer."""


import pytest

from runners.parsers import ethtool
from runners.parsers.base import ParseError
from tests.parsers.corpus import CORPUS, needs_corpus

SETTINGS = """Settings for ens1f0np0:
\tSupported ports: [ Backplane ]
\tSupported link modes:   1000baseKX/Full
\t                        100000baseCR4/Full
\tSupported pause frame use: Symmetric
\tSupports auto-negotiation: Yes
\tAdvertised link modes:  100000baseCR4/Full
\tSpeed: {speed}
\tDuplex: Full
\tAuto-negotiation: on
\tPort: Direct Attach Copper
\tPHYAD: 0
\tTransceiver: internal
\tSupports Wake-on: d
\tWake-on: d
\tCurrent message level: 0x00000004 (4)
\t\t\t       link
\tLink detected: {link}
"""


def values(raw):
    return {m.metric: (m.value, m.unit, m.labels) for m in ethtool.parse(raw)}


def test_it_converts_megabits_to_bytes_per_second():
    v = values(SETTINGS.format(speed="100000Mb/s", link="yes").encode())
    assert v["link_speed"] == (12.5e9, "B/s", {"interface": "ens1f0np0"})
    assert v["link_detected"] == (1, "1", {"interface": "ens1f0np0"})


def test_it_reads_other_speeds_and_a_missing_link():
    v = values(SETTINGS.format(speed="25000Mb/s", link="no").encode())
    assert v["link_speed"][0] == 25000 * 1e6 / 8
    assert v["link_detected"][0] == 0


def test_it_rejects_an_unknown_speed_naming_the_line():
    with pytest.raises(ParseError) as error:
        ethtool.parse(SETTINGS.format(speed="Unknown!", link="no").encode())
    assert error.value.line == 8
    assert "Speed: <N>Mb/s" in str(error.value)
    assert "Unknown!" in str(error.value)


def test_it_rejects_output_without_a_speed_line():
    text = "Settings for lo:\n\tLink detected: yes\n"
    with pytest.raises(ParseError) as error:
        ethtool.parse(text.encode())
    assert "Speed" in str(error.value)


def test_it_reads_the_sysfs_integer():
    assert values(b"100000\n") == {"link_speed": (12.5e9, "B/s", {})}


@pytest.mark.parametrize("raw", [b"-1\n", b"0\n"])
def test_it_rejects_a_sysfs_speed_of_a_down_link(raw):
    with pytest.raises(ParseError) as error:
        ethtool.parse(raw)
    assert "positive link speed" in str(error.value)


def test_it_rejects_empty_input():
    with pytest.raises(ParseError) as error:
        ethtool.parse(b"")
    assert error.value.line == 0


def test_it_tolerates_netlink_warnings_and_crlf():
    text = ("netlink error: Operation not permitted\r\n"
            + SETTINGS.format(speed="200000Mb/s", link="yes").replace("\n", "\r\n"))
    v = values(text.encode())
    assert v["link_speed"] == (25e9, "B/s", {"interface": "ens1f0np0"})


@pytest.mark.corpus
@needs_corpus
def test_it_rejects_module_eeprom_output():
    with pytest.raises(ParseError):
        ethtool.parse((CORPUS / "misc" / "ethtool-m-sfp-10GBase-LR-ddm.txt").read_bytes())
