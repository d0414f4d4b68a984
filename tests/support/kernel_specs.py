"""The kernels the suite runs its kernel scenarios on, installed from the package index as test
dependencies: each one's kernel spec, what it says of itself, and its language's cells for each
scenario. A new kernel is one row of `KERNELS` (and, where its package ships no kernel spec, a
spec in `write_kernel_specs`)."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

# Each prints its argument on a line of its own; `{n}` in COUNT is how many lines it prints.
PYTHON = "python"


@dataclass(frozen=True)
class KernelUnderTest:
    """One kernel: its spec's name, language and implementation (its kernel_info's), and the
    cells each scenario runs in its language."""

    spec: str
    language: str
    implementation: str
    echo: str  # prints `{text}` on a line of its own
    count: str  # prints 1 to {n}, a line each
    remember: str  # sets the variable `kept` to 42
    recall: str  # prints the variable `kept`
    fail: str  # ends in an error
    error_name: str  # the error's name as the kernel gives it ("" when it names none)
    sleep: str  # runs for a minute unless interrupted
    html: str  # displays HTML (the words "Dog, not a cat.")
    image: str  # displays `{png}` (a PNG, base64) as an image
    ask: str | None  # asks for input with the prompt "name? " and prints "hi " + the answer
    interrupts: bool  # an interrupt ends a running cell and the kernel lives on
    file_extension: str
    # Its messages are numbered (jupyter_client's Session): a run its publisher dropped is told.
    numbered: bool = False

    def __str__(self) -> str:
        return self.spec


IPYTHON_CELLS = {
    "echo": "print({text!r})",
    "count": "for i in range(1, {n} + 1): print(i)",
    "remember": "kept = 42",
    "recall": "print(kept)",
    "fail": "1 / 0",
    "error_name": "ZeroDivisionError",
    "sleep": "import time; time.sleep(60)",
    "html": "from IPython.display import HTML, display; display(HTML('<b>Dog</b>, not a cat.'))",
    "image": (
        "import base64; from IPython.display import Image, display; "
        "display(Image(base64.b64decode('{png}')))"
    ),
    "ask": "print('hi ' + input('name? '))",
    "file_extension": ".py",
}

KERNELS = (
    KernelUnderTest(
        spec="python3",
        language=PYTHON,
        implementation="ipython",
        interrupts=True,
        numbered=True,
        **IPYTHON_CELLS,
    ),
    KernelUnderTest(
        spec="py",
        language=PYTHON,
        implementation="ipymini",
        interrupts=True,
        **IPYTHON_CELLS,
    ),
    KernelUnderTest(
        spec="xpython",
        language=PYTHON,
        implementation="xeus-python",
        interrupts=False,
        **IPYTHON_CELLS,
    ),
    KernelUnderTest(
        spec="bash",
        language="bash",
        implementation="bash_kernel",
        echo="echo {text}",
        count="seq 1 {n}",
        remember="kept=42",
        recall="echo $kept",
        fail="ls /no/such/dir",
        error_name="",
        sleep="sleep 60",
        html='echo "<b>Dog</b>, not a cat." | displayHTML',
        image="echo {png} | base64 -d | display",
        ask=None,
        interrupts=True,
        file_extension=".sh",
        numbered=True,
    ),
    KernelUnderTest(
        spec="deno",
        language="typescript",
        implementation="Deno kernel",
        echo="console.log({text!r})",
        count="for (let i = 1; i <= {n}; i++) console.log(i)",
        remember="var kept = 42",
        recall="console.log(kept)",
        fail="throw new Error('boom')",
        error_name="Error",
        sleep="await new Promise((resolve) => setTimeout(resolve, 60000))",
        html="Deno.jupyter.html`<b>Dog</b>, not a cat.`",
        image='Deno.jupyter.display({{"image/png": "{png}"}}, {{ raw: true }})',
        ask="console.log('hi ' + prompt('name? '))",
        interrupts=False,
        file_extension=".ts",
    ),
)
BY_SPEC = {kernel.spec: kernel for kernel in KERNELS}


def write_kernel_specs(data_dir: Path, *, python_kernels: bool = False) -> Path:
    """Write the kernel specs whose packages install none (bash_kernel's and Deno's are written
    by commands of their own) under `data_dir`, and with `python_kernels` ipymini's and
    xeus-python's on this interpreter (for a server of another environment: Enterprise
    Gateway's); return it, for JUPYTER_PATH."""
    import deno

    python = sys.executable
    specs: dict[str, dict[str, object]] = {
        "bash": {
            "argv": [python, "-m", "bash_kernel", "-f", "{connection_file}"],
            "display_name": "Bash",
            "language": "bash",
            "env": {"PS1": "$"},
        },
        "deno": {
            "argv": [deno.find_deno_bin(), "jupyter", "--kernel", "--conn", "{connection_file}"],
            "display_name": "Deno",
            "language": "typescript",
        },
    }
    if python_kernels:
        specs["py"] = {
            "argv": [python, "-Xfrozen_modules=off", "-m", "ipymini", "-f", "{connection_file}"],
            "display_name": "IPyMini",
            "language": "python",
            "interrupt_mode": "signal",
        }
        specs["xpython"] = {
            "argv": [python, "-m", "xpython_launcher", "-f", "{connection_file}"],
            "display_name": "Python (XPython)",
            "language": "python",
        }
    for name, spec in specs.items():
        directory = data_dir / "kernels" / name
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "kernel.json").write_text(json.dumps(spec))
    return data_dir
