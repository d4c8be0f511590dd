"""What a browser downloads, made small and cacheable: the page's static files (web/static),
read and gzip-compressed once when the app starts and answered from memory, so a request for
one costs no disk read and no compression; and gzip for every other response (pages, JSON).

URLs: `/static/<version>/<name>` where <version> is rendering.static_version (a hash of every
static file), so a release changes every asset URL. Under the current version an answer may be
kept for a year without asking again (`immutable`); page.js's relative imports (layernorm.js,
the panels' modules) resolve under the same versioned folder and are kept as long. Any other URL
(`/static/<name>`, or an older release's version) answers with `no-cache`: the browser keeps the
file but checks its ETag before each use, so it never holds on to an outdated file.

Compression: gzip when the client accepts it and it makes the file smaller; the ETag is weak
(RFC 9110 8.8.1), shared by the plain and the compressed form of the same content. Pages and
JSON go through Starlette's GZipMiddleware; static files pass by it, already compressed.
"""

from __future__ import annotations

import gzip
import hashlib
import mimetypes
import re
from dataclasses import dataclass
from pathlib import Path

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.middleware.gzip import GZipMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from normdive.web.views.rendering import STATIC_MOUNT

# A year, the longest that HTTP caches are expected to honour (RFC 9111 5.2.2.1 gives no
# maximum; a year is the customary one).
IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"
# gzip's strongest level: paid once per file at start-up, never per request.
STATIC_GZIP_LEVEL = 9
# Pages and JSON are compressed per response, on the server's CPU every time: level 1 costs
# 40 % of level 6's time on the lesson page for 18 % more bytes (8.9 KB against 7.6 KB: some
# 25 ms at 400 kbit/s), bench/RESULTS.md, "Compression levels".
GZIP_LEVEL = 1
# Below this many bytes gzip's own overhead outweighs what it saves (Starlette's default).
GZIP_MIN_BYTES = 500
# Types whose bytes compress; images and the like are already compressed.
COMPRESSIBLE_PREFIXES = (
    "text/",
    "application/javascript",
    "application/json",
    "application/wasm",
    "image/svg",
)
# Text types are sent with their charset; everything in web/static is UTF-8.
TEXT_TYPES = {".js": "text/javascript", ".css": "text/css", ".md": "text/markdown"}


@dataclass(frozen=True)
class Asset:
    body: bytes
    gzipped: bytes | None  # None when gzip would not make it smaller
    media_type: str
    etag: str


def _media_type(path: Path) -> str:
    guessed = TEXT_TYPES.get(path.suffix) or mimetypes.guess_type(path.name)[0]
    media_type = guessed or "application/octet-stream"
    return f"{media_type}; charset=utf-8" if media_type.startswith("text/") else media_type


def load_asset(path: Path) -> Asset:
    body = path.read_bytes()
    media_type = _media_type(path)
    gzipped: bytes | None = None
    if media_type.startswith(COMPRESSIBLE_PREFIXES):
        # mtime=0: the same file always compresses to the same bytes.
        candidate = gzip.compress(body, compresslevel=STATIC_GZIP_LEVEL, mtime=0)
        gzipped = candidate if len(candidate) < len(body) else None
    etag = 'W/"' + hashlib.sha256(body).hexdigest()[:20] + '"'
    return Asset(body=body, gzipped=gzipped, media_type=media_type, etag=etag)


def load_assets(directory: Path) -> dict[str, Asset]:
    """Every file under `directory`, by its path relative to it with forward slashes."""
    return {
        path.relative_to(directory).as_posix(): load_asset(path)
        for path in sorted(directory.rglob("*"))
        if path.is_file() and not path.name.startswith(".")
    }


def accepts_gzip(accept_encoding: str) -> bool:
    """Whether an Accept-Encoding header allows gzip (RFC 9110 12.5.3; q=0 refuses)."""
    for item in accept_encoding.split(","):
        coding, _, params = item.strip().partition(";")
        if coding.strip().lower() not in ("gzip", "*"):
            continue
        quality = params.strip().lower().removeprefix("q=").strip()
        try:
            return not params.strip() or float(quality) > 0
        except ValueError:
            return False
    return False


def etag_matches(if_none_match: str, etag: str) -> bool:
    """Weak comparison (RFC 9110 13.1.2), as If-None-Match uses."""
    if if_none_match.strip() == "*":
        return True
    wanted = etag.removeprefix("W/")
    return any(tag.strip().removeprefix("W/") == wanted for tag in if_none_match.split(","))


# What a version segment looks like (rendering.static_version: hex digits), this release's or
# an older one's.
VERSION_PATTERN = re.compile(r"[0-9a-f]{8,64}")


def route_path(scope: Scope) -> str:
    """The request's path below where the app handling it is mounted."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root + "/"):
        return path[len(root) :]
    return path


class StaticAssets:
    """ASGI app for the static files, mounted at rendering.STATIC_MOUNT."""

    def __init__(self, directory: Path, version: str) -> None:
        self.version = version
        self.assets = load_assets(directory)

    def find(self, route_path: str) -> tuple[Asset, str] | None:
        """The asset a path names and the Cache-Control it is answered with."""
        name = route_path.lstrip("/")
        asset = self.assets.get(name)
        if asset is not None:
            return asset, REVALIDATE
        version, _, rest = name.partition("/")
        asset = self.assets.get(rest)
        if asset is None or VERSION_PATTERN.fullmatch(version) is None:
            return None
        return asset, IMMUTABLE if version == self.version else REVALIDATE

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert scope["type"] == "http"  # mounted on the HTTP app only
        if scope["method"] not in ("GET", "HEAD"):
            # The app's error handlers turn these into readable pages.
            raise HTTPException(405, headers={"Allow": "GET, HEAD"})
        found = self.find(route_path(scope))
        if found is None:
            raise HTTPException(404)
        asset, cache_control = found
        request_headers = Headers(scope=scope)
        headers = [
            (b"cache-control", cache_control.encode()),
            (b"etag", asset.etag.encode()),
        ]
        if asset.gzipped is not None:
            headers.append((b"vary", b"Accept-Encoding"))
        if_none_match = request_headers.get("if-none-match")
        if if_none_match is not None and etag_matches(if_none_match, asset.etag):
            await send({"type": "http.response.start", "status": 304, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return
        body = asset.body
        if asset.gzipped is not None and accepts_gzip(request_headers.get("accept-encoding", "")):
            body = asset.gzipped
            headers.append((b"content-encoding", b"gzip"))
        headers += [
            (b"content-type", asset.media_type.encode()),
            (b"content-length", str(len(body)).encode()),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send(
            {"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body}
        )


class CompressResponses:
    """gzip for pages and JSON answers (Starlette's GZipMiddleware), for clients that accept
    it; static files skip it, since StaticAssets sends them compressed already."""

    def __init__(
        self, app: ASGIApp, minimum_size: int = GZIP_MIN_BYTES, level: int = GZIP_LEVEL
    ) -> None:
        self.app = app
        self.gzip = GZipMiddleware(app, minimum_size=minimum_size, compresslevel=level)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["path"].startswith(STATIC_MOUNT + "/")
            # GZipMiddleware would compress for "gzip;q=0", which refuses it.
            or not accepts_gzip(Headers(scope=scope).get("accept-encoding", ""))
        ):
            await self.app(scope, receive, send)
            return
        await self.gzip(scope, receive, send)
