"""In the sandbox, in front of the agent: 127.0.0.1:<port> of the sandbox's own network
namespace, carried to the host's egress proxy on a Unix socket (clients want a proxy's
host:port, not a socket). Then runs the agent as its child and exits with its status.

    python -I -S egress_forwarder.py --socket /run/calvin/egress.sock --port 3128 -- <agent argv>

Only the standard library's C modules (`_socket`, `_thread`: `socket` and `threading` would
double its start time) and no site packages: it starts before every turn's agent.
"""

import _socket
import _thread
import os
import sys

CHUNK = 65536
GONE = b"HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\ncalvin egress: the host's proxy is not listening\n"


def usage() -> int:
    print("usage: egress_forwarder.py --socket PATH --port N -- ARGV...", file=sys.stderr)
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


def carry(fd: int, path: str) -> None:
    client = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM, 0, fd)
    proxy = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        try:
            proxy.connect(path)
        except OSError:
            client.sendall(GONE)
            return
        back = _thread.allocate_lock()
        back.acquire()
        _thread.start_new_thread(pipe, (proxy, client, back))
        pipe(client, proxy)
        back.acquire()  # the other way is done too
    finally:
        proxy.close()
        client.close()


def serve(listener, path: str) -> None:
    while True:
        try:
            fd, _ = listener._accept()
        except OSError:
            return
        _thread.start_new_thread(carry, (fd, path))


def main(args: list[str]) -> int:
    if len(args) < 6 or args[0] != "--socket" or args[2] != "--port" or args[4] != "--" or not args[3].isdigit():
        return usage()
    path, port, argv = args[1], int(args[3]), args[5:]
    listener = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    listener.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(128)
    _thread.start_new_thread(serve, (listener, path))
    try:
        child = os.posix_spawnp(argv[0], argv, os.environ)
    except OSError as error:
        print(f"{argv[0]}: {error.strerror or error}", file=sys.stderr)
        return 127
    _, status = os.waitpid(child, 0)
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


if __name__ == "__main__":
    os._exit(main(sys.argv[1:]))  # not sys.exit: threads still carrying connections must not hold the exit
