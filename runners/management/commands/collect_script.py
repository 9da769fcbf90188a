"""``manage.py collect_script ENGAGEMENT GATE [--node NAME] [--output-dir DIR]``.

Writes one evidence collection script per node the gate runs on (``collect-ENG-GATE-NODE.py``):
run it on that node with ``python3``; it writes a bundle to import with ``import_evidence``.
"""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from acceptance.models import Engagement
from gates.services import GateRefused, gate_get
from runners.evidence import EvidenceRefused, collection_script


class Command(BaseCommand):
    help = "Write the evidence collection script(s) of a gate for sites without inbound SSH."

    def add_arguments(self, parser):
        parser.add_argument("engagement")
        parser.add_argument("gate")
        parser.add_argument("--node", help="only this node (default: every node of the gate)")
        parser.add_argument("--output-dir", default=".", type=Path)

    def handle(self, *args, engagement, gate, node, output_dir, **options):
        found = Engagement.objects.filter(name=engagement).first()
        if found is None:
            raise CommandError(f"no engagement named {engagement!r}")
        try:
            gate_obj = gate_get(engagement=found, code=gate)
        except GateRefused as error:
            raise CommandError(str(error)) from None
        roles = {s["role"] for s in gate_obj.probe_plan} - {"service"}
        nodes = found.nodes.filter(role__in=roles).order_by("name")
        if node:
            nodes = nodes.filter(name=node)
            if not nodes:
                known = ", ".join(found.nodes.values_list("name", flat=True))
                raise CommandError(f"{gate_obj.code} runs on no node named {node!r} "
                                   f"(nodes: {known})")
        if not nodes:
            raise CommandError(f"{gate_obj.code} has no probes on any node of {found.name}")
        output_dir.mkdir(parents=True, exist_ok=True)
        for target in nodes:
            try:
                text = collection_script(gate=gate_obj, node=target)
            except EvidenceRefused as error:
                raise CommandError(str(error)) from None
            path = output_dir / f"collect-{found.name}-{gate_obj.code}-{target.name}.py"
            path.write_text(text)
            path.chmod(0o755)
            self.stdout.write(f"{path}  (run on {target.name}: python3 {path.name})")
