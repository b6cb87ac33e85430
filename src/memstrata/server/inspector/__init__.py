"""The memory inspector: a single page at ``/ui`` that browses memories through the REST API with the user's key.

The page and its assets ship in this package (``assets/``) and are served with a strict
Content-Security-Policy: no inline script, nothing from another origin, no framing. The page
holds no data of its own: every request it makes is an ordinary ``/v1`` call with the key the
user entered, so the key's tenant and its isolation apply unchanged.
"""

from __future__ import annotations

from importlib import resources
from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Response

router = APIRouter(tags=["inspector"], include_in_schema=False)

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
}
PAGE = "index.html"
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    # The assets are small and change with the package; a stale script against a newer API helps no one.
    "Cache-Control": "no-cache",
}


def asset_names() -> list[str]:
    """The files the inspector serves (the page is one of them)."""
    folder = resources.files(__package__).joinpath("assets")
    return sorted(item.name for item in folder.iterdir() if item.is_file() and _suffix(item.name) in MEDIA_TYPES)


def read_asset(name: str) -> bytes:
    """One shipped asset's bytes; KeyError for a name that is not one (so no path can leave the folder)."""
    if name not in asset_names():
        raise KeyError(name)
    return resources.files(__package__).joinpath("assets", name).read_bytes()


@router.get("/ui")
def page() -> Response:
    """The inspector's page; it asks for an API key before it reads anything."""
    return _asset_response(PAGE)


@router.get("/ui/{name}")
def asset(name: Annotated[str, Path(description="A file of the page.")]) -> Response:
    """A script, style sheet or image of the page; 404 for anything else."""
    if name == PAGE:
        raise HTTPException(status_code=404, detail="Not Found")  # one address for the page: /ui
    return _asset_response(name)


def _asset_response(name: str) -> Response:
    try:
        body = read_asset(name)
    except KeyError:
        raise HTTPException(status_code=404, detail="Not Found") from None
    return Response(body, media_type=MEDIA_TYPES[_suffix(name)], headers=SECURITY_HEADERS)


def _suffix(name: str) -> str:
    return name[name.rfind(".") :] if "." in name else ""
