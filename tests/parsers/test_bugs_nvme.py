"""BUGS.md #6-#8 (nvme-cli): list shapes, "no devices", JSON that is not JSON, smart-log value
types. nvme-cli 2.3 is installed here but this host has no NVMe (``nvme list -o json`` exits 1,
"Failed to scan topology"), so the inputs are built field by field from nvme-cli's print code
(``nvme-print.c`` 1.x, ``nvme-print-json.c`` 2.x), each expected value derived beside it."""

import json

import pytest

from runners.parsers import nvme_list, nvme_smart_log
from runners.parsers.base import ParseError
from tests.parsers.corpus import by_metric


def counts(measurements):
    return {m.metric: m.value for m in measurements if m.metric != "drive_present"}


# --- #6 nvme-cli#2749, netdata#19500 / PR #19505, nvme-cli#2886, #225: 1.x flat vs 2.11 tree ------

FLAT = {"Devices": [  # 1.x json_print_list_items: one entry per namespace, NameSpace an integer
    {"NameSpace": 1, "DevicePath": "/dev/nvme0n1", "Firmware": "1B2QEXM7",
     "ModelNumber": "Samsung SSD 980 PRO 1TB                 ", "SerialNumber": "S5GXNX0R1   ",
     "UsedBytes": 1, "MaximumLBA": 1953525168, "PhysicalSize": 1000204886016, "SectorSize": 512},
    {"NameSpace": 2, "DevicePath": "/dev/nvme0n2", "Firmware": "1B2QEXM7",
     "ModelNumber": "Samsung SSD 980 PRO 1TB", "SerialNumber": "S5GXNX0R1",
     "UsedBytes": 1, "MaximumLBA": 1, "PhysicalSize": 512, "SectorSize": 512},
]}
TREE = {"Devices": [{  # 2.11+ default: the former -v tree, NameSpace a string, NSID the integer
    "HostNQN": "nqn.2014-08.org.nvmexpress:uuid:0", "HostID": "0",
    "Subsystems": [
        {"Subsystem": "nvme-subsys0", "SubsystemNQN": "nqn.2014.08.org.nvmexpress:144d144dA",
         "Controllers": [{"Controller": "nvme0", "SerialNumber": "S5GXNX0R1",
                          "ModelNumber": "Samsung SSD 980 PRO 1TB", "Transport": "pcie",
                          "Namespaces": [{"NameSpace": "nvme0n1", "NSID": 1}]}],
         "Namespaces": []},
        # native multipath: the namespace hangs off the subsystem, not the controller
        {"Subsystem": "nvme-subsys1", "SubsystemNQN": "nqn.2014.08.org.nvmexpress:1c5c1c5cB",
         "Controllers": [{"Controller": "nvme1", "SerialNumber": "SN1", "ModelNumber": "M",
                          "Transport": "pcie", "Namespaces": []}],
         "Namespaces": [{"NameSpace": "nvme1n1", "NSID": 1}, {"NameSpace": "nvme1n2", "NSID": 2}]},
    ]}]}


def test_the_flat_shape_keys_drives_on_the_stripped_serial():
    m = nvme_list.parse(json.dumps(FLAT).encode())
    # one drive (serial "S5GXNX0R1" with and without nvme-cli's padding), two namespaces
    assert counts(m) == {"drive_count": 1, "namespace_count": 2}
    assert [x.labels["controller"] for x in m if x.metric == "drive_present"] == ["/dev/nvme0"]


def test_the_2_11_tree_walks_controller_and_subsystem_namespaces():
    m = nvme_list.parse(json.dumps(TREE).encode())
    # drives: S5GXNX0R1, SN1; namespaces: (subsys0, 1) + (subsys1, 1) + (subsys1, 2)
    assert counts(m) == {"drive_count": 2, "namespace_count": 3}
    assert sorted(x.labels["controller"] for x in m if x.metric == "drive_present") == [
        "/dev/nvme0", "/dev/nvme1"]


def test_array_order_does_not_matter():
    reordered = {"Devices": list(reversed(FLAT["Devices"]))}
    assert counts(nvme_list.parse(json.dumps(reordered).encode())) == {
        "drive_count": 1, "namespace_count": 2}


# --- #7 nvme-cli#173, #1994: no devices; -o json printing text ------------------------------------

@pytest.mark.parametrize("capture", [
    b"",  # nvme-cli 1.2: nothing at all (nvme-cli#173)
    b"{\n\n}\n",  # nvme-cli 1.3: an empty root object printed as "{", "", "}" (the shape)
    b"{}",  # the same, on one line
    b'{\n  "Devices" : [\n\n  ]\n}\n',  # later: an empty Devices array, 1.x json.c spacing
    b'{"Devices":[]}',
])
def test_every_spelling_of_no_device_is_zero_drives(capture):
    assert counts(nvme_list.parse(capture)) == {"drive_count": 0, "namespace_count": 0}


def test_text_printed_for_o_json_is_unparseable_never_a_pass():
    # nvme-cli 2.5 ana-log -o json printed the text report (nvme-cli#1994); the same for list
    text = (b"Node                  SN                   Model\n"
            b"--------------------- -------------------- ----------------------------------------\n"
            b"/dev/nvme0n1          S5GXNX0R1            Samsung SSD 980 PRO 1TB\n")
    with pytest.raises(ParseError) as error:
        nvme_list.parse(text)
    assert "JSON document" in str(error.value) and "Node" in str(error.value)


def test_an_object_that_is_not_a_device_list_is_refused():
    with pytest.raises(ParseError) as error:
        nvme_list.parse(b'{"error": "Failed to scan topology"}')
    assert "Devices" in str(error.value)


# --- #8 netdata PR #19505, nvme-cli#1745, smartctl_exporter PR #211: smart-log value types --------

# nvme-cli 2.3 json_smart_log(): counters via json_object_add_value_uint (int), some builds as
# long double (9898518.0) or strings (libnvme "nvme-cli 2.1.1 exposes some values as strings");
# 2.11: critical_warning an object {"value": …, "available_spare": …}; temperature in Kelvin.
@pytest.mark.parametrize(("critical_warning", "temperature", "media_errors"), [
    (0, 324, 0),
    (0.0, 324.0, 0.0),
    ("0", "324", "0"),
    ({"value": 0, "available_spare": 0, "temp_threshold": 0}, 324, 0),
])
def test_smart_log_counters_in_every_type(critical_warning, temperature, media_errors):
    doc = {"critical_warning": critical_warning, "temperature": temperature,
           "avail_spare": 100, "percent_used": 3, "data_units_written": "136157684",
           "media_errors": media_errors}
    m = by_metric(nvme_smart_log.parse(json.dumps(doc).encode()))
    assert m["temperature"].value == 324 and m["temperature"].unit == "K"  # Kelvin as printed
    assert m["critical_warning"].value == 0
    assert m["percentage_used"].value == 3


def test_a_non_zero_critical_warning_object_is_read_from_value():
    doc = {"critical_warning": {"value": 4, "available_spare": 0, "temp_threshold": 0,
                                "reliability_degraded": 1}, "temperature": 310,
           "percent_used": 3, "media_errors": 0}
    assert by_metric(nvme_smart_log.parse(json.dumps(doc).encode()))["critical_warning"].value == 4
