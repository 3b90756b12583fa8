"""In the sandbox, in front of the agent: 127.0.0.1:<port> of the sandbox's own network
namespace, carried to the host's egress proxy on a Unix socket (clients want a proxy's
host:port, not a socket). Then runs the agent as its child and exits with its status.

    python -I -S egress_forwarder.py --socket /run/calvin/egress.sock --port 3128 -- <agent argv>

Only the standard library and no site packages: it starts before every turn's agent.
"""

import os
import socket
import sys
import threading

CHUNK = 65536
GONE = b"HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\ncalvin egress: the host's proxy is not listening\n"


def usage() -> int:
    print("usage: egress_forwarder.py --socket PATH --port N -- ARGV...", file=sys.stderr)
    return 2


def pipe(source: socket.socket, target: socket.socket) -> None:
    try:
        while chunk := source.recv(CHUNK):
            target.sendall(chunk)
        target.shutdown(socket.SHUT_WR)  # half-close: the other way may still be talking
    except OSError:
        for each in (source, target):
            try:
                each.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def carry(client: socket.socket, path: str) -> None:
    with client:
        try:
            proxy = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            proxy.connect(path)
        except OSError:
            client.sendall(GONE)
            return
        with proxy:
            back = threading.Thread(target=pipe, args=(proxy, client), daemon=True)
            back.start()
            pipe(client, proxy)
            back.join()


def serve(listener: socket.socket, path: str) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=carry, args=(client, path), daemon=True).start()


def main(args: list[str]) -> int:
    if len(args) < 6 or args[0] != "--socket" or args[2] != "--port" or args[4] != "--" or not args[3].isdigit():
        return usage()
    path, port, argv = args[1], int(args[3]), args[5:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(128)
    threading.Thread(target=serve, args=(listener, path), daemon=True).start()
    try:
        child = os.posix_spawnp(argv[0], argv, os.environ)
    except OSError as error:
        print(f"{argv[0]}: {error.strerror or error}", file=sys.stderr)
        return 127
    _, status = os.waitpid(child, 0)
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


if __name__ == "__main__":
    os._exit(main(sys.argv[1:]))  # not sys.exit: threads still carrying connections must not hold the exit
