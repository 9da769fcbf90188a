"""Simplified Chinese: the pages follow Accept-Language and the language switch; the catalogue
translates every message, and the committed .mo is the compiled .po."""

import gettext
import shutil
import subprocess
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client
from django.utils import translation

LOCALE = Path(settings.BASE_DIR) / "locale" / "zh_Hans" / "LC_MESSAGES"


def test_the_login_page_follows_accept_language(db):
    english = Client().get("/accounts/login/")
    assert "Acceptance service" in english.content.decode()
    chinese = Client().get("/accounts/login/", HTTP_ACCEPT_LANGUAGE="zh-hans")
    page = chinese.content.decode()
    assert chinese["Content-Language"] == "zh-hans"
    assert '<html lang="zh-CN">' in page
    assert "验收服务" in page  # "Acceptance service", from this project's catalogue
    assert "简体中文" in page  # the language switch offers both


def test_the_language_switch_sets_chinese_for_later_pages(db):
    client = Client()
    response = client.post("/i18n/setlang/", {"language": "zh-hans",
                                              "next": "/accounts/login/"})
    assert response.status_code == 302
    assert response.cookies[settings.LANGUAGE_COOKIE_NAME].value == "zh-hans"
    assert "验收服务" in client.get("/accounts/login/").content.decode()


def test_domain_terms_are_translated_consistently():
    with translation.override("zh-hans"):
        words = {w: translation.gettext(w) for w in (
            "Acceptance service", "Engagement", "Gate", "Criterion", "Decision",
            "SIMULATED EVIDENCE", "stopped", "passed", "Customer", "Line efficiency")}
    assert words == {
        "Acceptance service": "验收服务", "Engagement": "验收项目", "Gate": "验收关口",
        "Criterion": "判据", "Decision": "决定", "SIMULATED EVIDENCE": "模拟证据",
        "stopped": "已停止", "passed": "已通过", "Customer": "客户",
        "Line efficiency": "线速效率"}


@pytest.mark.skipif(shutil.which("msgfmt") is None, reason="gettext's msgfmt is not installed")
def test_every_message_is_translated_and_the_mo_is_the_compiled_po(tmp_path):
    compiled = tmp_path / "django.mo"
    result = subprocess.run(
        ["msgfmt", "--check-format", "--statistics", "-o", str(compiled),
         str(LOCALE / "django.po")], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert "untranslated" not in result.stderr and "fuzzy" not in result.stderr, (
        f"{result.stderr.strip()}: run makemessages and translate the new entries")

    def catalogue(path: Path) -> dict:
        with open(path, "rb") as handle:
            return gettext.GNUTranslations(handle)._catalog

    assert catalogue(LOCALE / "django.mo") == catalogue(compiled), (
        "locale/zh_Hans/LC_MESSAGES/django.mo is stale: run "
        "manage.py compilemessages -l zh_Hans --ignore=.venv")
