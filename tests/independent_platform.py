"""The two methods an adapter of `lti1p3platform` (PyPI: a platform we did not write) supplies
(read the preflight's parameters, hand back the launch form's data), and an RSA key pair in
PEM for it. Everything LTI stays the library's: its OIDC login initiation, id_token claims and
RS256 signature, key set, OAuth 2 token endpoint with its RFC 7523 client assertion check, and
deep linking response check.

The library's own Starlette adapter cannot be imported here (its templates module imports
pkg_resources, which setuptools 81 removed)."""

from __future__ import annotations

from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from lti1p3platform.ltiplatform import LTI1P3PlatformConfAbstract
from lti1p3platform.message_launch import LTIAdvantageMessageLaunchAbstract
from lti1p3platform.oidc_login import OIDCLoginAbstract
from lti1p3platform.registration import Registration as PlatformRegistration


class PlatformConfig(LTI1P3PlatformConfAbstract):
    def init_platform_config(self, **kwargs: Any) -> None:
        self._registration = kwargs["registration"]

    def get_registration_by_params(self, **kwargs: Any) -> PlatformRegistration:
        return self._registration  # type: ignore[return-value]


class Login(OIDCLoginAbstract):
    def set_lti_message_hint(self, **kwargs: Any) -> None:
        self._lti_message_hint = kwargs["hint"]

    def get_redirect(self, url: str) -> str:
        return url


class MessageLaunch(LTIAdvantageMessageLaunchAbstract):
    def get_preflight_response(self) -> dict[str, Any]:
        return dict(self._request)  # type: ignore[arg-type]

    def render_launch_form(self, launch_data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return launch_data


def pem_pair() -> tuple[str, str]:
    """A new RSA key pair: (private PKCS#8 PEM, public SubjectPublicKeyInfo PEM)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return private, public
