"""In the sandbox, in front of the agent: 127.0.0.1:<port> of the sandbox's own network
namespace, carried to the host's egress proxy on a Unix socket (clients want a proxy's
host:port, not a socket). Then runs the agent as its child and exits with its status.

    python -I -S egress_forwarder.py --socket /run/calvin/egress.sock --port 3128 \
        [--door FD] [--status FD] -- <agent argv>

With `--door FD` (a listening Unix socket the host daemon made and only it can reach) it is
also the door of previews: each connection accepted there names a port in one line
(`5173\n`); the door connects to 127.0.0.1:<port> of the sandbox's own namespace, answers
`OK\n` or `ERR <errno>\n`, then carries bytes both ways. It reaches nothing but the
sandbox's loopback, and never its own egress port (that would lend a browser the agent's way out).

With `--status FD` (a pipe's writing end) it writes the agent's exit status there (`3\n`)
when the agent ends, and then stays, with whatever the agent left running, until it is
signalled: the host keeps a sandbox whose servers are previewed past the turn.

Only the standard library's C modules (`_socket`, `_thread`: `socket` and `threading` would
double its start time) and no site packages: it starts before every turn's agent.
"""

import _socket
import _thread
import os
import sys

CHUNK = 262144
GONE = b"HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\ncalvin egress: the host's proxy is not listening\n"


DOOR_LINE = 16  # "65535\n" and then some: a longer request is refused
DOOR_TIMEOUT = 10.0


def usage() -> int:
    print("usage: egress_forwarder.py --socket PATH --port N [--door FD] [--status FD] -- ARGV...", file=sys.stderr)
    return 2


def pipe(source, target, done=None) -> None:
    try:
        while chunk := source.recv(CHUNK):
            target.sendall(chunk)
        target.shutdown(_socket.SHUT_WR)  # half-close: the other way may still be talking
    except OSError:
        for each in (source, target):
            try:
                each.shutdown(_socket.SHUT_RDWR)
            except OSError:
                pass
    finally:
        if done is not None:
            done.release()


def both_ways(one, other) -> None:
    back = _thread.allocate_lock()
    back.acquire()
    _thread.start_new_thread(pipe, (other, one, back))
    pipe(one, other)
    back.acquire()  # the other way is done too


def carry(fd: int, path: str) -> None:
    client = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM, 0, fd)
    proxy = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        try:
            proxy.connect(path)
        except OSError:
            client.sendall(GONE)
            return
        both_ways(client, proxy)
    finally:
        proxy.close()
        client.close()


def door_port(line: bytes, own_port: int) -> int:
    """The port a door request names, or 0 when it names none the door may reach."""
    text = line[:-1]  # digits, then the newline: nothing else
    if not text.isdigit() or len(text) > 5:
        return 0
    port = int(text)
    return port if 1 <= port <= 65535 and port != own_port else 0


def door_open(fd: int, own_port: int) -> None:
    daemon = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM, 0, fd)
    server = None
    try:
        daemon.settimeout(DOOR_TIMEOUT)
        line = b""
        while not line.endswith(b"\n"):
            chunk = daemon.recv(1)  # byte by byte: nothing after the line is taken from the stream
            if not chunk or len(line) >= DOOR_LINE:
                return
            line += chunk
        port = door_port(line, own_port)
        if not port:
            daemon.sendall(b"ERR 22\n")  # EINVAL: no such port to reach
            return
        server = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
        server.settimeout(DOOR_TIMEOUT)
        try:
            server.connect(("127.0.0.1", port))
        except OSError as error:
            daemon.sendall(b"ERR %d\n" % (error.errno or 0))
            return
        server.settimeout(None)
        daemon.settimeout(None)
        daemon.sendall(b"OK\n")
        both_ways(daemon, server)
    except OSError:
        pass
    finally:
        if server is not None:
            server.close()
        daemon.close()


def serve(listener, work, *extra) -> None:
    while True:
        try:
            fd, _ = listener._accept()
        except OSError:
            return
        _thread.start_new_thread(work, (fd, *extra))


def options(args: list[str]) -> dict | None:
    """--socket PATH --port N [--door FD] [--status FD] -- ARGV..."""
    found, i = {}, 0
    while i + 1 < len(args) and args[i] in ("--socket", "--port", "--door", "--status") and args[i] not in found:
        found[args[i]], i = args[i + 1], i + 2
    if i >= len(args) - 1 or args[i] != "--" or "--socket" not in found or "--port" not in found:
        return None
    if not all(found[name].isdigit() for name in ("--port", "--door", "--status") if name in found):
        return None
    found["argv"] = args[i + 1 :]
    return found


def main(args: list[str]) -> int:
    found = options(args)
    if found is None:
        return usage()
    path, port, argv = found["--socket"], int(found["--port"]), found["argv"]
    listener = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    listener.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(128)
    _thread.start_new_thread(serve, (listener, carry, path))
    if "--door" in found:
        door = int(found["--door"])
        os.set_inheritable(door, False)  # the agent must never accept on it
        _thread.start_new_thread(
            serve, (_socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM, 0, door), door_open, port)
        )
    report = int(found["--status"]) if "--status" in found else None
    if report is not None:
        os.set_inheritable(report, False)
    code = run(argv)
    if report is not None:
        try:
            os.write(report, b"%d\n" % code)
        except OSError:
            return code  # nobody reads it: nothing to stay for
        stay = _thread.allocate_lock()
        stay.acquire()
        stay.acquire()  # until SIGTERM (its default action) or SIGKILL
    return code


def run(argv: list[str]) -> int:
    try:
        child = os.posix_spawnp(argv[0], argv, os.environ)
    except OSError as error:
        print(f"{argv[0]}: {error.strerror or error}", file=sys.stderr)
        return 127
    _, status = os.waitpid(child, 0)
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


if __name__ == "__main__":
    os._exit(main(sys.argv[1:]))  # not sys.exit: threads still carrying connections must not hold the exit
