"""The paths no confined kernel can read, under any profile: keys, credentials, password
stores, the display's cookies, browser profiles, histories and the sockets through which
something outside would run code for it."""

from __future__ import annotations

__all__ = ["ALWAYS_HIDDEN"]

# Never readable under any profile but `none`; a profile cannot take one out. Home-relative
# ones start with `~/`. A path that does not exist here is kept: it may appear later, and on
# the other OS (the macOS ones on Linux) it costs nothing.
ALWAYS_HIDDEN: tuple[str, ...] = (
    # keys and cloud, cluster, registry and forge credentials
    "~/.ssh",
    "~/.gnupg",
    "~/.aws",
    "~/.azure",
    "~/.config/gcloud",
    "~/.kube",
    "~/.docker",
    "~/.netrc",
    "~/.git-credentials",
    "~/.config/git/credentials",
    "~/.config/gh",
    "~/.pypirc",
    # package registries', databases' and tools' credentials
    "~/.npmrc",
    "~/.yarnrc.yml",
    "~/.cargo/credentials",
    "~/.cargo/credentials.toml",
    "~/.gem/credentials",
    "~/.m2/settings.xml",
    "~/.gradle/gradle.properties",
    "~/.pgpass",
    "~/.my.cnf",
    "~/.vault-token",
    "~/.terraform.d/credentials.tfrc.json",
    "~/.cache/huggingface/token",
    "~/.huggingface/token",
    "~/.config/rclone/rclone.conf",
    "~/.s3cfg",
    "~/.boto",
    # the shells' and REPLs' histories, where pasted tokens live
    "~/.bash_history",
    "~/.zsh_history",
    "~/.python_history",
    "~/.psql_history",
    "~/.local/share/fish/fish_history",
    # the agents' own logins (a kernel could act as the person's assistant)
    "~/.claude/.credentials.json",
    "~/.codex/auth.json",
    # password stores and keyrings
    "~/.password-store",
    "~/.local/share/keyrings",
    "~/.gnome2/keyrings",
    "~/.local/share/kwalletd",
    "~/Library/Keychains",
    # the display's cookies (a client of the person's display can type into their windows)
    "~/.Xauthority",
    "~/.ICEauthority",
    # browser profiles (cookies, saved passwords, sessions)
    "~/.mozilla",
    "~/.config/google-chrome",
    "~/.config/chromium",
    "~/.config/BraveSoftware",
    "~/.config/microsoft-edge",
    "~/snap/firefox",
    "~/snap/chromium",
    "~/Library/Application Support/Google/Chrome",
    "~/Library/Application Support/Chromium",
    "~/Library/Application Support/BraveSoftware",
    "~/Library/Application Support/Microsoft Edge",
    "~/Library/Application Support/Firefox",
    "~/Library/Safari",
    "~/Library/Cookies",
    # system sockets through which something outside would run code for the kernel: the system
    # bus, docker, containerd, podman and systemd's own socket (the session's runtime dir, with
    # its D-Bus and systemd user sockets, is added by session_runtime_dirs())
    "/run/dbus",
    "/var/run/dbus",
    "/run/docker.sock",
    "/var/run/docker.sock",
    "/run/containerd",
    "/run/podman",
    "/run/systemd/private",
)
