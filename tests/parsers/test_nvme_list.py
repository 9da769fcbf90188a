"""nvme_list parser: the flat, verbose 2.x and verbose 3.0 shapes of ``nvme list -o json``."""

import json

import pytest

from runners.parsers import nvme_list
from runners.parsers.base import ParseError
from tests.parsers.corpus import CORPUS, needs_corpus

NVME = CORPUS / "nvme"


def counts(measurements):
    return {m.metric: m.value for m in measurements if m.metric != "drive_present"}


def drives(measurements):
    return [m.labels for m in measurements if m.metric == "drive_present"]


def parse(doc):
    return nvme_list.parse(json.dumps(doc).encode())


# --- corpus -------------------------------------------------------------------------------------


@needs_corpus
@pytest.mark.corpus
def test_it_counts_the_flat_devices_shape():
    m = nvme_list.parse(
        (NVME / "nvme-cli-1.x-style-list-Devices-DevicePath-2ssd.json").read_bytes())
    assert counts(m) == {"drive_count": 2, "namespace_count": 2}
    assert drives(m) == [
        {"serial": "XXX00YYY", "model": "Seagate FireCuda 530 ZP4000GM30023",
         "controller": "/dev/nvme0"},
        {"serial": "XXX01YYY", "model": "Seagate FireCuda 530 ZP4000GM30023",
         "controller": "/dev/nvme1"},
    ]
    assert all(x.unit == "1" for x in m)
    assert [x.labels for x in m if x.metric != "drive_present"] == [{}, {}]


@needs_corpus
@pytest.mark.corpus
def test_it_counts_the_verbose_subsystems_shape():
    m = nvme_list.parse(
        (NVME / "nvme-cli-2.11-list-Subsystems-Controllers-Namespaces-3ssd.json").read_bytes())
    assert counts(m) == {"drive_count": 3, "namespace_count": 3}  # NSID 1 in three subsystems
    assert drives(m) == [
        {"serial": "XXX02YYY", "model": "Seagate FireCuda 530 ZP4000GM30023",
         "controller": "/dev/nvme0"},
        {"serial": "XXX00YYY", "model": "Seagate FireCuda 530 ZP4000GM30023",
         "controller": "/dev/nvme1"},
        {"serial": "7VS00KNX", "model": "Seagate FireCuda 530 ZP4000GM30023",
         "controller": "/dev/nvme2"},
    ]


@needs_corpus
@pytest.mark.corpus
def test_it_reports_zero_for_an_empty_device_list():
    m = nvme_list.parse((NVME / "nvme-list-empty-devices.json").read_bytes())
    assert counts(m) == {"drive_count": 0, "namespace_count": 0}
    assert drives(m) == []


@needs_corpus
@pytest.mark.corpus
@pytest.mark.parametrize("name", [
    "nvme-cli-2.5-ana-log-o-json-prints-TEXT-from-issue-1994.txt",
    "nvme-cli-2.11-smart-log-critical_warning-object.json",
    "nvme-cli-1.x-id-ctrl-WDC-SN730-kelvin-padded-strings.json",
])
def test_it_rejects_other_commands_output(name):
    with pytest.raises(ParseError):
        nvme_list.parse((NVME / name).read_bytes())


# --- shapes and quirks --------------------------------------------------------------------------


def test_it_strips_padded_serials_and_models():
    m = parse({"Devices": [{"NameSpace": 1, "DevicePath": "/dev/nvme3n1",
                            "SerialNumber": "S5RTNC0T104269      ",
                            "ModelNumber": "SAMSUNG MZWLJ7T6HALA-00AU3          "}]})
    assert drives(m) == [{"serial": "S5RTNC0T104269", "model": "SAMSUNG MZWLJ7T6HALA-00AU3",
                          "controller": "/dev/nvme3"}]


def test_it_counts_a_drive_once_across_its_namespaces_and_paths():
    entry = {"SerialNumber": "A1", "ModelNumber": "M"}
    m = parse({"Devices": [
        {**entry, "NameSpace": 1, "DevicePath": "/dev/nvme0n1"},
        {**entry, "NameSpace": 2, "DevicePath": "/dev/nvme0n2"},
        {**entry, "NameSpace": 1, "DevicePath": "/dev/nvme1n1"},  # second path, no native mp
    ]})
    assert counts(m) == {"drive_count": 1, "namespace_count": 2}
    assert drives(m)[0]["controller"] == "/dev/nvme0"


def verbose(*subsystems):
    return {"Devices": [{"HostNQN": "nqn.2014-08.org.nvmexpress:uuid:h", "HostID": "h",
                         "Subsystems": list(subsystems)}]}


def controller(name, serial, transport, namespaces=()):
    return {"Controller": name, "Cntlid": "1", "SerialNumber": serial, "ModelNumber": "FX100",
            "Firmware": "1.0", "Transport": transport, "Address": "traddr=10.0.0.1",
            "Slot": "", "Namespaces": list(namespaces), "Paths": []}


def test_it_does_not_count_fabrics_controllers_as_drives():
    m = parse(verbose({
        "Subsystem": "nvme-subsys1", "SubsystemNQN": "nqn.2020-01.com.example:array",
        "Controllers": [controller("nvme1", "ARRAY1", "rdma"),
                        controller("nvme2", "ARRAY1", "rdma")],
        "Namespaces": [{"NameSpace": "nvme1n1", "Generic": "ng1n1", "NSID": 1},
                       {"NameSpace": "nvme1n2", "Generic": "ng1n2", "NSID": 2}],
    }))
    assert counts(m) == {"drive_count": 0, "namespace_count": 2}


def test_it_deduplicates_namespaces_by_nqn_and_nsid():
    ns = {"NameSpace": "nvme1n1", "Generic": "ng1n1", "NSID": 1}
    m = parse(verbose({
        "Subsystem": "nvme-subsys1", "SubsystemNQN": "nqn.x:array  ",
        "Controllers": [controller("nvme1", "A", "tcp", [ns]),
                        controller("nvme2", "A", "tcp", [{**ns, "NameSpace": "nvme2n1"}])],
        "Namespaces": [],
    }))
    assert counts(m)["namespace_count"] == 1


def test_it_reads_the_3_0_multipath_paths_shape():
    def path(name, serial, transport):
        return {"Path": f"{name}c1n1", "ANAState": "optimized", "Controller": name,
                "Cntlid": "1", "SerialNumber": serial, "ModelNumber": "Dual-port SSD  ",
                "Firmware": "1", "Transport": transport, "Address": "0000:01:00.0", "Slot": ""}

    m = parse(verbose(
        {"Subsystem": "nvme-subsys0", "SubsystemNQN": "nqn.x:local",
         "Namespaces": [{"NameSpace": "nvme0n1", "Generic": "ng0n1", "NSID": 1,
                         "Paths": [path("nvme0", "DP1 ", "pcie"), path("nvme4", "DP1", "pcie")]}]},
        {"Subsystem": "nvme-subsys1", "SubsystemNQN": "nqn.x:array",
         "Namespaces": [{"NameSpace": "nvme1n1", "Generic": "ng1n1", "NSID": 1,
                         "Paths": [path("nvme1", "ARR", "rdma"), path("nvme2", "ARR", "rdma")]}]},
    ))
    assert counts(m) == {"drive_count": 1, "namespace_count": 2}
    assert drives(m) == [{"serial": "DP1", "model": "Dual-port SSD", "controller": "/dev/nvme0"}]


def test_it_skips_warnings_before_the_json():
    text = "warning: libnvme: failed to read host NQN\n" + json.dumps({"Devices": []})
    assert counts(nvme_list.parse(text.encode())) == {"drive_count": 0, "namespace_count": 0}


def test_it_reports_the_line_of_truncated_json():
    text = '{\n  "Devices": [\n    {\n      "NameSpace": 1,\n      "DevicePath": "/dev/nv'
    with pytest.raises(ParseError) as error:
        nvme_list.parse(text.encode())
    assert error.value.line == 5


def test_empty_output_is_zero_drives_as_nvme_cli_1_2_printed_it():
    # BUGS.md #7, linux-nvme/nvme-cli#173: nvme-cli 1.2 printed nothing for a host without NVMe
    # (exit 0). That is zero drives — a G1 FAIL when drives were expected — not a pass.
    assert counts(nvme_list.parse(b"")) == {"drive_count": 0, "namespace_count": 0}
    assert counts(nvme_list.parse(b"\n")) == {"drive_count": 0, "namespace_count": 0}


def test_it_rejects_json_without_devices():
    with pytest.raises(ParseError) as error:
        parse({"Subsystems": []})
    assert "Devices" in str(error.value)
