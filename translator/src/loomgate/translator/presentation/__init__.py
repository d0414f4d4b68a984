"""What a model (or a person) reads: records, reads, searches and kernels as concise text.

The one place where the gateway's wire shapes become words. Where the model and the person need
different words for one fact (a busy kernel, say), both are written here, side by side.
"""

from __future__ import annotations

from loomgate.translator.jupyter_enable import ENABLE_HINT
from loomgate.translator.presentation.audience import (
    Audience,
    read_call,
)
from loomgate.translator.presentation.cells import (
    RUNNING_TAIL,
    cell_header,
    cell_text,
    clipped_suffix,
    format_elapsed,
    gap_note,
    omission_line,
    output_line,
    render_cell,
    render_running,
    state_note,
    unstored_note,
)
from loomgate.translator.presentation.kernels import (
    attached_note,
    installed_note,
    kernel_label,
    render_execution_status,
    render_jupyter_server,
    render_kernel,
    render_kernels,
    render_prewarmed,
    render_setup,
    render_unattached,
    replaced_note,
    serving,
    started_note,
)
from loomgate.translator.presentation.reads import (
    read_on,
    render_read,
    render_search,
)
from loomgate.translator.presentation.refusals import (
    STATE_PHRASES,
    busy_refusal,
    dismissed_dialog_note,
    no_notebook_kernel,
    not_waiting_for_input,
    several_kernels,
    stop_needs_force,
)

__all__ = [
    "ENABLE_HINT",
    "RUNNING_TAIL",
    "STATE_PHRASES",
    "Audience",
    "attached_note",
    "busy_refusal",
    "cell_header",
    "cell_text",
    "clipped_suffix",
    "dismissed_dialog_note",
    "format_elapsed",
    "gap_note",
    "installed_note",
    "kernel_label",
    "no_notebook_kernel",
    "not_waiting_for_input",
    "omission_line",
    "output_line",
    "read_call",
    "read_on",
    "render_cell",
    "render_execution_status",
    "render_jupyter_server",
    "render_kernel",
    "render_kernels",
    "render_prewarmed",
    "render_read",
    "render_running",
    "render_search",
    "render_setup",
    "render_unattached",
    "replaced_note",
    "serving",
    "several_kernels",
    "started_note",
    "state_note",
    "stop_needs_force",
    "unstored_note",
]
