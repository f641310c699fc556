"""A real WebDAV-style HTTP cache server for the remote-cache tests: Debian's nginx on loopback.

nginx with its DAV module (``ngx_http_dav_module``, compiled into Debian bookworm's ``nginx``
binary, the package ``make dav`` installs) stores a PUT body at its path
(``create_full_put_path on`` makes the folders) and serves it back on GET, as a team's build
cache server would. Each :class:`NginxDav` runs one nginx in the foreground (``daemon off``,
``master_process off``: one process, the one this object started and stops by its pid) on
127.0.0.1 with a generated configuration in its own folder: its own pid file, error and access
logs, temp folders and document root, nothing under /etc or /var.

``writes`` picks how it answers PUT: ``"put"`` stores it, ``"405"`` is nginx without
``dav_methods`` (Method Not Allowed), ``"403"`` denies every method but GET/HEAD
(``limit_except``). ``token`` makes every request without ``Authorization: Bearer <token>`` a 401.
The same ``root`` can be served by several servers in turn (a writable one fills it, a read-only
one serves it).
"""
from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

CACHE_LOCATION = "/cache"
START_ATTEMPTS = 3  # a free port can be taken between probing and nginx's bind
READY_POLLS = 200  # x 0.05 s: the server answers within 10 s or the start failed
STOP_TIMEOUT_S = 10.0


class DavServerError(RuntimeError):
    """nginx is missing, lacks the DAV module, or did not start (one line)."""


def nginx_binary() -> str:
    """The nginx binary with the DAV module; DavServerError (one line) otherwise."""
    path = shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/sbin/nginx") if Path(p).is_file()), None)
    if path is None:
        raise DavServerError("nginx is not installed: `make dav` (Debian: apt-get install -y nginx)")
    version = subprocess.run([path, "-V"], capture_output=True, text=True, timeout=30)
    if "--with-http_dav_module" not in version.stderr + version.stdout:
        raise DavServerError(f"{path} was built without ngx_http_dav_module (nginx -V)")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class NginxDav:
    """One nginx serving ``root`` at ``http://127.0.0.1:<port>/cache`` (see the module docstring)."""

    def __init__(self, home: Path, root: Path, writes: str = "put", token: str | None = None,
                 binary: str | None = None) -> None:
        if writes not in ("put", "405", "403"):
            raise ValueError(f"writes must be put, 405 or 403, not {writes!r}")
        self.home = home  # config, pid, logs, temp folders
        self.root = root  # the document root: the cache's files are under root/cache/
        self.writes = writes
        self.token = token
        self.binary = binary or nginx_binary()
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{CACHE_LOCATION}"

    @property
    def files(self) -> Path:
        """Where the server keeps what was PUT under :attr:`url`."""
        return self.root / CACHE_LOCATION.lstrip("/")

    @property
    def access_log(self) -> Path:
        return self.home / "access.log"

    def requests(self) -> list[tuple[str, str, int]]:
        """(method, path, status) of every request served, in the order their connections were
        opened (nginx's connection serial number: the client opens one per request, one after
        another; the log itself is written when a request is freed, not in order)."""
        rows = []
        if self.access_log.exists():
            for line in self.access_log.read_text().splitlines():
                serial, method, path, status = line.split(" ")
                rows.append((int(serial), method, path, int(status)))
        return [(method, path, status) for _, method, path, status in sorted(rows)]

    def _config(self) -> str:
        h = self.home
        writes = {"put": "dav_methods PUT;\n        create_full_put_path on;\n"
                         "        dav_access user:rw group:r all:r;",
                  "405": "",
                  "403": "limit_except GET HEAD { deny all; }"}[self.writes]
        auth = (f'if ($http_authorization != "Bearer {self.token}") {{ return 401; }}'
                if self.token else "")
        return f"""
daemon off;
master_process off;
worker_processes 1;
pid {h}/nginx.pid;
error_log {h}/error.log warn;
events {{ worker_connections 64; }}
http {{
    log_format requests '$connection $request_method $uri $status';
    access_log {h}/access.log requests;
    client_body_temp_path {h}/tmp/body;
    proxy_temp_path {h}/tmp/proxy;
    fastcgi_temp_path {h}/tmp/fastcgi;
    uwsgi_temp_path {h}/tmp/uwsgi;
    scgi_temp_path {h}/tmp/scgi;
    client_max_body_size 0;
    default_type application/octet-stream;
    server {{
        listen 127.0.0.1:{self.port};
        root {self.root};
        location {CACHE_LOCATION}/ {{
        {auth}
        {writes}
        }}
    }}
}}
"""

    def start(self) -> NginxDav:
        """Start nginx and wait until it answers; DavServerError with its error log if not."""
        (self.home / "tmp").mkdir(parents=True, exist_ok=True)
        self.files.mkdir(parents=True, exist_ok=True)
        for _attempt in range(START_ATTEMPTS):
            self.port = _free_port()
            (self.home / "nginx.conf").write_text(self._config())
            self._proc = subprocess.Popen(
                [self.binary, "-p", str(self.home), "-e", str(self.home / "error.log"),
                 "-c", str(self.home / "nginx.conf")],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if self._wait_ready():
                return self
            self.stop()
        log = (self.home / "error.log").read_text()[-2000:] if (self.home / "error.log").exists() \
            else ""
        raise DavServerError(f"nginx did not start on 127.0.0.1 (error log: {log.strip()!r})")

    def _wait_ready(self) -> bool:
        assert self._proc is not None
        for _ in range(READY_POLLS):
            if self._proc.poll() is not None:
                return False
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1.0):
                    return True
            except OSError:
                time.sleep(0.05)
        return False

    def stop(self) -> None:
        """Stop the nginx this object started (by its pid); idempotent."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(STOP_TIMEOUT_S)

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def __enter__(self) -> NginxDav:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
