"""The fields of a form post: the page's forms and the lab's send a plain form
(application/x-www-form-urlencoded) or multipart (the page script's FormData)."""

from __future__ import annotations

from starlette.datastructures import FormData
from starlette.requests import Request

# What a form posts as: a plain form, or multipart (the page script's FormData).
FORM_MEDIA_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
NOT_A_FORM = (
    "This address takes a form (application/x-www-form-urlencoded or multipart/form-data), "
    "and that request sent something else, so nothing was saved."
)


def _field_values(form: FormData) -> dict[str, str]:
    """Each text field's value, whole: BodyLimit bounds them all, and a refusal that counts
    what was sent (the takeaway's length) counts all of it. Files are not form values here."""
    values: dict[str, str] = {}
    for key, value in form.multi_items():
        if isinstance(value, str):
            values[key] = value
    return values


async def form_fields(request: Request) -> dict[str, str] | None:
    """The form's fields, or None when the body is not a form (415). A body with no
    Content-Type at all is a form only when it is empty (a form with no fields)."""
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type in FORM_MEDIA_TYPES:
        return _field_values(await request.form())
    if not media_type and not await request.body():
        return {}
    return None
