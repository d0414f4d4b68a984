"""Kernel creation requests: the cwd and environment asked for, and the ones refused."""

from __future__ import annotations

import os

import httpx
import pytest

API = "/api/loomgate/kernels"


async def test_kernel_cwd_and_requested_env(http: httpx.AsyncClient, tmp_path: os.PathLike) -> None:
    r = await http.post(API, json={"cwd": str(tmp_path), "env": {"LOOMGATE_REQUESTED": "yes"}})
    assert r.status_code == 201, r.text
    kernel = r.json()["kernel"]["id"]
    try:
        code = "import os; print(os.getcwd()); print(os.environ.get('LOOMGATE_REQUESTED'))"
        r = await http.post(
            f"{API}/{kernel}/executions", json={"code": code, "wait": 30, "head": 2}
        )
        head = r.json()["execution"]["output"]["head"]
        assert [line["text"] for line in head] == [str(tmp_path), "yes"]
    finally:
        await http.delete(f"{API}/{kernel}")


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"cwd": "/no/such/dir"}, "not an existing absolute directory"),
        ({"cwd": "relative/dir"}, "not an existing absolute directory"),
        ({"env": {"BAD NAME": "x"}}, "invalid environment variables"),
        ({"name": "has space"}, "kernel name"),
        ({"kernel_spec": "nope"}, "no kernel spec named 'nope'"),
        ({"lifetime": "forever"}, "lifetime must be"),
    ],
)
async def test_bad_kernel_requests_are_refused(
    http: httpx.AsyncClient, body: dict, fragment: str
) -> None:
    before = len((await http.get(API)).json()["kernels"])
    r = await http.post(API, json=body)
    assert r.status_code == 400
    assert fragment in r.json()["message"]
    assert len((await http.get(API)).json()["kernels"]) == before
