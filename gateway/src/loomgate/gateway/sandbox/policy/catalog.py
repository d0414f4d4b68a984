"""The gateway's sandbox profiles: which one a new kernel gets, and who may ask for which."""

from __future__ import annotations

from pathlib import Path

from jupyter_core.paths import jupyter_data_dir, jupyter_runtime_dir

from loomgate.gateway.errors import BadRequest, Forbidden, Unavailable
from loomgate.gateway.sandbox.policy.config import (
    SandboxConfig,
    SandboxConfigError,
    UnknownProfile,
    load_sandbox_config,
)
from loomgate.gateway.sandbox.policy.installation import installation_roots
from loomgate.gateway.sandbox.policy.profiles import SandboxRules, at_least_as_strict
from loomgate.gateway.sandbox.policy.state_dirs import known_state_dirs, note_state_dir
from loomgate.shared import paths
from loomgate.shared.echo import echo


class SandboxCatalog:
    """The person's sandbox.toml (read again when it changes) over the built-in profiles, and the
    directories every confined kernel is kept out of (the state dir, Jupyter's runtime dirs)."""

    def __init__(self, state_dir: Path, *, config_file: Path | None = None) -> None:
        """`state_dir`: where this gateway keeps its records (in someone's Jupyter server, a
        directory inside loomgate's state dir, which is hidden whole)."""
        self.config_file = config_file or paths.config_dir() / "sandbox.toml"
        # The gateway points JUPYTER_RUNTIME_DIR at its own; the person's servers and kernels
        # keep their tokens and keys in the one jupyter_core names without it.
        runtime_dirs = {
            Path(jupyter_runtime_dir()),
            Path(jupyter_data_dir()) / "runtime",
            state_dir / "runtime",
        }
        # The config dir too: gateways.toml may hold tokens.
        self._private = {state_dir, paths.state_dir(), paths.config_dir(), *runtime_dirs}
        note_state_dir(state_dir)
        self._config: SandboxConfig | None = None
        self._stamp: tuple[float, int] | None = None

    @property
    def private(self) -> tuple[Path, ...]:
        """Return the dirs every confined kernel is kept out of: this gateway's, Jupyter's
        runtime dirs, and every other gateway's state dir noted so far (state_dirs.py)."""
        return tuple(sorted({*self._private, *known_state_dirs()}))

    def config(self) -> SandboxConfig:
        """Return the profiles as the file says now (Unavailable naming file and line if the
        file is malformed: no kernel starts under a profile it may have meant otherwise)."""
        try:
            stat = self.config_file.stat()
            stamp: tuple[float, int] | None = (stat.st_mtime, stat.st_size)
        except FileNotFoundError:
            stamp = None
        if self._config is None or stamp != self._stamp:
            try:
                self._config = load_sandbox_config(self.config_file)
            except SandboxConfigError as e:
                self._config = None
                raise Unavailable(f"{e}; fix the file to start kernels") from None
            self._stamp = stamp
        return self._config

    def default_name(self) -> str | None:
        """Return the default profile's name (None while the file is malformed)."""
        try:
            return self.config().default
        except Unavailable:
            return None

    def names(self) -> list[str]:
        """Return every profile's name (none while the file is malformed)."""
        try:
            return sorted(self.config().profiles)
        except Unavailable:
            return []

    def choose(self, name: str | None, *, stricter_only: bool, cwd: Path) -> SandboxRules:
        """Return the rules a new kernel working in `cwd` runs under: profile `name`, else the
        default; with `stricter_only` (a model's request), only one at least as strict as the
        default (Forbidden otherwise)."""
        config = self.config()
        if name is None:
            return self.rules(config.default, cwd)
        if name not in config.profiles:
            known = ", ".join(sorted(config.profiles))
            raise BadRequest(f"no sandbox profile named {echo(name)}; known: {known}")
        chosen = self.rules(name, cwd)
        if stricter_only and not at_least_as_strict(chosen, self.rules(config.default, cwd)):
            raise Forbidden(
                f"the sandbox profile {name} is looser than this gateway's default "
                f"({config.default})",
                profile=name,
                default=config.default,
            )
        return chosen

    def for_kernel(
        self, name: str | None, stricter_only: bool, cwd: str | None, *, upstream: str | None
    ) -> SandboxRules | None:
        """Return the rules a new kernel working in `cwd` runs under (`choose`); None for a
        kernel on an upstream, which starts its own kernels: a profile asked for it is refused,
        none excepted."""
        if upstream:
            if name not in (None, "none"):
                raise Unavailable(
                    f"kernels on the upstream {upstream} run as the upstream starts them; "
                    "loomgate cannot sandbox them (choose the profile none, or run a local "
                    "gateway)"
                )
            return None
        return self.choose(name, stricter_only=stricter_only, cwd=launch_cwd(cwd))

    def open_to_agents(self, rules: SandboxRules | None, cwd: Path) -> bool:
        """Return whether a model may use a kernel under `rules` working in `cwd` by its profile
        alone: it is at least as strict as the default (one loomgate does not confine never is;
        nor is one where the default cannot hold)."""
        if rules is None:
            return False
        try:
            default = self.rules(self.config().default, cwd)
        except (BadRequest, Unavailable):
            return False
        return at_least_as_strict(rules, default)

    def jupyter_api_open_to_agents(self, rules: SandboxRules | None, cwd: Path) -> bool:
        """Return whether a model may use a kernel started through the stock Jupyter API:
        sandbox.toml opens them all (`jupyter_api_open_to_agents`), or its profile does."""
        try:
            if self.config().jupyter_api_open_to_agents:
                return True
        except Unavailable:
            return False
        return self.open_to_agents(rules, cwd)

    def for_jupyter_api(self, cwd: Path) -> SandboxRules:
        """Return the rules for a kernel started through the stock Jupyter API (`jupyter_api`)."""
        return self.rules(self.config().jupyter_api, cwd)

    def rules(self, name: str, cwd: Path) -> SandboxRules:
        """Return profile `name` made concrete for a kernel working in `cwd`."""
        try:
            profile = self.config().profile(name)
        except UnknownProfile as e:
            raise BadRequest(str(e)) from None
        try:
            return profile.rules(
                cwd=cwd, home=Path.home(), private=self.private, environment=installation_roots()
            )
        except ValueError as e:
            raise BadRequest(f"the sandbox profile {name} cannot hold for {cwd}: {e}") from None


def launch_cwd(cwd: str | None) -> Path:
    """Return the directory a kernel starts in: the one asked for, else the gateway's own."""
    return Path(cwd) if cwd else Path.cwd()
