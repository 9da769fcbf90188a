"""``nvme list -o json`` (nvme-cli) → drive and namespace inventory for G1 arrival acceptance.

Reads the three JSON shapes of RUNBOOK §2.1 (nvme-cli ``nvme-print.c`` 1.16,
``nvme-print-json.c`` 2.x, ``src/nvme-print-json.c`` 3.0):

* **flat** (1.x, and 2.x/3.0 without ``-v``): ``{"Devices": [{"DevicePath": "/dev/nvme0n1",
  "NameSpace": 1, "SerialNumber", "ModelNumber", ...}]}``. There is no transport field, so every
  entry counts as a PCIe drive.
* **verbose 2.x** (``-v``): ``Devices[].Subsystems[].Controllers[]`` with ``Controller``
  (``"nvme0"``), ``SerialNumber``, ``ModelNumber``, ``Transport`` and ``Namespaces[]`` (``NSID``),
  plus ``Subsystems[].Namespaces[]`` for native-multipath namespaces.
* **verbose 3.0** (``--output-format-version=2``): multipath subsystems list
  ``Subsystems[].Namespaces[].Paths[]``, each path carrying the controller fields.

Emits (METRICS.md, all unit ``1``):

* ``drive_count`` (labels ``{}``): distinct stripped ``SerialNumber`` of PCIe controllers
  (``Transport`` ``pcie``, or no transport given). Over fabrics every namespace reports its
  controller's serial, so fabrics controllers are not drives and are not counted (RUNBOOK §1).
* ``namespace_count`` (labels ``{}``): distinct (subsystem NQN, NSID) pairs, so that a namespace
  seen through several paths counts once; the flat shape has no NQN and uses (serial, NSID).
* ``drive_present`` (vocabulary extension), value 1, one per counted drive, labels ``serial``,
  ``model`` (both stripped: nvme-cli pads them) and ``controller``: ``/dev/nvmeN`` from
  ``Controller`` ``"nvmeN"`` or from ``DevicePath`` ``/dev/nvmeNn1`` (``""`` when neither
  exists). The runner uses it to pick the controllers to self-test (RUNBOOK §2.3). With native
  multipath the ``N`` of a flat ``DevicePath`` is the subsystem instance, which matches the
  controller for single-port PCIe drives but not always otherwise.

No NVMe device (BUGS.md #7, linux-nvme/nvme-cli#173): nvme-cli 1.2 printed *nothing*, the fix
(1.3) prints an empty object — ``{`` newline newline ``}`` — and later versions
``{"Devices": []}``. All three give drive_count 0 and namespace_count 0 — a valid document
meaning zero drives (a G1 FAIL when drives were expected), not a tool error. An object with
keys but no ``Devices`` list, or text that is not JSON (``-o json`` printing the text report,
nvme-cli#1994), is refused.

Shapes (BUGS.md #6, nvme-cli#2749, netdata PR #19505): detected per entry, never assumed — a
``Subsystems`` list means the 2.11+ tree (``NameSpace`` a string, the integer in ``NSID``, no
``DevicePath``), else the flat 1.x entry.
"""

from __future__ import annotations

import re
from typing import Any

from runners.parsers.base import MeasurementData, ParseError, decode_text, extract_json, line_of

TOOL = "nvme_list"
PARSER_VERSION = "2"  # 2: empty output and {} are zero drives (nvme-cli#173)

_DEVICE_PATH = re.compile(r"^/dev/(nvme\d+)(?:c\d+)?n\d+")
_CONTROLLER = re.compile(r"^(?:/dev/)?(nvme\d+)$")


def parse(raw: bytes) -> list[MeasurementData]:
    try:
        text = decode_text(TOOL, raw)
    except ParseError as error:
        if error.line == 0:  # a blank capture: nvme-cli 1.2 without NVMe printed nothing (#173)
            return _counted(set(), {})
        raise
    document, _prefix = extract_json(TOOL, text)
    if document == {}:  # nvme-cli 1.3+: "{" "" "}" for no device (nvme-cli#173)
        document = {"Devices": []}
    devices = document.get("Devices") if isinstance(document, dict) else None
    if not isinstance(devices, list) or not all(isinstance(d, dict) for d in devices):
        raise ParseError(TOOL, line_of(text, '"Devices"') or 1, "a 'Devices' list of objects")

    drives: dict[str, dict[str, str]] = {}  # serial → labels, first controller seen wins
    namespaces: set[tuple[str, str]] = set()
    for device in devices:
        if isinstance(device.get("Subsystems"), list):
            _read_verbose(device["Subsystems"], drives, namespaces)
        else:
            _read_flat(device, drives, namespaces)

    return _counted(namespaces, drives)


def _counted(namespaces: set[tuple[str, str]],
             drives: dict[str, dict[str, str]]) -> list[MeasurementData]:
    measurements = [
        MeasurementData("drive_count", float(len(drives)), "1", {}),
        MeasurementData("namespace_count", float(len(namespaces)), "1", {}),
    ]
    measurements += [MeasurementData("drive_present", 1.0, "1", labels)
                     for labels in drives.values()]
    return measurements


def _list(entry: dict[str, Any], key: str) -> list[Any]:
    """``entry[key]`` as a list (absent or null: empty); ParseError for anything else, which
    would otherwise be skipped and undercount drives."""
    value = entry.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ParseError(TOOL, 0, f"a list for {key!r}", repr(value)[:80])
    return value


def _text(value: object) -> str:
    return str(value).strip() if value is not None else ""


def _add_drive(drives: dict[str, dict[str, str]], entry: dict[str, Any], controller: str) -> None:
    serial = _text(entry.get("SerialNumber"))
    transport = _text(entry.get("Transport")).lower()
    if serial and transport in ("", "pcie") and serial not in drives:
        drives[serial] = {"serial": serial, "model": _text(entry.get("ModelNumber")),
                          "controller": controller}


def _read_flat(device: dict[str, Any], drives: dict[str, dict[str, str]],
               namespaces: set[tuple[str, str]]) -> None:
    path = _text(device.get("DevicePath"))
    match = _DEVICE_PATH.match(path)
    _add_drive(drives, device, f"/dev/{match.group(1)}" if match else "")
    nsid = _text(device.get("NameSpace")) or path
    namespaces.add((_text(device.get("SerialNumber")), nsid))


def _controller_path(entry: dict[str, Any]) -> str:
    match = _CONTROLLER.match(_text(entry.get("Controller")))
    return f"/dev/{match.group(1)}" if match else ""


def _namespace_key(nqn: str, namespace: dict[str, Any]) -> tuple[str, str]:
    return (nqn, _text(namespace.get("NSID")) or _text(namespace.get("NameSpace")))


def _read_verbose(subsystems: list[Any], drives: dict[str, dict[str, str]],
                  namespaces: set[tuple[str, str]]) -> None:
    for subsystem in subsystems:
        if not isinstance(subsystem, dict):
            continue
        nqn = _text(subsystem.get("SubsystemNQN") or subsystem.get("NQN")
                    or subsystem.get("Subsystem"))
        for controller in _list(subsystem, "Controllers"):
            if not isinstance(controller, dict):
                continue
            _add_drive(drives, controller, _controller_path(controller))
            for namespace in _list(controller, "Namespaces"):
                if isinstance(namespace, dict):
                    namespaces.add(_namespace_key(nqn, namespace))
        for namespace in _list(subsystem, "Namespaces"):
            if not isinstance(namespace, dict):
                continue
            namespaces.add(_namespace_key(nqn, namespace))
            for path in _list(namespace, "Paths"):  # 3.0: controller fields on each path
                if isinstance(path, dict) and "SerialNumber" in path:
                    _add_drive(drives, path, _controller_path(path))
