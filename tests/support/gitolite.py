"""A real git server with per-machine rights for the tests: gitolite (Debian's gitolite3)
behind an sshd of its own on 127.0.0.1, everything under one temporary directory the
test owns - gitolite's HOME (its ~/.gitolite and ~/repositories), the keys, the sshd
config and host key. Nothing outside it is touched but /run/sshd, the empty directory
an sshd started as root needs for privilege separation (made when missing).

No system user is needed: sshd logs in the user running the tests (its own
authorized-keys file is gitolite's, whose every line forces `gitolite-shell <name>`), and
`SetEnv HOME=...` points gitolite at the temporary HOME. Keys are named after the
gitolite user they log in as. The server is a child with a bounded lifetime (coreutils
`timeout`, a parent-death signal) and is stopped when the context ends.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support.remotes import _die_with_parent, _free_port
from tests.support.transports import _wait_listening

SSHD = "/usr/sbin/sshd"
LIFETIME = 1800  # seconds


def missing() -> str | None:
    """Why a gitolite server cannot run here (None when it can)."""
    for tool in ("gitolite", "ssh", "ssh-keygen"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian: gitolite3, openssh-client; .ci/run installs them)"
    if not os.access(SSHD, os.X_OK):
        return f"{SSHD} is not installed (Debian: openssh-server; .ci/run installs it)"
    return None


@dataclass
class Gitolite:
    root: Path

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def repositories(self) -> Path:
        return self.home / "repositories"

    @property
    def keys(self) -> Path:
        return self.root / "keys"

    port: int = 0
    login: str = ""

    def run(self, *args: str) -> str:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        env["HOME"] = str(self.home)
        proc = subprocess.run(["gitolite", *args], capture_output=True, text=True, env=env, cwd=self.home)
        if proc.returncode != 0:
            raise RuntimeError(f"gitolite {' '.join(args)}: exit {proc.returncode}: {proc.stderr.strip()}")
        return proc.stdout

    def key(self, name: str) -> Path:
        """The private key of gitolite user `name` (made on first use)."""
        self.keys.mkdir(parents=True, exist_ok=True)
        path = self.keys / name
        if not path.exists():
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(path)], check=True)
        return path

    def setup(self, admin: str = "admin") -> None:
        """`gitolite setup` with `admin`'s key: gitolite's HOME, its admin repository."""
        self.home.mkdir(parents=True, exist_ok=True)
        self.run("setup", "-pk", str(self.key(admin)) + ".pub")

    def configure(self, conf: str, users: list[str]) -> None:
        """Install `conf` as gitolite.conf and the keys of `users`, then compile (`gitolite
        setup` again: it also adopts repositories already under ~/repositories and gives
        them gitolite's update hook) - the admin's offline way, without the admin repo."""
        base = self.home / ".gitolite"
        for user in users:
            shutil.copy(str(self.key(user)) + ".pub", base / "keydir" / f"{user}.pub")
        (base / "conf" / "gitolite.conf").write_text(conf)
        self.run("setup")

    def url(self, repo: str) -> str:
        return f"ssh://{self.login}@127.0.0.1:{self.port}/{repo}"

    def ssh_command(self, user: str) -> str:
        """An ssh command line that logs in with `user`'s key only and knows the host key
        (core.sshCommand of that machine's clone)."""
        return (f"ssh -F /dev/null -i {self.key(user)} -o IdentitiesOnly=yes -o BatchMode=yes "
                f"-o StrictHostKeyChecking=yes -o UserKnownHostsFile={self.root / 'known_hosts'} -o LogLevel=ERROR")

    @contextlib.contextmanager
    def serving(self) -> Iterator[Gitolite]:
        """sshd on a free loopback port, for as long as the context lasts."""
        host_key = self.root / "ssh_host_ed25519_key"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(host_key)], check=True)
        self.port = _free_port()
        self.login = getpass.getuser()
        (self.root / "known_hosts").write_text(
            f"[127.0.0.1]:{self.port} {' '.join(Path(str(host_key) + '.pub').read_text().split()[:2])}\n")
        config = self.root / "sshd_config"
        config.write_text("\n".join([
            f"Port {self.port}", "ListenAddress 127.0.0.1", f"HostKey {host_key}", f"PidFile {self.root / 'sshd.pid'}",
            f"AuthorizedKeysFile {self.home / '.ssh' / 'authorized_keys'}", f"AllowUsers {self.login}",
            "PermitRootLogin prohibit-password", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
            "UsePAM no", "StrictModes no", "PermitUserEnvironment no", "AllowTcpForwarding no", "X11Forwarding no",
            f"SetEnv HOME={self.home}", "MaxStartups 100:30:200", "LogLevel ERROR", ""]))
        if os.geteuid() == 0:
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        log = self.root / "sshd.log"
        with open(log, "ab") as err:
            proc = subprocess.Popen(["timeout", "--kill-after=5", str(LIFETIME), SSHD, "-D", "-e", "-f", str(config)],
                                    stdout=subprocess.DEVNULL, stderr=err, preexec_fn=_die_with_parent)
        try:
            try:
                _wait_listening(self.port, proc, "sshd")
            except RuntimeError as exc:
                raise RuntimeError(f"{exc}: {log.read_text()[-2000:]}") from None
            yield self
        finally:
            proc.terminate()  # `timeout` passes it on to sshd, which ends its sessions
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
