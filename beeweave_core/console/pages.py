"""The console's routes: one HTML page per section and its static files."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

from .i18n import LANGUAGES, pick_language
from .render import STATIC, render_page

__all__ = ["mount_console", "PAGES"]

PAGES = ("login", "memories", "memory", "review", "dashboard", "graph")
# Nothing but this server's own files: the console must work offline, and a memory's text
# can never run as script (every value is put in the page as text by the scripts).
_CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")


def _render(request: Request, page: str, **extra: Any) -> HTMLResponse:
    lang = pick_language(request.query_params.get("lang"), request.cookies.get("bw_lang"),
                         request.headers.get("accept-language"))
    response = HTMLResponse(render_page(page, lang, **extra), headers={"Content-Security-Policy": _CSP, "Cache-Control": "no-store",
                                           "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"})
    if request.query_params.get("lang") in LANGUAGES:
        response.set_cookie("bw_lang", lang, max_age=365 * 86400, samesite="strict", path="/ui")
    return response


def mount_console(app: FastAPI, prefix: str = "/ui") -> None:
    """Serve the console under ``prefix``; the pages are not part of the OpenAPI spec."""

    @app.get(prefix, include_in_schema=False)
    def home() -> RedirectResponse:
        return RedirectResponse(f"{prefix}/memories")

    def page_route(page: str) -> Any:
        def show(request: Request) -> HTMLResponse:
            return _render(request, page)
        return show

    for page in ("login", "memories", "review", "dashboard", "graph"):
        app.add_api_route(f"{prefix}/{page}", page_route(page), methods=["GET"], include_in_schema=False)

    @app.get(prefix + "/memory/{memory_id}", include_in_schema=False)
    def memory(request: Request, memory_id: str) -> HTMLResponse:
        return _render(request, "memory", memory_id=memory_id)

    app.mount(f"{prefix}/static", StaticFiles(directory=STATIC), name="console-static")
