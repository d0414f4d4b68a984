"""What a kernel sent that never arrived, from its numbered message ids."""

from __future__ import annotations

import pytest

from loomgate.gateway.kernels.message_sequence import OTHER_CLIENTS, MessageSequence

SESSION = "a1b2c3-d4e5_4242"


@pytest.mark.parametrize(
    ("ids", "dropped"),
    [
        ([f"{SESSION}_1", f"{SESSION}_2", f"{SESSION}_3"], [0, 0, 0]),
        ([f"{SESSION}_1", f"{SESSION}_3"], [0, 0]),  # one number: a reply to another client
        # A run as long as other clients' requests may take (a server's nudges): not a loss.
        ([f"{SESSION}_1", f"{SESSION}_{OTHER_CLIENTS + 2}"], [0, 0]),
        ([f"{SESSION}_1", f"{SESSION}_{OTHER_CLIENTS + 3}"], [0, OTHER_CLIENTS + 1]),
        ([f"{SESSION}_10", f"{SESSION}_1010"], [0, 999]),
        ([f"{SESSION}_5", "other-session_4242_900"], [0, 0]),  # another sender: a restart
        ([f"{SESSION}_500", f"{SESSION}_3"], [0, 0]),  # backwards: nothing to tell
        (["7f0e7c1c-3a4b-4f4e-9a3f-8c0d", f"{SESSION}_900"], [0, 0]),  # not numbered
        ([f"{SESSION}_1", "uuid-like", f"{SESSION}_900"], [0, 0, 0]),
        ([f"{SESSION}_1", f"{SESSION}_500", "uuid-like"], [0, 498, 0]),
    ],
)
def test_a_run_of_missing_numbers_is_what_the_kernel_dropped(
    ids: list[str], dropped: list[int]
) -> None:
    sequence = MessageSequence()
    assert [sequence.see(msg_id) for msg_id in ids] == dropped
    assert sequence.dropped == sum(dropped)  # until a cell takes them


def test_an_upstreams_notice_that_it_holds_output_back_is_a_loss_of_no_told_size() -> None:
    sequence = MessageSequence()
    sequence.see(f"{SESSION}_1")
    sequence.upstream_held_back()
    sequence.see("server-session_77_3")  # the notice, from the server's own session
    assert sequence.loss(kept=True) == (0, "upstream")  # ipykernel's too: not its doing
    sequence.see(f"{SESSION}_2")
    assert sequence.loss(kept=False) is None


def test_a_run_a_kernel_dropped_is_its_loss_unless_it_was_told_to_keep_every_message() -> None:
    sequence = MessageSequence()
    sequence.see(f"{SESSION}_1")
    sequence.see(f"{SESSION}_901")
    assert sequence.loss(kept=False) == (899, "kernel")
    assert sequence.loss(kept=False) is None  # taken
    sequence.see(f"{SESSION}_2000")
    assert sequence.loss(kept=True) is None  # told to keep every message
    assert sequence.dropped == 0


def test_runs_found_at_messages_of_no_cell_wait_for_the_next_cell_to_take_them() -> None:
    sequence = MessageSequence()
    for msg_id in (1, 901, 902, 2002, 2010):  # a reply, a silent run's status: no cell's
        sequence.see(f"{SESSION}_{msg_id}")
    assert sequence.loss(kept=False) == (899 + 1099, "kernel")


def test_what_an_upstream_held_back_takes_the_runs_found_with_it() -> None:
    sequence = MessageSequence()
    sequence.see(f"{SESSION}_1")
    sequence.see(f"{SESSION}_901")
    sequence.upstream_held_back()
    sequence.see("server-session_77_3")
    assert sequence.loss(kept=False) == (0, "upstream")
    assert sequence.loss(kept=False) is None


def test_nothing_is_lost_before_the_first_message() -> None:
    sequence = MessageSequence()
    assert (sequence.dropped, sequence.loss(kept=False)) == (0, None)
    sequence.see(f"{SESSION}_1")
    assert sequence.loss(kept=False) is None
