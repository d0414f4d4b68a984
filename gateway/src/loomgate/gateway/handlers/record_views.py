"""The wire forms endpoints answer with for records: a line, and an execution's summary with
the first and last lines of its output."""

from __future__ import annotations

from loomgate.gateway.handlers.call import OutputArgs
from loomgate.gateway.records.output_log import KIND_MASK, PART_START, Line, OutputKind, clip_line
from loomgate.gateway.records.record import ExecutionRecord
from loomgate.shared import wire

LINE_KINDS: dict[int, wire.LineKind] = {
    OutputKind.STDOUT: "stdout",
    OutputKind.STDERR: "stderr",
    OutputKind.RESULT: "result",
    OutputKind.DISPLAY: "display",
    OutputKind.ERROR: "error",
    OutputKind.RICH: "rich",
}
NO_OUTPUT = OutputArgs()


def line_json(line: Line, max_chars: int | None = None) -> wire.Line:
    """Return a line's wire form: number, text (clipped), kind, part start, partial, clipped."""
    text, clipped = clip_line(line.text, max_chars)
    kind = line.tag & KIND_MASK
    out = wire.Line(n=line.number, text=text)
    if kind:
        out["kind"] = LINE_KINDS[kind]
    if line.tag & PART_START:
        out["start"] = True
    if line.partial:
        out["partial"] = True
    if clipped:
        out["clipped"] = clipped
    return out


def execution_json(record: ExecutionRecord, output: OutputArgs = NO_OUTPUT) -> wire.Execution:
    """Return a record's summary, plus the first `head` and last `tail` combined lines."""
    data = record.summary()
    head, tail, max_chars = output
    if head or tail:
        log = record.log("combined")
        total = log.total
        if head + tail >= total:
            lines, omitted = log.read(0, total), 0
            first, last = lines, []
        else:
            first, last = log.read(0, head), log.read(total - tail, total)
            omitted = total - head - tail
        data["output"] = wire.OutputView(
            total=total,
            head=[line_json(line, max_chars) for line in first],
            tail=[line_json(line, max_chars) for line in last],
            omitted=omitted,
        )
    return data
