"""The console's routes: one HTML page per section and its static files."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

from ..server.errors import segment
from .i18n import LANGUAGES, pick_language
from .render import STATIC, render_page

__all__ = ["mount_console", "PAGES"]

# The pages without a memory id; ``memory/{id}`` is the other. The templates and scripts
# link to ``/ui/...`` directly, so the prefix is fixed.
PAGES = ("login", "memories", "review", "dashboard", "graph")
# Nothing but this server's own files: the console must work offline, and a memory's text
# can never run as script (every value is put in the page as text by the scripts).
_CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")


def _render(request: Request, page: str, **extra: Any) -> HTMLResponse:
    lang = pick_language(request.query_params.get("lang"), request.cookies.get("bw_lang"),
                         request.headers.get("accept-language"))
    headers = {"Content-Security-Policy": _CSP, "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
               "Referrer-Policy": "no-referrer"}
    response = HTMLResponse(render_page(page, lang, **extra), headers=headers)
    if request.query_params.get("lang") in LANGUAGES:
        response.set_cookie("bw_lang", lang, max_age=365 * 86400, samesite="strict", path="/ui")
    return response


def mount_console(app: FastAPI) -> None:
    """Serve the console under ``/ui``; the pages are not part of the OpenAPI spec."""

    @app.get("/ui", include_in_schema=False)
    def home() -> RedirectResponse:
        return RedirectResponse("/ui/memories")

    def page_route(page: str) -> Any:
        def show(request: Request) -> HTMLResponse:
            return _render(request, page)
        return show

    for page in PAGES:
        app.add_api_route(f"/ui/{page}", page_route(page), methods=["GET"], include_in_schema=False)

    @app.get("/ui/memory/{memory_id}", include_in_schema=False)
    def memory(request: Request, memory_id: str) -> HTMLResponse:
        # As the API's routes read it: a "/" inside the id arrives escaped (EncodedSlashes).
        return _render(request, "memory", memory_id=segment(memory_id))

    app.mount("/ui/static", StaticFiles(directory=STATIC), name="console-static")
