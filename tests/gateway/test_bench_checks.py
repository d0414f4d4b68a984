"""The gateway benchmark times only what it checked: its search runs over the 1,000,000-line
execution it reports on (not the small cell that ran after it) and finds its one line, and its
range reads return the lines asked for."""

from __future__ import annotations

import pytest

from bench.gateway_bench import API, BIG_CELL, checked_read, checked_search
from tests.support.cells import submit
from tests.support.gateways import GatewayProcess, client


async def test_the_bench_search_is_over_the_big_execution(fresh_gateway: GatewayProcess) -> None:
    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        kernel = (await http.post(API, json={})).json()["kernel"]["id"]
        big = (await submit(http, kernel, BIG_CELL, wait=600))["execution"]
        assert big["streams"]["stdout"]["lines"] == 1_000_000
        small = (await submit(http, kernel, "for i in range(100): print(i)"))["execution"]
        await checked_search(http, kernel, big["number"])
        with pytest.raises(AssertionError):  # the small cell holds no such line
            await checked_search(http, kernel, small["number"])
        url = f"{API}/{kernel}/executions/{big['number']}/streams/stdout"
        await checked_read(http, url, 500000, 20)
