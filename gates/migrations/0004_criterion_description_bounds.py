"""Criterion descriptions say their bounds from the stored values: each default description
that still has the default's figures written in (``"… reaches 83 % of the link's line rate"``)
becomes its template (``"… reaches {threshold} of …"``, ``gates.presentation``), which reads
exactly the same while the bound is the default's and follows an edited one. Descriptions a
person wrote are left as they are; verdicts keep their snapshots. Reversible."""

from django.db import migrations

DESCRIPTIONS = (
    ("Sequential read reaches 83 % of the link's line rate",
     "Sequential read reaches {threshold} of the link's line rate"),
    ('TTFT p50 at concurrency 16 within ±10 % of R2',
     'TTFT p50 at concurrency 16 within ±{tolerance} of R2'),
    ('Output throughput at concurrency 16 within ±10 % of R2',
     'Output throughput at concurrency 16 within ±{tolerance} of R2'),
    ('TTFT p50 reduced by at least 25 % vs local NVMe (mean of the rounds)',
     'TTFT p50 reduced by at least {threshold} vs local NVMe (mean of the rounds)'),
    ('Output throughput gain inside +29 % … +40 % (mean of the rounds)',
     'Output throughput gain inside +{threshold} … +{threshold_high} (mean of the rounds)'),
    ('Two rounds agree within 5 % for every figure and arm',
     'Two rounds agree within {threshold} for every figure and arm'),
    ('8 nodes sharing one array: aggregate read-back ≥ 83 % of line rate',
     '8 nodes sharing one array: aggregate read-back ≥ {threshold} of line rate'),
    ('Continuous load held for 72 h',
     'Continuous load held for {threshold}'),
    ('No gap between successful completions longer than 60 s',
     'No gap between successful completions longer than {threshold}'),
    ('TTFT p99 at most 25 % above the pre-fault baseline',
     'TTFT p99 at most {threshold} above the pre-fault baseline'),
    ('Output throughput at most 10 % below the pre-fault baseline',
     'Output throughput at most {-threshold} below the pre-fault baseline'),
)


def to_templates(apps, schema_editor):
    criterion = apps.get_model("gates", "Criterion")
    for old, new in DESCRIPTIONS:
        criterion.objects.filter(description=old).update(description=new)


def to_fixed_texts(apps, schema_editor):
    criterion = apps.get_model("gates", "Criterion")
    for old, new in DESCRIPTIONS:
        criterion.objects.filter(description=new).update(description=old)


class Migration(migrations.Migration):
    dependencies = [("gates", "0003_gate_rescheduled_due_date")]

    operations = [migrations.RunPython(to_templates, to_fixed_texts)]
