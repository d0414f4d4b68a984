"""`loomgate export`: a kernel's executions as a Jupyter notebook, on stdout or in a file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from loomgate.translator.cli.kernel_commands import existing_kernel
from loomgate.translator.client.gateway import GatewayClient
from loomgate.translator.notebook_file import NotebookPathRefused, notebook_text, save_notebook
from loomgate.translator.presentation import notebook_path_refusal, saved_note


async def export_notebook(client: GatewayClient, args: argparse.Namespace) -> int:
    """Write the notebook to `--output` (saying so on stderr), else to stdout; 2 when the file
    may not be written."""
    kernel = await existing_kernel(client, args.kernel)
    notebook = await client.notebook(
        kernel,
        executions=args.executions,
        source=args.source,
        client=args.ran_by,
        max_lines=args.max_lines,
    )
    if args.output is None or args.output == "-":
        sys.stdout.write(notebook_text(notebook))
        return 0
    try:
        save_notebook(Path(args.output), notebook)
    except NotebookPathRefused as refused:
        print(f"loomgate: {notebook_path_refusal(refused, 'person')}", file=sys.stderr)
        return 2
    print(saved_note(notebook, args.output), file=sys.stderr)
    return 0
