"""A real headless Chromium (Debian's `chromium`), driven by Playwright for Python."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import AsyncIterator

from playwright.async_api import Browser, Page, async_playwright

# The machine's network is closed: without these, Chromium keeps trying Google's services.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


def chromium_path() -> str:
    """Return the system Chromium's path (installed by .ci/run; never downloaded)."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        raise RuntimeError("no chromium on PATH: apt-get install chromium (.ci/run does)")
    return path


@contextlib.asynccontextmanager
async def browser() -> AsyncIterator[Browser]:
    """A headless Chromium with a new empty profile, closed (with its processes) afterwards."""
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=chromium_path(), args=FLAGS)
        try:
            yield launched
        finally:
            await launched.close()


@contextlib.asynccontextmanager
async def page_at(url: str, *, width: int = 1280, height: int = 800) -> AsyncIterator[Page]:
    """A page of a fresh browser, opened at `url`; its script errors fail the test."""
    errors: list[str] = []
    async with browser() as chromium:
        page = await chromium.new_page(viewport={"width": width, "height": height})
        page.on("pageerror", lambda error: errors.append(str(error)))
        await page.goto(url)
        yield page
        assert errors == [], errors
