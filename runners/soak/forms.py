"""Forms of the soak pages: the plan edit (JSON + reason), marking a fault target (typed
confirmation), and the reason of a pause or an abort."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext_lazy as _

from runners.soak.models import FaultTarget


class PlanEditForm(forms.Form):
    """The soak plan as JSON text and why it changes (recorded in the audit trail)."""

    plan = forms.CharField(label=_("Soak plan (JSON)"), widget=forms.Textarea(
        attrs={"rows": 24, "spellcheck": "false", "class": "mono"}), max_length=500_000)
    reason = forms.CharField(label=_("Reason (recorded in the audit trail)"), max_length=2000,
                             widget=forms.Textarea(attrs={"rows": 2}))


class FaultTargetForm(forms.Form):
    """Allow fault injection on one node's interface or one array drive. ``confirmation``
    must name the node and the target, typed by the person (the service checks it)."""

    node = forms.ChoiceField(label=_("Node"))
    kind = forms.ChoiceField(label=_("Fault"), choices=FaultTarget.Kind.choices)
    target = forms.CharField(label=_("Target"), max_length=128, help_text=_(
        "link down: the interface (IF or NETNS/IF); drive out: the drive index"))
    confirmation = forms.CharField(label=_("Confirmation"), max_length=500, help_text=_(
        "Type: allow KIND of TARGET on NODE — it must name the node and the target; a drive "
        "also the first 12 hex digits of its commands' sha256 (shown above)"))

    def __init__(self, *args, nodes=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["node"].choices = [(n.name, f"{n.name} ({n.role})") for n in nodes]


class ReasonForm(forms.Form):
    """Why a soak is paused or aborted (recorded in the soak's log)."""

    reason = forms.CharField(label=_("Reason"), max_length=2000)
