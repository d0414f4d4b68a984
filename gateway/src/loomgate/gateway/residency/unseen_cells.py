"""The cells an IPython kernel ran while no gateway listened, found when it is taken back: every
number it used since the last record gets a record of its own, ended `lost`, with its code from
the kernel's history and its sender from the journal when the earlier gateway sent it. No
number without a record."""

from __future__ import annotations

import logging
from typing import Any, Protocol

from loomgate.gateway.records.store import RecordStore

# A cell an IPython kernel ran while no gateway listened, found by its number at a take back.
UNSEEN_RUN = "it ran while no gateway listened; its output was not seen"
UNSEEN_TIMEOUT = 10.0  # for each of a take back's questions to an idle kernel


class KernelQuestions(Protocol):
    """The kernel's shell channel as a take back asks it (kernels/kernel_channels.py's
    KernelChannels)."""

    async def ask(self, msg_type: str, content: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send a question about the kernel and return its reply (not the kernel's activity)."""

    async def request(
        self, msg_type: str, content: dict[str, Any], timeout: float
    ) -> dict[str, Any]:
        """Send a shell request and return its reply (TimeoutError after `timeout` seconds)."""


def count_content() -> dict[str, Any]:
    """Return a silent execute_request that runs nothing: IPython's reply carries the number
    of its last cell (`execution_count`), and its counter stays as it is."""
    return {"code": "", "silent": True, "store_history": False, "allow_stdin": False}


def history_content(first: int, last: int) -> dict[str, Any]:
    """Return a history_request for the code of this session's cells `first` to `last`."""
    return {
        "output": False,
        "raw": True,
        "hist_access_type": "range",
        "session": 0,
        "start": first,
        "stop": last + 1,
    }


async def account_for_unseen(
    channels: KernelQuestions, store: RecordStore, log: logging.Logger
) -> None:
    """Give a record in `store` to every number the IPython kernel behind `channels` used
    while no gateway listened: ended `lost`, its output unseen."""
    reply = await channels.ask("execute_request", count_content(), UNSEEN_TIMEOUT)
    last = int(reply["content"].get("execution_count") or 0)
    if last <= store.last_number:
        return
    first = store.last_number + 1
    answer = await channels.request("history_request", history_content(first, last), UNSEEN_TIMEOUT)
    codes = {int(n): str(code) for _, n, code in answer["content"].get("history", [])}
    sent = store.unstarted_sends()
    for number in range(first, last + 1):
        code = codes.get(number, "")
        journalled = next((s for s in sent if s["code"] == code), None)
        if journalled is not None:
            sent.remove(journalled)
        record = store.new_record(
            number=number,
            msg_id=journalled["sent"] if journalled else "",
            code=code,
            source="loomgate" if journalled else "other",
            client=journalled["client"] if journalled else None,
        )
        record.end_unseen("lost", UNSEEN_RUN)
    log.info(
        "Kernel %s ran %d cell(s) while no gateway listened: In [%d] to In [%d] recorded lost",
        store.kernel_id,
        last - first + 1,
        first,
        last,
    )
