"""Which frames of a traceback are shown, table-driven: ipykernel's and IPython's own frames
between the user's last frame and the exception line are left out, with the messaging they call
(one line says how many and how to read them); the user's frames, other libraries' frames,
frames before the user's and tracebacks seen only in part are kept."""

from __future__ import annotations

from typing import Any

import pytest

from loomgate.translator.output_view import CellOutput
from loomgate.translator.presentation import Audience, render_cell
from loomgate.translator.presentation.tracebacks import (
    LeftOutFrames,
    internal_frames,
    left_out_line,
)
from tests.support.wire_values import execution, lines

SITE = "/home/ada/.venv/lib/python3.11/site-packages"
HEADER = [
    ("+error", "-" * 75),
    ("error", "KeyboardInterrupt                         Traceback (most recent call last)"),
]
CELL = [("error", "Cell In[1], line 1"), ("error", "----> 1 input('Name? ')"), ("error", "")]
RAW_INPUT = [
    ("error", f"File {SITE}/ipykernel/kernelbase.py:1515, in Kernel.raw_input(self, prompt)"),
    ("error", "   1514     raise StdinNotImplementedError(msg)"),
    ("error", "-> 1515 return self._input_request("),
    ("error", "   1516     str(prompt),"),
    ("error", ""),
]
INPUT_REQUEST = [
    ("error", f"File {SITE}/ipykernel/kernelbase.py:1560, in Kernel._input_request(self, prompt)"),
    ("error", "   1559     msg = 'Interrupted by user'"),
    ("error", "-> 1560     raise KeyboardInterrupt(msg) from None"),
    ("error", ""),
]
RUN_CODE = [
    ("error", "File ~/.venv/lib/python3.11/site-packages/IPython/core/shell.py:3577, in run_code"),
    ("error", "-> 3577     exec(code_obj, self.user_global_ns, self.user_ns)"),
    ("error", ""),
]
LIBRARY = [
    ("error", f"File {SITE}/pandas/core/frame.py:4102, in DataFrame.__getitem__(self, key)"),
    ("error", "-> 4102     indexer = self.columns.get_loc(key)"),
    ("error", ""),
]
# A KeyboardInterrupt inside ipykernel's send of its input request: through jupyter_client and
# pyzmq, down to a compiled frame whose path is relative and whose source IPython cannot show.
SEND = [
    ("error", f"File {SITE}/ipykernel/kernelbase.py:1541, in Kernel._input_request(self, prompt)"),
    ("error", "-> 1541 self.session.send(self.stdin_socket, 'input_request', content, parent)"),
    ("error", ""),
    ("error", f"File {SITE}/jupyter_client/session.py:852, in Session.send(self, stream)"),
    ("error", "-> 852     stream.send_multipart(to_send, copy=copy)"),
    ("error", ""),
    ("error", f"File {SITE}/zmq/sugar/socket.py:805, in Socket.send_multipart(self, msg_parts)"),
    ("error", "-> 805     return self.send(msg_parts[-1], flags, copy=copy, track=track)"),
    ("error", ""),
    ("error", "File zmq/backend/cython/_zmq.py:179, in zmq.backend.cython._zmq._check_rc()"),
    ("error", "--> 179 'Could not get source, probably due dynamically evaluated source code.'"),
    ("error", ""),
]
ZMQ_CALL = [SEND[6], SEND[7], SEND[8]]  # the user's own call of pyzmq
ENDS = [("error", "KeyboardInterrupt: Interrupted by user")]
INPUT_TRACEBACK = [*HEADER, *CELL, *RAW_INPUT, *INPUT_REQUEST, *ENDS]  # 15 lines
CHAINED = [
    *HEADER,
    *CELL,
    *INPUT_REQUEST,
    ("error", "KeyError: 'x'"),
    ("error", ""),
    ("error", "During handling of the above exception, another exception occurred:"),
    ("error", ""),
    *HEADER[1:],
    *CELL,
    *RAW_INPUT,
    *ENDS,
]
FROM_IPYTHON = LeftOutFrames(6, 11, 2, ("IPython", "ipykernel"), ("shell.py", "kernelbase.py"))


@pytest.mark.parametrize(
    ("specs", "total", "left_out"),
    [
        pytest.param(
            ["before", *INPUT_TRACEBACK],
            16,
            [LeftOutFrames(7, 14, 2, ("ipykernel",), ("kernelbase.py",))],
            id="an interrupted input(): both kernelbase.py frames",
        ),
        pytest.param(
            [*HEADER, *CELL, *RUN_CODE, *INPUT_REQUEST, *ENDS],
            13,
            [FROM_IPYTHON],
            id="IPython's and ipykernel's frames, named once each",
        ),
        pytest.param([*HEADER, *CELL, *ENDS], 6, [], id="the cell's frame alone"),
        pytest.param(
            [*HEADER, *RUN_CODE, *CELL, *ENDS], 9, [], id="internal frames before the user's stay"
        ),
        pytest.param(
            [*HEADER, *CELL, *RAW_INPUT, *CELL, *ENDS],
            14,
            [],
            id="an internal frame between two of the user's stays",
        ),
        pytest.param([*HEADER, *RAW_INPUT, *INPUT_REQUEST, *ENDS], 12, [], id="no user frame"),
        pytest.param(
            [*HEADER, *CELL, *LIBRARY, *ENDS], 9, [], id="another library's frame is the user's"
        ),
        pytest.param(
            [*HEADER, *CELL, *RAW_INPUT, *SEND, *ENDS],
            23,
            [
                LeftOutFrames(
                    6,
                    21,
                    5,
                    ("ipykernel", "jupyter_client", "zmq"),
                    ("kernelbase.py", "session.py", "socket.py", "_zmq.py"),
                )
            ],
            id="interrupted in ipykernel's send: the messaging it called too",
        ),
        pytest.param(
            [*HEADER, *CELL, *ZMQ_CALL, *SEND[9:], *ENDS],
            12,
            [],
            id="pyzmq the user's code called is the user's",
        ),
        pytest.param(
            [*HEADER, *CELL, *LIBRARY, *INPUT_REQUEST, *ENDS],
            13,
            [LeftOutFrames(9, 11, 1, ("ipykernel",), ("kernelbase.py",))],
            id="after a library's frame",
        ),
        pytest.param(INPUT_TRACEBACK, 40, [], id="cut short: the output goes on past the lines"),
        pytest.param(INPUT_TRACEBACK[1:], 14, [], id="cut short: its start is not among them"),
        pytest.param(
            [*HEADER, *CELL, *RAW_INPUT, *INPUT_REQUEST], 14, [], id="no exception line after"
        ),
        pytest.param(
            [*INPUT_TRACEBACK, "after"],
            16,
            [LeftOutFrames(6, 13, 2, ("ipykernel",), ("kernelbase.py",))],
            id="a line of other output after it",
        ),
        pytest.param(
            CHAINED,
            23,
            [
                LeftOutFrames(6, 8, 1, ("ipykernel",), ("kernelbase.py",)),
                LeftOutFrames(18, 21, 1, ("ipykernel",), ("kernelbase.py",)),
            ],
            id="chained exceptions: each part",
        ),
        pytest.param(
            [*HEADER, *CELL, ("error", "KeyError: 'x'"), *CHAINED[10:]],
            19,
            [LeftOutFrames(14, 17, 1, ("ipykernel",), ("kernelbase.py",))],
            id="chained exceptions: a part with nothing left out, then one with",
        ),
        pytest.param(
            [("+error", CELL[0][1]), *CELL[1:], *INPUT_REQUEST, *ENDS],
            8,
            [LeftOutFrames(4, 6, 1, ("ipykernel",), ("kernelbase.py",))],
            id="no header: the first line is the user's frame",
        ),
        pytest.param([*HEADER, *CELL, *INPUT_REQUEST[:-1]], 8, [], id="it ends inside a frame"),
        pytest.param(
            [ENDS[0], *INPUT_TRACEBACK],
            16,
            [LeftOutFrames(7, 14, 2, ("ipykernel",), ("kernelbase.py",))],
            id="the end of a traceback cut short, then a whole one",
        ),
        pytest.param(
            [*INPUT_TRACEBACK, *INPUT_TRACEBACK],
            30,
            [
                LeftOutFrames(6, 13, 2, ("ipykernel",), ("kernelbase.py",)),
                LeftOutFrames(21, 28, 2, ("ipykernel",), ("kernelbase.py",)),
            ],
            id="two tracebacks with no line between",
        ),
    ],
)
def test_internal_frames(specs: list[Any], total: int, left_out: list[LeftOutFrames]) -> None:
    numbered: Any = lines(*specs)
    assert internal_frames(numbered, total) == left_out


def test_internal_frames_need_consecutive_lines() -> None:
    numbered: Any = lines(*INPUT_TRACEBACK)
    numbered[-1]["n"] += 5  # lines between were left out of the view (head and tail)
    assert internal_frames(numbered, numbered[-1]["n"]) == []


@pytest.mark.parametrize(
    ("audience", "note"),
    [
        (
            "model",
            "… 2 frames inside ipykernel (kernelbase.py) left out; "
            'read_output(execution=5, lines="6:13") shows them …',
        ),
        (
            "person",
            "… 2 frames inside ipykernel (kernelbase.py) left out; "
            "`loomgate output 5 --lines 6:13` shows them …",
        ),
    ],
)
def test_an_interrupted_input_reads_as_the_users_frame_and_the_interrupt(
    audience: Audience, note: str
) -> None:
    numbered: Any = lines(*INPUT_TRACEBACK)
    interrupted = execution(state="interrupted", error={"name": "KeyboardInterrupt", "value": ""})
    blocks = render_cell(interrupted, CellOutput(numbered, [], 15), audience=audience)
    assert blocks == [
        "\n".join(
            [
                "In [5] (1.2 s, interrupted):",
                "-" * 75,
                "KeyboardInterrupt                         Traceback (most recent call last)",
                "Cell In[1], line 1",
                "----> 1 input('Name? ')",
                "",
                note,
                "",
                "KeyboardInterrupt: Interrupted by user",
            ]
        )
    ]


@pytest.mark.parametrize(
    ("left", "audience", "line"),
    [
        (
            FROM_IPYTHON,
            "model",
            "… 2 frames inside IPython and ipykernel (shell.py, kernelbase.py) left out; "
            'read_output(execution=5, lines="6:11") shows them …',
        ),
        (
            LeftOutFrames(9, 11, 1, ("ipykernel",), ("kernelbase.py",)),
            "person",
            "… 1 frame inside ipykernel (kernelbase.py) left out; "
            "`loomgate output 5 --lines 9:11` shows them …",
        ),
        (
            LeftOutFrames(6, 21, 5, ("ipykernel", "jupyter_client", "zmq"), ("a.py", "b.py")),
            "person",
            "… 5 frames inside ipykernel, jupyter_client and zmq (a.py, b.py) left out; "
            "`loomgate output 5 --lines 6:21` shows them …",
        ),
    ],
    ids=["two packages, two files", "one frame", "three packages"],
)
def test_left_out_line(left: LeftOutFrames, audience: Audience, line: str) -> None:
    assert left_out_line(5, left, audience) == line


def test_output_missed_among_left_out_frames_is_noted_where_it_was() -> None:
    numbered: Any = lines(*INPUT_TRACEBACK)
    interrupted = execution(
        state="interrupted",
        error={"name": "KeyboardInterrupt", "value": ""},
        gaps=[{"after_line": 8, "since": 10.0, "until": 14.0}],  # inside the frames left out
    )
    text = render_cell(interrupted, CellOutput(numbered, [], 15))[0]
    assert isinstance(text, str)
    assert text.split("\n")[-4:] == [
        "… 2 frames inside ipykernel (kernelbase.py) left out; "
        'read_output(execution=5, lines="6:13") shows them …',
        "[output after line 8 may be missing: no gateway listened for 4.0 s (it was down, then "
        "took the kernel back)]",
        "",
        "KeyboardInterrupt: Interrupted by user",
    ]
