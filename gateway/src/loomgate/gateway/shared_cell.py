"""One of the agent's cells in a shared notebook (jupyter_ydoc's `YNotebook`): appended at the
notebook's end, its outputs brought up to date by the smallest edit, one transaction each."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jupyter_ydoc import YNotebook
from pycrdt import Array, Map, Text

Output = dict[str, Any]
ORIGIN = "loomgate"  # the origin of loomgate's transactions on the shared document
AGENT_TAG = "loomgate-agent"


@dataclass(frozen=True)
class OutputEdit:
    """How a cell's outputs become new ones: the first `keep` stay; `grow`, if set, is text
    appended to the stream output at `keep` (which then stays too); the rest is replaced."""

    keep: int
    grow: str | None
    replace: list[Output]


def output_edit(old: list[Output], new: list[Output]) -> OutputEdit:
    """Return the smallest edit (of those above) that turns `old` into `new`: a running cell's
    stream only grows, so its Y update is the new text alone."""
    keep = 0
    while keep < min(len(old), len(new)) and old[keep] == new[keep]:
        keep += 1
    if keep == len(old) - 1 and keep < len(new):
        before, after = old[keep], new[keep]
        if (
            before.get("output_type") == after.get("output_type") == "stream"
            and before.get("name") == after.get("name")
            and str(after.get("text", "")).startswith(str(before.get("text", "")))
        ):
            grown = str(after["text"])[len(str(before.get("text", ""))) :]
            return OutputEdit(keep=keep, grow=grown, replace=new[keep + 1 :])
    return OutputEdit(keep=keep, grow=None, replace=new[keep:])


def youtput(output: Output) -> Map[Any]:
    """Return an output as the notebook schema keeps it (a stream's text as Y text, so that it
    can grow)."""
    fields = dict(output)
    if fields.get("output_type") == "stream":
        fields["text"] = Text(str(fields.get("text", "")))
    return Map(fields)


class SharedCell:
    """An agent's code cell `In [number]` in one shared notebook, found again by its id at every
    update (the person may have moved, deleted or run it again meanwhile)."""

    def __init__(self, notebook: YNotebook, cell_id: str, number: int) -> None:
        self.notebook = notebook
        self.cell_id = cell_id
        self.number = number
        self.written: list[Output] = []
        self.transactions = 0

    @classmethod
    def append(
        cls,
        notebook: YNotebook,
        cell_id: str,
        code: str,
        number: int,
        metadata: dict[str, Any],
        outputs: list[Output],
        *,
        ended: bool,
    ) -> SharedCell:
        """Append the code cell `In [number]` of `code` with its `outputs` so far at the
        notebook's end, running unless it has `ended`."""
        cell = cls(notebook, cell_id, number)
        value = {
            "cell_type": "code",
            "id": cell_id,
            "source": code,
            "execution_count": number,
            "metadata": metadata,
            "outputs": outputs,
        }
        with notebook.ydoc.transaction(origin=ORIGIN):
            ycell = notebook.create_ycell(value)
            notebook.ycells.append(ycell)
            # JupyterLab shows In [*] while a cell is busy.
            ycell["execution_state"] = "idle" if ended else "busy"
        cell.written = list(outputs)
        cell.transactions += 1
        return cell

    def find(self) -> Map[Any] | None:
        """Return the cell's Y map, or None if the person deleted it or ran it again (its
        outputs are then that run's)."""
        for ycell in self.notebook.ycells:
            if isinstance(ycell, Map) and ycell.get("id") == self.cell_id:
                return ycell if ycell.get("execution_count") == self.number else None
        return None

    def update(self, outputs: list[Output], *, state: str | None = None) -> bool:
        """Bring the outputs up to date, and with `state` (the execution's final state) mark the
        cell ended; return False if the cell is no longer this execution's."""
        edit = output_edit(self.written, outputs)
        changed = edit.grow is not None or edit.keep < len(self.written) or edit.replace
        if not changed and state is None:
            return True
        with self.notebook.ydoc.transaction(origin=ORIGIN):
            ycell = self.find()
            if ycell is None:
                return False
            youtputs = ycell.get("outputs")
            if not isinstance(youtputs, Array):
                youtputs = ycell["outputs"] = Array()
            if len(youtputs) != len(self.written):  # someone cleared or changed them
                edit = OutputEdit(keep=0, grow=None, replace=outputs)
            start = edit.keep
            if edit.grow is not None:
                stream = youtputs[start]
                text = stream.get("text") if isinstance(stream, Map) else None
                if isinstance(text, Text):
                    text += edit.grow
                    start += 1
                else:  # not kept as Y text (someone rewrote it): replaced whole
                    edit = OutputEdit(keep=start, grow=None, replace=outputs[start:])
            del youtputs[start:]
            youtputs.extend([youtput(o) for o in outputs[start:]])
            if state is not None:
                ycell["execution_state"] = "idle"
                metadata = ycell.get("metadata")
                if isinstance(metadata, Map):
                    loomgate = metadata.get("loomgate")
                    if isinstance(loomgate, dict):
                        metadata["loomgate"] = {**loomgate, "state": state}
        self.written = list(outputs)
        self.transactions += 1
        return True
