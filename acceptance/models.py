"""The engagement domain: customers, engagements, their inventory and bill of materials.

An engagement is the ten-week joint acceptance test of one customer's site (DOMAIN.md). Its gates
and criteria live in ``gates``; its probe runs and measurements in ``runners``.
"""

import base64
import hashlib
import re
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models

from acceptance import crypto
from acceptance.tokens import ApiToken  # noqa: F401 (the app's model, defined apart)
from acceptance_core.profiles import DEFAULT_PROFILE, PROFILES
from runners.transport import MAX_JUMP_HOSTS, SSHTarget

ENGAGEMENT_WEEKS = 10  # DOMAIN.md: "a joint acceptance test of about 10 weeks"

# The reference profiles an engagement's G2/G3 figures are compared with, by key: the rows of the
# vendor's reports R1, R2 (c8, c16, c32) and R3 as data (acceptance_core.profiles).
REFERENCE_PROFILES = {key: profile.title for key, profile in PROFILES.items()}
DEFAULT_REFERENCE_PROFILE = DEFAULT_PROFILE

# \A…\Z, not ^…$: "$" also matches before a trailing newline, which would let "name\n" in.
name_validator = RegexValidator(
    r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,62}\Z",
    "use letters, digits, '.', '_' or '-' (at most 63 characters, starting with a letter or digit)",
)
interface_validator = RegexValidator(
    r"\A[A-Za-z0-9_.:-]{1,15}\Z", "a Linux interface name: at most 15 of A-Z a-z 0-9 _ . : -"
)
device_path_validator = RegexValidator(
    r"\A/[A-Za-z0-9._/-]{1,200}\Z",
    "an absolute device or file path of letters, digits, '.', '_', '-' and '/'",
)
ssh_user_validator = RegexValidator(r"\A[a-z_][a-z0-9_-]{0,31}\Z", "a POSIX user name")
host_validator = RegexValidator(
    r"\A[A-Za-z0-9.:-]{1,253}\Z", "a host name or IP address (letters, digits, '.', ':', '-')"
)


class Organisation(models.Model):
    """A customer organisation (or the vendor's own lab)."""

    name = models.CharField(max_length=200, unique=True)

    def __str__(self) -> str:
        return self.name


class Engagement(models.Model):
    """One customer's ten-week gated acceptance test.

    ``state``: active while gates are being run; stopped when a gate's criteria were not met
    (later gates refuse to run until a person re-opens it with a reason); accepted when G4 passed.
    """

    class State(models.TextChoices):
        ACTIVE = "active"
        STOPPED = "stopped"
        ACCEPTED = "accepted"

    class Language(models.TextChoices):
        ENGLISH = "en", "English"
        CHINESE = "zh-hans", "简体中文"

    name = models.CharField(max_length=63, unique=True, validators=[name_validator])
    customer = models.ForeignKey(Organisation, on_delete=models.PROTECT, related_name="engagements")
    start_date = models.DateField()
    state = models.CharField(max_length=16, choices=State.choices, default=State.ACTIVE)
    stopped_reason = models.TextField(blank=True)
    report_language = models.CharField(
        max_length=8, choices=Language.choices, default=Language.ENGLISH
    )
    is_lab = models.BooleanField(
        default=False, help_text="a lab engagement: its node runs stand-in tools (simulated)"
    )
    reference_profile = models.CharField(
        max_length=64, choices=list(REFERENCE_PROFILES.items()),
        default=DEFAULT_REFERENCE_PROFILE,
        help_text="the reference figures its G2/G3 results are compared with",
    )
    max_parallel_nodes = models.PositiveIntegerField(
        default=128, validators=[MinValueValidator(1), MaxValueValidator(1024)],
        help_text="how many nodes of this site a gate run works on at once",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name

    @property
    def end_date(self):
        return self.start_date + timedelta(weeks=ENGAGEMENT_WEEKS)

    def bom_open_items(self):
        return self.bom_items.filter(ticked_at__isnull=True)


class Array(models.Model):
    """An all-flash NVMe-oF array under test (e.g. FX100: 24 × 7.68 TB U.2 NVMe, 100 GbE)."""

    class Layout(models.TextChoices):
        RAID0 = "raid0", "RAID0 (no redundancy)"
        RAID5 = "raid5", "RAID5"
        RAID6 = "raid6", "RAID6"
        RAID10 = "raid10", "RAID10"
        OTHER = "other", "other (described by the vendor)"

    engagement = models.ForeignKey(Engagement, on_delete=models.CASCADE, related_name="arrays")
    model = models.CharField(max_length=64, default="FX100")
    serial = models.CharField(max_length=64)
    expected_drive_count = models.PositiveIntegerField(
        default=24, validators=[MinValueValidator(1), MaxValueValidator(1024)]
    )
    drive_model = models.CharField(
        max_length=64, blank=True, default="",
        help_text="ModelNumber of the array's drives as nvme list prints it (the BOM's drive "
                  "line); G1 counts only drives of this model. Blank: the model most of the "
                  "controller's PCIe drives report",
    )
    link_speed_mbps = models.PositiveIntegerField(
        default=100000, help_text="nominal link speed per port in Mb/s (100 GbE = 100000)"
    )
    layout = models.CharField(max_length=16, choices=Layout.choices, default=Layout.OTHER)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["engagement", "serial"], name="array_serial_unique")
        ]

    def __str__(self) -> str:
        return f"{self.model} {self.serial}"


class Credential(models.Model):
    """An SSH private key (OpenSSH PEM text) and optional passphrase, encrypted at rest.

    The secret is only readable through :meth:`private_key` / :meth:`passphrase`; ``repr`` and
    ``str`` never show it.
    """

    name = models.CharField(max_length=100, unique=True)
    private_key_encrypted = models.BinaryField()
    passphrase_encrypted = models.BinaryField(blank=True, default=b"")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"credential {self.name}"

    __repr__ = __str__

    @classmethod
    def from_secret(cls, name: str, private_key: str, passphrase: str = "") -> "Credential":
        return cls(
            name=name,
            private_key_encrypted=crypto.encrypt(private_key),
            passphrase_encrypted=crypto.encrypt(passphrase) if passphrase else b"",
        )

    def private_key(self) -> str:
        return crypto.decrypt(self.private_key_encrypted)

    def passphrase(self) -> str | None:
        return crypto.decrypt(self.passphrase_encrypted) if self.passphrase_encrypted else None


def host_key_fingerprint(public_key_line: str) -> str:
    """OpenSSH ``SHA256:…`` fingerprint of a public key line ``"ssh-ed25519 AAAA… [comment]"``.

    Raises ValidationError when the line is not ``type base64``.
    """
    parts = public_key_line.split()
    if len(parts) < 2 or not re.fullmatch(r"(ssh|ecdsa|sk)-[A-Za-z0-9@.-]+", parts[0]):
        raise ValidationError("host key must be an OpenSSH public key line: 'TYPE BASE64'")
    try:
        blob = base64.b64decode(parts[1], validate=True)
    except ValueError:
        raise ValidationError("host key's key data is not base64") from None
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    return f"SHA256:{digest}"


class Node(models.Model):
    """A machine the service runs probes on over SSH.

    ``role`` says which probes it takes: ``array`` is the array's own controller, where the drives
    are local PCIe devices (G1 drive inventory, self-tests, SMART; RUNBOOK §1); ``inference`` is a
    GPU node that reads the array over NVMe-oF (G2 fio line efficiency, serving benchmark);
    ``bastion`` is a jump host that takes no probes and only forwards to the nodes behind it.
    The host key is pinned: a connection to a host presenting any other key is refused.
    ``jump_host``: a node of the same engagement the service connects through (its key pinned
    too); ``address`` is then as the jump host sees it.
    """

    class Role(models.TextChoices):
        ARRAY = "array", "array controller"
        INFERENCE = "inference", "inference node"
        BASTION = "bastion", "jump host (bastion)"

    engagement = models.ForeignKey(Engagement, on_delete=models.CASCADE, related_name="nodes")
    name = models.CharField(max_length=63, validators=[name_validator])
    role = models.CharField(max_length=16, choices=Role.choices)
    address = models.CharField(max_length=253, validators=[host_validator])
    port = models.PositiveIntegerField(
        default=22, validators=[MinValueValidator(1), MaxValueValidator(65535)]
    )
    ssh_user = models.CharField(max_length=32, validators=[ssh_user_validator])
    host_key = models.TextField(help_text="the pinned OpenSSH public host key line")
    host_key_fingerprint = models.CharField(max_length=80, editable=False)
    credential = models.ForeignKey(Credential, on_delete=models.PROTECT, related_name="nodes")
    array = models.ForeignKey(
        Array, on_delete=models.SET_NULL, null=True, blank=True, related_name="nodes",
        help_text="the array this node is the controller of (array role) or reads (inference)",
    )
    use_sudo = models.BooleanField(default=False, help_text="prefix probe commands with sudo -n")
    interface = models.CharField(
        max_length=15, blank=True, validators=[interface_validator],
        help_text="network interface carrying the array's traffic (G2 link speed)",
    )
    fio_target = models.CharField(
        max_length=200, blank=True, validators=[device_path_validator],
        help_text="the array namespace (or file on it) the G2 read-only fio job reads",
    )
    is_lab = models.BooleanField(default=False)
    jump_host = models.ForeignKey(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="jumped_nodes",
        help_text="reach this node through that node of the same engagement (a bastion)",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["engagement", "name"], name="node_name_unique")
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.address}:{self.port})"

    def save(self, *args, **kwargs) -> None:
        self.host_key_fingerprint = host_key_fingerprint(self.host_key)
        super().save(*args, **kwargs)

    def clean(self) -> None:
        errors = {}
        try:
            if self.host_key:  # an empty one is the field's own error
                host_key_fingerprint(self.host_key)
        except ValidationError as error:
            errors["host_key"] = error.messages
        if self.jump_host_id is not None:
            errors.update(self._jump_host_errors())
        if errors:
            raise ValidationError(errors)

    def ssh_target(self) -> SSHTarget:
        """Where and how to reach this node: its pinned host key and credential, through its
        jump host (``via``) when it has one."""
        credential = self.credential
        return SSHTarget(
            name=self.name, host=self.address, port=self.port, user=self.ssh_user,
            host_key=self.host_key, private_key=credential.private_key(),
            passphrase=credential.passphrase(), connect_timeout=settings.SSH_CONNECT_TIMEOUT,
            connect_retries=settings.SSH_CONNECT_RETRIES,
            keepalive_s=settings.SSH_KEEPALIVE_SECONDS,
            keepalive_count=settings.SSH_KEEPALIVE_COUNT,
            via=self.jump_host.ssh_target() if self.jump_host_id else None,
        )

    def _jump_host_errors(self) -> dict[str, str]:
        jump = self.jump_host
        if jump.engagement_id != self.engagement_id:
            return {"jump_host": f"jump host {jump.name} belongs to another engagement "
                                 f"({jump.engagement.name})"}
        chain = [jump]
        while True:
            if self.pk is not None and chain[-1].pk == self.pk:
                return {"jump_host": f"jump host {jump.name} leads back to {self.name}"}
            if len(chain) > MAX_JUMP_HOSTS:
                return {"jump_host": f"{self.name} would sit behind more than "
                                     f"{MAX_JUMP_HOSTS} jump hosts"}
            if chain[-1].jump_host_id is None:
                return {}
            if chain[-1].jump_host_id in {hop.pk for hop in chain}:
                return {"jump_host": f"the jump hosts behind {jump.name} form a loop"}
            chain.append(chain[-1].jump_host)


class BomItem(models.Model):
    """One line of the bill-of-materials checklist, ticked by a person (who, when)."""

    engagement = models.ForeignKey(Engagement, on_delete=models.CASCADE, related_name="bom_items")
    position = models.PositiveIntegerField()
    description = models.CharField(max_length=300)
    quantity = models.PositiveIntegerField(default=1, validators=[MinValueValidator(1)])
    part_number = models.CharField(max_length=100, blank=True)
    serials = models.JSONField(default=list, blank=True,
                               help_text="the serial numbers of the delivered units")
    ticked_by = models.CharField(max_length=150, blank=True)
    ticked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["position"]
        constraints = [
            models.UniqueConstraint(fields=["engagement", "position"], name="bom_position_unique")
        ]

    def __str__(self) -> str:
        return f"{self.quantity} × {self.description}"


class AuditEntry(models.Model):
    """Who changed what and why: threshold edits, re-openings, lab resets (append-only)."""

    engagement = models.ForeignKey(Engagement, on_delete=models.CASCADE, related_name="audit")
    at = models.DateTimeField(auto_now_add=True)
    actor = models.CharField(max_length=150)
    action = models.CharField(max_length=64)
    reason = models.TextField()
    details = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["at", "id"]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.actor}: {self.action}"


class Membership(models.Model):
    """A person's role in the service: the vendor's project managers and engineers work on every
    engagement; a customer belongs to one organisation and sees only its engagements."""

    class Role(models.TextChoices):
        PROJECT_MANAGER = "project_manager", "project manager"
        ENGINEER = "engineer", "engineer"
        CUSTOMER = "customer", "customer"

    user = models.OneToOneField("auth.User", on_delete=models.CASCADE, related_name="membership")
    role = models.CharField(max_length=16, choices=Role.choices)
    organisation = models.ForeignKey(
        Organisation, on_delete=models.PROTECT, null=True, blank=True, related_name="members",
        help_text="required for customers: the organisation whose engagements they see",
    )

    def __str__(self) -> str:
        return f"{self.user} ({self.get_role_display()})"

    def clean(self) -> None:
        if self.role == self.Role.CUSTOMER and self.organisation_id is None:
            raise ValidationError({"organisation": "a customer belongs to an organisation"})


class Invitation(models.Model):
    """An e-mailed, one-time invitation to the service with a role, sent from an engagement's
    People page: the invitee sets a password from the link and gets a ``Membership``.

    Only the sha256 of the link's token is stored (the mail carries the token itself). A link is
    good once, until ``expires_at``, unless revoked; a customer invited from an engagement
    belongs to that engagement's organisation.
    """

    class Status(models.TextChoices):
        PENDING = "pending"
        USED = "used"
        REVOKED = "revoked"
        EXPIRED = "expired"

    engagement = models.ForeignKey(Engagement, on_delete=models.CASCADE,
                                   related_name="invitations")
    email = models.EmailField()
    role = models.CharField(max_length=16, choices=Membership.Role.choices)
    token_sha256 = models.CharField(max_length=64, unique=True, editable=False)
    invited_by = models.CharField(max_length=150)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    used_by = models.ForeignKey("auth.User", on_delete=models.SET_NULL, null=True, blank=True,
                                related_name="+")
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.CharField(max_length=150, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"invitation of {self.email} as {self.role} ({self.engagement})"

    @staticmethod
    def token_hash(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()

    def status(self, now) -> str:
        if self.used_at is not None:
            return self.Status.USED
        if self.revoked_at is not None:
            return self.Status.REVOKED
        if now >= self.expires_at:
            return self.Status.EXPIRED
        return self.Status.PENDING
