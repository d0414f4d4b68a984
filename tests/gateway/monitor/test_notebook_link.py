"""The monitor page's "download .ipynb" link, in a real headless Chromium: the selected kernel's
notebook, fetched with the page's read-only token."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import nbformat
from playwright.async_api import expect

from tests.support.browser import page_at
from tests.support.cells import run
from tests.support.gateways import GatewayProcess

API = "/api/loomgate"
SEEN = 20_000  # ms


async def test_the_page_downloads_the_selected_kernels_notebook(
    gateway: GatewayProcess, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    name = f"download-{os.urandom(3).hex()}"
    kernel = (await http.post(f"{API}/kernels", json={"name": name})).json()["kernel"]["id"]
    try:
        await run(http, kernel, "print('in the download')")
        url = f"{gateway.url}/loomgate/monitor?token={gateway.monitor_token}#{kernel}"
        async with page_at(url) as page:
            link = page.locator("#download")
            await expect(link).to_be_visible(timeout=SEEN)
            await expect(link).to_have_text("download .ipynb")
            async with page.expect_download(timeout=SEEN) as download_info:
                await link.click()
            download = await download_info.value
            assert download.suggested_filename == f"{name}.ipynb"
            saved = tmp_path / download.suggested_filename
            await download.save_as(saved)
        book = nbformat.read(saved, as_version=4)
        nbformat.validate(book)
        assert book.cells[0].outputs[0]["text"] == "in the download\n"
        assert json.loads(saved.read_text())["metadata"]["loomgate"]["kernel"]["name"] == name
    finally:
        await http.delete(f"{API}/kernels/{kernel}")
