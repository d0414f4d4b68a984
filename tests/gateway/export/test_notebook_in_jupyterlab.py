"""A notebook exported from a real kernel, opened in a person's real JupyterLab in a real
headless Chromium: every cell with its `[N]` prompt and its outputs (streams, a PNG, an HTML
table, a traceback), and a screenshot kept in test-artifacts/ at the repo's root."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Page, expect

from tests.support.browser import page_at
from tests.support.cells import PNG_8X8, run
from tests.support.jupyter_lab import JupyterServerProcess
from tests.support.png import decode

API = "/api/loomgate"
ARTIFACTS = Path(__file__).parents[3] / "test-artifacts"  # gitignored; made by the tests
SCREENSHOT = ARTIFACTS / "notebook-in-jupyterlab.png"
FILE = "exported session.ipynb"  # a space: the path is quoted as the person's browser does
SEEN = 60_000  # ms JupyterLab may take to load and render: generous, to fail rather than hang
TABLE = (
    "<table><thead><tr><th>planet</th><th>moons</th></tr></thead>"
    "<tbody><tr><td>Mars</td><td>2</td></tr><tr><td>Jupiter</td><td>95</td></tr></tbody></table>"
)
SESSION = [
    'import sys\nprint("out 1", flush=True)\nprint("err 1", file=sys.stderr, flush=True)\n'
    'print("out 2", flush=True)',
    "import base64\nfrom IPython.display import Image, display\n"
    f'display(Image(data=base64.b64decode("{PNG_8X8}"), width=64))',
    f"from IPython.display import HTML\ndisplay(HTML({TABLE!r}))\n6 * 7",
    "raise ValueError('broken on purpose')",
]


@pytest.fixture
def person_lab(tmp_path: Path) -> Iterator[JupyterServerProcess]:
    """The person's own JupyterLab, without loomgate; stopped with the kernel it starts for the
    notebook."""
    server = JupyterServerProcess(tmp_path / "person", extension=False)
    # No "official Jupyter news?" toast over the notebook (the machine is offline anyway).
    notification = {"fetchNews": "false", "checkForUpdates": False}
    server.write_lab_settings("@jupyterlab/apputils-extension:notification", notification)
    try:
        server.start()
        yield server
    finally:
        server.stop()


async def exported_session(http: httpx.AsyncClient, kernel: str) -> tuple[list[int], str]:
    """Run SESSION on `kernel`; return the numbers of its executions and its notebook as the
    gateway exports it."""
    numbers = [(await run(http, kernel, code))["number"] for code in SESSION]
    r = await http.get(f"{API}/kernels/{kernel}/notebook")
    assert r.status_code == 200, r.text
    return numbers, r.text


async def prompts(page: Page, selector: str) -> list[str]:
    """Return the text of every prompt `selector` finds, in the page's order."""
    found: list[str] = await page.locator(selector).all_inner_texts()
    return [text.strip() for text in found]


async def test_an_exported_notebook_shows_its_cells_and_outputs_in_jupyterlab(
    http: httpx.AsyncClient, kernel: str, person_lab: JupyterServerProcess
) -> None:
    numbers, notebook = await exported_session(http, kernel)
    assert len(json.loads(notebook)["cells"]) == len(SESSION)
    (person_lab.root / FILE).write_text(notebook)
    url = f"{person_lab.url}/lab/tree/{FILE.replace(' ', '%20')}?token={person_lab.token}"
    async with page_at(url, width=1280, height=1600) as page:
        try:
            centre = await shows_the_session(page, numbers)
        finally:  # kept also when it fails: what the page showed then
            ARTIFACTS.mkdir(exist_ok=True)
            await page.screenshot(path=str(SCREENSHOT), full_page=True)
    shot = decode(SCREENSHOT.read_bytes())
    assert (shot.width, shot.height) == (1280, 1600)
    assert shot.pixel(*centre) == (255, 0, 0)  # the PNG's own colour, where the page shows it


async def shows_the_session(page: Page, numbers: list[int]) -> tuple[int, int]:
    """Check the notebook panel shows SESSION's cells (`numbers` their executions) with their
    outputs; return the centre of the PNG on the page."""
    panel = page.locator(".jp-NotebookPanel")
    cells = panel.locator(".jp-Notebook .jp-Cell")
    await expect(cells).to_have_count(len(SESSION), timeout=SEEN)
    first, image, table, error = (cells.nth(i) for i in range(len(SESSION)))
    # Outputs are rendered in order: once the last cell's traceback is there, all are.
    stderr = ".jp-RenderedText[data-mime-type='application/vnd.jupyter.stderr']"
    await expect(error.locator(stderr)).to_contain_text("Traceback", timeout=SEEN)

    assert await prompts(page, ".jp-Notebook .jp-Cell .jp-InputPrompt") == [
        f"[{n}]:" for n in numbers
    ]
    # Out[N] labels only the execute_result: the table's cell's 42.
    assert [p for p in await prompts(page, ".jp-OutputPrompt") if p] == [f"[{numbers[2]}]:"]

    await expect(first.locator(".jp-OutputArea-output")).to_have_text(["out 1", "err 1", "out 2"])
    await expect(first.locator(stderr)).to_have_text("err 1")

    img = image.locator(".jp-OutputArea-output img")
    await expect(img).to_have_count(1)
    assert (await img.get_attribute("src") or "").startswith("data:image/png;base64,")
    assert await img.evaluate("i => [i.naturalWidth, i.naturalHeight]") == [8, 8]

    rendered = table.locator(".jp-RenderedHTMLCommon table")
    await expect(rendered.locator("th")).to_have_text(["planet", "moons"])
    await expect(rendered.locator("td")).to_have_text(["Mars", "2", "Jupiter", "95"])
    await expect(table.locator(".jp-OutputArea-output").last).to_have_text("42")

    traceback = await error.locator(stderr).inner_text()
    assert traceback.splitlines()[1].split() == [
        "ValueError",
        "Traceback",
        "(most",
        "recent",
        "call",
        "last)",
    ]
    assert traceback.splitlines()[-1] == "ValueError: broken on purpose"

    box = await img.bounding_box()
    assert box is not None and box["width"] == 64
    return int(box["x"] + box["width"] / 2), int(box["y"] + box["height"] / 2)
