"""The fields of a form post: the page's forms and the lab's send a plain form
(application/x-www-form-urlencoded) or multipart (the page script's FormData), and each is
checked the same way before anything is written (vouched_form)."""

from __future__ import annotations

from dataclasses import dataclass

from itsdangerous import Signer
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response

from normdive.config import Settings
from normdive.i18n.catalogues import gettext
from normdive.web.infrastructure.errors import error_response
from normdive.web.infrastructure.identity import COOKIE_NAME, learner_from_cookie
from normdive.web.security import csrf

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


@dataclass(frozen=True)
class VouchedForm:
    """A form post's fields (the form token taken out) and the learner its cookie vouches for."""

    fields: dict[str, str]
    learner_id: str


async def vouched_form(
    request: Request, signer: Signer, settings: Settings
) -> VouchedForm | Response:
    """The checks every form post passes before its write: a form body (else 415), then this
    site's origin and the learner's own form token (else 403: nothing read, nothing written)."""
    form = await form_fields(request)
    if form is None:
        return error_response(request, 415, NOT_A_FORM)
    vouched = learner_from_cookie(request.cookies.get(COOKIE_NAME), signer)
    forged = csrf.refusal(request, form, vouched, settings)
    if forged is not None or vouched is None:
        return error_response(request, 403, forged or gettext(csrf.NO_LEARNER))
    form.pop(csrf.FIELD, None)
    return VouchedForm(form, vouched)
