"""Browser pages of the bill of materials: add an item, edit or remove one, upload a CSV list.

Project managers only (the same people who tick it); an engagement the user may not see
answers 404 first. Every change goes through ``acceptance.bom`` (audited); a refused CSV file
changes nothing and the page names the line and column.
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST

from acceptance.bom import (
    CSV_COLUMNS,
    CsvRefused,
    bom_csv_import,
    bom_item_add,
    bom_item_edit,
    bom_item_remove,
    serials_text,
)
from acceptance.engagement_views import detail_url, manager_only, posted
from acceptance.forms import BomItemEditForm, BomItemForm, BomUploadForm, ReasonForm
from acceptance.permissions import engagement_for


def _form_page(request, engagement, *, title: str, form, action: str, status: int,
               multipart: bool = False, explanation: str = ""):
    return render(request, "acceptance/bom_form.html", {
        "engagement": engagement, "title": title, "form": form, "action": action,
        "multipart": multipart, "explanation": explanation,
        "back_url": detail_url(engagement.name, "bom")}, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def bom_add(request, name: str):
    engagement = engagement_for(request.user, name)
    manager_only(request)
    form = BomItemForm(posted(request))
    if request.method == "POST" and form.is_valid():
        try:
            item = bom_item_add(engagement=engagement, line=form.bom_line(),
                                actor=request.user.get_username())
        except ValueError as error:
            form.add_error(None, str(error))
        else:
            messages.success(request, _("Added: %(item)s.") % {"item": item})
            return redirect(detail_url(name, "bom"))
    return _form_page(request, engagement, title=_("Add an item to the bill of materials"),
                      form=form, action=_("Add the item"),
                      status=400 if request.method == "POST" else 200)


@login_required
@require_http_methods(["GET", "POST"])
def bom_upload(request, name: str):
    engagement = engagement_for(request.user, name)
    manager_only(request)
    form = BomUploadForm(*((request.POST, request.FILES) if request.method == "POST" else ()))
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        try:
            items = bom_csv_import(engagement=engagement, raw=upload.read(),
                                   filename=upload.name, actor=request.user.get_username())
        except (CsvRefused, ValueError) as error:
            form.add_error("file", _("Refused, nothing was added: %(error)s") % {
                "error": error})
        else:
            messages.success(request, _("%(n)d items added from %(file)s.") % {
                "n": len(items), "file": upload.name})
            return redirect(detail_url(name, "bom"))
    return _form_page(
        request, engagement, title=_("Upload the bill of materials (CSV)"), form=form,
        action=_("Upload"), multipart=True, status=400 if request.method == "POST" else 200,
        explanation=_("Columns: %(columns)s. The items are added after the ones already "
                      "listed; a bad line refuses the whole file.") % {
            "columns": ", ".join(CSV_COLUMNS)})


@login_required
@require_http_methods(["GET", "POST"])
def bom_item_edit_view(request, name: str, position: int):
    engagement = engagement_for(request.user, name)
    item = get_object_or_404(engagement.bom_items, position=position)
    manager_only(request)
    initial = {"description": item.description, "quantity": item.quantity,
               "part_number": item.part_number, "serials": serials_text(item.serials)}
    form = BomItemEditForm(posted(request), initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            bom_item_edit(item=item, line=form.bom_line(), actor=request.user.get_username(),
                          reason=form.cleaned_data["reason"])
        except ValueError as error:
            form.add_error(None, str(error))
        else:
            messages.success(request, _("Item %(position)d changed.") % {"position": position})
            return redirect(detail_url(name, "bom"))
    return render(request, "acceptance/bom_item_edit.html", {
        "engagement": engagement, "item": item, "form": form,
        "remove_form": ReasonForm(auto_id="remove_%s"),
        "back_url": detail_url(name, "bom")},
        status=400 if request.method == "POST" else 200)


@login_required
@require_POST
def bom_item_remove_view(request, name: str, position: int):
    engagement = engagement_for(request.user, name)
    item = get_object_or_404(engagement.bom_items, position=position)
    manager_only(request)
    form = ReasonForm(request.POST, auto_id="remove_%s")
    if form.is_valid():
        try:
            bom_item_remove(item=item, actor=request.user.get_username(),
                            reason=form.cleaned_data["reason"])
        except ValueError as error:
            form.add_error(None, str(error))
        else:
            messages.success(request, _("Item %(position)d removed; the audit trail keeps what "
                                        "it was.") % {"position": position})
            return redirect(detail_url(name, "bom"))
    edit = BomItemEditForm(initial={"description": item.description,
                                    "quantity": item.quantity, "part_number": item.part_number,
                                    "serials": serials_text(item.serials)})
    return render(request, "acceptance/bom_item_edit.html", {
        "engagement": engagement, "item": item, "form": edit, "remove_form": form,
        "back_url": detail_url(name, "bom")}, status=400)
