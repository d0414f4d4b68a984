"""One execution's outputs as nbformat 4 outputs, rebuilt from its `combined` stream in IOPub
order: stream runs as stdout and stderr interleaved them, results and displays with every MIME
type of their bundles, errors with their tracebacks. A longer output than the limit keeps its
head and tail, with a line naming the command that reads the rest."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loomgate.gateway.export.notes import omitted_text
from loomgate.gateway.records.output_log import KIND_MASK, PART_START, Line, OutputKind
from loomgate.gateway.records.record import COLOURED_TRACEBACK_CHARS, ExecutionRecord
from loomgate.shared.wire import RichEntry

Output = dict[str, Any]
STREAM_NAMES = {OutputKind.STDOUT: "stdout", OutputKind.STDERR: "stderr"}
BUNDLE_KINDS = frozenset({OutputKind.RESULT, OutputKind.DISPLAY, OutputKind.RICH})


@dataclass(frozen=True)
class Omission:
    """The middle of a long output left out of the notebook: lines `first` to `last`."""

    first: int
    last: int
    total: int


@dataclass(frozen=True)
class CellOutputs:
    """A cell's outputs, how many `combined` lines it has, and what was left out."""

    outputs: list[Output]
    lines: int
    omitted: Omission | None


class _Builder:
    """Turns a record's `combined` lines, read in order, into outputs."""

    def __init__(self, record: ExecutionRecord) -> None:
        self.record = record
        self.outputs: list[Output] = []
        self.kind = 0  # the kind of the output being gathered (0: none)
        self.start = 0  # its first line's number when it began with a PART_START line
        self.texts: list[str] = []
        self.partial = False  # the last line gathered is a live stream's unfinished one
        self.stand_in = False  # the lines being read are the text stand-in of a bundle
        self.in_tail = False  # whether lines after an omission are being read
        self.last_error: tuple[int, bool] | None = None  # (output index, begun in the tail)
        self.rich: dict[int, list[RichEntry]] = {}
        for entry in record.rich.entries:
            self.rich.setdefault(entry["line"], []).append(entry)

    def feed(self, lines: list[Line]) -> None:
        """Gather `lines`, closing each output where the next begins."""
        for line in lines:
            kind = line.tag & KIND_MASK
            starts = bool(line.tag & PART_START)
            entries = self.rich.pop(line.number, [])
            own = entries.pop() if entries and starts and kind in BUNDLE_KINDS else None
            if entries or starts or kind != self.kind:
                self.close()
                self.outputs.extend(self.bundle(entry) for entry in entries)  # with no text
                self.kind, self.start = kind, line.number if starts else 0
                if own is not None:
                    self.outputs.append(self.bundle(own))
                    self.stand_in = True
            if not self.stand_in:
                self.texts.append(line.text)
                self.partial = line.partial

    def close(self) -> None:
        """End the output being gathered (if any) and append it."""
        texts, kind, partial = self.texts, self.kind, self.partial
        self.texts, self.kind, self.partial, self.stand_in = [], 0, False, False
        if not texts:
            return
        text = "\n".join(texts)
        if kind in STREAM_NAMES:
            name = STREAM_NAMES[OutputKind(kind)]
            ending = "" if partial else "\n"
            self.outputs.append({"output_type": "stream", "name": name, "text": text + ending})
        elif kind == OutputKind.ERROR:
            self.last_error = (len(self.outputs), self.in_tail and bool(self.start))
            name, _, value = texts[-1].partition(": ")
            self.outputs.append(
                {"output_type": "error", "ename": name, "evalue": value, "traceback": texts}
            )
        elif kind == OutputKind.RESULT:
            self.outputs.append(self.result({"text/plain": text}, {}))
        else:  # a display's text, or a bundle's whose start was left out
            data = {"text/plain": text}
            self.outputs.append({"output_type": "display_data", "data": data, "metadata": {}})

    def result(self, data: dict[str, object], metadata: dict[str, object]) -> Output:
        """Return an execute_result output numbered as its execution."""
        return {
            "output_type": "execute_result",
            "execution_count": self.record.number,
            "data": data,
            "metadata": metadata,
        }

    def bundle(self, entry: RichEntry) -> Output:
        """Return a rich output's bundle as the kernel sent it, every MIME type kept."""
        bundle = self.record.rich.bundle(entry["index"])
        if entry["result"]:
            return self.result(bundle["data"], bundle["metadata"])
        return {
            "output_type": "display_data",
            "data": bundle["data"],
            "metadata": bundle["metadata"],
        }

    def omit(self, omission: Omission, ref: str) -> None:
        """Put the line that stands for the omitted middle, and read the tail next."""
        self.close()
        text = omitted_text(self.record.number, omission.first, omission.last, omission.total, ref)
        left_out = {"first": omission.first, "last": omission.last, "total": omission.total}
        self.outputs.append(
            {
                "output_type": "display_data",
                "data": {"text/plain": text},
                "metadata": {"loomgate": {"omitted": left_out}},
            }
        )
        self.in_tail = True
        self.rich = {line: entries for line, entries in self.rich.items() if line > omission.last}

    def finish(self, whole: bool) -> list[Output]:
        """Close the last output, add bundles stored after the last line, and give the last
        error the name, value and coloured traceback the record kept (`whole`: nothing of it
        was left out)."""
        self.close()
        for line in sorted(self.rich):
            self.outputs.extend(self.bundle(entry) for entry in self.rich[line])
        error = self.record.meta["error"]
        if self.last_error is not None and error is not None:
            index, begun_in_tail = self.last_error
            output = self.outputs[index]
            output["ename"], output["evalue"] = error["name"], error["value"]
            coloured = self.record.coloured_traceback() if whole or begun_in_tail else None
            if coloured is not None and len(coloured) < COLOURED_TRACEBACK_CHARS:
                output["traceback"] = coloured.split("\n")
        return self.outputs


def cell_outputs(record: ExecutionRecord, max_lines: int, ref: str) -> CellOutputs:
    """Return `record`'s outputs, at most `max_lines` lines of them (its head and tail) plus
    the line naming `loomgate output … --kernel ref` for the rest."""
    log = record.log("combined")
    total = log.total
    builder = _Builder(record)
    if total <= max_lines:
        builder.feed(log.read(0, total))
        return CellOutputs(builder.finish(whole=True), total, None)
    head = max_lines // 2
    tail = max_lines - head
    omission = Omission(first=head + 1, last=total - tail, total=total)
    builder.feed(log.read(0, head))
    builder.omit(omission, ref)
    builder.feed(log.read(total - tail, total))
    return CellOutputs(builder.finish(whole=False), total, omission)
