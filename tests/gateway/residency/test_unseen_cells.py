"""The cells an IPython kernel ran while no gateway listened, given records at its take back:
one per number it used since the last record, ended `lost`, its code from the kernel's history,
its sender from the journal when the earlier gateway sent it."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from loomgate.gateway.residency.unseen_cells import UNSEEN_RUN, account_for_unseen
from tests.support.records import kernel_store


class IdleKernel:
    """An IPython kernel's shell channel, answering a take back's two questions."""

    def __init__(self, last: int, history: dict[int, str]) -> None:
        self.last = last
        self.history = history
        self.asked: list[str] = []

    async def ask(self, msg_type: str, content: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Answer the count question: the number of the kernel's last cell."""
        assert (msg_type, content["code"], content["silent"]) == ("execute_request", "", True)
        self.asked.append(msg_type)
        return {"content": {"status": "ok", "execution_count": self.last}}

    async def request(
        self, msg_type: str, content: dict[str, Any], timeout: float
    ) -> dict[str, Any]:
        """Answer the history question: the code of cells `start` to `stop` - 1."""
        assert msg_type == "history_request"
        self.asked.append(msg_type)
        numbers = range(content["start"], content["stop"])
        found = [(0, n, code) for n, code in self.history.items() if n in numbers]
        return {"content": {"status": "ok", "history": found}}


@pytest.mark.parametrize(
    ("case", "seen", "last", "history", "sent", "expected"),
    [
        ("nothing ran unseen", 2, 2, {}, [], {}),
        (
            "two cells, one the earlier gateway sent",
            1,
            3,
            {2: "a = 1", 3: "print(a)"},
            [("m2", "a = 1", "conversation-1")],
            {2: ("a = 1", "loomgate", "conversation-1"), 3: ("print(a)", "other", None)},
        ),
        ("a number the history lacks", 0, 1, {}, [], {1: ("", "other", None)}),
    ],
)
async def test_every_number_used_unseen_gets_a_lost_record(
    tmp_path: Path,
    case: str,
    seen: int,
    last: int,
    history: dict[int, str],
    sent: list[tuple[str, str, str]],
    expected: dict[int, tuple[str, str, str | None]],
) -> None:
    store = kernel_store(tmp_path / "k")
    for number in range(1, seen + 1):
        store.new_record(number=number, msg_id=f"s{number}", code="", source="other", client=None)
    for msg_id, code, client in sent:
        store.journal_sent(msg_id, code, client)
    kernel = IdleKernel(last, history)
    await account_for_unseen(kernel, store, logging.getLogger("test"))
    found = {
        number: (record.meta["code"], record.meta["source"], record.meta["client"])
        for number in range(seen + 1, last + 1)
        if (record := store.get(number)) is not None
    }
    assert found == expected, case
    for number in expected:
        record = store.get(number)
        assert record is not None and record.state == "lost" and record.meta["note"] == UNSEEN_RUN
    assert kernel.asked == (
        ["execute_request"] if not expected else ["execute_request", "history_request"]
    )
    assert store.last_number == max(seen, last)
