"""Scale out on one machine, without docker compose (issue 22.4): one ``chroma run`` server, N app processes on it,
and nginx in front with sticky sessions; optionally measured with the 20-session load test through the proxy.

    python scripts/scale_out.py --apps 2                     # serve on http://127.0.0.1:8080/ until Ctrl-C
    python scripts/scale_out.py --measure 1,2 --out runs/scale_out.json   # the README's numbers

Every piece is a plain process on 127.0.0.1: ``chroma run --path WORK/chroma`` (the one store: corpora, labeled
turns and vectors, see ``retrieval.corpora``), ``python app.py`` per app with ``CHROMA_HOST`` pointing at it (each
its own port, DATA_DIR and temp folder), and ``nginx -c WORK/nginx.conf`` (Debian's ``apt-get install -y nginx``)
as the reverse proxy. Gradio keeps a session's queue in the process that served its page, so nginx pins each
browser (and each ``gradio_client`` session, which keeps the first response's cookies) to one app with a cookie
it sets on the first response (``inspector_backend``); a new visitor is spread by ``split_clients``.

``--measure`` runs ``tests/test_load.py::test_twenty_concurrent_sessions_match_their_lone_runs`` with
``LOAD_URL`` set to the proxy, once per app count, after a warm-up turn on each app (its 20 sessions repeat 4
turns, and its lone runs warm the per-turn caches of the app they land on), then a burst of 20 new sessions with
20 turns never asked before (each pays its full model work), and writes both with the machine, its load average
and the date.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.app_server import SHIPPED, AppServer, free_port  # noqa: E402
from tests.chroma_server import ChromaServer  # noqa: E402

# The load test compares each concurrent answer with the same turn run alone, so a stage must not time out under
# load (a correct but nondeterministic degradation); the same patient budgets as the test's own app.
BUDGETS = {"BM25_TIMEOUT_MS": "120000", "DENSE_TIMEOUT_MS": "120000", "RERANK_TIMEOUT_MS": "120000"}

NGINX_CONF = """
worker_processes 1;
pid {work}/nginx.pid;
error_log {work}/nginx-error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {work}/nginx-body;
    proxy_temp_path {work}/nginx-proxy;
    fastcgi_temp_path {work}/nginx-fastcgi;
    uwsgi_temp_path {work}/nginx-uwsgi;
    scgi_temp_path {work}/nginx-scgi;
    map $http_upgrade $connection_upgrade {{ default upgrade; '' close; }}
{upstreams}
    # a new visitor gets an app at random; the cookie keeps it there (Gradio's queue lives in one process)
    split_clients "${{remote_addr}}${{remote_port}}${{msec}}" $fresh {{
{split}
    }}
    map $cookie_inspector_backend $backend {{
{known}
        default $fresh;
    }}
    server {{
        listen 127.0.0.1:{port};
        client_max_body_size 60m;
        location / {{
            proxy_pass http://$backend;
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_set_header Host $host;
            # the address nginx saw, replacing whatever the client sent: appending ($proxy_add_x_forwarded_for)
            # would pass a forged first address on, and the apps key their per-address bounds on this header
            proxy_set_header X-Forwarded-For $remote_addr;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_buffering off;
            proxy_cache off;
            proxy_read_timeout 3600s;
            add_header Set-Cookie "inspector_backend=$backend; Path=/; HttpOnly; SameSite=Lax" always;
        }}
    }}
}}
"""


def nginx_conf(work: Path, port: int, app_ports: list[int]) -> str:
    names = [f"app{i + 1}" for i in range(len(app_ports))]
    upstreams = "\n".join(f"    upstream {n} {{ server 127.0.0.1:{p}; }}" for n, p in zip(names, app_ports))
    share = 100.0 / len(names)
    split = "\n".join(f"        {share:.2f}% {n};" for n in names[:-1]) + f"\n        * {names[-1]};"
    known = "\n".join(f"        {n} {n};" for n in names)
    return NGINX_CONF.format(work=work, port=port, upstreams=upstreams, split=split, known=known)


class Proxy:
    """nginx in the foreground (``daemon off``) with the generated config; stopped with its process."""

    def __init__(self, work: Path, port: int, app_ports: list[int]) -> None:
        self.work, self.port = work, port
        self.conf = work / "nginx.conf"
        self.conf.write_text(nginx_conf(work, port, app_ports), encoding="utf-8")
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 30.0) -> Proxy:
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        if not Path(nginx).exists():
            raise SystemExit("nginx is not installed: `apt-get install -y nginx` (Debian's package).")
        self.proc = subprocess.Popen(
            [nginx, "-c", str(self.conf), "-g", "daemon off;"],
            stdout=subprocess.DEVNULL,
            stderr=(self.work / "nginx.log").open("w"),
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nginx exited: {(self.work / 'nginx.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/", timeout=5) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.3)
        raise RuntimeError(f"nginx did not answer on 127.0.0.1:{self.port} within {timeout:.0f} s")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


class Deployment:
    """One Chroma server, ``apps`` app processes on it, nginx in front."""

    def __init__(self, work: Path, apps: int, port: int, patient: bool = False) -> None:
        self.work, self.n, self.port = work, apps, port
        self.extra = dict(BUDGETS) if patient else {}
        self.chroma = ChromaServer(work / "chroma")
        self.apps: list[AppServer] = []
        self.proxy: Proxy | None = None

    def start(self) -> Deployment:
        self.chroma.start()
        print(f"chroma run: 127.0.0.1:{self.chroma.port} (store {self.chroma.path})", flush=True)
        for i in range(self.n):  # one after the other: the first embeds the shipped cards into the server
            folder = self.work / f"app{i + 1}"
            (folder / "tmp").mkdir(parents=True, exist_ok=True)
            # the same settings in every app (a turn's export records them); only the port and temp folder differ
            env = {
                "CHROMA_HOST": "127.0.0.1",
                "CHROMA_PORT": str(self.chroma.port),
                "DATA_DIR": str(self.work / "data"),
                "CHROMA_PATH": str(self.work / "unused-local-chroma"),
                "TMPDIR": str(folder / "tmp"),
                "TRUSTED_PROXIES": "127.0.0.1",  # nginx, on the loopback: the one source of X-Forwarded-For
                **self.extra,
            }
            app = AppServer(folder, SHIPPED, extra_env=env).start(timeout=900)
            self.apps.append(app)
            print(f"app {i + 1}: {app.url} (log {app.log_path})", flush=True)
        self.proxy = Proxy(self.work, self.port, [a.port for a in self.apps]).start()
        print(f"nginx: http://127.0.0.1:{self.port}/ -> {', '.join(a.url for a in self.apps)}", flush=True)
        return self

    def warm(self) -> None:
        """One turn on each app directly, so no measured turn pays a model load."""
        from gradio_client import Client

        for app in self.apps:
            Client(app.url, verbose=False).predict(query="warm-up turn", api_name="/run_turn")

    def stop(self) -> None:
        if self.proxy:
            self.proxy.stop()
        for app in self.apps:
            app.stop()
        self.chroma.stop()


def burst(url: str, turns: list[str]) -> dict:
    """One new session per turn, all released together through the proxy: turns never asked before, so each pays
    its full model work (the load test's turns repeat, and its lone runs warm the per-turn caches)."""
    import threading

    from gradio_client import Client

    clients = [Client(url, verbose=False) for _ in turns]
    barrier = threading.Barrier(len(turns))
    latency = [0.0] * len(turns)
    errors: list[str] = []

    def one(i: int) -> None:
        try:
            barrier.wait(timeout=120)
            start = time.perf_counter()
            clients[i].predict(query=turns[i], api_name="/run_turn")
            latency[i] = time.perf_counter() - start
        except Exception as exc:
            errors.append(f"{turns[i]!r}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(turns))]
    wall = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(1800)
    wall = time.perf_counter() - wall
    if errors:
        raise RuntimeError("; ".join(errors[:3]))
    ordered = sorted(latency)
    pick = lambda q: ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]  # noqa: E731
    backends = {c.cookies.get("inspector_backend") for c in clients}
    return {
        "n": len(turns),
        "p50_s": round(pick(50), 3),
        "p95_s": round(pick(95), 3),
        "max_s": round(ordered[-1], 3),
        "wall_s": round(wall, 3),
        "turns_per_s": round(len(turns) / wall, 3),
        "backends_used": len(backends),
    }


def fresh_turns(n: int) -> list[str]:
    """``n`` labeled turns of the shipped set that the load test does not ask (it takes the first of each category)."""
    rows = [
        json.loads(line)
        for line in SHIPPED.with_name("queries.jsonl").read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    firsts = {
        next((r["text"] for r in rows if r.get("category") == c), None) for c in {r.get("category") for r in rows}
    }
    return [r["text"] for r in rows if r["text"] not in firsts][:n]


def measure(counts: list[int], port: int, keep: Path | None) -> list[dict]:
    rows = []
    for n in counts:
        work = Path(tempfile.mkdtemp(prefix=f"scale-out-{n}-", dir=keep))
        dep = Deployment(work, n, port, patient=True)
        try:
            dep.start()
            dep.warm()
            report = work / "load.json"
            env = {**os.environ, "LOAD_URL": f"http://127.0.0.1:{port}/", "LOAD_REPORT": str(report)}
            load_before = os.getloadavg()
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pytest",
                    "-q",
                    "-s",
                    "-p",
                    "no:cacheprovider",
                    "tests/test_load.py::test_twenty_concurrent_sessions_match_their_lone_runs",
                ],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=3600,
            )
            if proc.returncode != 0:
                raise RuntimeError(f"the load test failed through the proxy with {n} app(s):\n{proc.stdout[-4000:]}")
            load_mid = os.getloadavg()
            cold = burst(f"http://127.0.0.1:{port}/", fresh_turns(20))
            row = {
                "apps": n,
                "load_test": json.loads(report.read_text()),
                "fresh_turns": cold,
                "load_avg_before": [round(x, 2) for x in load_before],
                "load_avg_between": [round(x, 2) for x in load_mid],
                "load_avg_after": [round(x, 2) for x in os.getloadavg()],
            }
            print(json.dumps(row), flush=True)
            rows.append(row)
        finally:
            dep.stop()
            if keep is None:
                shutil.rmtree(work, ignore_errors=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--apps", type=int, default=2, help="app processes behind the proxy (default 2)")
    parser.add_argument("--port", type=int, default=8080, help="the proxy's port on 127.0.0.1 (default 8080)")
    parser.add_argument(
        "--work",
        type=Path,
        help="folder for the store, the apps' data and nginx's files (default: a new temporary folder)",
    )
    parser.add_argument("--measure", help="comma-separated app counts to measure with the load test, e.g. 1,2")
    parser.add_argument("--out", type=Path, help="with --measure: write the results as JSON here")
    args = parser.parse_args(argv)
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.measure:
        port = args.port if args.port != 8080 else free_port()
        rows = measure([int(x) for x in args.measure.split(",")], port, args.work)
        result = {
            "command": "python scripts/scale_out.py --measure " + args.measure,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}",
            "runs": rows,
        }
        text = json.dumps(result, indent=2)
        print(text)
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(text + "\n", encoding="utf-8")
        return 0
    work = args.work or Path(tempfile.mkdtemp(prefix="scale-out-"))
    work.mkdir(parents=True, exist_ok=True)
    dep = Deployment(work, args.apps, args.port)
    try:
        dep.start()
        print("serving; Ctrl-C stops the proxy, the apps and the Chroma server", flush=True)
        while all(a.proc and a.proc.poll() is None for a in dep.apps):
            time.sleep(1)
        print("an app exited; stopping", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        dep.stop()


if __name__ == "__main__":
    sys.exit(main())
