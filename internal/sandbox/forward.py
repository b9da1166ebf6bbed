# agentd's forwarder: the in-sandbox end of the egress proxy (docs/tools.md).
#
#   python3 -I -S forward.py SOCKET -- PROGRAM [ARGS...]
#
# It listens on a free port of the sandbox's own loopback, points the proxy
# variables (and pip) at it, and then becomes PROGRAM (same pid, same exit
# code), while a forked child carries each connection to SOCKET: a unix
# socket that agentd's egress proxy serves for this one run. The sandbox has
# no other network; every check happens on agentd's side, so nothing here
# needs to be trusted.
import os
import selectors
import socket
import sys


def serve(ls, path, parent):
    sel = selectors.DefaultSelector()
    sel.register(ls, selectors.EVENT_READ)
    peer = {}  # socket -> the other end
    eof = set()  # sockets that sent EOF

    def drop(s):
        for x in (s, peer.get(s)):
            if x is None:
                continue
            try:
                sel.unregister(x)
            except (KeyError, ValueError):
                pass
            peer.pop(x, None)
            eof.discard(x)
            x.close()

    while True:
        for key, _ in sel.select(timeout=1.0):
            s = key.fileobj
            if s is ls:
                try:
                    c, _ = ls.accept()
                except OSError:
                    continue
                u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    u.connect(path)
                except OSError:
                    try:
                        c.sendall(b"HTTP/1.1 502 agentd egress proxy unreachable\r\n"
                                  b"Content-Length: 0\r\nConnection: close\r\n\r\n")
                    except OSError:
                        pass
                    c.close()
                    u.close()
                    continue
                peer[c], peer[u] = u, c
                sel.register(c, selectors.EVENT_READ)
                sel.register(u, selectors.EVENT_READ)
                continue
            if s not in peer:
                continue
            try:
                data = s.recv(65536)
            except OSError:
                drop(s)
                continue
            if data:
                try:
                    peer[s].sendall(data)
                except OSError:
                    # The other end takes no more (the proxy refused and
                    # closed): read no more from this one, but pass on
                    # what the other end still sends (its refusal, then
                    # its EOF) before both are closed.
                    sel.unregister(s)
                    eof.add(s)
                    if peer[s] in eof:
                        drop(s)
                continue
            # EOF one way: pass it on, keep the other way open.
            sel.unregister(s)
            eof.add(s)
            other = peer[s]
            try:
                other.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            if other in eof:
                drop(s)
        if os.getppid() != parent:
            return  # the program is gone


def main():
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        sys.exit("usage: forward.py SOCKET -- PROGRAM [ARGS...]")
    path, argv = sys.argv[1], sys.argv[3:]
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.bind(("127.0.0.1", 0))
    ls.listen(64)
    url = "http://127.0.0.1:%d" % ls.getsockname()[1]
    for k in ("http_proxy", "https_proxy", "all_proxy"):
        os.environ[k] = os.environ[k.upper()] = url
    os.environ["PIP_PROXY"] = url
    for k in ("no_proxy", "NO_PROXY"):
        os.environ.pop(k, None)
    parent = os.getpid()
    if os.fork() == 0:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        try:
            serve(ls, path, parent)
        finally:
            os._exit(0)
    ls.close()
    os.execvp(argv[0], argv)


main()
