#!/usr/bin/env python3
"""hub_server.py - a local server with the Hugging Face Hub's HTTP API, for the download tests.

It serves a directory tree the way the Hub serves repositories, with the routes, headers and
error answers that `huggingface_hub` (the reference client) reads, as its sources document them:

  GET  /api/models/{owner}/{name}                      repo info of main
  GET  /api/models/{owner}/{name}/revision/{rev}       repo info: {"id", "sha", "siblings": [...]}
  GET  /api/models/{owner}/{name}/tree/{rev}[/{path}]  ?recursive=1: [{"type","path","oid","size","lfs"}]
  HEAD/GET /{owner}/{name}/resolve/{rev}/{path}        regular file: 200, ETag "<git blob sha1>";
                                                       LFS file: 302 to /cdn/..., X-Linked-Etag
                                                       "<sha256>", X-Linked-Size
  GET  /cdn/{sha256}?repo=&file=                      the LFS bytes, Range requests honoured

Every answer about a repo carries X-Repo-Commit. Errors carry X-Error-Code (RepoNotFound,
RevisionNotFound, EntryNotFound, GatedRepo) and X-Error-Message, with the Hub's statuses
(401 for a private repo without a valid token, 401/403 GatedRepo, 404, 429 with Retry-After).

Layout of --root:
  <owner>/<name>/<revision>/...   each revision (branch or tag) is a directory; "main" is the
                                  default branch. Commit ids are derived from the content.
  <owner>/<name>.json             optional: {"private": bool, "gated": bool, "rate_limited": bool,
                                  "corrupt_once": [paths], "corrupt_always": [paths],
                                  "understate_size": bool}
Files ending in .safetensors/.gguf/.bin/.pt/.onnx/.npz or of 1 MiB and more are LFS files.

  python hub_server.py --root DIR [--port 0] [--port-file F] [--token T] [--throttle BYTES_PER_S]
                       [--tls-cert PEM --tls-key PEM]

--token is the one token that opens private and gated repos. --throttle slows every body (for
tests that interrupt a transfer). The port in use is printed on stdout ("PORT <n>") and written
to --port-file.
"""
import argparse
import hashlib
import json
import os
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LFS_SUFFIXES = (".safetensors", ".gguf", ".bin", ".pt", ".onnx", ".npz")
LFS_MIN = 1 << 20


class Repo:
    """One revision of a repository: file list, per-file digests, commit id."""

    def __init__(self, repo_id, rev, path):
        self.repo_id, self.rev, self.path = repo_id, rev, path
        self.files = {}  # rel path -> dict(size, git, sha256, lfs, abspath)
        for dirpath, dirnames, filenames in os.walk(path):
            dirnames.sort()
            for fn in sorted(filenames):
                ap = os.path.join(dirpath, fn)
                rel = os.path.relpath(ap, path).replace(os.sep, "/")
                self.files[rel] = self._describe(ap, rel)
        h = hashlib.sha1(f"{repo_id}@{rev}\n".encode())
        for rel in sorted(self.files):
            h.update(f"{rel}\0{self.files[rel]['git']}\n".encode())
        self.commit = h.hexdigest()

    @staticmethod
    def _describe(ap, rel):
        size = os.path.getsize(ap)
        git = hashlib.sha1(f"blob {size}\0".encode())
        sha = hashlib.sha256()
        with open(ap, "rb") as f:
            while True:
                b = f.read(1 << 22)
                if not b:
                    break
                git.update(b)
                sha.update(b)
        lfs = rel.endswith(LFS_SUFFIXES) or size >= LFS_MIN
        return {"size": size, "git": git.hexdigest(), "sha256": sha.hexdigest(), "lfs": lfs, "abspath": ap}


class Hub:
    def __init__(self, root, token, throttle):
        self.root, self.token, self.throttle = root, token, throttle
        self.lock = threading.Lock()
        self.cache = {}  # (repo_id, rev) -> (mtime key, Repo)
        self.corrupt_served = set()
        self.requests = {}  # route kind -> count, for tests

    def count(self, kind):
        with self.lock:
            self.requests[kind] = self.requests.get(kind, 0) + 1

    def config(self, repo_id):
        p = os.path.join(self.root, repo_id + ".json")
        if os.path.isfile(p):
            with open(p) as f:
                return json.load(f)
        return {}

    def revisions(self, repo_id):
        d = os.path.join(self.root, repo_id)
        if not os.path.isdir(d):
            return None
        return sorted(x for x in os.listdir(d) if os.path.isdir(os.path.join(d, x)))

    def repo(self, repo_id, rev):
        """The Repo for a branch/tag name or a commit id; None when there is none."""
        revs = self.revisions(repo_id) or []
        for r in revs:
            rp = self._load(repo_id, r)
            if r == rev or rp.commit == rev:
                return rp
        return None

    def _load(self, repo_id, rev):
        path = os.path.join(self.root, repo_id, rev)
        key = (repo_id, rev)
        stamp = []
        for dirpath, _, filenames in os.walk(path):
            for fn in filenames:
                st = os.stat(os.path.join(dirpath, fn))
                stamp.append((dirpath, fn, st.st_size, st.st_mtime_ns))
        stamp = tuple(sorted(stamp))
        with self.lock:
            hit = self.cache.get(key)
            if hit and hit[0] == stamp:
                return hit[1]
        rp = Repo(repo_id, rev, path)
        with self.lock:
            self.cache[key] = (stamp, rp)
        return rp

    def by_sha256(self, sha, prefer_repo=None):
        with self.lock:
            entries = [v[1] for v in self.cache.values()]
        entries.sort(key=lambda rp: rp.repo_id != prefer_repo)  # the repo the redirect named first
        for rp in entries:
            for rel, f in rp.files.items():
                if f["sha256"] == sha:
                    return rp, rel, f
        return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "mlxcel-test-hub/1"

    def log_message(self, fmt, *args):  # quiet
        pass

    @property
    def hub(self):
        return self.server.hub

    # ---- answers ---------------------------------------------------------------------------
    def error(self, status, code, message, extra=None):
        body = json.dumps({"error": message}).encode()
        self.send_response(status)
        if code:
            self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", message)
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def json(self, obj, commit=None, extra=None):
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if commit:
            self.send_header("X-Repo-Commit", commit)
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_file(self, f, headers, corrupt=False):
        size = f["size"]
        start, end, status = 0, size - 1, 200
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes="):
            a, _, b = rng[6:].partition("-")
            try:
                start = int(a) if a else 0
                end = int(b) if b else size - 1
            except ValueError:
                start, end = 0, size - 1
            if start >= size and size > 0:
                self.error(416, None, "range not satisfiable", {"Content-Range": f"bytes */{size}"})
                return
            end = min(end, size - 1)
            status = 206
        n = max(0, end - start + 1)
        if status == 206 and start > 0 and self.command == "GET":
            self.hub.count("resumed-GET")  # a transfer that continues from a byte offset
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(n))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.end_headers()
        if self.command == "HEAD" or n == 0:
            return
        with open(f["abspath"], "rb") as fh:
            if corrupt:
                fh.seek(start)
                data = bytearray(fh.read(n))
                data[len(data) // 2] ^= 0xFF
                self.wfile.write(bytes(data))
                return
            if self.hub.throttle:
                fh.seek(start)
                left = n
                while left > 0:
                    chunk = fh.read(min(left, 16384))
                    if not chunk:
                        break
                    self.wfile.write(chunk)
                    left -= len(chunk)
                    time.sleep(len(chunk) / self.hub.throttle)
                return
            self.connection.sendfile(fh, offset=start, count=n)

    # ---- routing -------------------------------------------------------------------------------
    def authorized(self, cfg):
        auth = self.headers.get("Authorization", "")
        tok = auth[7:] if auth.startswith("Bearer ") else None
        return self.hub.token is not None and tok == self.hub.token

    def gate(self, repo_id):
        """Checks existence and access; answers and returns None when refused."""
        cfg = self.hub.config(repo_id)
        if self.hub.revisions(repo_id) is None:
            self.error(401 if not self.headers.get("Authorization") else 404, "RepoNotFound",
                       "Repository Not Found for url: " + self.path)
            return None
        ok = self.authorized(cfg)
        if cfg.get("private") and not ok:
            self.error(401, "RepoNotFound", "Repository Not Found for url: " + self.path)
            return None
        if cfg.get("gated") and not ok:
            status = 403 if self.headers.get("Authorization") else 401
            self.error(status, "GatedRepo", f"Access to model {repo_id} is restricted. You must have access to it "
                       "and be authenticated to access it. Please log in.")
            return None
        if cfg.get("rate_limited"):
            self.error(429, None, "You have been rate-limited; try again later.", {"Retry-After": "7"})
            return None
        return cfg

    def do_HEAD(self):
        self.route()

    def do_GET(self):
        self.route()

    def route(self):
        try:
            self._route()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _route(self):
        url = urllib.parse.urlsplit(self.path)
        parts = [urllib.parse.unquote(p) for p in url.path.split("/")[1:]]
        query = urllib.parse.parse_qs(url.query)
        if parts[:1] == ["cdn"] and len(parts) == 2:
            self.hub.count("cdn")
            found = self.hub.by_sha256(parts[1], query.get("repo", [None])[0])
            if not found:
                return self.error(404, "EntryNotFound", "no such object")
            rp, rel, f = found
            cfg = self.hub.config(rp.repo_id)
            corrupt = rel in cfg.get("corrupt_always", [])
            if rel in cfg.get("corrupt_once", []):
                with self.hub.lock:
                    if (rp.repo_id, rel) not in self.hub.corrupt_served:
                        self.hub.corrupt_served.add((rp.repo_id, rel))
                        corrupt = True
            return self.send_file(f, {"ETag": f'"{f["sha256"]}"'}, corrupt=corrupt and self.command == "GET")
        if parts[:2] == ["api", "models"] and len(parts) >= 4:
            repo_id = parts[2] + "/" + parts[3]
            rest = parts[4:]
            self.hub.count("api")
            if self.gate(repo_id) is None:
                return
            if not rest:
                rest = ["revision", "main"]
            if rest[0] == "revision" and len(rest) >= 2:
                rev = "/".join(rest[1:])
                rp = self.hub.repo(repo_id, rev)
                if rp is None:
                    return self.error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
                cfg = self.hub.config(repo_id)
                return self.json({"_id": rp.commit[:24], "id": repo_id, "modelId": repo_id, "sha": rp.commit,
                                  "private": bool(cfg.get("private")), "gated": "auto" if cfg.get("gated") else False,
                                  "disabled": False, "tags": [], "downloads": 0, "likes": 0,
                                  "lastModified": "2026-01-01T00:00:00.000Z",
                                  "siblings": [{"rfilename": p} for p in sorted(rp.files)]}, commit=rp.commit)
            if rest[0] == "tree" and len(rest) >= 2:
                rev = rest[1]
                prefix = "/".join(rest[2:])
                rp = self.hub.repo(repo_id, rev)
                if rp is None:
                    return self.error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
                recursive = query.get("recursive", ["false"])[0].lower() in ("1", "true")
                out, dirs = [], set()
                for p in sorted(rp.files):
                    if prefix and not p.startswith(prefix + "/"):
                        continue
                    tail = p[len(prefix) + 1:] if prefix else p
                    if not recursive and "/" in tail:
                        dirs.add(tail.split("/")[0])
                        continue
                    if recursive:
                        segs = tail.split("/")[:-1]
                        for i in range(len(segs)):
                            dirs.add("/".join(segs[: i + 1]))
                    f = rp.files[p]
                    e = {"type": "file", "oid": f["git"], "size": f["size"], "path": p}
                    if f["lfs"]:
                        e["lfs"] = {"oid": f["sha256"], "size": f["size"], "pointerSize": 134}
                    out.append(e)
                for dname in sorted(dirs):
                    full = (prefix + "/" + dname) if prefix else dname
                    out.append({"type": "directory", "oid": hashlib.sha1(full.encode()).hexdigest(), "size": 0,
                                "path": full})
                return self.json(out, commit=rp.commit)
            return self.error(404, None, "no such route")
        # /{owner}/{name}/resolve/{rev}/{path}
        if len(parts) >= 5 and parts[2] == "resolve":
            repo_id = parts[0] + "/" + parts[1]
            rev, rel = parts[3], "/".join(parts[4:])
            self.hub.count("resolve-" + self.command)
            if self.gate(repo_id) is None:
                return
            rp = self.hub.repo(repo_id, rev)
            if rp is None:
                return self.error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
            f = rp.files.get(rel)
            if f is None:
                return self.error(404, "EntryNotFound", f"{rel} does not exist on \"{rev}\"",
                                  {"X-Repo-Commit": rp.commit})
            if f["lfs"]:
                # the CDN is another host, as on the Hub (cdn-lfs.hf.co): 127.0.0.1 <-> localhost
                host = self.headers.get("Host", "127.0.0.1")
                name, _, port = host.rpartition(":")
                cdn = "localhost" if name == "127.0.0.1" else "127.0.0.1"
                scheme = "https" if self.server.tls else "http"
                q = urllib.parse.urlencode({"repo": repo_id, "file": rel})
                loc = f"{scheme}://{cdn}:{port}/cdn/{f['sha256']}?{q}"
                self.send_response(302)
                self.send_header("Location", loc)
                self.send_header("X-Repo-Commit", rp.commit)
                self.send_header("X-Linked-Etag", f'"{f["sha256"]}"')
                cfg = self.hub.config(repo_id)
                # "understate_size": a Hub that announces a quarter of the size (a disk check passes,
                # the writes then run out of space)
                self.send_header("X-Linked-Size", str(f["size"] // 4 if cfg.get("understate_size") else f["size"]))
                self.send_header("ETag", f'"{f["git"]}"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            return self.send_file(f, {"ETag": f'"{f["git"]}"', "X-Repo-Commit": rp.commit})
        if parts[:2] == ["_test", "stats"]:
            with self.hub.lock:
                return self.json(dict(self.hub.requests))
        self.error(404, None, "no such route")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--token")
    ap.add_argument("--throttle", type=float, default=0.0)
    ap.add_argument("--tls-cert", help="serve HTTPS with this PEM certificate (and --tls-key)")
    ap.add_argument("--tls-key")
    a = ap.parse_args()
    # a listen backlog like a production server's: socketserver's default of 5 drops the SYNs of a
    # client that opens its parallel connections at once (each retried a second later)
    ThreadingHTTPServer.request_queue_size = 128
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    srv.daemon_threads = True
    srv.tls = bool(a.tls_cert)
    if a.tls_cert:
        import ssl
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(a.tls_cert, a.tls_key)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    srv.hub = Hub(os.path.abspath(a.root), a.token, a.throttle)
    port = srv.server_address[1]
    if a.port_file:
        tmp = a.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(port))
        os.replace(tmp, a.port_file)
    print(f"PORT {port}", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
