# ~/.config/loomgate/inspectors.py: cell inspectors, run before every cell (sent as source).
# Define `inspect` and/or a list `inspectors`. Each takes the cell's AST (one parameter) or the
# AST and the source (two). Return a string to show a note before the output; raise RuleBlock
# (provided by loomgate) to block the cell with that message; any other exception only warns.
import ast


def inspect(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "rmtree":
            raise RuleBlock("shutil.rmtree is blocked here; delete files one by one")  # noqa: F821


def long_loops(tree, source):
    if "while True" in source:
        return "this cell loops for ever unless it breaks; run_cell returns while it runs"
    return None


inspectors = [long_loops]
