"""The requests loomgate itself sends a kernel: a cell, the silent counter seed, and the silent
move of a prewarmed kernel into its working directory and environment (the questions a take
back asks are residency/unseen_cells.py's)."""

from __future__ import annotations

from typing import Any

# Run silently after a restart so that In[N], Out[N], _N and "Cell In[N]" continue the numbering.
SEED_CODE = (
    "(lambda ip, n: [setattr(ip, 'execution_count', n)] + [h.extend([''] * (n - len(h)))"
    " for h in (ip.history_manager.input_hist_parsed, ip.history_manager.input_hist_raw)])"
    "(get_ipython(), {n})"
)


def cell_content(code: str) -> dict[str, Any]:
    """Return the execute_request content of a cell submitted through loomgate."""
    return {
        "code": code,
        "silent": False,
        "store_history": True,
        "user_expressions": {},
        "allow_stdin": True,
        "stop_on_error": False,
    }


def seed_content(next_number: int) -> dict[str, Any]:
    """Return a silent execute_request that makes IPython's next cell number `next_number`."""
    code = SEED_CODE.format(n=next_number)
    return {"code": code, "silent": True, "store_history": False, "allow_stdin": False}


def claim_content(cwd: str | None, env: dict[str, str]) -> dict[str, Any]:
    """Return a silent execute_request that moves a prewarmed Python kernel into `cwd` (when
    given) and lays `env` over its environment, as if it had been started so."""
    lines = ["import os as __loomgate_os"]
    if cwd is not None:
        lines.append(f"__loomgate_os.chdir({cwd!r})")
    lines += [f"__loomgate_os.environ.update({env!r})", "del __loomgate_os"]
    return {"code": "\n".join(lines), "silent": True, "store_history": False, "allow_stdin": False}
