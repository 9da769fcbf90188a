"""Forms of the engineer's pages: evidence upload, node registration (two steps), re-runs.

Node registration never trusts on first use: step one reads the host key the node presents and
shows its fingerprint; step two enrols only when the engineer confirms that fingerprint as read
on the node's own console. The key read in step one travels to step two signed by the service
(``host_key_token``), so what is pinned is what the service saw. Private keys and passphrases
are read once, checked, stored encrypted, and never rendered back into a page.
"""

from __future__ import annotations

import re

from django import forms
from django.core import signing
from django.core.validators import MaxValueValidator, MinValueValidator
from django.utils.translation import gettext_lazy as _
from django.views.decorators.debug import sensitive_variables

from acceptance.models import (
    Engagement,
    Node,
    device_path_validator,
    host_validator,
    interface_validator,
    name_validator,
    ssh_user_validator,
)
from runners.evidence import MAX_BUNDLE_BYTES, MAX_BUNDLES
from runners.transport import AuthenticationFailed, private_key_type

HOST_KEY_SALT = "runners.node-register.host-key"
HOST_KEY_MAX_AGE_S = 30 * 60  # the engineer has half an hour to walk to the console
MAX_PRIVATE_KEY_BYTES = 16 << 10
FINGERPRINT_RE = re.compile(r"SHA256:[A-Za-z0-9+/]{43}")

ROLE_CHOICES = [
    (Node.Role.ARRAY, _("array controller")),
    (Node.Role.INFERENCE, _("inference node")),
    (Node.Role.BASTION, _("jump host (bastion)")),
]


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class BundleField(forms.FileField):
    """One or more bundles: at most ``MAX_BUNDLES``, each at most ``MAX_BUNDLE_BYTES``;
    counted and sized before any is read."""

    def clean(self, data, initial=None):
        files = data if isinstance(data, list | tuple) else [data]
        files = [f for f in files if f]
        if len(files) > MAX_BUNDLES:
            raise forms.ValidationError(
                _("%(count)s bundles: at most %(max)s in one import (one per node of the gate)")
                % {"count": len(files), "max": MAX_BUNDLES})
        cleaned = [super(BundleField, self).clean(f, initial) for f in files]
        if not cleaned:
            raise forms.ValidationError(_("choose at least one evidence bundle (.tar.gz)"))
        for f in cleaned:
            if f.size > MAX_BUNDLE_BYTES:
                raise forms.ValidationError(
                    _("%(name)s is larger than %(mib)s MiB")
                    % {"name": f.name, "mib": MAX_BUNDLE_BYTES >> 20})
        return cleaned


class EvidenceUploadForm(forms.Form):
    """The bundles of one import; on a gate that has passed (``needs_confirm``) the import is a
    re-run of it and needs the confirmation box and a reason, as on the re-run page."""

    bundles = BundleField(widget=MultipleFileInput(attrs={"accept": ".tar.gz,.tgz"}),
                          help_text=_("One bundle per node, as written by the collection script"))
    reason = forms.CharField(
        label=_("Reason"), required=False, max_length=2000, strip=True,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=_("Recorded in the audit trail with your name and the time."))
    confirm = forms.BooleanField(
        label=_("I confirm: this gate has passed, and the new attempt's decision replaces that "
                "pass"), required=False)

    def __init__(self, *args, needs_confirm: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.needs_confirm = needs_confirm
        if not needs_confirm:
            del self.fields["confirm"]
            del self.fields["reason"]
        else:
            self.fields["reason"].required = True
            self.fields["reason"].error_messages["required"] = _(
                "Give a reason: it is recorded in the audit trail.")

    def clean_confirm(self):
        if self.needs_confirm and not self.cleaned_data.get("confirm"):
            raise forms.ValidationError(_("Tick the box to confirm the re-run of a passed gate."))
        return True


# --- node registration ------------------------------------------------------------------------


class NodeAddressForm(forms.Form):
    """Step one: where the node answers (through which jump host)."""

    address = forms.CharField(label=_("Address"), max_length=253, validators=[host_validator],
                              help_text=_("Host name or IP address (as the jump host sees it, "
                                          "if there is one)"))
    port = forms.IntegerField(label=_("SSH port"), initial=22,
                              validators=[MinValueValidator(1), MaxValueValidator(65535)])
    jump_host = forms.ModelChoiceField(
        label=_("Jump host"), queryset=Node.objects.none(), required=False,
        empty_label=_("none: connect directly"),
        help_text=_("An enrolled node of this engagement to connect through"))

    def __init__(self, *args, engagement: Engagement, **kwargs):
        super().__init__(*args, **kwargs)
        self.engagement = engagement
        self.fields["jump_host"].queryset = engagement.nodes.order_by("name")
        self.fields["jump_host"].label_from_instance = (
            lambda node: f"{node.name} ({node.address}:{node.port})")


def host_key_token(*, engagement: Engagement, address: str, port: int, jump_host: Node | None,
                   host_key: str) -> str:
    """The key read in step one, signed so step two pins exactly that key."""
    return signing.dumps({"engagement": engagement.pk, "address": address, "port": port,
                          "jump_host": jump_host.pk if jump_host else None,
                          "host_key": host_key}, salt=HOST_KEY_SALT, compress=True)


def host_key_unsign(token: str, engagement: Engagement) -> dict:
    """The step-one facts from ``token``; ValidationError when forged, expired or another
    engagement's."""
    try:
        data = signing.loads(token, salt=HOST_KEY_SALT, max_age=HOST_KEY_MAX_AGE_S)
    except signing.SignatureExpired:
        raise forms.ValidationError(_("The host key was read more than 30 minutes ago: read it "
                                      "again (step 1).")) from None
    except signing.BadSignature:
        raise forms.ValidationError(_("The host key shown was not read by this service: read "
                                      "it again (step 1).")) from None
    if data.get("engagement") != engagement.pk:
        raise forms.ValidationError(_("That host key was read for another engagement."))
    return data


def fingerprint_from(text: str) -> str | None:
    """The ``SHA256:…`` fingerprint in pasted text (a whole ``ssh-keygen -lf`` line is fine)."""
    found = FINGERPRINT_RE.search(text or "")
    return found.group(0) if found else None


class NodeEnrolForm(forms.Form):
    """Step two: the confirmed fingerprint and everything the node needs."""

    host_key_token = forms.CharField(widget=forms.HiddenInput)
    fingerprint = forms.CharField(
        label=_("Fingerprint read on the node's console"), max_length=400,
        help_text=_("On the node run: ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub — and "
                    "type or paste the SHA256:… it prints. Do not copy it from this page."),
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}))
    name = forms.CharField(label=_("Node name"), max_length=63, validators=[name_validator])
    role = forms.ChoiceField(label=_("Role"), choices=ROLE_CHOICES)
    ssh_user = forms.CharField(label=_("SSH user"), max_length=32,
                               validators=[ssh_user_validator])
    private_key = forms.FileField(
        label=_("Private key file"),
        help_text=_("OpenSSH private key (Ed25519, ECDSA or RSA); stored encrypted, never shown "
                    "again"))
    passphrase = forms.CharField(
        label=_("Key passphrase"), required=False, strip=False, max_length=1024,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text=_("Only if the key is encrypted"))
    interface = forms.CharField(label=_("Network interface"), required=False, max_length=15,
                                validators=[interface_validator],
                                help_text=_("The interface carrying the array's traffic, e.g. "
                                            "ens1f0 (G2 link speed)"))
    fio_target = forms.CharField(label=_("fio target"), required=False, max_length=200,
                                 validators=[device_path_validator],
                                 help_text=_("The array namespace (or a file on it) G2 reads, "
                                             "e.g. /dev/nvme1n1"))
    array = forms.ModelChoiceField(label=_("Array"), queryset=None, required=False,
                                   empty_label=_("none"))
    use_sudo = forms.BooleanField(label=_("Run probes with sudo -n"), required=False)

    def __init__(self, *args, engagement: Engagement, **kwargs):
        super().__init__(*args, **kwargs)
        self.engagement = engagement
        self.fields["array"].queryset = engagement.arrays.order_by("serial")
        self.step_one: dict | None = None

    def clean_host_key_token(self) -> str:
        token = self.cleaned_data["host_key_token"]
        self.step_one = host_key_unsign(token, self.engagement)
        return token

    def clean_fingerprint(self) -> str:
        found = fingerprint_from(self.cleaned_data["fingerprint"])
        if found is None:
            raise forms.ValidationError(_(
                "Type or paste the SHA256:… fingerprint (43 characters after 'SHA256:') that "
                "ssh-keygen -lf prints on the node's console."))
        return found

    def clean_name(self) -> str:
        name = self.cleaned_data["name"]
        if self.engagement.nodes.filter(name=name).exists():
            raise forms.ValidationError(_("This engagement has a node named %(name)s already.")
                                        % {"name": name})
        return name

    @sensitive_variables("data", "text", "passphrase")
    def clean(self):
        cleaned = super().clean()
        upload = cleaned.get("private_key")
        if upload is None or "passphrase" not in cleaned:
            return cleaned
        if upload.size > MAX_PRIVATE_KEY_BYTES:
            self.add_error("private_key", _("That file is too large to be an SSH private key."))
            return cleaned
        data = upload.read()
        try:
            text = data.decode("ascii")
        except UnicodeDecodeError:
            self.add_error("private_key", _("That file is not an OpenSSH private key (not "
                                            "text)."))
            return cleaned
        passphrase = cleaned.get("passphrase") or None
        try:
            private_key_type(text, passphrase)
        except AuthenticationFailed:
            self.add_error("private_key", _(
                "That key does not open as an Ed25519, ECDSA or RSA private key: is it the "
                "private key, and the right passphrase?") if passphrase else _(
                "That key does not open as an Ed25519, ECDSA or RSA private key: is it the "
                "private key? If it is encrypted, give its passphrase."))
            return cleaned
        cleaned["private_key_text"] = text
        return cleaned


# --- the lab ------------------------------------------------------------------------------------



class NodeRepinForm(forms.Form):
    """Re-pinning an enrolled node's host key: the key read in step one (signed), the
    fingerprint read on the node's console and why the key changed."""

    host_key_token = forms.CharField(widget=forms.HiddenInput)
    fingerprint = NodeEnrolForm.base_fields["fingerprint"]
    reason = forms.CharField(
        label=_("Why the host key changed"), max_length=2000, strip=True,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=_("For example: node re-installed, host keys rotated (ticket). Recorded in the "
                    "audit trail with your name, the old and the new fingerprint."),
        error_messages={"required": _("Give a reason: it is recorded in the audit trail.")})

    def __init__(self, *args, node: Node, **kwargs):
        super().__init__(*args, **kwargs)
        self.node = node
        self.step_one: dict | None = None

    def clean_host_key_token(self) -> str:
        token = self.cleaned_data["host_key_token"]
        data = host_key_unsign(token, self.node.engagement)
        jump = self.node.jump_host_id
        if (data["address"], data["port"], data["jump_host"]) != (
                self.node.address, self.node.port, jump):
            raise forms.ValidationError(_("That host key was read for another node: read it "
                                          "again (step 1)."))
        self.step_one = data
        return token

    clean_fingerprint = NodeEnrolForm.clean_fingerprint

class RerunForm(forms.Form):
    """Re-running a gate (every node) or one node of a finished attempt. A one-node re-run and
    a re-run of a passed gate need a reason; a passed gate also needs the confirmation box."""

    node = forms.CharField(required=False, max_length=64, widget=forms.HiddenInput)
    reason = forms.CharField(
        label=_("Reason"), required=False, max_length=2000, strip=True,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=_("Recorded in the audit trail with your name and the time."))
    confirm = forms.BooleanField(
        label=_("I confirm: this gate has passed, and the new attempt's decision replaces that "
                "pass"), required=False)

    def __init__(self, *args, needs_confirm: bool, per_node: bool, **kwargs):
        super().__init__(*args, **kwargs)
        self.needs_confirm = needs_confirm
        if not needs_confirm:
            del self.fields["confirm"]
        if per_node or needs_confirm:
            self.fields["reason"].required = True
            self.fields["reason"].error_messages["required"] = _(
                "Give a reason: it is recorded in the audit trail.")

    def clean_confirm(self):
        if self.needs_confirm and not self.cleaned_data.get("confirm"):
            raise forms.ValidationError(_("Tick the box to confirm the re-run of a passed gate."))
        return True
