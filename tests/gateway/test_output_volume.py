"""Large and terminal-styled output: stored normalized, line-addressable, searchable."""

from __future__ import annotations

import httpx

API = "/api/loomgate/kernels"

CELL = r"""
import sys
for i in range(200_000):
    print(f"row {i}")
    if i % 1000 == 0:
        pct = i // 2000
        sys.stderr.write(f"\r{pct:3d}%|" + "#" * (pct // 10) + " " * (10 - pct // 10) + "|")
sys.stderr.write("\r100%|##########|\n")
print("\x1b[31mred\x1b[0m \x1b]0;title\x07done")
"""


async def test_200k_lines_with_progress_bar(http: httpx.AsyncClient, kernel: str) -> None:
    r = await http.post(
        f"{API}/{kernel}/executions", json={"code": CELL, "wait": 600, "head": 2, "tail": 2}
    )
    execution = r.json()["execution"]
    assert execution["state"] == "completed", execution
    streams = execution["streams"]
    assert streams["stdout"]["lines"] == 200_001
    assert streams["stderr"]["lines"] == 1
    base = f"{API}/{kernel}/executions/{execution['number']}/streams"
    r = await http.get(f"{base}/stderr")
    assert [line["text"] for line in r.json()["lines"]] == ["100%|##########|"]
    r = await http.get(f"{base}/stdout", params={"lines": "123457:123459"})
    assert [line["text"] for line in r.json()["lines"]] == [
        "row 123456",
        "row 123457",
        "row 123458",
    ]
    r = await http.get(f"{base}/stdout", params={"lines": "-1:"})
    assert r.json()["lines"][0]["text"] == "red done"
    assert "red done" in [line["text"] for line in execution["output"]["tail"]]
    assert execution["output"]["omitted"] == streams["combined"]["lines"] - 4
    r = await http.get(
        f"{API}/{kernel}/search",
        params={"query": "row 199999", "mode": "literal", "stream": "stdout"},
    )
    assert [line["n"] for g in r.json()["groups"] for line in g["lines"]] == [200_000]
